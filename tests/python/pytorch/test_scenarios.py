"""Feature scenarios on real torch (scenarios/*.py check themselves against torch and zlib);
each runs in a fresh process forked from one that imported torch (forkrun.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
LIB = REPO / "target" / "release" / "libmsprobe.so"
SCEN = HERE / "scenarios"

JOBS = {
    "convnet": ("convnet.py", []),
    "values": ("values.py", []),
    "inplace": ("inplace.py", []),
    "inplace_pre": ("inplace.py", ["pre"]),
    "steps": ("steps.py", []),
    "rank0": ("rank.py", ["[0]"]),
    "rank1": ("rank.py", ["[1]"]),
    "l0_dict": ("l0_dict.py", []),
    "api_errors": ("api_errors.py", []),
    "l0_lean": ("l0_lean.py", ["lean"]),
    "l0_torch": ("l0_lean.py", ["torch"]),
    "l0_pylean": ("l0_lean.py", ["pylean"]),
    "stop_waits": ("stop_waits.py", []),
    "dist": ("dist.py", []),
}


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("scen")
    jobs = [
        {"script": str(SCEN / s), "argv": [str(root / name)] + a, "cwd": str(root), "log": str(root / f"{name}.log")}
        for name, (s, a) in JOBS.items()
    ]
    (root / "jobs.json").write_text(json.dumps(jobs))
    env = {"PYTHONPATH": str(REPO / "python"), "MSPROBE_LIB": str(LIB), "PATH": "/usr/bin:/bin"}
    p = subprocess.run(
        [sys.executable, str(HERE / "forkrun.py"), str(root / "jobs.json")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return root


def _log(runs: Path, name: str) -> str:
    return (runs / f"{name}.log").read_text()


@pytest.mark.parametrize("name", [n for n in JOBS if not n.startswith("rank")])
def test_scenario(runs: Path, name: str) -> None:
    log = _log(runs, name)
    assert "\nOK" in "\n" + log, log[-3000:]


def test_l0_lean_hooks_record_what_torch_full_backward_hooks_do(runs: Path) -> None:
    """L0's own backward hooking (native, and module_hooks._LeanHooks, its Python twin) against
    torch's full backward hooks (what mix and msprobe 1.1.1 use) on the same modules: identical
    files."""
    full = runs / "l0_torch"
    files = sorted(p.relative_to(full) for p in full.rglob("*") if p.is_file())
    assert [str(f) for f in files] == [
        f"step{s}/rank/{n}" for s in (0, 1) for n in ("construct.json", "dump.json", "stack.json")
    ]
    for lean in (runs / "l0_lean", runs / "l0_pylean"):
        assert files == sorted(p.relative_to(lean) for p in lean.rglob("*") if p.is_file())
        for rel in files:
            assert (lean / rel).read_bytes() == (full / rel).read_bytes(), (lean.name, rel)
    names = list(json.loads((full / "step1/rank/dump.json").read_text())["data"])
    for expected in (
        "Module.pair.Pair.backward.0",
        "Module.split.Split.backward.0",
        "Module.act.ReLU.backward.1",
        "Module.seq.1.Tanh.backward.1",
        "Module.first.Linear.backward.0",
        "Module.named.Named.backward.0",
    ):
        assert expected in names, names
    assert not any(n.startswith("Module.dicty.Dicty.backward") for n in names)


def test_rank_filter(runs: Path) -> None:
    assert "OK ['step0']" in _log(runs, "rank0")
    assert "OK False" in _log(runs, "rank1"), _log(runs, "rank1")


def test_preloaded_library_is_used(tmp_path: Path) -> None:
    """With LD_PRELOAD the package binds the preloaded copy (one recorder per process)."""
    code = f"""
import ctypes, torch
from msprobe.core import native
from msprobe.pytorch import PrecisionDebugger
assert native.lib._name is None, native.lib._name      # ctypes.CDLL(None): the process itself
d = PrecisionDebugger(dump_path={str(tmp_path / "d")!r}); d.start(); torch.add(torch.ones(2), 1); d.stop()
import os; print("OK", os.listdir({str(tmp_path / "d" / "step0" / "rank")!r}))
"""
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"), LD_PRELOAD=str(LIB), MSPROBE_LIB="/nonexistent.so")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "dump.json" in p.stdout, p.stdout + p.stderr
