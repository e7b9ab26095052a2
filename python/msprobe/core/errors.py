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


def _rank_text() -> str:
    """``[rank R] `` once the library knows the process's rank (set by the debugger from
    torch.distributed, by HCCL, or from RANK_ID/RANK at L2), as its own log lines show it; empty
    before, or while the library is not loaded (it imports this module first)."""
    native = sys.modules.get("msprobe._native")
    lib = getattr(native, "lib", None)
    if lib is None or not hasattr(lib, "msprobe_log_rank"):
        return ""
    try:
        rank = int(lib.msprobe_log_rank())
    except Exception:  # a log line never fails for want of its rank
        return ""
    return f"[rank {rank}] " if rank >= 0 else ""


class _RankFilter(logging.Filter):
    """Adds ``rank`` (``[rank R] `` or empty) to each record for the formatter."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.rank = _rank_text()
        return True


def _make_logger() -> logging.Logger:
    log = logging.getLogger("msprobe")
    if not log.handlers:
        h = logging.StreamHandler(sys.stdout)
        h.setFormatter(
            logging.Formatter(
                "%(asctime)s (" + str(os.getpid()) + ") %(rank)s[%(levelname)s] %(message)s", "%Y-%m-%d %H:%M:%S"
            )
        )
        h.addFilter(_RankFilter())
        log.addHandler(h)
        log.propagate = False
    # the recorder's names too (crates/core/src/logging.rs)
    levels = {"0": logging.DEBUG, "debug": logging.DEBUG, "trace": logging.DEBUG}
    levels.update({"1": logging.INFO, "info": logging.INFO})
    levels.update({"2": logging.WARNING, "warn": logging.WARNING, "warning": logging.WARNING})
    levels.update({"3": logging.ERROR, "error": logging.ERROR, "4": logging.CRITICAL + 1, "off": logging.CRITICAL + 1})
    raw = os.environ.get("MSPROBE_LOG_LEVEL", "").strip()
    level = levels.get(raw.lower(), logging.INFO)
    log.setLevel(level)  # an unknown value is named by the recorder's logger (logging.rs), once
    return log


logger = _make_logger()
_warned: set[str] = set()


def warn_null(what: str) -> None:
    """Warns once per distinct `what` that a value the framework layer cannot read (a tensor of
    an unsupported dtype, layout, ...) was recorded as null."""
    if what not in _warned:
        _warned.add(what)
        logger.warning(f"{what}: recorded as null.")
