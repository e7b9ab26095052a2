"""The MindSpore differential zoo (scripts/diff_msprobe.py --framework ms, driver scripts/zoo/zoo_ms.py):
6 PyNative nets at L0/L1/mix x statistics/md5/tensor and a few filters, dumped by msprobe 1.1.1
(cached under target/zoo-cache-ms) and by msprobe-rs with the same driver and config. Fails when a
case diverges more than tests/data/zoo_ms_baseline.json allows (record names/order, leaves), when a
net fails under msprobe-rs, or when a captured run's losses, gradients or parameters differ from an
uncaptured run's (CRC-32). Runs in the .venv interpreter's place of the harness: the harness itself
starts target/venv-ms for both sides."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_ms_zoo_against_msprobe_111(tmp_path: Path) -> None:
    out = tmp_path / "summary.json"
    p = subprocess.run(
        [
            str(REPO / ".venv/bin/python"),
            str(REPO / "scripts/diff_msprobe.py"),
            *("--framework", "ms", "--json", str(out), "--show", "20", "--out", str(tmp_path / "zoo")),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert p.returncode == 0, p.stdout[-20000:] + p.stderr[-5000:]
    summary = json.loads(out.read_text())["cases"]
    baseline = json.loads((REPO / "tests/data/zoo_ms_baseline.json").read_text())
    assert set(summary) == set(baseline)
    for case, s in summary.items():
        assert not s["errors"], (case, s["errors"])
        # the harness compares something real: both sides wrote records and leaves
        assert s["records"][0] > 0 and s["records"][1] > 0 and s["leaves"] > s["records"][1], (case, s)
        assert not s["crc_differs"], (case, s["crc_differs"])  # capture leaves the computation untouched
