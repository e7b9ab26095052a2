"""Helpers for the recorder suites: run a small program in a fresh process (one recorder per
process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
LIB = TARGET / "release" / "libmsprobe.so"
CLI = TARGET / "release" / "msprobe"


def free_port() -> int:
    """A TCP port nobody listens on now (for a rendezvous: a fixed port may be taken on a CI runner)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The simulator's CANN tree (scripts/sim-install.sh), as the suites find it.
LIB64 = Path(os.environ.get("CANNSIM_LIB64", REPO / "target" / "cann" / "latest" / "lib64"))


def sim_env(**extra: str) -> dict[str, str]:
    """The environment of a child that runs a CANN client on the simulator: this process's
    environment without the msprobe/simulator settings it may have inherited (MSPROBE_*,
    CANNSIM_*, LD_PRELOAD), the toolkit variables torch_npu and MindSpore look for, the library
    path, then `extra` (e.g. LD_PRELOAD=str(LIB), MSPROBE_LEVEL="L2")."""
    root = LIB64.parent
    e = {k: v for k, v in os.environ.items() if not k.startswith(("MSPROBE_", "CANNSIM_")) and k != "LD_PRELOAD"}
    e.update(
        ASCEND_TOOLKIT_HOME=str(root),
        ASCEND_HOME_PATH=str(root),
        ASCEND_OPP_PATH=str(root / "opp"),
        LD_LIBRARY_PATH=str(LIB64),
        CANNSIM_LIB64=str(LIB64),
    )
    e.update(extra)
    return e


def run_child(code: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Runs `code` with `msprobe._native` importable; returns the completed process."""
    e = dict(os.environ)
    e.update({"PYTHONPATH": str(REPO / "python"), "MSPROBE_LIB": str(LIB)})
    e.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=e, capture_output=True, text=True, timeout=timeout
    )


def run_counted(argv: list[str], env: dict[str, str], stats: Path, cwd: Path | None = None) -> tuple[dict, str]:
    """Runs a child on the simulator with CANNSIM_STATS=`stats`; asserts it succeeded and returns
    its counters ({} when it wrote none) and its output (stdout then stderr)."""
    p = subprocess.run(
        argv, env={**env, "CANNSIM_STATS": str(stats)}, capture_output=True, text=True, timeout=300, cwd=cwd
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return (json.loads(stats.read_text()) if stats.exists() else {}), p.stdout + p.stderr


def spawn_child(code: str, env: dict[str, str]) -> subprocess.Popen:
    e = dict(os.environ)
    e.update({"PYTHONPATH": str(REPO / "python"), "MSPROBE_LIB": str(LIB)})
    e.update(env)
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)], env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def journal_entries(raw: bytes) -> list[tuple[str, str, str, str]]:
    """The entries of a journal (format: crates/core/src/journal.rs module docs) whose CRC
    checks out, as (kind, directory, name, text); a cut or damaged entry is skipped."""
    if not raw.startswith(b"msprobe-journal 2 "):
        return []
    pos = raw.index(b"\n") + 1
    out = []
    while pos < len(raw):
        if raw[pos] == 0:
            pos += 1
            continue
        nl = raw.find(b"\n", pos)
        try:
            kind, crc, length, rest = raw[pos:nl].decode().split(" ", 3)
            d, used = json.JSONDecoder().raw_decode(rest)
            name = json.loads(rest[used + 1 :])
            t0, t1 = nl + 1, nl + 1 + int(length)
            ok = (
                nl > 0
                and raw[t1 : t1 + 1] == b"\n"
                and zlib.crc32(kind.encode() + raw[pos + 11 : t1 + 1]) == int(crc, 16)
            )
        except (ValueError, UnicodeDecodeError):
            ok = False
        if not ok:
            pos += 1  # look for the next entry
            continue
        out.append((kind, d, name, raw[t0:t1].decode()))
        pos = t1 + 1
    return out
