"""Builds the msprobe-rs platform wheel from the workspace's native build.

The wheel bundles what `bash scripts/build.sh` (cargo build --release --workspace) made:
libmsprobe.so and the msprobe._fastpath extension in msprobe/lib/, and the `msprobe` command line
(the Rust binary itself, installed into the environment's bin/ as a script). They come from
$MSPROBE_LIB / $MSPROBE_FASTPATH / $MSPROBE_CLI when set, else from $CARGO_TARGET_DIR/release
(default: the repository's target/release). A missing one stops the build with the command that
builds it: a wheel without them would install and then fail at the first use.

Why not maturin or setuptools-rust: libmsprobe.so is a C-ABI library for LD_PRELOAD (not a Python
extension) and the CLI is a second crate's binary; maturin takes one binding per project, and
both tools would run a second cargo build under pip's environment. The workspace build already
needs bindgen's libclang (scripts/setup.sh); packaging its output keeps the wheel build offline and
a few seconds long.

The wheel is tagged cp310-abi3-<platform>: the extension uses Python's stable ABI from 3.10 on
(pyo3's abi3-py310), the libraries are built for this machine's platform. setuptools' build/ and
*.egg-info go to a temporary directory, never into the source tree.
"""

import atexit
import os
import shutil
import sys
import sysconfig
import tempfile
from distutils.command.build_scripts import build_scripts  # setuptools ships distutils (its own copy)
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", HERE.parent / "target")) / "release"

# (file in the wheel, environment override, cargo output, what builds it)
NATIVE = {
    "libmsprobe.so": ("MSPROBE_LIB", "libmsprobe.so", "cargo build --release -p libmsprobe"),
    "_fastpath.abi3.so": ("MSPROBE_FASTPATH", "lib_fastpath.so", "cargo build --release -p msprobe-fastpath"),
    "msprobe": ("MSPROBE_CLI", "msprobe", "cargo build --release -p msprobe-cli"),
}


def native(name: str) -> Path:
    env, built, how = NATIVE[name]
    p = Path(os.environ[env]) if os.environ.get(env) else TARGET / built
    if not p.is_file():
        sys.exit(
            f"msprobe-rs wheel: {p} is missing ({name}). Build the native parts first: "
            f"`bash scripts/build.sh` in the repository (or `{how}`), or point ${env} at a built {name}."
        )
    return p


class BuildPyWithLib(build_py):
    def run(self) -> None:
        super().run()
        dest = Path(self.build_lib) / "msprobe" / "lib"
        dest.mkdir(parents=True, exist_ok=True)
        for name in ("libmsprobe.so", "_fastpath.abi3.so"):
            shutil.copy2(native(name), dest / name)


class PlatformWheel(bdist_wheel):
    def get_tag(self):
        plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
        return "cp310", "abi3", plat


class BuildCli(build_scripts):
    """The `msprobe` script is the CLI binary itself (no Python wrapper: exit codes, signals and
    start-up time are the binary's)."""

    def get_source_files(self) -> list:
        return []

    def run(self) -> None:
        self.mkpath(self.build_dir)
        out = Path(self.build_dir) / "msprobe"
        shutil.copy2(native("msprobe"), out)
        out.chmod(0o755)
        # setuptools' install_scripts copies build_dir only when the distribution names scripts
        self.distribution.scripts = [str(out)]


class NativeDist(Distribution):
    """Native parts without setuptools Extensions: platlib, a platform tag, the CLI script."""

    def has_scripts(self) -> bool:
        return True

    def has_ext_modules(self) -> bool:
        return True


# setuptools writes build/ and msprobe_rs.egg-info next to setup.py unless told otherwise.
_scratch = tempfile.mkdtemp(prefix="msprobe-rs-build-")
atexit.register(shutil.rmtree, _scratch, True)

setup(
    distclass=NativeDist,
    cmdclass={"build_py": BuildPyWithLib, "build_scripts": BuildCli, "bdist_wheel": PlatformWheel},
    options={"build": {"build_base": str(Path(_scratch) / "build")}, "egg_info": {"egg_base": _scratch}},
)
