"""MindSpore values onto recorder records: tensor leaves (zero-copy host views), non-tensor leaves,
containers, stack frames, and the shared capture state (switch, nesting guard, Cell stacks).

Everything here is called from hooks; it must be cheap when capture is off and never raise into the
user's program (hooks catch and log).
"""
from __future__ import annotations

import ctypes
import linecache
import logging
import os
import sys
from typing import Any, Optional

import numpy as np
import mindspore as ms
from mindspore import Tensor

from msprobe.core.errors import logger as _core_logger

from msprobe._native import MsprobeTensor, lib, native_encoder

try:  # an internal class in some MindSpore versions; an alias of Tensor in 2.10
    from mindspore.common._stub_tensor import StubTensor
except Exception:  # pragma: no cover
    StubTensor = Tensor

TENSOR_TYPES = (Tensor,) if StubTensor is Tensor else (Tensor, StubTensor)
_PKG_DIR = os.path.dirname(os.path.abspath(__file__))

# aclDataType numbers by numpy dtype name (asnumpy gives ml_dtypes' "bfloat16" for BFloat16).
_ACL = {"float32": 0, "float16": 1, "int8": 2, "int32": 3, "uint8": 4, "int16": 6, "uint16": 7, "uint32": 8,
        "int64": 9, "uint64": 10, "float64": 11, "bool": 12, "complex64": 16, "complex128": 17, "bfloat16": 27}


class State:
    """Process-wide capture state (one recorder per process)."""
    enabled = False        # between start() and stop() with the step/rank selected
    depth = 0              # > 0 while inside a wrapped call or our own hook code: nested calls pass through
    construct = False      # L0/mix: write construct.json parents
    fwd_stack: list = []   # forward Cell record names (pre-hook push, forward-hook pop)
    bwd_stack: list = []   # backward Cell record names (backward pre-hook push, backward hook pop)
    fwd_owner: list = []   # id() of the Cell that pushed each fwd_stack entry
    bwd_owner: list = []


# msprobe's log format and MSPROBE_LOG_LEVEL handling live in msprobe.core; this child logger
# propagates to its handler.
logger = _core_logger.getChild("mindspore")


def parent(backward: bool) -> Optional[str]:
    s = State.bwd_stack if backward else State.fwd_stack
    return s[-1] if s else None


def next_index(key: str) -> int:
    return int(lib.msprobe_next_index(key.encode()))


# ---------------------------------------------------------------------------------------- tensors
def add_tensor(r: int, k: Optional[bytes], t: Any) -> None:
    try:
        a = t.asnumpy()
    except Exception:
        lib.msprobe_record_add_null(r, k)
        return
    if not a.flags["C_CONTIGUOUS"]:
        a = np.ascontiguousarray(a)
    code = _ACL.get(a.dtype.name)
    if code is None:
        lib.msprobe_record_add_null(r, k)
        return
    nd = a.ndim
    shape = (ctypes.c_int64 * max(nd, 1))(*a.shape)
    d = MsprobeTensor()
    d.dtype = code
    d.ndim = nd
    d.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    d.strides = None
    d.offset = 0
    d.data = a.ctypes.data if a.size else None
    d.storage_bytes = a.nbytes
    d.requires_grad = -1
    d.type_name = None
    lib.msprobe_record_add_tensor(r, k, ctypes.byref(d))
    # `a` (and so the memory) stays alive until here; Rust is done with it when add_tensor returns.


