"""MindSpore Ascend tensors copied to the host without blocking (issue #21,
python/msprobe/mindspore/devcopies.py): md5 and tensor tasks.

One PyNative script (f32/f16/bf16/int32/f64/bool, a 0-d, NaN/Inf, a transposed view, a concat of
five inputs, an empty tensor) runs on the simulator's Ascend device under msprobe.mindspore at L1
with the non-blocking copies (default), with ``asnumpy()`` per tensor (MSPROBE_ASYNC_COPY=0),
with batches of 3 (fetched while a record is still open), and on CPU. Checked: dump.json and
every tensor file byte-identical to the asnumpy() path; CRCs equal to the CPU run's; the files
complete after stop(); and from the simulator's counters (CANNSIM_STATS) that every device tensor
crosses the link once, none by a synchronous copy, and that the training thread waits far fewer
times than once per tensor.
"""

from __future__ import annotations

import filecmp
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("mindspore")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from recorder_testutil import LIB64, run_counted  # noqa: E402
from test_device_stats_ms import ms_env  # noqa: E402
from test_device_stats_npu import leaves, waits  # noqa: E402

pytestmark = pytest.mark.skipif(
    not (LIB64 / "libascendcl.so").exists(), reason="the simulator's CANN tree (scripts/build.sh) is absent"
)

SCRIPT = r"""
import json, os, shutil, sys
import numpy as np
import mindspore as ms
from mindspore import Tensor, mint, ops
ms.set_context(mode=ms.PYNATIVE_MODE, device_target=sys.argv[1])
from msprobe.mindspore import PrecisionDebugger
out, task = sys.argv[2], sys.argv[3]
if task == "md5":
    cfg = out + ".config.json"
    with open(cfg, "w") as f:
        json.dump({"task": "statistics", "level": "L1", "dump_path": out, "statistics": {"summary_mode": "md5"}}, f)
    dbg = PrecisionDebugger(config_path=cfg)
else:
    dbg = PrecisionDebugger(dump_path=out, task=task, level="L1")
x = Tensor(np.random.default_rng(0).standard_normal((64, 48)).astype(np.float32)) * 1.0
dbg.start()
a = mint.add(mint.mul(x, 3.0), 1.0)
h = mint.mul(x.astype(ms.float16), 2.0)
b = mint.add(x.astype(ms.bfloat16), 1.0)
i = mint.add(mint.mul(x, 100.0).astype(ms.int32), 7)
d = mint.mul(x.astype(ms.float64), 0.5)
s = mint.mul(x[0, 0], 2.0)
inf = mint.div(x, mint.sub(x, x))
g = mint.logical_not(x.astype(ms.bool_))
t = mint.mul(mint.transpose(x, 0, 1), 2.0)
c = mint.cat([a, x, mint.transpose(t, 0, 1), a, x], dim=0)
e = mint.mul(x[:0], 1.0)
dbg.stop()
shutil.copyfile(os.path.join(out, "step0", "rank", "dump.json"), out + ".after_stop.json")
dbg.step()
"""

RUNS = {"async": {}, "blocking": {"MSPROBE_ASYNC_COPY": "0"}, "batch3": {"MSPROBE_DEVICE_BATCH": "3"}}


def run(tmp: Path, name: str, device: str, task: str, extra: dict) -> tuple[Path, dict, str]:
    out = tmp / name
    stats = tmp / f"{name}.stats.json"
    src = tmp / "script.py"
    src.write_text(SCRIPT)
    counters, log = run_counted([sys.executable, str(src), device, str(out), task], ms_env(**extra), stats, cwd=tmp)
    return out, counters, log


@pytest.fixture(scope="module", params=["md5", "tensor"])
def runs(request, tmp_path_factory):
    task = request.param
    tmp = tmp_path_factory.mktemp(f"ms-devcopies-{task}")
    got = {name: run(tmp, name, "Ascend", task, extra) for name, extra in RUNS.items()}
    if task == "md5":
        got["cpu"] = run(tmp, "cpu", "CPU", task, {})
    got["task"] = task
    return got


def dump(out: Path) -> dict:
    return json.loads((out / "step0" / "rank" / "dump.json").read_text())["data"]


def files(out: Path) -> list[str]:
    d = out / "step0" / "rank" / "dump_tensor_data"
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def test_same_dump_and_files_as_asnumpy(runs):
    want = runs["blocking"][0]
    for name in ("async", "batch3"):
        got = runs[name][0]
        assert json.dumps(dump(got)) == json.dumps(dump(want)), name
        assert files(got) == files(want), name
        for f in files(got):
            a, b = got / "step0/rank/dump_tensor_data" / f, want / "step0/rank/dump_tensor_data" / f
            assert filecmp.cmp(a, b, shallow=False), (name, f)
    if runs["task"] == "tensor":
        assert len(files(want)) == sum(1 for r in dump(want).values() for _ in leaves(r))


def test_crcs_equal_to_cpu_and_complete_after_stop(runs):
    out = runs["async"][0]
    assert json.loads(Path(str(out) + ".after_stop.json").read_text())["data"] == dump(out)
    if "cpu" not in runs:
        return
    got, cpu = dump(out), dump(runs["cpu"][0])
    assert list(got) == list(cpu)
    pairs = [(a, b) for k in got for a, b in zip(leaves(got[k]), leaves(cpu[k]), strict=True)]
    assert pairs and [a["md5"] for a, _ in pairs] == [b["md5"] for _, b in pairs]


def test_one_async_copy_per_tensor_and_fewer_waits(runs):
    out, c, log = runs["async"]
    device = [lf for r in dump(out).values() for lf in leaves(r) if 0 not in lf["shape"]]
    x = c["copies"]["device_to_host"]
    assert x["sync"]["copies"] == 0 and x["async"]["copies"] >= len(device), x
    assert f"copied to the host without blocking: {len(device)}" in log
    # asnumpy() per tensor (and MindSpore's synchronous launch then) against one wait per batch
    assert waits(c) * 4 < waits(runs["blocking"][1]), (c["threads"], runs["blocking"][1]["threads"])
    assert waits(c) < waits(runs["batch3"][1])
