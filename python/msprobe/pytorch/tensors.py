"""torch values → record leaves. CPU tensors go by pointer (storage base, offset, strides: no
copy, no ``.contiguous()``/``.numpy()``); CUDA/NPU tensors are reduced on the device in
statistics-only sessions (devstats.py), else copied to the host first.
Statistics, CRC and ``.pt`` files are computed by the recorder while the call lasts."""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Optional

import torch

from msprobe._native import native_encoder
from msprobe.core import dtypes
from msprobe.core.errors import logger, warn_null
from msprobe.core.native import MsprobeTensor, lib
from msprobe.core.values import ValueEncoder, add_ints

from .devcopies import devcopies
from .devstats import devstats

# aclDataType numbers by torch dtype (the shared table, msprobe.core.dtypes).
ACL_DTYPE = {getattr(torch, name): code for name, code in dtypes.ACL_DTYPE.items()}
_MAX_DIMS = 64
_tls = threading.local()


def _descriptor() -> MsprobeTensor:
    d = getattr(_tls, "desc", None)
    if d is None:
        d = MsprobeTensor()
        d._shape = (ctypes.c_int64 * _MAX_DIMS)()
        d._strides = (ctypes.c_int64 * _MAX_DIMS)()
        d.shape = ctypes.cast(d._shape, ctypes.POINTER(ctypes.c_int64))
        d.strides = ctypes.cast(d._strides, ctypes.POINTER(ctypes.c_int64))
        d.type_name = None
        _tls.desc = d
    return d


_VF: Any = torch._C._VariableFunctions
_MEAN_NORM_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# Reduced by 1.1.1 as float32 (`data.float()`): integers and float64.
_CAST_DTYPES = (
    torch.float64,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint8,
    *(getattr(torch, n) for n in ("uint16", "uint32", "uint64") if hasattr(torch, n)),
)


def mean_norm(t: torch.Tensor, device_norm: Optional[torch.dtype] = None) -> Optional[tuple[float, float]]:
    """torch's own Mean and Norm of a non-empty, non-0-d real tensor, as msprobe 1.1.1's
    get_stat_info computes them: in the tensor's dtype, integers and float64 cast to float32
    first. The recorder's f64 accumulation agrees to the last bits, but not to the bit (CPU
    torch's float32 Norm of 300k float64 values is 2e-6 off the exact one, and 1.1.1 writes that),
    and a mean near zero differs relatively much, which 1.1.1's compare flags as a Warning against
    a 1.1.1 bench dump. None: the recorder's own values are kept (other dtypes, or torch failed).

    `device_norm`: `t` is the host copy of a device tensor, whose Norm 1.1.1 computes on the
    device in that dtype (`device_norm_dtype`). A device reduces accurately; CPU torch's float32
    and 16-bit reductions of long tensors do not (1e-4 relative at 1e5 elements, an fp16 ulp), so
    both are then computed in float64 and rounded: Mean to the tensor's dtype, Norm to `device_norm`."""
    if t.dim() == 0 or t.numel() == 0:
        return None
    if t.dtype not in _MEAN_NORM_DTYPES:
        # A host copy's integers and float64: the recorder's f64 values rounded to float32 are
        # what an accurate device reduction of the float32 cast gives.
        if device_norm is not None or t.dtype not in _CAST_DTYPES:
            return None
    try:
        with torch.no_grad():
            if device_norm is None:
                if t.dtype in _CAST_DTYPES:
                    t = t.float()
                mean, norm = _VF.stack([_VF.mean(t), _VF.norm(t)]).tolist()
            else:
                x = t.to(torch.float64)
                mean = _VF.mean(x).to(t.dtype).item()
                norm = _VF.norm(x).to(device_norm).item()
        return mean, norm
    except Exception:  # e.g. an op the device lacks: the recorder's values
        return None


def device_norm_dtype(t: torch.Tensor) -> torch.dtype:
    """The dtype of 1.1.1's `torch.norm(t)` on `t`'s device here: float32 for a 16-bit float tensor
    inside the device's autocast (norm is on autocast's float32 list), else `t`'s."""
    if t.dtype in (torch.float16, torch.bfloat16):
        try:
            if torch.is_autocast_enabled(t.device.type):
                return torch.float32
        except Exception:  # an older torch or an unknown device type: no autocast seen
            pass
    return t.dtype


