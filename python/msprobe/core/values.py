"""msprobe's encoding of argument and output values onto a record (msprobe-format.md §5.7).

A framework layer supplies how to add a tensor and (optionally) its special values (torch.Size,
dtype/device under those keys, ...); containers, Python scalars, slices, Ellipsis, None and
numpy scalars are handled here the same way for every framework.
"""

from __future__ import annotations

import ctypes
import dataclasses
import sys
from typing import Any, Callable, Optional

from .errors import logger
from .native import lib

AddTensor = Callable[[int, Optional[bytes], Any], None]
# special(r, key_bytes, value, last_key) -> True when it added the value.
Special = Callable[[int, Optional[bytes], Any, Optional[str]], bool]

_I64 = (-(1 << 63), (1 << 63) - 1)
MAX_DEPTH = 10


def add_ints(r: int, key: Optional[bytes], type_name: Optional[bytes], values: list[Optional[int]]) -> None:
    """A list of ints with None parts (slices, torch.Size)."""
    n = len(values)
    arr = (ctypes.c_int64 * max(n, 1))(*[0 if v is None else v for v in values])
    nul = (ctypes.c_uint8 * max(n, 1))(*[1 if v is None else 0 for v in values])
    lib.msprobe_record_add_ints(r, key, type_name, arr, nul, n)


def json_key(k: Any) -> str:
    """A dict key as msprobe 1.1.1's `json.dump` writes it: True/False/None as JSON words, floats
    by their JSON form, anything else by `str`."""
    if k is True or k is False:
        return "true" if k else "false"
    if k is None:
        return "null"
    if type(k) is float:
        return "NaN" if k != k else "Infinity" if k == float("inf") else "-Infinity" if k == -float("inf") else repr(k)
    return str(k)


def _slice_part(p: Any) -> Optional[int]:
    if p is None:
        return None
    try:
        v = int(p)
    except Exception:
        return None
    return v if _I64[0] <= v <= _I64[1] else None


class ValueEncoder:
    """Adds Python values to an open record section, recursively."""

    def __init__(self, tensor_types: tuple, add_tensor: AddTensor, special: Optional[Special] = None) -> None:
        self.tensor_types = tensor_types
        self.add_tensor = add_tensor
        self.special = special
        self._warned: set[type] = set()

    def add(self, r: int, key: Optional[str], v: Any, depth: int = 0) -> None:
        k = None if key is None else key.encode()
        if isinstance(v, self.tensor_types):
            self.add_tensor(r, k, v)
            return
        if v is None:
            lib.msprobe_record_add_null(r, k)
            return
        if self.special is not None and self.special(r, k, v, key):
            return
        t = type(v)
        # Subclasses (IntEnum, str Enums) as 1.1.1: `isinstance`, the subclass's own type name.
        tn = None if t in (bool, int, float, str) else t.__name__.encode()
        if t is bool:
            lib.msprobe_record_add_bool(r, k, None, int(v))
        elif isinstance(v, int):
            if _I64[0] <= v <= _I64[1]:
                lib.msprobe_record_add_int(r, k, tn, int(v))
            else:
                lib.msprobe_record_add_float(r, k, tn or b"int", float(v))
        elif isinstance(v, float):
            lib.msprobe_record_add_float(r, k, tn, float(v))
        elif isinstance(v, str):
            lib.msprobe_record_add_str(r, k, tn, str.encode(v, "utf-8", "surrogatepass"), None)
        elif t is slice:
            add_ints(r, k, None, [_slice_part(v.start), _slice_part(v.stop), _slice_part(v.step)])
        elif v is Ellipsis:
            lib.msprobe_record_add_str(r, k, b"ellipsis", b"...", None)
        elif isinstance(v, (list, tuple, dict)) or (dataclasses.is_dataclass(v) and not isinstance(v, type)):
            # 1.1.1's order (recursive_apply_transform): namedtuple, dataclass (also one that is a
            # dict, as transformers' ModelOutput: its fields), list/tuple, dict
            if depth >= MAX_DEPTH:
                return self._unsupported(r, k, v, "nesting deeper than 10 levels")
            fields = getattr(v, "_fields", None) if isinstance(v, tuple) else None
            if fields is not None:  # namedtuple: keyed by field name
                lib.msprobe_record_open(r, k, 1)
                for f, item in zip(fields, v):
                    self.add(r, str(f), item, depth + 1)
            elif dataclasses.is_dataclass(v):
                lib.msprobe_record_open(r, k, 1)
                for f in dataclasses.fields(v):
                    self.add(r, f.name, getattr(v, f.name), depth + 1)
            elif isinstance(v, dict):
                lib.msprobe_record_open(r, k, 1)
                for dk, item in v.items():
                    self.add(r, json_key(dk), item, depth + 1)
            else:
                lib.msprobe_record_open(r, k, 0)
                for item in v:
                    self.add(r, None, item, depth + 1)
            lib.msprobe_record_close(r)
        elif not self._numpy_scalar(r, k, v):
            self._unsupported(r, k, v, "not supported")

    def _numpy_scalar(self, r: int, k: Optional[bytes], v: Any) -> bool:
        np = sys.modules.get("numpy")
        if np is None or not isinstance(v, np.generic):
            return False
        tn = type(v).__name__.encode()
        if isinstance(v, np.bool_):
            # numpy 2 names it "bool"; msprobe 1.1.1 runs on numpy 1 only (np.unicode_), "bool_"
            lib.msprobe_record_add_bool(r, k, b"bool_", int(bool(v)))
        elif isinstance(v, np.integer):
            iv = int(v)
            if _I64[0] <= iv <= _I64[1]:
                lib.msprobe_record_add_int(r, k, tn, iv)
            else:
                lib.msprobe_record_add_float(r, k, tn, float(iv))
        elif isinstance(v, np.floating):
            lib.msprobe_record_add_float(r, k, tn, float(v))
        elif isinstance(v, (np.str_, np.bytes_)):
            s = v if isinstance(v, str) else v.decode("utf-8", "replace")
            lib.msprobe_record_add_str(r, k, tn, s.encode(), None)
        else:
            return False
        return True

    def _unsupported(self, r: int, k: Optional[bytes], v: Any, why: str) -> None:
        if type(v) not in self._warned:
            self._warned.add(type(v))
            logger.warning(f"Data type {type(v)} is {why}; recorded as null.")
        lib.msprobe_record_add_null(r, k)
