"""The README's L2 one-liner, run as written (its shell block, taken from the README): with msprobe
installed it preloads the library and starts the job; without msprobe in that Python, or without the
native library, it says what to do and does not start the job uncaptured.

The job is a stand-in `examples/train.py` in a scratch directory that reports the LD_PRELOAD it got;
`python` is put first on PATH as a link to the interpreter under test."""

import os
import re
import subprocess
import sys
from pathlib import Path

from recorder_testutil import LIB, REPO


def readme_l2_block() -> str:
    text = (REPO / "README.md").read_text()
    section = text.split("## Kernel level (L2)", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "the L2 section has no sh block"
    return block.group(1)


def run_block(tmp: Path, python: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    bindir = tmp / "bin"
    bindir.mkdir(exist_ok=True)
    link = bindir / "python"
    if link.exists() or link.is_symlink():
        link.unlink()
    link.symlink_to(python)
    work = tmp / "work"
    (work / "examples").mkdir(parents=True, exist_ok=True)
    (work / "examples" / "train.py").write_text(
        "import os\nprint('JOB RAN, LD_PRELOAD=' + os.environ.get('LD_PRELOAD', ''))\n"
    )
    e = {k: v for k, v in os.environ.items() if not k.startswith(("MSPROBE_", "PYTHON"))}
    e.pop("LD_PRELOAD", None)
    e.update(env)
    e["PATH"] = f"{bindir}:{e.get('PATH', '')}"
    return subprocess.run(
        ["bash", "-c", readme_l2_block()], cwd=work, env=e, capture_output=True, text=True, timeout=60
    )


def test_installed_preloads_and_runs(tmp_path):
    r = run_block(tmp_path, sys.executable, {"PYTHONPATH": str(REPO / "python"), "MSPROBE_LIB": str(LIB)})
    assert r.returncode == 0, r.stderr
    assert f"JOB RAN, LD_PRELOAD={LIB.resolve()}" in r.stdout, (r.stdout, r.stderr)


def test_without_msprobe_the_job_does_not_start(tmp_path):
    # A bare interpreter: the venv's Python in isolated mode sees neither PYTHONPATH nor the repo.
    bare = tmp_path / "bare.sh"
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -I "$@"\n')
    bare.chmod(0o755)
    r = run_block(tmp_path, str(bare), {})
    assert "JOB RAN" not in r.stdout
    assert r.returncode != 0
    assert "No module named" in r.stderr and "msprobe" in r.stderr, r.stderr
    # The README names the cure beside the line.
    readme = (REPO / "README.md").read_text().split("## Kernel level (L2)", 1)[1]
    assert "`No module named msprobe`" in readme.split("##", 1)[0]


def test_without_the_library_it_says_how_to_get_it(tmp_path):
    missing = tmp_path / "none" / "libmsprobe.so"
    r = run_block(
        tmp_path,
        sys.executable,
        {"PYTHONPATH": str(REPO / "python"), "MSPROBE_LIB": str(missing), "CARGO_TARGET_DIR": str(tmp_path / "t")},
    )
    assert "JOB RAN" not in r.stdout
    assert r.returncode == 1
    assert "msprobe.preload:" in r.stderr and "wheel" in r.stderr, r.stderr