_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def add_value(r: int, key: Optional[str], v: Any, depth: int = 0) -> None:
    k = None if key is None else key.encode()
    if isinstance(v, TENSOR_TYPES):
        add_tensor(r, k, v)
        return
    if v is None:
        lib.msprobe_record_add_null(r, k)
        return
    t = type(v)
    if t is bool:
        lib.msprobe_record_add_bool(r, k, None, int(v))
    elif t is int:
        if _I64_MIN <= v <= _I64_MAX:
            lib.msprobe_record_add_int(r, k, None, v)
        else:
            lib.msprobe_record_add_float(r, k, b"int", float(v))
    elif t is float:
        lib.msprobe_record_add_float(r, k, None, v)
    elif t is str:
        lib.msprobe_record_add_str(r, k, None, v.encode("utf-8", "surrogatepass"), None)
    elif isinstance(v, (list, tuple)) and depth < 10:
        lib.msprobe_record_open(r, k, 0)
        for item in v:
            add_value(r, None, item, depth + 1)
        lib.msprobe_record_close(r)
    elif isinstance(v, dict) and depth < 10:
        lib.msprobe_record_open(r, k, 1)
        for dk, item in v.items():
            add_value(r, str(dk), item, depth + 1)
        lib.msprobe_record_close(r)
    elif t is slice:
        vals = [v.start, v.stop, v.step]
        n = 3
        arr = (ctypes.c_int64 * n)(*[x if isinstance(x, int) else 0 for x in vals])
        nul = (ctypes.c_uint8 * n)(*[0 if isinstance(x, int) else 1 for x in vals])
        lib.msprobe_record_add_ints(r, k, None, arr, nul, n)
    elif v is Ellipsis:
        lib.msprobe_record_add_str(r, k, b"ellipsis", b"...", None)
    elif isinstance(v, ms.common.dtype.Type):
        lib.msprobe_record_add_str(r, k, b"mindspore.dtype", str(v).encode(), None)
    elif isinstance(v, np.generic):
        tn = type(v).__name__.encode()
        if isinstance(v, np.bool_):
            lib.msprobe_record_add_bool(r, k, tn, int(bool(v)))
        elif isinstance(v, np.integer):
            lib.msprobe_record_add_int(r, k, tn, int(v))
        elif isinstance(v, np.floating):
            lib.msprobe_record_add_float(r, k, tn, float(v))
        else:
            lib.msprobe_record_add_null(r, k)
    else:
        lib.msprobe_record_add_null(r, k)


def add_list_section(r: int, section: bytes, values) -> None:
    if lib.msprobe_record_section(r, section) == 1:
        for v in values:
            add_value(r, None, v)


def add_kwargs_section(r: int, kwargs: dict) -> None:
    if lib.msprobe_record_section(r, b"input_kwargs") == 1:
        for kk, v in kwargs.items():
            add_value(r, str(kk), v)


def as_list(out: Any) -> list:
    return list(out) if isinstance(out, (list, tuple)) else [out]


# ----------------------------------------------------------------------------------------- stack
_fmt_cache: dict = {}


def set_stack(r: int) -> None:
    """stack.json frames (forward records): the caller's frames, without this package's own."""
    frame = sys._getframe(1)
    out = []
    while frame is not None:
        code = frame.f_code
        fn = code.co_filename
        if not fn.startswith(_PKG_DIR):
            key = (code, frame.f_lineno)
            s = _fmt_cache.get(key, b"")
            if s == b"":
                line = linecache.getline(fn, frame.f_lineno).strip()
                s = f"File {fn}, line {frame.f_lineno}, in {code.co_name}, \n {line}".encode() if line else None
                _fmt_cache[key] = s
            if s is not None:
                out.append(s)
        frame = frame.f_back
    n = len(out)
    arr = (ctypes.c_char_p * max(n, 1))(*out)
    lib.msprobe_record_set_stack(r, arr, n)


def finish(r: int, name: str, backward: bool) -> None:
    _construct(name, backward)
    lib.msprobe_record_end(r)


def _fallback(r: int, key: Optional[str], v: Any, depth: int) -> None:
    add_value(r, key, v, depth)


# The native encoder (msprobe._fastpath) for MindSpore tensors, or None: then the functions above
# do it all (same output).
fast = native_encoder("asnumpy", TENSOR_TYPES, dict(_ACL), None, _fallback, logger.warning, special_keys=[],
                      stack_skip=_PKG_DIR, split_lists=True, keep_empty=True)


def _construct(name: str, backward: bool) -> None:
    if State.construct:
        p = parent(backward)
        lib.msprobe_construct_set(name.encode(), None if p is None else p.encode())


def forward_record(name: str, args, kwargs, output) -> None:
    """One forward record: input_args, input_kwargs, output, stack, construct parent."""
    if fast is not None:
        if fast.record(name, args, kwargs or None, output, sys._getframe(1)):
            _construct(name, False)
        return
    r = lib.msprobe_record_begin(name.encode())
    if not r:
        return
    add_list_section(r, b"input_args", args)
    add_kwargs_section(r, kwargs or {})
    add_list_section(r, b"output", as_list(output))
    set_stack(r)
    finish(r, name, False)


def backward_record(name: str, grads_in, grads_out) -> None:
    """One backward record: input = gradients w.r.t. the outputs, output = w.r.t. the inputs."""
    if fast is not None:
        if fast.backward(name, grads_in, grads_out):
            _construct(name, True)
        return
    r = lib.msprobe_record_begin(name.encode())
    if not r:
        return
    add_list_section(r, b"input", grads_in)
    add_list_section(r, b"output", grads_out)
    finish(r, name, True)
