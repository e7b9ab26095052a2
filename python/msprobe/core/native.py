"""Library access for the framework layers: the ctypes binding plus session start-up.

The binding itself lives in :mod:`msprobe._native` (found by ``_native._load``: preloaded,
``$MSPROBE_LIB``, bundled ``msprobe/lib/libmsprobe.so``, or the repository's cargo output).
"""

from __future__ import annotations

from msprobe._native import MsprobeTensor, enc, last_error, lib, tensor  # noqa: F401

OK, ALREADY, ERR_CONFIG = 0, 1, -1


def init_recorder(args_json: str) -> int:
    """Calls ``msprobe_init``: 0 started, 1 already running (one recorder per process),
    -1 bad configuration (the recorder has logged it once; capture stays off)."""
    return int(lib.msprobe_init(args_json.encode()))
