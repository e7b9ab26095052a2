"""Device tensors (torch_npu, CUDA) copied to the host without blocking, for the md5 and tensor
tasks and for statistics not reduced on the device (issue #21).

``t.cpu()`` waits for the device per tensor: the launching thread stops until the stream has run
up to that tensor, so the host can no longer run ahead of the device. Instead each tensor is
copied with one non-blocking copy, on its stream, into pinned host memory, and its leaf goes into
the record as *pending data* (``msprobe_record_add_tensor_pending_data``); the recorder holds the
record, and every record that ends after it, so dump.json keeps its order. The copies are
collected in batches (``fetch``): one wait per stream that holds copies, then each host copy goes
to the recorder (``msprobe_resolve_tensor``), which makes statistics, CRC and the tensor file from
it exactly as from ``t.cpu()``. The copies land in one pinned arena, allocated at the first copy
(``MSPROBE_QUEUE_MB``, at most ``ARENA_MAX``). A batch is collected when it holds
``MSPROBE_DEVICE_BATCH`` tensors (default 256), when the arena is full (the launching thread then
waits for the batch, as ``block``), and at ``stop()``/``step()`` and exit, so the files are complete
after ``stop()``; with ``"async_dump": true`` only at ``step()`` (and for room).

An empty tensor, one larger than the arena, or any after a failed copy takes the blocking path
(``t.cpu()``), as does everything with ``MSPROBE_ASYNC_COPY=0``.
"""

from __future__ import annotations

import atexit
import ctypes
import threading
from typing import Any, Callable, Optional

import torch

from msprobe.core import config
from msprobe.core.devstats import _env_count
from msprobe.core.errors import logger
from msprobe.core.native import lib

_VF: Any = torch._C._VariableFunctions
_copy_: Any = torch._C.TensorBase.copy_  # unpatched by the API wrappers: nothing is recorded
ARENA_MAX = 256 << 20
"""The pinned arena's size: ``MSPROBE_QUEUE_MB``, at most this."""


class DeviceCopies:
    """The pending host copies of this process (thread-safe)."""

    def __init__(self) -> None:
        self.enabled = config.env_switch("MSPROBE_ASYNC_COPY", True)
        self.batch = _env_count("MSPROBE_DEVICE_BATCH", 256)
        self.lock = threading.RLock()  # add() fetches while holding it
        self.items: list[tuple[int, torch.Tensor]] = []
        self.streams: list[Any] = []
        self.arena: Optional[torch.Tensor] = None  # pinned, allocated at the first copy
        self.arena_bytes = 0
        self.used = 0  # bytes of the arena the pending copies hold (from its start)
        self.next_slot = 0
        self.copies = 0
        self.fetches = 0
        self.failed = False
        # Fills a host tensor's descriptor and resolves its slot (set by tensors.py).
        # resolve(slot, host copy, the dtype of the device's Norm of it): see tensors.py
        self.resolve: Optional[Callable[[int, torch.Tensor, torch.dtype], None]] = None
        atexit.register(self.fetch)

    def add(
        self, r: int, key: Optional[bytes], t: torch.Tensor, describe: Callable[[], Any], norm_dtype: torch.dtype
    ) -> bool:
        """Starts the host copy of device tensor `t` and adds its leaf as pending data
        (`describe()`: its descriptor, dtype, shape and requires_grad; called after the torch
        calls here, which may reach hooks that reuse it; `norm_dtype`: handed to `resolve`).
        False: nothing added, the caller copies it."""
        if not self.enabled or self.failed or t.numel() == 0:
            return False
        stream = _current_stream(t)
        if stream is None:
            return False
        perm = _dense_order(t)
        nbytes = t.numel() * t.element_size()
        with self.lock:
            if self.arena is None:
                self.arena_bytes = min(int(lib.msprobe_queue_bytes()), ARENA_MAX)
            if nbytes > self.arena_bytes:
                return False  # larger than the pinned arena: the blocking path
            if self.used + nbytes > self.arena_bytes:
                self._fetch()  # wait for the batch: its pinned memory is free again (block mode)
            off = self.used
            try:
                with torch.no_grad():
                    if self.arena is None:
                        self.arena = _VF.empty(self.arena_bytes, dtype=torch.uint8, pin_memory=True)
                    # The layout .cpu() gives (strides kept when dense: the same reduction
                    # order), copied contiguous to contiguous: torch_npu waits for the stream
                    # when it copies a strided source to the host.
                    if perm is None:  # not dense: .cpu() is contiguous; made so on the device
                        src = _VF.clone(t, memory_format=torch.contiguous_format)
                        perm = tuple(range(t.dim()))
                    else:
                        src = _VF.permute(t, perm)
                    flat = self.arena[off : off + nbytes].view(t.dtype).view(tuple(src.shape))
                    _copy_(flat, src, non_blocking=True)
                    host = _VF.permute(flat, _inverse(perm))
            except Exception as e:  # no pinned memory or no async copy here: blocking from now on
                self.failed = True
                logger.warning(f"non-blocking copy of a device tensor failed ({e}); device tensors are copied blocking")
                return False
            self.used = (off + nbytes + 63) & ~63
            slot = self.next_slot
            self.next_slot += 1
            # The copy is on its way: a leaf that cannot be added is still waited for (its
            # arena range is in use until the next wait) but never resolved.
            self.items.append((slot, host, norm_dtype))
            if not any(stream == s for s in self.streams):
                self.streams.append(stream)
            if lib.msprobe_record_add_tensor_pending_data(r, key, ctypes.byref(describe()), slot) != 0:
                self.items[-1] = (-1, host, norm_dtype)
                return False
            self.copies += 1
            if len(self.items) >= self.batch:
                self._fetch()
        return True

    def fetch(self) -> None:
        """Waits for every pending copy (one wait per stream) and hands each to the recorder. A
        batch that cannot be waited for leaves its leaves null (the recorder counts them)."""
        with self.lock:
            self._fetch()

    def _fetch(self) -> None:
        items, streams = self.items, self.streams
        self.items, self.streams = [], []
        if not items:
            return
        try:
            for s in streams:
                s.synchronize()
        except Exception as e:
            self.failed = True  # the arena may still be written: never reused
            logger.warning(f"waiting for host copies failed ({e}); their leaves are written with null values")
            return
        self.used = 0  # nothing reads or writes the arena any more
        self.fetches += 1
        resolve = self.resolve
        for slot, host, norm_dtype in items:
            if resolve is not None and slot >= 0:
                resolve(slot, host, norm_dtype)


def _dense_order(t: torch.Tensor) -> Optional[tuple[int, ...]]:
    """The order of `t`'s dimensions, outermost first, in which it is contiguous (`t.permute`
    of it is), or None if no order is (an overlapping or gapped view)."""
    perm = sorted(range(t.dim()), key=lambda d: (-t.stride(d), -d))
    expect = 1
    for d in reversed(perm):
        if t.shape[d] != 1:
            if t.stride(d) != expect:
                return None
            expect *= t.shape[d]
    return tuple(perm)


def _inverse(perm: tuple[int, ...]) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, d in enumerate(perm):
        inv[d] = i
    return tuple(inv)


def _current_stream(t: torch.Tensor) -> Any:
    mod = getattr(torch, t.device.type, None)
    stream = getattr(mod, "current_stream", None) if mod is not None else None
    return stream(t.device) if stream is not None else None


devcopies = DeviceCopies()
