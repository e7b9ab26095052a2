"""Bundles libmsprobe.so and the msprobe._fastpath extension into the package (msprobe/lib/) when
they are available at build time: $MSPROBE_LIB / $MSPROBE_FASTPATH, else the repository's
target/release build (`cargo build --release --workspace`). Without them the package still works
with MSPROBE_LIB, a preloaded library, or the repository build (msprobe/_native.py); without the
extension it records through its pure-Python path."""

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
        dest = Path(self.build_lib) / "msprobe" / "lib"
        for name, env, built in (
            ("libmsprobe.so", "MSPROBE_LIB", "libmsprobe.so"),
            ("_fastpath.abi3.so", "MSPROBE_FASTPATH", "lib_fastpath.so"),
        ):
            for c in (os.environ.get(env), target / "release" / built):
                if c and Path(c).is_file():
                    dest.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(c, dest / name)
                    break


setup(cmdclass={"build_py": BuildPyWithLib})
