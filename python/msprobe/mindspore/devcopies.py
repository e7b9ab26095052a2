"""MindSpore Ascend tensors copied to the host without blocking, for the md5 and tensor tasks and for
statistics not reduced on the device (issue #21); the torch_npu counterpart is
``msprobe.pytorch.devcopies``.

``Tensor.asnumpy()`` of a device tensor waits for its stream, per tensor. Instead each device tensor
is copied with ``Tensor.to("CPU", non_blocking=True)`` (MindSpore copies it on its stream into its
own pinned memory pool) and its leaf goes into the record as *pending data*
(``msprobe_record_add_tensor_pending_data``); the recorder holds the record, and every record that
ends after it, so dump.json keeps its order. The copies are collected in batches: the PyNative
queue drained and the device synchronised once, then each host copy is read (``asnumpy()`` of a CPU
tensor) and handed to the recorder (``msprobe_resolve_tensor``), which makes statistics, CRC and the
tensor file from it exactly as from ``asnumpy()`` of the device tensor. A batch is collected when it
holds ``MSPROBE_DEVICE_BATCH`` tensors (default 256), before the bytes it holds would pass
``MSPROBE_QUEUE_MB`` (the launching thread then waits for it, as ``block``), and at
``stop()``/``step()`` and exit, so the files are complete after ``stop()``.

The pinned memory is MindSpore's pool (sized by MindSpore, allocated at its first non-blocking
copy), not ours: the cap bounds the bytes our pending copies hold in it. An empty tensor, one larger
than the cap, or any after a failed copy is read with ``asnumpy()``, as is everything with
``MSPROBE_ASYNC_COPY=0``.
"""

from __future__ import annotations

import atexit
import ctypes
import threading
from typing import Any, Callable, Optional

import mindspore as ms
from msprobe.core import config
from msprobe.core.devstats import _env_count
from msprobe.core.errors import logger
from msprobe.core.native import lib

from .devstats import on_device


class DeviceCopies:
    """The pending host copies of this process (thread-safe)."""

    def __init__(self) -> None:
        self.enabled = config.env_switch("MSPROBE_ASYNC_COPY", True)
        self.batch = _env_count("MSPROBE_DEVICE_BATCH", 256)
        self.lock = threading.RLock()  # add() fetches while holding it
        self.items: list[tuple[int, Any]] = []
        self.held = 0  # bytes the pending copies hold
        self.next_slot = 0
        self.copies = 0
        self.fetches = 0
        self.failed = False
        # Reads a host copy and resolves its slot (set by _record.py).
        self.resolve: Optional[Callable[[int, Any], None]] = None
        atexit.register(self.fetch)

    def eligible(self, t: Any) -> bool:
        return self.enabled and not self.failed and on_device(t) and t.size > 0

    def add(self, r: int, key: Optional[bytes], t: Any, desc: Any) -> bool:
        """Starts the host copy of device tensor `t` and adds its leaf as pending data (`desc`:
        its dtype and shape). False: nothing added, the caller reads it with asnumpy()."""
        from ._record import State  # (_record imports this module)

        nbytes = int(t.size) * int(t.itemsize)
        cap = int(lib.msprobe_queue_bytes())
        if nbytes > cap:
            return False
        with self.lock:
            if self.held + nbytes > cap:
                self._fetch()  # wait for the batch (block mode)
            State.depth += 1  # our own op: neither the API wrappers nor the primitive hooks record
            try:
                host = t.to("CPU", non_blocking=True)
            except Exception as e:  # blocking from now on
                self.failed = True
                logger.warning(f"non-blocking copy of a device tensor failed ({e}); device tensors are read blocking")
                return False
            finally:
                State.depth -= 1
            slot = self.next_slot
            if lib.msprobe_record_add_tensor_pending_data(r, key, ctypes.byref(desc), slot) != 0:
                return False
            self.next_slot += 1
            self.items.append((slot, host))
            self.held += nbytes
            self.copies += 1
            if len(self.items) >= self.batch:
                self._fetch()
        return True

    def fetch(self) -> None:
        """Waits for every pending copy and hands each to the recorder. A batch that cannot be
        waited for leaves its leaves null (the recorder counts them)."""
        with self.lock:
            self._fetch()

    def _fetch(self) -> None:
        from mindspore.common.api import _pynative_executor

        items = self.items
        self.items, self.held = [], 0
        if not items:
            return
        try:
            # the PyNative queue first: the copies may not be launched yet (and MindSpore must not
            # initialise its device context from two threads at once)
            _pynative_executor.sync()
            ms.runtime.synchronize()
        except Exception as e:
            logger.warning(f"waiting for host copies failed ({e}); their leaves are written with null values")
            return
        self.fetches += 1
        resolve = self.resolve
        for slot, host in items:
            if resolve is not None:
                resolve(slot, host)


devcopies = DeviceCopies()
