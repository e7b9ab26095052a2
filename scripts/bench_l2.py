#!/usr/bin/env python3
"""L2 benchmarks, each beside its baseline in the same run (see scripts/bench_l2.sh)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
LIB = TARGET / "release" / "libmsprobe.so"


def clean_env(**extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("MSPROBE_") and k != "LD_PRELOAD"}
    e.update(extra)
    return e


def per_call(work: Path, calls: int) -> None:
    subprocess.run(
        ["cc", "-O2", "-shared", "-fPIC", "-o", work / "libfakeop.so", REPO / "benches/fakeop.c"], check=True
    )
    src = REPO / "benches/l2_call.c"
    subprocess.run(["cc", "-O2", "-o", work / "l2_call", src, "-ldl"], check=True)
    link = [f"-L{work}", "-lfakeop", f"-Wl,-rpath,{work}"]
    subprocess.run(["cc", "-O2", "-DLINKED", "-o", work / "l2_call_linked", src, *link], check=True)
    subprocess.run(["cc", "-O2", "-DLINKED", "-DACLOP", "-o", work / "l2_call_aclop", src, *link], check=True)
    (work / "l1.json").write_text('{"level": "L1"}')

    def ns(exe: str, **env: str) -> float:
        out = subprocess.run(
            [work / exe, work / "libfakeop.so", str(calls)],
            env=clean_env(**env),
            capture_output=True,
            text=True,
            check=True,
        )
        return float(out.stdout.strip())

    off = {"LD_PRELOAD": str(LIB), "MSPROBE_CONFIG": str(work / "l1.json")}
    filtered = {
        "LD_PRELOAD": str(LIB),
        "MSPROBE_LEVEL": "L2",
        "MSPROBE_LIST": "Aclnn.Mm.",
        "MSPROBE_DUMP_PATH": str(work / "d"),
        "MSPROBE_LOG_LEVEL": "2",
    }
    for exe, what in (
        ("l2_call", "aclnnAdd (phase 2) via dlsym"),
        ("l2_call_linked", "aclnnAdd (phase 2) called by name (export)"),
        ("l2_call_aclop", "aclopExecuteV2 called by name (export)"),
    ):
        rows = [
            ("direct (no preload)", ns(exe)),
            ("wrapped, capture off (level L1 config)", ns(exe, **off)),
            ("wrapped, no MSPROBE_LEVEL/config at all", ns(exe, LD_PRELOAD=str(LIB))),
        ]
        if exe != "l2_call_aclop":  # the list prefilter is per aclnn op
            rows.append(("wrapped, L2 on, op filtered out", ns(exe, **filtered)))
        print(f"== per-call cost of a trivial {what}, best of 5 x {calls} calls")
        print(f"{'configuration':<44} {'ns/call':>8} {'extra ns':>9}")
        for name, v in rows:
            print(f"{name:<44} {v:>8.2f} {v - rows[0][1]:>9.2f}")


def step_time(work: Path, lib64: str, reps: int = 3) -> None:
    def run(steps: int, **env: str) -> float:
        best = float("inf")
        for _ in range(reps):
            shutil.rmtree(work / "dump", ignore_errors=True)
            e = clean_env(
                LD_LIBRARY_PATH=lib64,
                CANNSIM_LIB64=lib64,
                MSPROBE_DUMP_PATH=str(work / "dump"),
                MSPROBE_LOG_LEVEL="2",
                **env,
            )
            t0 = time.perf_counter()
            subprocess.run(
                [sys.executable, REPO / "examples/train.py", "--steps", str(steps)],
                env=e,
                stdout=subprocess.DEVNULL,
                check=True,
            )
            best = min(best, time.perf_counter() - t0)
        return best

    def ms_per_step(**env: str) -> float:
        return (run(105, **env) - run(5, **env)) * 1000 / 100

    base = ms_per_step()
    rows = [
        ("uncaptured", base),
        ("L2 statistics", ms_per_step(LD_PRELOAD=str(LIB), MSPROBE_LEVEL="L2", MSPROBE_TASK="statistics")),
        ("L2 statistics + md5", ms_per_step(LD_PRELOAD=str(LIB), MSPROBE_LEVEL="L2", MSPROBE_SUMMARY_MODE="md5")),
        ("L2 tensor (.pt files)", ms_per_step(LD_PRELOAD=str(LIB), MSPROBE_LEVEL="L2", MSPROBE_TASK="tensor")),
    ]
    print("== examples/train.py step time: (t[105 steps] - t[5 steps]) / 100, best of 3 runs each")
    print(f"{'configuration':<44} {'ms/step':>8} {'ratio':>7}")
    for name, v in rows:
        print(f"{name:<44} {v:>8.3f} {v / base:>7.2f}")


def main() -> None:
    lib64 = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        per_call(Path(d), int(os.environ.get("BENCH_CALLS", "20000000")))
        if os.environ.get("BENCH_STEPS", "1") != "0":
            step_time(Path(d), lib64)


if __name__ == "__main__":
    main()
