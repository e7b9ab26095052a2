"""Statistics of device tensors (torch_npu, CUDA) reduced on the device (issue #21); the batching
is shared with MindSpore (``msprobe.core.devstats``).

Copying a device tensor to the host for four numbers costs a whole-tensor transfer and a
synchronisation per tensor. Instead, in a statistics-only session (task statistics,
summary_mode statistics), each tensor is reduced with torch's own device ops, exactly as
msprobe 1.1.1's ``get_stat_info`` does (integers and float64 reduced as float32, f16/bf16
results in their own dtype, then widened exactly to float32), and beside them the largest and
smallest finite values (NaN/±inf replaced by ∓inf; from them the recorder writes 1.1.1's
``*_except_inf_nan`` where Max/Min are NaN/Inf): six 0-d float32 results per tensor stay on the
device (Max and Min from one ``aminmax``, the finite extremes from two ``nan_to_num`` into one
scratch and one ``aminmax`` over its rows: 6 kernels per float32 tensor up to ``_SCRATCH_MAX``;
not stacked per tensor, which would cost a kernel each: the batch's one stack takes them all).
The leaf goes into the record as *pending* (``msprobe_record_add_tensor_pending``); the recorder
holds the record until its values arrive. The results are fetched in batches: stacked on the
device, one non-blocking copy into pinned host memory, one wait, ``msprobe_resolve_stats_except``.
A batch is fetched when it holds ``MSPROBE_DEVICE_BATCH`` results (default 256) and at
``stop()``/``step()`` (so the files are complete after ``stop()``, as today); with
``async_dump: true`` in config.json only at ``step()`` (as msprobe 26's async_dump).

By default only tensors larger than ``MSPROBE_DEVICE_STATS_MIN_BYTES`` (1 MiB) are reduced here,
smaller ones are copied without blocking (the hybrid, ``msprobe.core.devstats``): on KiB-sized
tensors (the torch_npu GPT example) the 6 small kernels cost more in the modelled step than the
copy they save. ``MSPROBE_DEVICE_STATS=1``: every tensor; ``0``: none. A bool tensor is reduced
by ``any`` and ``all`` (1.1.1's Max / Min; the recorder writes them as booleans, no Mean/Norm).
Complex, 0-d integer/float64 and empty tensors keep the copy path (their statistics are not all
floats or need the data).

The reductions call ``torch._C._VariableFunctions`` directly (as 1.1.1 does), which the API
wrappers do not patch, on a detached tensor: nothing is recorded, nothing in-place, no RNG.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from msprobe.core.devstats import DeviceStats as _Base
from msprobe.pytorch.devcopies import _current_stream

_VF: Any = torch._C._VariableFunctions
_FLOAT_OWN = (torch.float16, torch.bfloat16, torch.float32)


_SCRATCH_MAX = 16 << 20
"""Tensors of at most this many bytes get their finite extremes from one [2, n] scratch (one
kernel less); larger ones from two temporaries in turn, so that the extra device memory stays
one tensor's size."""


class DeviceStats(_Base):
    """torch's device reductions and batch fetch."""

    width = 6  # Max, Min, Mean, Norm, then the largest and smallest finite values

    def eligible(self, t: torch.Tensor) -> bool:
        if not self.enabled or self.failed or t.is_cpu or t.is_meta or t.is_complex():
            return False
        if t.numel() == 0 or not self.large_enough(t.numel() * t.element_size()):
            return False
        return t.dim() > 0 or t.dtype in _FLOAT_OWN or t.dtype == torch.bool

    def reduce(self, t: torch.Tensor) -> tuple:
        """The 4 statistics as 1.1.1's get_stat_info, then the largest and smallest finite values
        (for its ``*_except_inf_nan``): six 0-d float32 device tensors, stacked only when the batch
        is fetched (one stack per batch, not one per tensor: a kernel less per tensor)."""
        with torch.no_grad():
            x = t.detach()
            if x.dim() == 0:  # 1.1.1: item() for all four (the value itself, also as Norm); a copy
                return tuple(_VF.stack([x, x, x, x, x, x]).to(torch.float32).unbind(0))
            if x.dtype == torch.bool:  # any / all (the recorder writes booleans), no temporary
                some, every = _VF.any(x), _VF.all(x)
                return tuple(_VF.stack([some, every] * 3).to(torch.float32).unbind(0))
            if not x.is_floating_point():  # integers are finite: their Max/Min
                x = x.to(torch.float32)
                mn, mx = _VF.aminmax(x)
                return (mx, mn, _VF.mean(x), _VF.norm(x), mx, mn)
            if x.dtype == torch.float64:
                x = x.to(torch.float32)
            # NaN/±inf replaced so that they never win: the largest finite value (-inf if none)
            # and the smallest; reduced always, since the device cannot branch on Max/Min.
            inf = float("inf")
            if x.numel() * x.element_size() <= _SCRATCH_MAX:
                # both replacements in the rows of one [2, n] scratch, one aminmax over its rows
                # (as L2): row 0's max is the largest finite value, row 1's min the smallest
                flat = x.reshape(-1)
                both = torch.empty((2, flat.numel()), dtype=x.dtype, device=x.device)
                _VF.nan_to_num(flat, nan=-inf, posinf=-inf, neginf=-inf, out=both[0])
                _VF.nan_to_num(flat, nan=inf, posinf=inf, neginf=inf, out=both[1])
                rmin, rmax = _VF.aminmax(both, dim=1)
                fmax, fmin = rmax[0], rmin[1]
            else:
                fmax = _VF.max(_VF.nan_to_num(x, nan=-inf, posinf=-inf, neginf=-inf))
                fmin = _VF.min(_VF.nan_to_num(x, nan=inf, posinf=inf, neginf=inf))
            # Max and Min in one pass (aclnnAminmax on torch_npu): the values of torch.max / torch.min
            mn, mx = _VF.aminmax(x)
            vals = (mx, mn, _VF.mean(x), _VF.norm(x), fmax, fmin)
            if x.dtype == torch.float32:
                return vals
            # f16/bf16 results in their own dtype (1.1.1), widened exactly to float32
            return tuple(_VF.stack(vals).to(torch.float32).unbind(0))

    def _streams(self, t: torch.Tensor) -> Optional[tuple[Any, Any]]:
        mod = getattr(torch, t.device.type, None)
        cur, default = _current_stream(t), getattr(mod, "default_stream", None)
        return None if cur is None or default is None else (cur, default(t.device))

    def _new_event(self, t: torch.Tensor) -> Any:
        return getattr(torch, t.device.type).Event()

    def _gather(self, results: list) -> tuple[Any, int]:
        """One stack on the device of every result's six values (after the streams they came
        from), one non-blocking copy into pinned memory, one wait on the stack's current stream."""
        self._order(results[0][0])
        dev = _VF.stack([v for r in results for v in r])
        try:
            host = torch.empty(dev.shape, dtype=torch.float32, pin_memory=True)
        except Exception:  # no pinned memory: a plain (blocking) copy
            host = torch.empty(dev.shape, dtype=torch.float32)
        host.copy_(dev, non_blocking=True)
        _wait(dev)
        vals = host.to(torch.float64)
        return vals, vals.data_ptr()


def _wait(dev: torch.Tensor) -> None:
    """Waits for the copy on `dev`'s current stream (only that stream, not the device)."""
    stream = _current_stream(dev)
    if stream is not None:
        stream.synchronize()


devstats = DeviceStats()
