"""CPU tensors' statistics written exactly as msprobe 1.1.1 writes them, dtype by dtype.

1.1.1's `get_stat_info` reduces integers and float64 as float32 (`data.float()`) with CPU torch's
own reductions, whose float32 Mean and Norm of long tensors are a few ulps (Norm of 300k float64
values: 2e-6 relative) off the exact values our recorder computes. A drop-in writes 1.1.1's values,
so a compare against a 1.1.1 bench dump sees no difference that is not in the model.

Truth: msprobe 1.1.1 itself (target/venv-msprobe111) run on the same script; ours runs with the
native fast path and with the pure-Python encoder. Every Max/Min/Mean/Norm must be equal, not close.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from compare_util import V111
from recorder_testutil import LIB, REPO

SCRIPT = r"""
import json, sys, torch
from msprobe.pytorch import PrecisionDebugger
out = sys.argv[1]
dbg = PrecisionDebugger(dump_path=out, task="statistics", level="L1")
g = torch.Generator().manual_seed(0)
x = torch.randn(300000, dtype=torch.float64, generator=g) * 3 + 0.1
i = torch.randint(-100000, 100000, (100001,), generator=g)
f = torch.randn(70000, generator=g)
dbg.start()
torch.add(x, 1e-9)                                              # float64, long
torch.mul(x[:5], 1e300)                                         # float64 beyond float32: inf
torch.mul(i, 3)                                                 # int64
torch.add(torch.arange(17, dtype=torch.int32), 2**24 + 1)       # int32 beyond 2^24
torch.bitwise_and(i.to(torch.int16), 255)                       # int16
torch.abs(i.to(torch.int8))                                     # int8 (wrapped)
torch.add(i.to(torch.uint8), 1)                                 # uint8
torch.mul(f, 0.5)                                               # float32
torch.mul(f.half(), 0.5)                                        # float16
torch.mul(f.bfloat16(), 0.5)                                    # bfloat16
torch.add(torch.tensor(2.5, dtype=torch.float64), 1)            # 0-d float64
torch.add(torch.tensor([], dtype=torch.int64), 1)               # empty
torch.gt(f, 0)                                                  # bool
dbg.stop()
"""

KEYS = ("type", "dtype", "shape", "Max", "Min", "Mean", "Norm")


def leaves(out: Path) -> dict:
    data = json.loads(next(out.glob("step0/rank*/dump.json")).read_text())["data"]
    got = {}
    for name, rec in data.items():
        for kind in ("input_args", "output"):
            for k, leaf in enumerate(rec.get(kind, [])):
                if isinstance(leaf, dict) and leaf.get("type") == "torch.Tensor":
                    got[f"{name}.{kind}.{k}"] = {key: leaf.get(key) for key in KEYS}
    return got


def run(py: Path, script: Path, out: Path, env: dict) -> dict:
    p = subprocess.run([str(py), str(script), str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return leaves(out)


@pytest.mark.skipif(not (V111 / "python").exists(), reason="msprobe 1.1.1 (scripts/setup-msprobe111.sh) is absent")
def test_cpu_statistics_equal_111s_for_every_dtype(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text(SCRIPT)
    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "MSPROBE_LOG_LEVEL": "2"}
    theirs = run(V111 / "python", script, tmp_path / "111", base)
    ours_env = dict(base, PYTHONPATH=str(REPO / "python"), MSPROBE_LIB=str(LIB))
    py = REPO / ".venv" / "bin" / "python"
    native = run(py, script, tmp_path / "native", ours_env)
    pure = run(py, script, tmp_path / "pure", dict(ours_env, MSPROBE_FASTPATH="0"))
    # the script reaches every dtype it means to
    dtypes = {v["dtype"] for v in theirs.values()}
    assert {"torch.float64", "torch.int64", "torch.int32", "torch.int16", "torch.int8", "torch.uint8"} <= dtypes
    assert len(theirs) > 20, theirs
    for name, ours in (("native", native), ("pure Python", pure)):
        assert set(ours) == set(theirs), (name, set(ours) ^ set(theirs))
        diffs = {k: (ours[k], theirs[k]) for k in theirs if json.dumps(ours[k]) != json.dumps(theirs[k])}
        assert not diffs, (name, diffs)
