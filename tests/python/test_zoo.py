"""The differential zoo (scripts/diff_msprobe.py): every zoo model at L0/L1/mix x statistics/md5/
tensor and a few filters, dumped by msprobe 1.1.1 (cached under target/zoo-cache) and by msprobe-rs
with the same driver and config. Fails when a case diverges more than tests/data/zoo_baseline.json
allows (record names/order, leaves), when a zoo model fails under msprobe-rs, or when a captured
run's losses, gradients or parameters differ from an uncaptured run's (CRC-32)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from recorder_testutil import REPO


def test_zoo_against_msprobe_111(tmp_path: Path) -> None:
    out = tmp_path / "summary.json"
    p = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts/diff_msprobe.py"),
            *("--json", str(out), "--show", "20", "--out", str(tmp_path / "zoo")),
        ],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert p.returncode == 0, p.stdout[-20000:] + p.stderr[-5000:]
    summary = json.loads(out.read_text())["cases"]
    baseline = json.loads((REPO / "tests/data/zoo_baseline.json").read_text())
    assert set(summary) == set(baseline)
    for case, s in summary.items():
        assert not s["errors"], (case, s["errors"])
        # the harness compares something real: both sides wrote records and leaves
        assert s["records"][0] > 0 and s["records"][1] > 0 and s["leaves"] > s["records"][1], (case, s)
        assert set(s["crc_differs"]) <= set(baseline[case]["crc_differs"]), (case, s["crc_differs"])
