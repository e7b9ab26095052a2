"""Statistics of device tensors reduced on the device, fetched in batches (issue #21): the
framework-neutral part, shared by ``msprobe.pytorch.devstats`` (torch_npu, CUDA) and
``msprobe.mindspore.devstats`` (MindSpore Ascend).

Copying a device tensor to the host for four numbers costs a whole-tensor transfer and a
synchronisation per tensor. Instead, in a statistics-only session, the framework layer reduces
each tensor with the framework's own device ops (as msprobe 1.1.1's ``get_stat_info``) into one
4-element float32 result that stays on the device, and adds the leaf to its record as *pending*
(``msprobe_record_add_tensor_pending``, with a slot number): the recorder holds that record, and
every record that ends after it, so dump.json keeps its order. Here the results wait for their
batch; ``fetch`` gathers them (the framework's ``_gather``: one stack on the device, one copy to
the host) and hands the values to the recorder (``msprobe_resolve_stats``). A batch is fetched when
it holds ``MSPROBE_DEVICE_BATCH`` results (default 256) and at ``stop()``/``step()`` and exit, so
the files are complete after ``stop()``; with ``"async_dump": true`` in config.json only at
``step()`` (as msprobe 26's async_dump). Pending results are never unbounded: with ``async_dump``
a batch is also fetched once ``MSPROBE_DEVICE_PENDING_MAX`` results wait (default 16384: about
8 MiB of device memory for MindSpore's one 6-element result per tensor, 48 MiB for torch's six
0-d results per tensor in 512-byte allocator blocks, and the held records on the host), with one
warning and a count.

By default the hybrid (as L2's): a tensor larger than ``MSPROBE_DEVICE_STATS_MIN_BYTES`` (1 MiB)
is reduced on the device, a smaller one copied to the host without blocking (devcopies.py): for a
small tensor the reduction kernels cost more than its copy, for a large one the copy over the host
link costs more than the kernels (the cost model of ``scripts/bench_device.py``; measured by
``scripts/bench_device_fw.py``). ``MSPROBE_DEVICE_STATS=1`` reduces every tensor on the device
(as msprobe 1.1.1 does on a device), ``0`` none.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import threading
from typing import Any, Optional

from msprobe.core import config
from msprobe.core.errors import logger
from msprobe.core.native import lib


def _env_int(name: str, default: int, lo: int, hi: int, what: str) -> int:
    """An integer from `lo` to `hi` from the environment, else `default` (with one warning naming
    the variable and its value when it is set but not such an integer)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        n = int(raw)
    except ValueError:
        n = lo - 1
    if not lo <= n <= hi:
        if name not in _said:  # read by more than one layer: said once
            _said.add(name)
            logger.warning(f"{name}={raw!r} is not {what}; using {default}")
        return default
    return n


_said: set[str] = set()


def _env_count(name: str, default: int) -> int:
    """A positive count (at most 2**20)."""
    return _env_int(name, default, 1, 1 << 20, "an integer from 1 to 1048576")


def _env_mode() -> str:
    """``MSPROBE_DEVICE_STATS``: "hybrid" (unset, the default), "all" (1) or "off" (0)."""
    raw = os.environ.get("MSPROBE_DEVICE_STATS", "").strip()
    if raw in ("0", "1", ""):
        return {"0": "off", "1": "all", "": "hybrid"}[raw]
    logger.warning(f"MSPROBE_DEVICE_STATS={raw!r} is not 0 or 1; using the default (the size hybrid)")
    return "hybrid"


