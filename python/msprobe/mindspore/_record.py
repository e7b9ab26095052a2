"""MindSpore values onto recorder records: tensor leaves (zero-copy host views) and MindSpore dtypes;
non-tensor leaves, containers and stack frames through the framework-neutral helpers of
``msprobe.core`` (the PyTorch layer's encoding); and the shared capture state (switch, nesting
guard, Cell stacks).

Everything here is called from hooks; it must be cheap when capture is off and never raise into the
user's program (hooks catch and log).
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Any, Optional

import numpy as np

import mindspore as ms
from mindspore import Tensor
from msprobe._native import native_encoder
from msprobe.core import stack
from msprobe.core.dtypes import ACL_DTYPE
from msprobe.core.errors import logger as _core_logger
from msprobe.core.errors import warn_null
from msprobe.core.native import MsprobeTensor, lib
from msprobe.core.values import ValueEncoder

from .devcopies import devcopies
from .devstats import devstats

try:  # an internal class in some MindSpore versions; an alias of Tensor in 2.10
    from mindspore.common._stub_tensor import StubTensor
except Exception:  # pragma: no cover
    StubTensor = Tensor

TENSOR_TYPES = (Tensor,) if StubTensor is Tensor else (Tensor, StubTensor)
_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_MS_DTYPE = ms.common.dtype.Type


class State:
    """Process-wide capture state (one recorder per process)."""

    enabled = False  # between start() and stop() with the step/rank selected
    depth = 0  # > 0 while inside a wrapped call or our own hook code: nested calls pass through
    construct = False  # L0/mix: write construct.json parents
    backward = True  # data_mode selects something of backward records (else no backward hook)
    fwd_stack: list = []  # forward Cell record names (pre-hook push, forward-hook pop)
    bwd_stack: list = []  # backward Cell record names (backward pre-hook push, backward hook pop)
    fwd_owner: list = []  # id() of the Cell that pushed each fwd_stack entry
    bwd_owner: list = []
    # (name, parent) of the Cells whose pre-hook ran and whose construct.json entry is not written
    # yet: msprobe 1.1.1 adds every begun Cell to construct.json with the next record (its
    # module_node), which fixes the key order (a parent Cell right after its first child's record)
    begun: list = []
    # a Cell's (backward) pre-hook ran since the step began: before that, msprobe 1.1.1's API
    # parent (CellProcessor.api_parent_node, reset by step()) is "", after it the open Cell or None
    cell_begun = False


# msprobe's log format and MSPROBE_LOG_LEVEL handling live in msprobe.core; this child logger
# propagates to its handler.
logger = _core_logger.getChild("mindspore")


_NOW: Any = object()  # a construct parent argument's default: the parent at the time of the call


def parent(backward: bool) -> Optional[str]:
    """The construct.json parent of a record now. A forward call made while no Cell's forward is
    open but a Cell's backward is (a custom ``bprop`` running) is that Cell's child, as in msprobe
    1.1.1, whose Cells share one stack for both directions."""
    s = State.bwd_stack if backward else (State.fwd_stack or State.bwd_stack)
    return s[-1] if s else None


def api_parent(backward: bool) -> Optional[str]:
    """The construct.json parent of an API or Primitive record now: "" until a Cell began in this
    step (msprobe 1.1.1's initial `api_parent_node`), then `parent`."""
    return parent(backward) if State.cell_begun else ""


def next_index(key: str) -> int:
    return int(lib.msprobe_next_index(key.encode()))


# ---------------------------------------------------------------------------------------- tensors
def add_tensor(r: int, k: Optional[bytes], t: Any) -> None:
    if devstats.eligible(t) and lib.msprobe_record_stats_only(r) == 1 and _add_pending(r, k, t):
        return
    if devcopies.eligible(t) and _add_copy(r, k, t):
        return
    try:
        a = t.asnumpy()
    except Exception as e:
        warn_null(f"tensor of type {type(t).__name__} cannot be read on the host ({type(e).__name__})")
        lib.msprobe_record_add_null(r, k)
        return
    if not a.flags["C_CONTIGUOUS"]:
        a = np.ascontiguousarray(a)
    code = ACL_DTYPE.get(a.dtype.name)
    if code is None:
        warn_null(f"tensor of dtype {t.dtype} is not supported")
        lib.msprobe_record_add_null(r, k)
        return
    d, _shape = _descriptor(code, a.shape, a.ctypes.data if a.size else None, a.nbytes)
    lib.msprobe_record_add_tensor(r, k, ctypes.byref(d))
    # `a` (and so the memory) stays alive until here; Rust is done with it when add_tensor returns.


def _descriptor(code: int, shape: tuple, data: Optional[int], nbytes: int) -> tuple[MsprobeTensor, Any]:
    """A contiguous tensor's descriptor, and the shape array it points into (keep it alive
    while the descriptor is used)."""
    nd = len(shape)
    arr = (ctypes.c_int64 * max(nd, 1))(*shape)
    d = MsprobeTensor()
    d.dtype = code
    d.ndim = nd
    d.shape = ctypes.cast(arr, ctypes.POINTER(ctypes.c_int64))
    d.strides = None
    d.offset = 0
    d.data = data
    d.storage_bytes = nbytes
    d.requires_grad = -1
    d.type_name = None
    return d, arr


def _add_pending(r: int, k: Optional[bytes], t: Any) -> bool:
    """The leaf with its statistics reduced on the device and fetched later (devstats.py), or
    False: the caller reads the tensor on the host."""
    code = ACL_DTYPE.get(str(t.dtype).lower())
    if code is None or t.ndim > 64:
        return False
    res = devstats.reduce_safe(t)
    if res is None:
        return False
    d, _shape = _descriptor(code, tuple(t.shape), None, 0)
    return devstats.add(r, k, d, res)


def _add_copy(r: int, k: Optional[bytes], t: Any) -> bool:
    """The leaf with its data copied to the host without blocking and read later
    (devcopies.py), or False: the caller reads the tensor with asnumpy()."""
    code = ACL_DTYPE.get(str(t.dtype).lower())
    if code is None or t.ndim > 64:
        return False
    d, _shape = _descriptor(code, tuple(t.shape), None, 0)
    return devcopies.add(r, k, t, d)


def _resolve_host(slot: int, host: Any) -> None:
    """Hands the host copy of pending-data leaf `slot` to the recorder, read as asnumpy() reads
    a device tensor (devcopies.py)."""
    a = host.asnumpy()
    if not a.flags["C_CONTIGUOUS"]:
        a = np.ascontiguousarray(a)
    code = ACL_DTYPE.get(a.dtype.name, -1)
    d, _shape = _descriptor(code, a.shape, a.ctypes.data if a.size else None, a.nbytes)
    lib.msprobe_resolve_tensor(slot, ctypes.byref(d), 0, 0.0, 0.0)


devcopies.resolve = _resolve_host


def _defer(t: Any) -> bool:
    """Whether the native encoder leaves `t` to add_tensor (read on the device or copied later)."""
    return devstats.eligible(t) or devcopies.eligible(t)


def _special(r: int, k: Optional[bytes], v: Any, last_key: Optional[str]) -> bool:
    """MindSpore's own non-tensor value: a dtype (``mindspore.float32``), written as its name."""
    if isinstance(v, _MS_DTYPE):
        lib.msprobe_record_add_str(r, k, b"mindspore.dtype", str(v).encode(), None)
        return True
    return False


# Non-tensor values, containers, numpy scalars: msprobe's encoding shared with the PyTorch layer.
encoder = ValueEncoder(TENSOR_TYPES, add_tensor, _special)


def add_list_section(r: int, section: bytes, values) -> None:
    if lib.msprobe_record_section(r, section) == 1:
        for v in values:
            encoder.add(r, None, v)


def add_kwargs_section(r: int, kwargs: dict) -> None:
    if lib.msprobe_record_section(r, b"input_kwargs") == 1:
        for kk, v in kwargs.items():
            encoder.add(r, str(kk), v)


def as_list(out: Any) -> list:
    return list(out) if isinstance(out, (list, tuple)) else [out]


# ----------------------------------------------------------------------------------------- stack
def set_stack(r: int) -> None:
    """stack.json frames (forward records): the caller's frames, without this package's own."""
    stack.set_stack(r, stack.frames(sys._getframe(1), skip=_PKG_DIR))


def finish(r: int, name: str, backward: bool, par: Any = _NOW) -> None:
    _construct(name, backward, par)
    lib.msprobe_record_end(r)


def _fallback(r: int, key: Optional[str], v: Any, depth: int) -> None:
    encoder.add(r, key, v, depth)


# The native encoder (msprobe._fastpath) for MindSpore tensors, or None: then the functions above
# do it all (same output).
fast = native_encoder(
    "asnumpy",
    TENSOR_TYPES,
    dict(ACL_DTYPE),
    None,
    _fallback,
    logger.warning,
    special_keys=[],
    stack_skip=_PKG_DIR,
    split_lists=True,
    defer=_defer if devstats.enabled or devcopies.enabled else None,
)


def _construct(name: str, backward: bool, p: Any = _NOW) -> None:
    if State.construct:
        if p is _NOW:
            p = api_parent(backward)
        lib.msprobe_construct_set(name.encode(), None if p is None else p.encode())
        if State.begun:
            for n, q in State.begun:
                if n != name:
                    lib.msprobe_construct_set(n.encode(), None if q is None else q.encode())
            State.begun.clear()


def scope_module(name: str, begin: bool) -> None:
    """A Cell began (pre-hook) or ended (after its record): msprobe 1.1.1's module range for
    `scope`/`list` at L0 and mix (its CellProcessor calls begin_module/end_module there)."""
    lib.msprobe_scope_module(name.encode(), 1 if begin else 0)


def begin_cell(name: str, backward: bool) -> None:
    """A Cell's (backward) pre-hook ran: its construct.json entry goes with the next record."""
    if State.construct:
        State.begun.append((name, parent(backward)))


def forward_record(name: str, args, kwargs, output, frame: Any = None) -> None:
    """One forward record: input_args, input_kwargs, output, stack (from `frame`, default the
    caller's), construct parent."""
    if frame is None:
        frame = sys._getframe(1)
    if fast is not None:
        fast.record(name, args, kwargs or None, output, frame)
        _construct(name, False)  # also of a record scope/list dropped, as msprobe 1.1.1
        return
    r = lib.msprobe_record_begin(name.encode())
    if not r:
        _construct(name, False)
        return
    add_list_section(r, b"input_args", args)
    add_kwargs_section(r, kwargs or {})
    add_list_section(r, b"output", as_list(output))
    stack.set_stack(r, stack.frames(frame, skip=_PKG_DIR))
    finish(r, name, False)


def backward_record(name: str, grads_in, grads_out, par: Any = _NOW) -> None:
    """One backward record: input = gradients w.r.t. the outputs, output = w.r.t. the inputs;
    construct.json parent `par` (default: the Cell whose backward is open now)."""
    if fast is not None:
        fast.backward(name, grads_in, grads_out)
        _construct(name, True, par)  # also of a record scope/list dropped, as msprobe 1.1.1
        return
    r = lib.msprobe_record_begin(name.encode())
    if not r:
        _construct(name, True, par)
        return
    add_list_section(r, b"input", grads_in)
    add_list_section(r, b"output", grads_out)
    finish(r, name, True, par)
