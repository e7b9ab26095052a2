#!/usr/bin/env python3
"""The idle cost of a wrapped call on aarch64 under qemu-aarch64, beside the direct call in the same
run (scripts/bench_aarch64.sh). benches/l2_call.c and benches/fakeop.c, cross-built, call a trivial
aclnnAdd (phase 2) N times, looked up with dlsym or called by name. Absolute times under emulation
mean little; the ratio wrapped/direct is the figure."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIB = REPO / "target/aarch64/aarch64-unknown-linux-gnu/release/libmsprobe.so"
CC = "aarch64-linux-gnu-gcc"


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        subprocess.run(
            [CC, "-O2", "-shared", "-fPIC", "-o", work / "libfakeop.so", REPO / "benches/fakeop.c"], check=True
        )
        src = REPO / "benches/l2_call.c"
        subprocess.run([CC, "-O2", "-o", work / "l2_call", src, "-ldl"], check=True)
        link = [f"-L{work}", "-lfakeop", f"-Wl,-rpath,{work}"]
        subprocess.run([CC, "-O2", "-DLINKED", "-o", work / "l2_call_linked", src, *link], check=True)
        (work / "l1.json").write_text('{"level": "L1"}')
        base = {k: v for k, v in os.environ.items() if not k.startswith(("MSPROBE_", "QEMU_", "LD_PRELOAD"))}
        base["QEMU_LD_PREFIX"] = "/usr/aarch64-linux-gnu"

        def ns(exe: str, preload: bool, **env: str) -> float:
            e = dict(base, **env)
            if preload:
                e["QEMU_SET_ENV"] = f"LD_PRELOAD={LIB}"
            out = subprocess.run(
                ["qemu-aarch64", work / exe, work / "libfakeop.so", str(calls)],
                env=e,
                capture_output=True,
                text=True,
                check=True,
            )
            return float(out.stdout.strip())

        off = {"MSPROBE_CONFIG": str(work / "l1.json")}
        for exe, what in (("l2_call", "via dlsym"), ("l2_call_linked", "called by name (export)")):
            # Interleaved, best of five each (l2_call itself takes the best of 5 rounds): other
            # processes on the machine slow single runs down, never speed them up.
            direct, idle, unset = [], [], []
            for _ in range(5):
                direct.append(ns(exe, False))
                idle.append(ns(exe, True, **off))
                unset.append(ns(exe, True))
            d = min(direct)
            print(f"== aarch64 under qemu: aclnnAdd (phase 2) {what}, {calls} calls, best of 5 x 5 rounds")
            print(f"{'configuration':<44} {'ns/call':>8} {'ratio':>6}")
            for name, v in (
                ("direct (no preload)", d),
                ("wrapped, capture off (level L1 config)", min(idle)),
                # Without a level dlsym hands out the real function (a direct call); a call by name
                # still goes through the export.
                ("preloaded, no MSPROBE_LEVEL/config at all", min(unset)),
            ):
                print(f"{name:<44} {v:>8.2f} {v / d:>6.2f}")


if __name__ == "__main__":
    main()
