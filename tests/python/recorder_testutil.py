"""Helpers for the recorder suites: run a small program in a fresh process (one recorder per
process)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
LIB = TARGET / "release" / "libmsprobe.so"
CLI = TARGET / "release" / "msprobe"


def run_child(code: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Runs `code` with `msprobe._native` importable; returns the completed process."""
    e = dict(os.environ)
    e.update({"PYTHONPATH": str(REPO / "python"), "MSPROBE_LIB": str(LIB)})
    e.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=e, capture_output=True, text=True, timeout=timeout
    )


def spawn_child(code: str, env: dict[str, str]) -> subprocess.Popen:
    e = dict(os.environ)
    e.update({"PYTHONPATH": str(REPO / "python"), "MSPROBE_LIB": str(LIB)})
    e.update(env)
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)], env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
