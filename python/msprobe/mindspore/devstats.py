"""Statistics of MindSpore Ascend tensors reduced on the device (issue #21); the batching is
``msprobe.core.devstats``'s, shared with the PyTorch layer.

In a statistics-only session with ``MSPROBE_DEVICE_STATS=1``, a tensor whose ``device`` is
``Ascend:N`` is not read with ``asnumpy()`` (a whole-tensor copy and a wait per tensor). It is
reduced as msprobe 1.1.1's MindSpore ``get_stat_info`` does: integers and float64 cast to float32
(``astype``), then ``mint.max``, ``mint.min``, ``mint.mean`` and ``mint.norm`` (f16/bf16 results in
their own dtype), stacked into one 4-element float32 device tensor; a 0-d float tensor's value
stands for all four (1.1.1's ``item()``). The reductions run with the capture guard raised, so
neither our API wrappers nor the primitive hooks record them. A batch of results is stacked on
the device and read with one ``asnumpy()`` (16 bytes per tensor cross the link, one wait per
batch).

Bool, complex, empty, 0-d integer/float64 and host tensors keep the ``asnumpy()`` path (their
statistics need the data or are not all floats). NaN/Inf tensors get ``null``
``*_except_inf_nan`` keys (those need the data), counted in the run summary.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import mindspore as ms
from mindspore import mint
from msprobe.core.devstats import DeviceStats as _Base

_FLOAT_OWN = (ms.float16, ms.bfloat16, ms.float32)
_FLOATS = (ms.float16, ms.bfloat16, ms.float32, ms.float64)
_NOT_REDUCED = (ms.bool_, ms.complex64, ms.complex128)


def on_device(t: Any) -> bool:
    """Whether `t` lives in Ascend device memory (``Tensor.device`` is ``Ascend:N``)."""
    try:
        return str(t.device).startswith("Ascend")
    except Exception:
        return False


class DeviceStats(_Base):
    """MindSpore's device reductions and batch fetch."""

    def eligible(self, t: Any) -> bool:
        if not self.enabled or self.failed or t.dtype in _NOT_REDUCED or not on_device(t):
            return False
        if t.size == 0:
            return False
        return t.ndim > 0 or t.dtype in _FLOAT_OWN

    def reduce(self, t: Any) -> Any:
        """The 4 statistics as a float32 device tensor, as 1.1.1's get_stat_info."""
        from ._record import State  # (_record imports this module)

        State.depth += 1  # our own ops: neither the API wrappers nor the primitive hooks record
        try:
            if t.ndim == 0:
                return mint.stack([t, t, t, t]).astype(ms.float32)
            x = t
            if x.dtype not in _FLOATS or x.dtype == ms.float64:
                x = x.astype(ms.float32)
            return mint.stack([mint.max(x), mint.min(x), mint.mean(x), mint.norm(x)]).astype(ms.float32)
        finally:
            State.depth -= 1

    def _gather(self, results: list) -> tuple[Any, int]:
        """One stack on the device, one read to the host (asnumpy waits for the stream)."""
        from ._record import State

        State.depth += 1
        try:
            host = mint.stack(results).asnumpy()
        finally:
            State.depth -= 1
        vals = np.ascontiguousarray(host, dtype=np.float64)
        return vals, vals.ctypes.data


devstats = DeviceStats()
