"""Exceptions and logging of the Python layers (msprobe's log-line shape)."""

from __future__ import annotations

import logging
import os
import sys

INVALID_PARAM = "[msprobe] 无效参数："


class MsprobeException(Exception):
    """Raised for API misuse, with msprobe's message prefix (``[msprobe] 无效参数：...``)."""

    def __init__(self, detail: str = "") -> None:
        super().__init__(INVALID_PARAM + detail)
        self.detail = detail


def _make_logger() -> logging.Logger:
    log = logging.getLogger("msprobe")
    if not log.handlers:
        h = logging.StreamHandler(sys.stdout)
        h.setFormatter(
            logging.Formatter("%(asctime)s (" + str(os.getpid()) + ") [%(levelname)s] %(message)s", "%Y-%m-%d %H:%M:%S")
        )
        log.addHandler(h)
        log.propagate = False
    level = {
        "0": logging.DEBUG,
        "1": logging.INFO,
        "2": logging.WARNING,
        "3": logging.ERROR,
        "4": logging.CRITICAL + 1,
    }.get(os.environ.get("MSPROBE_LOG_LEVEL", "1"), logging.INFO)
    log.setLevel(level)
    return log


logger = _make_logger()
_warned: set[str] = set()


def warn_null(what: str) -> None:
    """Warns once per distinct `what` that a value the framework layer cannot read (a tensor of
    an unsupported dtype, layout, ...) was recorded as null."""
    if what not in _warned:
        _warned.add(what)
        logger.warning(f"{what}: recorded as null.")
