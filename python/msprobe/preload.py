"""``python -m msprobe.preload``: prints the path of the libmsprobe.so to preload for level L2
(``LD_PRELOAD=$(python -m msprobe.preload)``), or says on stderr what to do and exits 1, so that a
shell line ``lib=$(python -m msprobe.preload) && LD_PRELOAD=$lib ...`` never starts the job uncaptured.

When msprobe itself is not installed in this Python, Python's own ``No module named msprobe`` is all
that can be printed: the README's line names the cure beside it."""

from __future__ import annotations

import os
import sys


def main() -> int:
    try:
        from msprobe import _native
    except OSError as e:  # the package is here, its native library is not
        print(f"msprobe.preload: {e} (or install the msprobe-rs wheel: README, Install)", file=sys.stderr)
        return 1
    path = _native.lib_path()
    if not os.path.isfile(path):
        print(f"msprobe.preload: {path} is missing. Reinstall the msprobe-rs wheel (README, Install).", file=sys.stderr)
        return 1
    print(os.path.realpath(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
