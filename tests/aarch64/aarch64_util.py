"""Paths and runners of the aarch64 build under qemu user-mode emulation (scripts/test-aarch64.sh)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRIPLE = "aarch64-unknown-linux-gnu"
ARM_TARGET = REPO / "target" / "aarch64"
RELEASE = ARM_TARGET / TRIPLE / "release"
LIB = RELEASE / "libmsprobe.so"
LIB64 = Path(os.environ.get("CANNSIM_LIB64_AARCH64", ARM_TARGET / "cann" / "latest" / "lib64"))
SYSROOT = "/usr/aarch64-linux-gnu"
QEMU = shutil.which("qemu-aarch64") or "qemu-aarch64"
CC = "aarch64-linux-gnu-gcc"


def cc(out: Path, *args: str | Path) -> Path:
    subprocess.run([CC, "-O1", "-Wall", "-o", str(out), *map(str, args)], check=True)
    return out


def run(
    args: list[str | Path],
    tmp: Path,
    env: dict[str, str] | None = None,
    preload: bool = True,
    trace: bool = True,
    timeout: float = 300,
) -> subprocess.CompletedProcess:
    """Runs an aarch64 program under qemu-aarch64 with the aarch64 simulator on its library path and,
    with `preload`, libmsprobe.so preloaded in L2. The guest's LD_PRELOAD and LD_LIBRARY_PATH go
    through QEMU_SET_ENV (in the host environment they would be read by qemu's own x86-64 loader)."""
    e = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MSPROBE_", "CANNSIM_", "QEMU_", "LD_PRELOAD", "LD_LIBRARY_PATH"))
    }
    guest = [f"LD_LIBRARY_PATH={LIB64}"]
    if preload:
        guest.append(f"LD_PRELOAD={LIB}")
        e["MSPROBE_LEVEL"] = "L2"
        e["MSPROBE_DUMP_PATH"] = str(tmp / "dump")
    if trace:
        e["CANNSIM_TRACE"] = str(tmp / "trace.{pid}.jsonl")
        # Slow kernels make a missing stream synchronisation in the capture show up every time.
        e["CANNSIM_KERNEL_DELAY_US"] = "200"
    e["CANNSIM_LIB64"] = str(LIB64)
    e["QEMU_LD_PREFIX"] = SYSROOT
    e["QEMU_SET_ENV"] = ",".join(guest)
    # Programs that spawn themselves (all_entries.c's rank 1) do it through the emulator.
    e["PEER_RUNNER"] = QEMU
    e.update(env or {})
    p = subprocess.run([QEMU, *map(str, args)], env=e, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    return p
