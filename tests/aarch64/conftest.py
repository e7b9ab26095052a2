"""The aarch64 suite (scripts/test-aarch64.sh): checks that the cross build and the qemu runner exist,
failing (never skipping) when they do not, and makes tests/python's helpers importable."""

import shutil
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))

from aarch64_util import CC, LIB, LIB64, QEMU  # noqa: E402

from recorder_testutil import LIB as HOST_LIB  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    for tool in (QEMU, CC):
        if shutil.which(tool) is None:
            raise pytest.UsageError(f"{tool} not found: run scripts/setup-aarch64.sh (scripts/test-aarch64.sh does)")
    for f in (LIB, LIB64 / "libascendcl.so"):
        if not f.exists():
            raise pytest.UsageError(f"{f} missing: run scripts/test-aarch64.sh (it cross-builds and installs it)")
    if not HOST_LIB.exists():
        raise pytest.UsageError(f"{HOST_LIB} missing (the x86-64 reference): run scripts/build.sh")
