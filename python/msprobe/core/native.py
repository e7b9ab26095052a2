"""Library access for the framework layers: the ctypes binding plus session start-up.

The binding itself lives in :mod:`msprobe._native` (found by ``_native._load``: preloaded,
``$MSPROBE_LIB``, bundled ``msprobe/lib/libmsprobe.so``, or the repository's cargo output).
"""

from __future__ import annotations

import shlex
import sys

from msprobe._native import MsprobeTensor, enc, last_error, lib, lib_path, preloaded, tensor  # noqa: F401
from msprobe.core.errors import logger

OK, ALREADY, ERR_CONFIG = 0, 1, -1


def init_recorder(args_json: str) -> int:
    """Calls ``msprobe_init``: 0 started, 1 already running (one recorder per process),
    -1 bad configuration (the recorder has logged it once; capture stays off)."""
    return int(lib.msprobe_init(args_json.encode()))


def l2_preloaded() -> bool:
    """Level L2 captures kernels through the interposer, which works only when libmsprobe.so is
    preloaded. Without the preload this says once how to enable it and returns False: the caller
    then records nothing (no recorder, no directories)."""
    if preloaded:
        return True
    cmd = " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv] if a)
    logger.warning(
        "level L2 captures kernels through libmsprobe.so, which must be preloaded; nothing is recorded in this "
        f"run. Enable it with: LD_PRELOAD={shlex.quote(lib_path())} {cmd}"
    )
    return False


def l2_enable() -> bool:
    """After init_recorder with level L2 (and the preload): the API's start()/stop() open and close
    the kernel capture window and step() ends the step (msprobe_l2_enable). False, logged, if the
    library refuses (e.g. a recorder of another level already runs in this process)."""
    if lib.msprobe_l2_enable() == OK:
        return True
    logger.error(f"L2 kernel capture stays off: {last_error()}")
    return False
