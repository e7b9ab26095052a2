"""msprobe 1.1.1's MindSpore compare and ours on every step of msprobe's MindSpore sample dumps (each
step against itself, and step N against step N+1 of the same case: different values, same records):
rows compared, rows equal in every cell, and the time of each tool (cold process each).

    target/venv-ms/bin/python scripts/compare_ms_vs_111.py

Needs `scripts/setup-ms.sh --msprobe` and `scripts/setup-msprobe111.sh` (its venv reads the xlsx).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "python"))
sys.path.insert(0, str(REPO / "tests" / "python" / "mindspore"))

import compare_util as cu  # noqa: E402
import test_compare_ms as t  # noqa: E402
from recorder_testutil import CLI  # noqa: E402


def main() -> int:
    import subprocess

    total = equal = 0
    t111 = tours = 0.0
    bad = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for case in sorted(p.name for p in t.SAMPLES.iterdir() if p.is_dir()):
            steps = sorted(p.name for p in (t.SAMPLES / case).iterdir() if p.name.startswith("step"))
            pairs = [(s, s) for s in steps] + list(zip(steps, steps[1:]))
            for a, b in pairs:
                npu, bench = t.SAMPLES / case / a / "rank", t.SAMPLES / case / b / "rank"
                name = f"{case}-{a}-{b}"
                cfg = cu.write_input(tmp / f"{name}.json", npu, bench)
                d111, dours = tmp / f"{name}-111", tmp / f"{name}-ours"
                s = time.perf_counter()
                p = t.run_111([(cfg, d111, ())], tmp)  # one cold process per run, as a user runs it
                t111 += time.perf_counter() - s
                assert p.returncode == 0 and "JOB FAILED" not in p.stderr, p.stderr[-2000:]
                dours.mkdir()
                s = time.perf_counter()
                q = subprocess.run(
                    [str(CLI), "-f", "mindspore", "compare", "-i", str(cfg), "-o", str(dours), "--no-progress"],
                    capture_output=True,
                    text=True,
                )
                tours += time.perf_counter() - s
                assert q.returncode == 0, q.stderr[-2000:]
                theirs, ours = cu.read_xlsx(d111), cu.read_xlsx(dours)
                rows = len(theirs["rows"]) - 1
                diff_rows = set()
                for line in cu.diff_tables(ours, theirs):
                    diff_rows.add(line.split(" (")[0])
                    bad.append(f"{name}: {line}")
                total += rows
                equal += rows - len(diff_rows)
                print(f"{name}: {rows} rows, {rows - len(diff_rows)} equal")
    print(f"total: {total} rows compared, {equal} equal in every cell; msprobe 1.1.1 {t111:.1f} s, ours {tours:.2f} s")
    for line in bad[:20]:
        print(line)
    return 0 if total == equal else 1


if __name__ == "__main__":
    sys.exit(main())
