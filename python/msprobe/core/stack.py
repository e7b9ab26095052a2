"""stack.json frames, collected cheaply.

msprobe 1.1.1 calls ``inspect.stack()`` per forward record (half its cost). We walk
``frame.f_back`` and format each (code, line) once: ``File {path}, line {n}, in {func}, \\n {source}``
(msprobe's string). Frames without source text are skipped, as msprobe does.
"""

from __future__ import annotations

import ctypes
import linecache
from types import FrameType
from typing import Optional

from .native import lib

_cache: dict[tuple[object, int], Optional[bytes]] = {}


def _format(frame: FrameType) -> Optional[bytes]:
    code = frame.f_code
    key = (code, frame.f_lineno)
    s = _cache.get(key, b"")
    if s != b"":
        return s
    line = linecache.getline(code.co_filename, frame.f_lineno).strip()
    s = f"File {code.co_filename}, line {frame.f_lineno}, in {code.co_name}, \n {line}".encode() if line else None
    _cache[key] = s
    return s


def frames(frame: Optional[FrameType], skip: Optional[str] = None) -> list[bytes]:
    """Formatted frames from `frame` outwards (innermost first), leaving out those of files whose
    path starts with `skip` (a framework layer's own package directory)."""
    out = []
    while frame is not None:
        if skip is None or not frame.f_code.co_filename.startswith(skip):
            s = _format(frame)
            if s is not None:
                out.append(s)
        frame = frame.f_back
    return out


def set_stack(r: int, frame_strings: list[bytes]) -> None:
    """Attaches the frames to record `r` (a non-NULL record handle)."""
    n = len(frame_strings)
    arr = (ctypes.c_char_p * max(n, 1))(*frame_strings)
    lib.msprobe_record_set_stack(r, arr, n)
