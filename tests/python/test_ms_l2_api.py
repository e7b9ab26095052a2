"""MindSpore's `PrecisionDebugger(level="L2")` drives the preloaded interposer (PyNative, device_target
"Ascend" on the CANN simulator): kernels are captured only inside start()..stop(), each step() ends a step
directory, and without the preload the debugger says once how to enable L2 and writes nothing.

Truth is the simulator's launch trace (CANNSIM_TRACE): every launch of the script in order with the CRCs of
its tensors. The dump of step i must hold exactly the launches made inside window i, with those CRCs
(MSPROBE_SUMMARY_MODE=md5); the launches outside (before the first start(), between stop() and step()) must
have run and not be captured. Runs under target/venv-ms (the MindSpore stage of scripts/test.sh).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from recorder_testutil import LIB, REPO
from test_l2 import check_fidelity
from test_ms_ascend import lib64  # noqa: F401  (fixture: the simulator's lib64, installed where MindSpore finds it)

_ms = importlib.util.find_spec("mindspore")
pytestmark = pytest.mark.skipif(_ms is None or _ms.origin is None, reason="MindSpore not installed (target/venv-ms)")

STEPS = 3
SCRIPT = f"""
import sys
import numpy as np
import mindspore as ms
from mindspore import Tensor, ops

ms.set_context(mode=ms.PYNATIVE_MODE, device_target="Ascend")
from msprobe.mindspore import PrecisionDebugger

debugger = PrecisionDebugger(dump_path=sys.argv[1], task="statistics", level="L2")
rng = np.random.default_rng(0)
x = Tensor(rng.standard_normal((8, 16)).astype(np.float32))
w = Tensor(rng.standard_normal((16, 16)).astype(np.float32))
x * 2.0                              # before the first window
for step in range({STEPS}):
    debugger.start()
    y = ops.relu(ops.matmul(x, w))   # inside: captured
    debugger.stop()
    ops.softmax(y, -1)               # between stop() and step(): not captured
    debugger.step()
# MindSpore 2.10 initialises its device context with the first op, on its launch thread; a bare
# runtime.synchronize() before that op has run races it and crashes MindSpore (SIGSEGV, ~1 run in 6
# without the preload, whose start() waits for the queue). Reading a result waits for the queue first.
y.asnumpy()
ms.runtime.synchronize()
print("done")
"""


def run(lib64: Path, tmp: Path, preload: bool, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:  # noqa: F811
    e = {k: v for k, v in os.environ.items() if not k.startswith(("MSPROBE_", "CANNSIM_", "LD_PRELOAD", "RANK"))}
    e.update(
        LD_LIBRARY_PATH=str(lib64),
        ASCEND_HOME_PATH=str(lib64.parent),
        MS_ALLOC_CONF="enable_vmm:False",
        GLOG_v="3",
        CANNSIM_TRACE=str(tmp / "trace.jsonl"),
        MSPROBE_SUMMARY_MODE="md5",
        MSPROBE_LIB=str(LIB),
        PYTHONPATH=str(REPO / "python"),
    )
    if preload:
        e["LD_PRELOAD"] = str(LIB)
    e.update(env or {})
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "user.py").write_text(SCRIPT)
    p = subprocess.run(
        [sys.executable, str(tmp / "user.py"), str(tmp / "dump")],
        env=e,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.rstrip().endswith("done"), p.stdout
    return p


def trace_of(tmp: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp / "trace.jsonl").read_text().splitlines()]


def test_window_and_steps_follow_the_api(lib64: Path, tmp_path: Path) -> None:  # noqa: F811
    p = run(lib64, tmp_path, preload=True, env={"RANK_ID": "1"})
    assert p.stderr.count(f"dump path {tmp_path / 'dump'}: ") == 1, p.stderr
    trace = trace_of(tmp_path)
    ops = [t["op"] for t in trace]
    # what the script launched: Muls, then per step Matmul, Relu (inside) and Softmax (outside)
    assert ops == ["aclnnMuls"] + ["aclnnMatmul", "aclnnRelu", "aclnnSoftmax"] * STEPS, ops
    dump = tmp_path / "dump"
    assert sorted(d.name for d in dump.iterdir()) == [f"step{i}" for i in range(STEPS)]
    for i in range(STEPS):
        inside = trace[1 + 3 * i : 3 + 3 * i]
        assert [d.name for d in (dump / f"step{i}").iterdir()] == ["rank1"]
        # exactly the window's launches, names in launch order, md5 = the trace's CRCs
        assert check_fidelity(inside, dump / f"step{i}" / "rank1") == 2
        data = json.loads((dump / f"step{i}" / "rank1" / "dump.json").read_text())["data"]
        assert list(data) == ["Aclnn.Matmul.0.forward", "Aclnn.Relu.0.forward"]


def test_without_preload_says_how_and_writes_nothing(lib64: Path, tmp_path: Path) -> None:  # noqa: F811
    p = run(lib64, tmp_path, preload=False)
    out = p.stdout + p.stderr
    hints = [line for line in out.splitlines() if "LD_PRELOAD=" in line]
    assert len(hints) == 1, out
    assert f"LD_PRELOAD={LIB}" in hints[0] and "nothing is recorded" in hints[0]
    assert not (tmp_path / "dump").exists()
    assert len(trace_of(tmp_path)) == 1 + 3 * STEPS  # the script's kernels did run