def add_tensor(r: int, key: Optional[bytes], t: torch.Tensor) -> None:
    """One tensor leaf. The descriptor is per thread and reused: the recorder is done with it
    (and with the tensor memory) when msprobe_record_add_tensor returns."""
    code = ACL_DTYPE.get(t.dtype)
    if code is None or t.layout != torch.strided or t.is_meta:
        warn_null(f"tensor of dtype {t.dtype}, layout {t.layout}, device {t.device} is not supported")
        lib.msprobe_record_add_null(r, key)
        return
    requires_grad = t.requires_grad
    res = None
    if not t.is_cpu and devstats.eligible(t) and lib.msprobe_record_stats_only(r) == 1 and t.dim() <= _MAX_DIMS:
        # Statistics reduced on the device, fetched later in a batch (devstats.py). Reduced
        # before the per-thread descriptor is filled: torch calls may reach our hooks.
        res = devstats.reduce_safe(t)
    if res is not None:
        if devstats.add(r, key, _pending_descriptor(t, code), res):
            return
    norm_dtype = None if t.is_cpu else device_norm_dtype(t)
    if norm_dtype is not None and t.dim() <= _MAX_DIMS:
        if devcopies.add(r, key, t, lambda: _pending_descriptor(t, code), norm_dtype):
            return  # copied without blocking, completed by the batch (devcopies.py)
    if not t.is_cpu:  # CUDA (bench side), NPU: a host copy, kept alive until the call returns
        t = t.detach().cpu()
    # torch's Mean/Norm of the host tensor (before the descriptor is filled: torch calls may
    # reach our hooks). A device tensor's are those of its host copy: reducing it on the device
    # would add kernels and a wait per tensor (devstats.py does that, batched, for large ones).
    mn = mean_norm(t, norm_dtype)
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    nd = t.dim()
    if nd > _MAX_DIMS:
        warn_null(f"tensor with {nd} dimensions")
        lib.msprobe_record_add_null(r, key)
        return
    st = t.untyped_storage()
    d = _descriptor()
    d.dtype = code
    d.ndim = nd
    if nd:
        d._shape[:nd] = t.shape
        d._strides[:nd] = t.stride()
    d.offset = t.storage_offset()
    d.data = st.data_ptr()
    d.storage_bytes = st.nbytes()
    d.requires_grad = 1 if requires_grad else 0
    if mn is None:
        lib.msprobe_record_add_tensor(r, key, ctypes.byref(d))
    else:
        lib.msprobe_record_add_tensor_mean_norm(r, key, ctypes.byref(d), mn[0], mn[1])


def _pending_descriptor(t: torch.Tensor, code: int) -> MsprobeTensor:
    """The per-thread descriptor with `t`'s dtype, shape and requires_grad, no data."""
    d = _descriptor()
    d.dtype = code
    d.ndim = t.dim()
    if d.ndim:
        d._shape[: d.ndim] = t.shape
        d._strides[: d.ndim] = t.stride()
    d.offset = 0
    d.data = None
    d.storage_bytes = 0
    d.requires_grad = 1 if t.requires_grad else 0
    return d


def _resolve_host(slot: int, host: torch.Tensor, norm_dtype: torch.dtype) -> None:
    """Hands the host copy of pending-data leaf `slot` to the recorder, with Mean and Norm as
    for a blocking copy (devcopies.py)."""
    mn = mean_norm(host, norm_dtype)
    st = host.untyped_storage()
    d = _descriptor()
    d.dtype = ACL_DTYPE[host.dtype]
    d.ndim = host.dim()
    if d.ndim:
        d._shape[: d.ndim] = host.shape
        d._strides[: d.ndim] = host.stride()
    d.offset = host.storage_offset()
    d.data = st.data_ptr()
    d.storage_bytes = st.nbytes()
    d.requires_grad = -1
    m, n = mn if mn is not None else (0.0, 0.0)
    lib.msprobe_resolve_tensor(slot, ctypes.byref(d), 0 if mn is None else 1, m, n)


devcopies.resolve = _resolve_host


def _device_str(v: Any) -> str:
    return f"{v.type}:{v.index}" if isinstance(v, torch.device) else str(v)


def _special(r: int, k: Optional[bytes], v: Any, last_key: Optional[str]) -> bool:
    """torch's special values (msprobe-format.md §5.7)."""
    if last_key == "device":
        lib.msprobe_record_add_str(r, k, b"torch.device", _device_str(v).encode(), None)
    elif last_key == "dtype":
        lib.msprobe_record_add_str(r, k, b"torch.dtype", str(v).encode(), None)
    elif isinstance(v, torch.Size):
        add_ints(r, k, b"torch.Size", list(v))
    elif isinstance(v, torch.memory_format):
        lib.msprobe_record_add_str(r, k, b"torch.memory_format", str(v).split(".")[-1].encode(), b"format")
    elif isinstance(v, (torch.dtype, torch.device)):
        lib.msprobe_record_add_empty(r, k)
    elif _is_process_group(v):
        ranks = _group_ranks(v)
        lib.msprobe_record_add_group(r, k, b"torch.ProcessGroup", (ctypes.c_int64 * len(ranks))(*ranks), len(ranks))
    else:
        return False
    return True


def _is_process_group(v: Any) -> bool:
    pg = getattr(getattr(torch, "distributed", None), "ProcessGroup", None)
    return pg is not None and isinstance(v, pg)


def _group_ranks(g: Any) -> list[int]:
    try:
        return list(torch.distributed.get_process_group_ranks(g))
    except Exception:
        return []


encoder = ValueEncoder((torch.Tensor,), add_tensor, _special)


def _fallback(r: int, key: Optional[str], v: Any, depth: int) -> None:
    encoder.add(r, key, v, depth)


# The native encoder (msprobe._fastpath), or None: then `encoder` does it all.
# `device=` and `dtype=` values go to `_special` whatever their type (a string too: 1.1.1 writes
# `device="npu:0"` as a torch.device).
fast = native_encoder(
    "torch",
    (torch.Tensor,),
    dict(ACL_DTYPE),
    torch.strided,
    _fallback,
    logger.warning,
    mean_norm=mean_norm,
    special_keys=["device", "dtype"],
)
