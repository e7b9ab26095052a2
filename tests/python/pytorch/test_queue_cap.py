"""A writer queue smaller than one op's tensors (MSPROBE_QUEUE_MB=1) at L1 tensor through the
PyTorch layer: the job finishes (it used to hang in block mode) and the files hold torch's
values (scenarios/queue_cap.py checks them). Each run is bounded by a timeout, so a hang fails
the test instead of the suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from recorder_testutil import LIB, REPO  # noqa: E402

TIMEOUT = 120


@pytest.mark.parametrize("mode", ["block", "drop"])
def test_ops_larger_than_the_queue_finish_and_their_files_hold_torchs_values(tmp_path: Path, mode: str) -> None:
    env = {
        "PYTHONPATH": str(REPO / "python"),
        "MSPROBE_LIB": str(LIB),
        "PATH": "/usr/bin:/bin",
        "MSPROBE_QUEUE_MB": "1",
    }
    cmd = [sys.executable, str(HERE / "scenarios" / "queue_cap.py"), str(tmp_path / "dump"), mode]
    try:
        p = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"hung: not finished after {TIMEOUT} s\n{(e.stderr or b'')[-2000:]!r}")
    assert p.returncode == 0 and p.stdout.startswith("OK"), p.stdout + p.stderr[-3000:]
    summary = p.stderr[p.stderr.find("run summary") :]
    assert "records dropped: 0" in summary, p.stderr[-3000:]
    if mode == "block":
        assert "written without their tensor files (writer queue full): 0;" in summary, summary
