"""Statistics of MindSpore Ascend tensors reduced on the device (issue #21); the batching is
``msprobe.core.devstats``'s, shared with the PyTorch layer.

In a statistics-only session, a tensor whose ``device`` is ``Ascend:N`` and which is larger than
``MSPROBE_DEVICE_STATS_MIN_BYTES`` (the hybrid, ``msprobe.core.devstats``; every one with
``MSPROBE_DEVICE_STATS=1``) is not copied to the host (a whole-tensor copy). It is
reduced as msprobe 1.1.1's MindSpore ``get_stat_info`` does: integers and float64 cast to float32
(``astype``), then ``mint.max``, ``mint.min``, ``mint.mean`` and ``mint.norm`` (f16/bf16 results in
their own dtype), stacked into one 4-element float32 device tensor; a 0-d float tensor's value
stands for all of them (1.1.1's ``item()``). 1.1.1's MindSpore dumps have no ``*_except_inf_nan``
keys (unlike its PyTorch ones), so nothing more is reduced. The reductions run with the capture
guard raised, so neither our API wrappers nor the primitive hooks record them. A batch of results
is stacked on the device and read with one ``asnumpy()`` (16 bytes per tensor cross the link, one
wait per batch).

A bool tensor is reduced by ``mint.any`` and ``mint.all`` (1.1.1's Max / Min; the recorder
writes them as booleans, no Mean/Norm). Smaller tensors, and complex, empty, 0-d integer/float64
ones, are copied (devcopies.py) (their statistics need the data or are not all floats).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

import mindspore as ms
from mindspore import mint
from msprobe.core.devstats import DeviceStats as _Base

_FLOAT_OWN = (ms.float16, ms.bfloat16, ms.float32)
_NOT_REDUCED = (ms.complex64, ms.complex128)


def on_device(t: Any) -> bool:
    """Whether `t` lives in Ascend device memory (``Tensor.device`` is ``Ascend:N``)."""
    try:
        return str(t.device).startswith("Ascend")
    except Exception:
        return False


class DeviceStats(_Base):
    """MindSpore's device reductions and batch fetch."""

    width = 4  # Max, Min, Mean, Norm

    def eligible(self, t: Any) -> bool:
        if not self.enabled or self.failed or t.dtype in _NOT_REDUCED or not on_device(t):
            return False
        if t.size == 0 or not self.large_enough(int(t.size) * int(t.itemsize)):
            return False
        return t.ndim > 0 or t.dtype in _FLOAT_OWN or t.dtype == ms.bool_

    def reduce(self, t: Any) -> Any:
        """The 4 statistics as 1.1.1's get_stat_info, as a 4-element float32 device tensor."""
        from ._record import State  # (_record imports this module)

        State.depth += 1  # our own ops: neither the API wrappers nor the primitive hooks record
        try:
            if t.ndim == 0:
                return mint.stack([t, t, t, t]).astype(ms.float32)
            x = t
            if x.dtype == ms.bool_:  # any / all (the recorder writes booleans), no temporary
                some, every = mint.any(x), mint.all(x)
                return mint.stack([some, every] * 2).astype(ms.float32)
            if x.dtype not in _FLOAT_OWN:  # integers and float64: reduced as float32
                x = x.astype(ms.float32)
            v = mint.stack([mint.max(x), mint.min(x), mint.mean(x), mint.norm(x)])
            return v if v.dtype == ms.float32 else v.astype(ms.float32)  # f16/bf16 results
        finally:
            State.depth -= 1

    def _streams(self, t: Any) -> Optional[tuple[Any, Any]]:
        return ms.runtime.current_stream(), ms.runtime.default_stream()

    def _new_event(self, t: Any) -> Any:
        return ms.runtime.Event()

    def _gather(self, results: list) -> tuple[Any, int]:
        """One stack on the device (after the streams the results came from), one read to the
        host (asnumpy waits for the stack's stream only)."""
        from ._record import State

        State.depth += 1
        try:
            self._order(results[0])
            host = mint.stack(results).asnumpy()
        finally:
            State.depth -= 1
        vals = np.ascontiguousarray(host, dtype=np.float64)
        return vals, vals.ctypes.data


devstats = DeviceStats()
