"""Side-by-side overhead of msprobe-rs and msprobe 1.1.1 on the MLP of run_case.py (same
driver, same config, same machine, runs interleaved). Per-record cost =
(dumped step - undumped step of the same Python) / records per step, where a cell's step time
is the lowest of its rounds' medians: other load on the machine only ever adds time, and on
this shared 2-core VM it made single cells swing by 2x between rounds. Before and after the
runs it measures the disk's file-creation cost, which both tools pay per file.

usage: python scripts/bench_pytorch.py [--steps 100] [--warmup 3] [--rounds 3] [--out target/bench-pytorch]
                                      [--levels L0,L1] [--settle 360]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DRIVER = REPO / "tests/python/pytorch/drivers/run_case.py"
SIDES = {
    "msprobe-rs": (
        str(REPO / ".venv/bin/python"),
        {"PYTHONPATH": str(REPO / "python"), "MSPROBE_LIB": str(REPO / "target/release/libmsprobe.so")},
    ),
    "msprobe-rs async stop": (
        str(REPO / ".venv/bin/python"),
        {
            "PYTHONPATH": str(REPO / "python"),
            "MSPROBE_LIB": str(REPO / "target/release/libmsprobe.so"),
            "MSPROBE_STOP_FLUSH": "0",
        },
    ),
    "msprobe 1.1.1": (str(REPO / "target/venv-msprobe111/bin/python"), {"MSPROBE_LOG_LEVEL": "3"}),
}
MODES = [
    ("L1", "statistics", "statistics"),
    ("L1", "statistics", "md5"),
    ("L1", "tensor", "statistics"),
    ("L0", "statistics", "statistics"),
]


def run(side: str, mode: tuple | None, out: Path, a: argparse.Namespace) -> dict:
    py, extra = SIDES[side]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MSPROBE_LIB", "LD_PRELOAD")}
    env.update(extra)
    res = out / "res.json"
    argv = [
        py,
        str(DRIVER),
        "--out",
        str(out / "dump"),
        "--steps",
        str(a.steps),
        "--warmup",
        str(a.warmup),
        "--json",
        str(res),
        "--cfg_dir",
        str(out / "cfgs"),
    ]
    if mode is None:
        argv += ["--mode", "none"]
    else:
        argv += ["--level", mode[0], "--task", mode[1], "--summary", mode[2]]
    out.mkdir(parents=True)
    # Each run writes to a fresh directory, with the previous runs' files on disk and none deleted
    # meanwhile: write-back of thousands of tensor files, or the discards that follow deleting
    # them (this disk is mounted with `discard`), slowed whichever run came next by up to 8x.
    os.sync()
    p = subprocess.run(argv, env=env, cwd=out, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise SystemExit(f"{side} {mode} failed:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    r = json.loads(res.read_text())
    if mode is not None:
        last = sorted(
            glob.glob(str(out / "dump/step*/rank*/dump.json")), key=lambda s: int(s.split("/step")[1].split("/")[0])
        )[-1]
        r["records"] = len(json.load(open(last))["data"])
    return r


def create_cost(parent: Path, n: int = 200) -> float:
    """µs to create, write and close one small file in a fresh directory under `parent`. Both tools
    pay this for every file they make (step directories, JSON files, tensor files). On ext4 it
    grows several-fold for a few minutes after many files were deleted: new inodes skip the
    recently deleted ones one by one (`recently_deleted` in the kernel's inode allocator)."""
    d = parent / f"probe-{time.time_ns()}"
    d.mkdir(parents=True)
    t = time.perf_counter()
    for i in range(n):
        fd = os.open(d / f"f{i}.pt", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)
        os.write(fd, b"x" * 1024)
        os.close(fd)
    return (time.perf_counter() - t) / n * 1e6


def settle(parent: Path, limit_s: float, slow_us: float = 60.0) -> float:
    """Waits (up to `limit_s`) until file creation under `parent` is back to normal after recent
    deletions (ours or anyone's), so neither tool is measured on a disk in that state; returns
    the last cost measured."""
    t0 = time.monotonic()
    cost = create_cost(parent)
    while cost > slow_us and time.monotonic() - t0 < limit_s:
        print(f"file creation costs {cost:.0f} µs (files were deleted recently); waiting for the disk", flush=True)
        time.sleep(20)
        cost = create_cost(parent)
    return cost


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(REPO / "target/bench-pytorch"))
    ap.add_argument("--levels", default="L0,L1", help="rows to run, by level")
    ap.add_argument("--settle", type=float, default=360, help="seconds to wait at most for normal file creation")
    a = ap.parse_args()
    modes = [m for m in MODES if m[0] in a.levels.split(",")]
    root = Path(a.out)
    times: dict = {}
    records: dict = {}
    # Files of an earlier bench are deleted after this one has measured, never before: deleting
    # makes file creation slower for minutes (see create_cost).
    trash = root / f"trash-{time.time_ns()}"
    for old in [root / "runs", *root.glob("trash-*")]:
        if old.exists():
            trash.mkdir(parents=True, exist_ok=True)
            old.rename(trash / old.name)
    create_before = settle(root / "runs", a.settle)
    n = 0
    for _rnd in range(a.rounds):
        for mode in [None] + modes:
            for side in SIDES:
                n += 1
                r = run(side, mode, root / "runs" / str(n), a)
                times.setdefault((side, mode), []).append(statistics.median(r["times"]))
                if mode is not None:
                    records[(side, mode)] = r["records"]
    create_after = create_cost(root / "runs")
    # The undumped run does not import msprobe: sides sharing a Python run the same program, so
    # their baseline runs are pooled (one noisy baseline would skew a side's per-record cost).
    for side in SIDES:
        times[(side, None)] = [t for other in SIDES if SIDES[other][0] == SIDES[side][0] for t in times[(other, None)]]
    med = {k: min(v) * 1e3 for k, v in times.items()}
    rows = []
    print(
        f"\nMLP of run_case.py, {a.steps} steps x {a.rounds} rounds per cell (ms: the lowest round median), "
        f"warm-up {a.warmup}\n"
    )
    print(
        "| level | task / summary | side | step ms | baseline ms | records/step | per-record µs | msprobe-rs / 1.1.1 |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for mode in modes:
        per = {}
        for side in SIDES:
            base = med[(side, None)]
            per[side] = (med[(side, mode)] - base) / records[(side, mode)] * 1e3
        for side in SIDES:
            ratio = f"1/{per['msprobe 1.1.1'] / per[side]:.1f}" if side != "msprobe 1.1.1" and per[side] > 0 else ""
            task = mode[1] if mode[1] == "tensor" else f"{mode[1]}/{mode[2]}"
            print(
                f"| {mode[0]} | {task} | {side} | {med[(side, mode)]:.2f} | {med[(side, None)]:.2f} | "
                f"{records[(side, mode)]} | {per[side]:.0f} | {ratio} |"
            )
            rows.append(
                {
                    "level": mode[0],
                    "task": task,
                    "side": side,
                    "step_ms": med[(side, mode)],
                    "baseline_ms": med[(side, None)],
                    "records": records[(side, mode)],
                    "per_record_us": per[side],
                }
            )
    print(
        f"\nFile creation on this disk (create + write 1 KiB + close, fresh directory): "
        f"{create_before:.0f} µs before the runs, {create_after:.0f} µs after."
    )
    (root / "bench.json").write_text(json.dumps(rows, indent=1))
    shutil.rmtree(root / "runs", ignore_errors=True)
    shutil.rmtree(trash, ignore_errors=True)


if __name__ == "__main__":
    main()
