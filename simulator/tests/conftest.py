"""Shared fixtures: install the simulator once per session and expose ctypes bindings."""

import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLES = os.path.join(REPO, "examples")
sys.path.insert(0, EXAMPLES)


def _install():
    if os.environ.get("CANNSIM_LIB64"):
        return os.environ["CANNSIM_LIB64"]
    out = subprocess.run(
        ["bash", os.path.join(REPO, "scripts", "sim-install.sh")], check=True, stdout=subprocess.PIPE, text=True
    ).stdout
    return out.strip().splitlines()[-1]


LIB64 = _install()
os.environ["CANNSIM_LIB64"] = LIB64


@pytest.fixture(scope="session")
def lib64():
    return LIB64


@pytest.fixture(scope="session")
def acl():
    import cannsim_ctypes as cs

    return cs.Acl(LIB64)


def run_py(code, env=None, timeout=60, check=True):
    """Run a Python snippet in a fresh process (the library reads CANNSIM_* once per process)."""
    e = dict(os.environ, CANNSIM_LIB64=LIB64, PYTHONPATH=EXAMPLES)
    e.update(env or {})
    prelude = "import ctypes as C, numpy as np, cannsim_ctypes as cs\nVP = C.c_void_p\n"
    p = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        env=e,
        timeout=timeout,
        capture_output=True,
        text=True,
    )
    if check and p.returncode != 0:
        raise AssertionError(f"child failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p
