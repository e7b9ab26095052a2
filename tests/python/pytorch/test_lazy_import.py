"""A torch module imported for the first time while the L1 wrappers are installed (issue: KeyError
aten.rnn_relu.input).

`torch._dynamo` is imported lazily by `torch.optim` (the first optimizer built), `torch.compile` and
torch_npu. Its import runs module code that looks up `decomposition_table[aten.rnn_relu.input]` and keys
tables by `torch.rnn_relu`; with the wrappers in place those were msprobe's stand-ins (KeyError, or keys
that stop matching once the originals come back). Each case runs in a fresh process (the point is the
first import) and must not raise; its dump must equal, file for file, the dump of the same script with
`torch._dynamo` imported before the wrapping (the only order msprobe 1.1.1 survives), and match msprobe
1.1.1's dump of that order (record names and order, statistics, stack function names).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from golden import compare_dump
from recorder_testutil import LIB, LIB64, REPO, sim_env

V111 = REPO / "target" / "venv-msprobe111" / "bin" / "python"
NPU_PY = REPO / "target" / "venv-npu" / "bin" / "python"

SCRIPT = r"""
import json, os, sys
import torch
side, order, trigger, out = sys.argv[1:5]
if order == "first":
    import torch._dynamo  # noqa: F401  (the old workaround)
assert ("torch._dynamo" in sys.modules) == (order == "first")
rnn_relu = torch.rnn_relu
torch.manual_seed(0)
torch.set_num_threads(1)
from msprobe.pytorch import PrecisionDebugger
cfg = {"task": "statistics", "dump_path": out, "rank": [], "step": [], "level": "L1",
       "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"}}
cp = out + ".config.json"
json.dump(cfg, open(cp, "w"))
dbg = PrecisionDebugger(config_path=cp)
m = torch.nn.Linear(8, 4)
x = torch.randn(3, 8)
dbg.start()
y = torch.add(x, 1)
if trigger == "import":
    import torch._dynamo  # noqa: F401,F811
opt = torch.optim.AdamW(m.parameters(), lr=0.1)  # imports torch._dynamo unless imported already
for _ in range(2):
    loss = m(y).relu().sum()
    loss.backward()
    opt.step()
    opt.zero_grad()
z = torch.ops.aten.mul.Tensor(y, 2)
dbg.stop()
dbg.step()
if side == "ours":
    from torch.nn.utils._expanded_weights import expanded_weights_impl as ew
    from msprobe.pytorch.api_wrap import _ImportGuard
    report = {
        "wrapped_after": getattr(torch.add, "__wrapped_by_msprobe__", False),
        "aten_wrapped_after": getattr(torch.ops.aten.mul, "__wrapped_by_msprobe__", False),
        "rnn_key_is_original": rnn_relu in ew.expanded_weights_rnn_decomps,
        "guard_while_wrapped": any(isinstance(f, _ImportGuard) for f in sys.meta_path),
    }
    from msprobe.pytorch.api_wrap import api_wrapper
    w = lambda: getattr(torch.add, "__wrapped_by_msprobe__", False)  # noqa: E731
    seen = [w()]
    api_wrapper.suspend("a")  # what a guarded import does; nested imports nest
    seen.append(w())
    api_wrapper.suspend("b")
    api_wrapper.resume("b")
    seen.append(w())
    api_wrapper.resume("a")
    seen.append(w())
    report["suspend_nesting"] = seen
    dbg.forward_backward_dump_end()  # restores the originals
    report["guard_after_restore"] = any(isinstance(f, _ImportGuard) for f in sys.meta_path)
    report["original_after_restore"] = torch.rnn_relu is rnn_relu
    json.dump(report, open(out + ".report.json", "w"))
