"""`PrecisionDebugger(level="L2")` drives the preloaded interposer (torch_npu on the simulator): kernels are
captured only while start()..stop() has the window open, and each step() ends a step directory. Without the
preload the debugger says once how to enable L2 and writes nothing.

Truth is the simulator's launch trace (CANNSIM_TRACE, written by the simulator, not the interposer): every
launch of the script is in it, in order, with CRCs of its tensors; the captured records must be exactly the
launches made inside the windows, with the same CRCs (MSPROBE_SUMMARY_MODE=md5), and the launches outside
(before the first start(), between stop() and step()) must have happened and not be captured.
"""

import json
import subprocess
from pathlib import Path

import pytest

from recorder_testutil import LIB, REPO, sim_env
from test_l2_torch_npu import LIB64, NPU_PY, coverage_module

pytestmark = pytest.mark.skipif(
    not NPU_PY.exists() or not (LIB64 / "libascendcl.so").exists(),
    reason="target/venv-npu (scripts/setup-torchnpu.sh) or the simulator's CANN tree (scripts/build.sh) is absent",
)

STEPS = 3
SCRIPT = f"""
import sys
import torch
import torch_npu  # noqa: F401
from msprobe.pytorch import PrecisionDebugger

debugger = PrecisionDebugger(dump_path=sys.argv[1], task="statistics", level="L2")
x = torch.randn(8, 16).npu()
w = torch.randn(16, 16).npu()
x * 2.0                        # before the first window
for step in range({STEPS}):
    debugger.start()
    y = torch.relu(x @ w)      # inside: captured
    debugger.stop()
    torch.softmax(y, -1)       # between stop() and step(): not captured
    debugger.step()
torch.npu.synchronize()
"""


def run(tmp: Path, preload: bool) -> subprocess.CompletedProcess:
    e = sim_env(
        CANNSIM_TRACE=str(tmp / "trace.jsonl"),
        MSPROBE_SUMMARY_MODE="md5",
        MSPROBE_LIB=str(LIB),
        PYTHONPATH=str(REPO / "python"),
    )
    if preload:
        e["LD_PRELOAD"] = str(LIB)
    (tmp / "user.py").write_text(SCRIPT)
    return subprocess.run(
        [str(NPU_PY), str(tmp / "user.py"), str(tmp / "dump")], env=e, capture_output=True, text=True, timeout=300
    )


def test_window_and_steps_follow_the_api(tmp_path):
    p = run(tmp_path, preload=True)
    assert p.returncode == 0, p.stderr[-3000:]
    # the log names the dump path once, when capture first writes there
    assert p.stderr.count(f"dump path {tmp_path / 'dump'}: ") == 1, p.stderr
    cov = coverage_module()
    trace = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    ops = [t["op"] for t in trace]
    # what the script launched: Muls, then per step Matmul, Relu (inside) and Softmax (outside)
    assert ops == ["aclnnMuls"] + ["aclnnMatmul", "aclnnRelu", "aclnnSoftmax"] * STEPS, ops
    dirs = sorted(d.name for d in (tmp_path / "dump").iterdir())
    assert dirs == [f"step{i}" for i in range(STEPS)], dirs
    for i in range(STEPS):
        inside = trace[1 + 3 * i : 3 + 3 * i]
        data = json.loads((tmp_path / "dump" / f"step{i}" / "rank" / "dump.json").read_text())["data"]
        assert list(data) == [f"Aclnn.{cov.record_of(t['op'])[1]}.0.forward" for t in inside]
        for t, rec in zip(inside, data.values()):
            want = [x["crc_view_before"] for x in t["tensors"] if x["role"] in ("input", "inout")]
            want += [x["crc_view_after"] for x in t["tensors"] if x["role"] in ("output", "inout")]
            got = [x.get("md5") for x in cov.leaves(rec.get("input_args", []))]
            got += [x.get("md5") for x in cov.leaves(rec.get("output", []))]
            assert got == want, (i, t["op"])


def test_without_preload_says_how_and_writes_nothing(tmp_path):
    p = run(tmp_path, preload=False)
    assert p.returncode == 0, p.stderr[-3000:]
    out = p.stdout + p.stderr  # msprobe's Python logger writes to stdout, as msprobe's does
    hints = [line for line in out.splitlines() if "LD_PRELOAD=" in line]
    assert len(hints) == 1, out
    assert f"LD_PRELOAD={LIB}" in hints[0] and "nothing is recorded" in hints[0]
    assert not (tmp_path / "dump").exists()
    # the script's kernels did run
    assert len((tmp_path / "trace.jsonl").read_text().splitlines()) == 1 + 3 * STEPS
