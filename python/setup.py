"""Bundles libmsprobe.so into the package (msprobe/lib/) when it is available at build time:
$MSPROBE_LIB, else the repository's target/release build. Without it the package still works
with MSPROBE_LIB, a preloaded library, or the repository build (msprobe/_native.py)."""
import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildPyWithLib(build_py):
    def run(self) -> None:
        super().run()
        target = Path(os.environ.get("CARGO_TARGET_DIR", HERE.parent / "target"))
        for c in (os.environ.get("MSPROBE_LIB"), target / "release" / "libmsprobe.so"):
            if c and Path(c).is_file():
                dest = Path(self.build_lib) / "msprobe" / "lib"
                dest.mkdir(parents=True, exist_ok=True)
                shutil.copy2(c, dest / "libmsprobe.so")
                break


setup(cmdclass={"build_py": BuildPyWithLib})