class DeviceStats:
    """The pending device results of this process, fetched in batches (thread-safe).

    A framework subclass supplies ``reduce`` (a tensor's ``width`` values as a float32 device
    tensor) and ``_gather`` (a list of them to the host as float64 values). ``width`` is 4 (Max,
    Min, Mean, Norm) or 6 (then also the largest and smallest finite values, from which the
    recorder writes ``*_except_inf_nan``: ``msprobe_resolve_stats_except``)."""

    width = 4

    def __init__(self) -> None:
        mode = _env_mode()
        # Tensors of at most this many bytes are copied (the hybrid); 0: every tensor reduced.
        self.min_bytes = (
            0
            if mode == "all"
            else _env_int("MSPROBE_DEVICE_STATS_MIN_BYTES", 1 << 20, 0, 1 << 62, "a byte count (an integer >= 0)")
        )
        self.enabled = mode != "off"
        self.batch = _env_count("MSPROBE_DEVICE_BATCH", 256)
        # async_dump fetches at step() only, but never holds more than this many results.
        self.pending_max = _env_count("MSPROBE_DEVICE_PENDING_MAX", 16384)
        self.early = 0  # async_dump batches fetched before step() for want of room
        self.async_dump = False
        self.lock = threading.Lock()
        self.first = 0  # slot of results[0]
        self.results: list[Any] = []
        self.fetches = 0
        self.tensors = 0
        self.failed = False
        # Results reduced on a stream other than the fetching one must be complete before the
        # fetch's stack reads them. Per side stream (not the device's default stream), one event,
        # re-recorded after each reduction there; the fetch's stream waits for every side
        # stream's event, on the device (no host wait, and no dependency on work queued later on
        # those streams; an event of an earlier batch has long completed). Once a result came
        # from the default stream, a fetch on a side stream waits for the default one. Nothing is
        # reset per fetch: a thread's reduction marked just before another thread's fetch is
        # still waited for by its own, later fetch. (torch and MindSpore streams and events share
        # these method names: ``record(stream)``, ``wait_event``, ``wait_stream``.)
        self.side: list[tuple[Any, Any]] = []  # (stream, event)
        self.default_used = False
        self.stream_lock = threading.Lock()
        atexit.register(self._at_exit)

    def configure(self, config_path: Optional[str]) -> None:
        v = config._file_value(config_path, "async_dump")
        self.async_dump = v is True

    def _at_exit(self) -> None:
        self.fetch()
        if self.early:
            logger.warning(
                f"async_dump: {self.early} batch(es) of device statistics fetched before step() "
                f"(more than MSPROBE_DEVICE_PENDING_MAX={self.pending_max} waiting)"
            )

    def large_enough(self, nbytes: int) -> bool:
        """Whether a tensor of `nbytes` is reduced on the device rather than copied."""
        return nbytes > self.min_bytes

    def reduce(self, t: Any) -> Any:  # pragma: no cover - every framework overrides it
        raise NotImplementedError

    def _gather(self, results: list) -> tuple[Any, int]:  # pragma: no cover
        """The results on the host: (an object keeping the memory alive, the address of
        width x len(results) contiguous float64 values)."""
        raise NotImplementedError

    def _streams(self, t: Any) -> Optional[tuple[Any, Any]]:
        """(the stream `t`'s reductions are enqueued on, its device's default stream), or None
        when the framework has no streams to order."""
        return None

    def _new_event(self, t: Any) -> Any:  # pragma: no cover - frameworks with _streams override it
        raise NotImplementedError

    def reduce_safe(self, t: Any) -> Optional[Any]:
        """`reduce`, or None (the caller takes the copy path)."""
        try:
            res = self.reduce(t)
            self._mark(t)
            return res
        except Exception as e:  # an op the device cannot run: copy path from now on
            self.failed = True
            logger.warning(f"device statistics failed ({e}); device tensors are copied to the host from now on")
            return None

    def _mark(self, t: Any) -> None:
        """Notes the stream `t`'s reductions were enqueued on (see ``__init__``)."""
        streams = self._streams(t)
        if streams is None:
            return
        cur, default = streams
        with self.stream_lock:
            if cur == default:
                self.default_used = True
                return
            entry = next((e for e in self.side if e[0] == cur), None)
            if entry is None:
                entry = (cur, self._new_event(t))
                self.side.append(entry)
            entry[1].record(cur)

    def _order(self, t: Any) -> None:
        """Makes the stream a fetch stacks on (`t`'s current one) wait, on the device, for the
        results reduced on other streams (see ``__init__``)."""
        streams = self._streams(t)
        if streams is None:
            return
        cur, default = streams
        with self.stream_lock:
            events = [e[1] for e in self.side if e[0] != cur]
            default_used = self.default_used
        for ev in events:
            cur.wait_event(ev)
        if default_used and cur != default:
            cur.wait_stream(default)

    def add(self, r: int, key: Optional[bytes], desc: Any, res: Any) -> bool:
        """Adds the leaf as pending with its device result `res` (True), or False: the caller
        takes the copy path."""
        with self.lock:
            slot = self.first + len(self.results)
            rc = lib.msprobe_record_add_tensor_pending(r, key, ctypes.byref(desc), slot)
            if rc != 0:
                return False
            self.results.append(res)
            self.tensors += 1
            n = len(self.results)
            full = n >= (self.pending_max if self.async_dump else self.batch)
            if full and self.async_dump:
                self.early += 1
                if self.early == 1:
                    logger.warning(
                        f"async_dump: {n} device statistics wait for step() (MSPROBE_DEVICE_PENDING_MAX); "
                        "fetched now to bound device and host memory (counted at exit)"
                    )
        if full:
            self.fetch()
        return True

    def fetch(self) -> None:
        """Fetches every pending result and hands the values to the recorder. A batch that
        cannot be fetched leaves its leaves null (the recorder counts them at exit)."""
        with self.lock:
            results, first = self.results, self.first
            self.results = []
            self.first += len(results)
            if not results:
                return
            try:
                keep, addr = self._gather(results)
            except Exception as e:
                logger.warning(f"fetching device statistics failed ({e}); their leaves are written with null values")
                return
            self.fetches += 1
            vals = ctypes.cast(addr, ctypes.POINTER(ctypes.c_double))
            if self.width == 6:
                lib.msprobe_resolve_stats_except(first, vals, len(results))
            else:
                lib.msprobe_resolve_stats(first, vals, len(results))
            del keep