"""


def run(src: Path, tmp: Path, side: str, order: str, trigger: str) -> tuple[Path, dict]:
    """Runs `src` (one file for all runs: stack.json names it); returns the rank dir and the report."""
    out = tmp / f"{side}-{order}-{trigger}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MSPROBE_")}
    env["MSPROBE_LOG_LEVEL"] = "2"
    if side == "ours":
        py = sys.executable
        env.update(PYTHONPATH=str(REPO / "python"), MSPROBE_LIB=str(LIB))
    else:
        py = str(V111)
        env.pop("PYTHONPATH", None)
    p = subprocess.run(
        [py, str(src), side, order, trigger, str(out)], env=env, capture_output=True, text=True, timeout=600
    )
    assert p.returncode == 0, p.stderr[-4000:]
    rep = out.parent / (out.name + ".report.json")
    return out / "step0" / "rank", (json.loads(rep.read_text()) if rep.exists() else {})


def files(rank: Path) -> dict:
    return {f: json.loads((rank / f).read_text()) for f in ("dump.json", "stack.json", "construct.json")}


@pytest.fixture(scope="module")
def script(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("script") / "script.py"
    src.write_text(SCRIPT)
    return src


@pytest.fixture(scope="module")
def first(script: Path, tmp_path_factory) -> Path:
    """torch._dynamo imported before the wrapping: the reference order."""
    return run(script, tmp_path_factory.mktemp("first"), "ours", "first", "optim")[0]


@pytest.mark.parametrize("trigger", ["import", "optim"])
def test_lazy_dynamo_import_after_wrapping(script: Path, tmp_path: Path, first: Path, trigger: str) -> None:
    rank, rep = run(script, tmp_path, "ours", "lazy", trigger)
    assert files(rank) == files(first)
    names = list(files(rank)["dump.json"]["data"])
    # records from before the import, from the optimizer that imported it, and after it
    for want in ("Torch.add.0.forward", "Tensor.addcmul_.1.forward", "Aten.mul.Tensor.0.forward"):
        assert want in names, (want, names)
    assert rep == {
        "wrapped_after": True,  # the wrappers are back once the import is done
        "aten_wrapped_after": True,
        "rnn_key_is_original": True,  # the imported module's table holds the original API
        "guard_while_wrapped": True,
        "guard_after_restore": False,
        "suspend_nesting": [True, False, False, True],  # wrappers back only after the outermost import
        "original_after_restore": True,
    }


@pytest.mark.skipif(not V111.exists(), reason="target/venv-msprobe111 (scripts/setup-msprobe111.sh) is absent")
def test_lazy_import_dump_matches_msprobe_111(script: Path, tmp_path: Path) -> None:
    ours, _ = run(script, tmp_path, "ours", "lazy", "optim")
    ref, _ = run(script, tmp_path, "111", "first", "optim")  # 1.1.1 raises KeyError in the lazy order
    d = compare_dump(ours, ref)
    assert not d.errs, d.errs[:10]
    assert not d.crc


NPU_DRIVER = r"""
import os, runpy, sys
sys.path.insert(0, os.environ["MSPROBE_PY"])
order, out = sys.argv[1], sys.argv[2]
sys.argv = [os.environ["EXAMPLE"], "--model", "gpt", "--steps", "2", "--dropout", "0"]
mod = runpy.run_path(sys.argv[0], run_name="example")  # imports torch_npu; main() builds the optimizer
if order == "first":
    import torch._dynamo  # noqa: F401
assert ("torch._dynamo" in sys.modules) == (order == "first")
from msprobe.pytorch import PrecisionDebugger
dbg = PrecisionDebugger(dump_path=out, task="statistics", level="L1")
dbg.start()
mod["main"]()  # torch_npu's finder imports torch._dynamo at the first optimizer
dbg.stop()
dbg.step()
"""


@pytest.mark.skipif(
    not NPU_PY.exists() or not (LIB64 / "libascendcl.so").exists(),
    reason="target/venv-npu (scripts/setup-torchnpu.sh) or the simulator's CANN tree (scripts/build.sh) is absent",
)
def test_lazy_dynamo_import_under_torch_npu(tmp_path: Path) -> None:
    env = sim_env(
        MSPROBE_PY=str(REPO / "python"),
        MSPROBE_LIB=str(LIB),
        MSPROBE_LOG_LEVEL="2",
        EXAMPLE=str(REPO / "examples" / "train_torch_npu.py"),
    )
    src = tmp_path / "driver.py"
    src.write_text(NPU_DRIVER)
    got = {}
    for order in ("lazy", "first"):
        p = subprocess.run(
            [str(NPU_PY), str(src), order, str(tmp_path / order)], env=env, capture_output=True, text=True, timeout=900
        )
        assert p.returncode == 0, p.stderr[-4000:]
        losses = [json.loads(line)["loss"] for line in p.stdout.splitlines() if line.startswith("{")]
        assert len(losses) == 2
        got[order] = (files(tmp_path / order / "step0" / "rank"), losses)
    assert got["lazy"] == got["first"]
    names = list(got["lazy"][0]["dump.json"]["data"])
    # the model's init before the optimizer (which imports torch._dynamo) and both steps after it
    # (torch_npu's AdamW runs the foreach ops, which are not on the list)
    for want in ("Tensor.normal_.0.forward", "Functional.cross_entropy.1.forward", "Functional.linear.17.backward"):
        assert want in names, (want, names[:20])
