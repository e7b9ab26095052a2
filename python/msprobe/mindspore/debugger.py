"""``PrecisionDebugger`` for MindSpore (PyNative): msprobe 1.1.1's API, recording through the Rust
recorder (``msprobe.core.native``). Arguments are checked, and API misuse raised as
``msprobe.core.errors.MsprobeException`` (also importable from here), as in the PyTorch layer."""

from __future__ import annotations

import os
from typing import Any, Optional

import mindspore as ms
from msprobe.core import config
from msprobe.core.errors import MsprobeException
from msprobe.core.native import init_recorder, l2_enable, l2_preloaded, lib

from . import _hooks as H
from ._record import State, logger
from .devcopies import devcopies
from .devstats import devstats


def _graph_mode() -> bool:
    try:
        return ms.get_context("mode") == ms.GRAPH_MODE
    except Exception:
        return False


def _launch_blocking() -> None:
    """Synchronous op launch (``mindspore.runtime.launch_blocking``). Every captured tensor is read on
    the host, and with MindSpore's asynchronous launch each read waits 3-5 ms for the launch pipeline
    on this CPU; launched synchronously, a read costs microseconds and the numbers are the same.
    Effective when called before the first operator runs; MSPROBE_MS_LAUNCH_BLOCKING=0 turns it off."""
    try:
        ms.runtime.launch_blocking()
    except Exception:
        pass


def _drain_launches() -> None:
    """L2: MindSpore launches kernels from its launch pipeline after the Python call returned, so
    the capture window moves only once what was queued so far has run (runtime.synchronize).

    The PyNative executor's queue is drained first (``_pynative_executor.sync()``): before the
    first op has run, MindSpore 2.10's ``runtime.synchronize()`` initialises the device context on
    this thread while the op's task may be doing so on the frontend_queue thread, and that race
    crashes the process (SIGSEGV in ``OpRunner::GetDeviceContext``, about 1 run in 5 here)."""
    try:
        from mindspore.common.api import _pynative_executor

        _pynative_executor.sync()
        ms.runtime.synchronize()
    except Exception as e:  # the window moves anyway; say why it may be off by the queued work
        logger.warning(f"L2: mindspore.runtime.synchronize() failed ({e}); the capture window may include queued work")


def _wants_backward(config_path: Optional[str], task: str) -> bool:
    """Whether data_mode selects anything of backward records (msprobe 1.1.1's
    `is_dump_for_data_mode`: "all", "backward", "input" or "output" in the list). With
    `["forward"]` 1.1.1 writes no backward record at all, so no backward hook is set."""
    env = os.environ.get("MSPROBE_DATA_MODE", "").strip()
    if env:
        modes = [m.strip() for m in env.split(",")]
    else:
        path = config_path if config_path is not None else os.environ.get("MSPROBE_CONFIG") or None
        data = config.read_config(path) if path else None
        sect = data.get(task) if isinstance(data, dict) else None
        modes = sect.get("data_mode") if isinstance(sect, dict) else None
        if not isinstance(modes, list):
            return True  # default ["all"]; a bad value is the recorder's to report
    return any(m in ("all", "backward", "input", "output") for m in modes)


def _dist_rank() -> Optional[int]:
    """The rank of an initialised MindSpore communication group (msprobe 1.1.1's
    ``get_rank_if_initialized``), else None."""
    try:
        from mindspore.communication import GlobalComm, get_rank

        return int(get_rank()) if GlobalComm.INITED else None
    except Exception:
        return None


class PrecisionDebugger:
    """One per process (a second construction returns the first instance, as msprobe's does)."""

    _instance: Optional[PrecisionDebugger] = None

    def __new__(cls, *args, **kwargs):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
            cls._instance._initialized = False
        return cls._instance

    def __init__(
        self,
        config_path: Optional[str] = None,
        task: Optional[str] = None,
        dump_path: Optional[str] = None,
        level: Optional[str] = None,
        step: Optional[list] = None,
        model: Any = None,
    ) -> None:
        if self._initialized:
            return
        config.check_args(config_path=config_path, task=task, dump_path=dump_path, level=level, step=step)
        self.level = str(config.effective("level", level, config_path, "L1"))
        self.task = str(config.effective("task", task, config_path, "statistics"))
        if self.level == "L2" and not l2_preloaded():
            rc = -1  # said how to enable L2; no recorder, nothing written
        else:
            rc = init_recorder(
                config.init_args("mindspore", config_path, task=task, dump_path=dump_path, level=level, step=step)
            )
            if self.level == "L2" and rc >= 0 and not l2_enable():
                rc = -1
        # rc 1: a recorder already runs in this process (e.g. preloaded and started): share it.
        # rc -1: the recorder has logged the one line saying why; capture stays off.
        self.ok = rc >= 0
        State.backward = _wants_backward(config_path, self.task)
        self.model = model
        devstats.configure(config_path)
        # Synchronous launch pays off when every tensor is read on the host with a wait; statistics
        # reduced on the device (devstats.py) and non-blocking copies (devcopies.py,
        # MSPROBE_ASYNC_COPY, default) wait for none, so they keep MindSpore's asynchronous launch
        # (on Ascend: CPU tensors are read where they are).
        blocking = os.environ.get("MSPROBE_MS_LAUNCH_BLOCKING", "").strip()
        ascend = ms.get_context("device_target") == "Ascend"
        on_device = ascend and ((devstats.enabled and self.task == "statistics") or devcopies.enabled)
        if self.level in ("L0", "L1", "mix") and (blocking == "1" or (blocking != "0" and not on_device)):
            _launch_blocking()
        self.hooked = False
        self.ended = False
        self.stop_waits = config.stop_waits()
        self.dump_end = False
        self._initialized = True

    # ------------------------------------------------------------------------------------ lifecycle
    def _check_mode(self) -> None:
        if self.level in ("L0", "L1", "mix") and _graph_mode():
            msg = (
                f"msprobe: level {self.level} is not supported in GRAPH_MODE: MindSpore compiles the whole graph, "
                'so there are no Python API or Cell calls to hook (msprobe: "Data dump is not supported in '
                'graph_kbyk mode when dump level is api"). Use PYNATIVE_MODE for L0/L1/mix, or level L2 '
                "with the kernel-level interposer: LD_PRELOAD=/path/to/libmsprobe.so MSPROBE_LEVEL=L2 python ..."
            )
            logger.error(msg)
            raise MsprobeException(msg)

    def start(self, model: Any = None) -> None:
        self._check_mode()
        if not self.ok or self.ended:
            return
        if model is not None:
            self.model = model
        rank = _dist_rank()
        if rank is not None:  # the directory is rank{N}, and log lines say [rank N]
            lib.msprobe_set_rank(rank)
        if self.level in ("L0", "mix") and self.model is None:
            logger.error(
                f"For level {self.level}, PrecisionDebugger or start interface must receive a 'model' argument."
            )
            raise MsprobeException("missing the parameter 'model'")
        if self.level == "L2":
            _drain_launches()
            lib.msprobe_start()
            return
        if lib.msprobe_steps_done() == 1:
            self._end()
            return
        rc = lib.msprobe_start()
        if rc != 1:
            State.enabled = False
            return
        self._install()
        State.construct = self.level in ("L0", "mix")
        State.enabled = True

    def _install(self) -> None:
        if self.level in ("L1", "mix"):
            if not self.dump_end:
                H.api_registry.install()
            H.hook_jit()
            if self.model is not None:
                H.hook_primitives(self.model)
        if self.level in ("L0", "mix") and self.model is not None:
            H.hook_cells(self.model)
        self.dump_end = False
        self.hooked = True

    def _reset_stacks(self) -> None:
        H.end_backward()
        for s in (State.fwd_stack, State.bwd_stack, State.fwd_owner, State.bwd_owner, State.begun):
            s.clear()

    def stop(self) -> None:
        if not self.ok or self.ended or self.level == "L2":
            if self.level == "L2" and self.ok and not self.ended:
                _drain_launches()
                lib.msprobe_stop()
            return
        self._reset_stacks()
        State.enabled = False
        if not devstats.async_dump:
            devstats.fetch()  # the files are complete after stop()
            devcopies.fetch()
        if self.stop_waits:
            lib.msprobe_stop_wait()
        else:
            lib.msprobe_stop()

    def step(self) -> None:
        if not self.ok or self.ended:
            return
        self._reset_stacks()
        State.enabled = False
        State.cell_begun = False
        devstats.fetch()
        devcopies.fetch()
        lib.msprobe_step()
        if self.dump_end:  # forward_backward_dump_end lasts until the next start()
            H.api_registry.install()
            self.dump_end = False
        if lib.msprobe_steps_done() == 1:
            self._end()

    def forward_backward_dump_end(self) -> None:
        """L1 only: later forward calls are not recorded (the original APIs are restored); backward hooks
        already placed still record. The next start() wraps the APIs again."""
        if not self.ok or self.ended:
            return
        if self.level != "L1":
            logger.warning("forward_backward_dump_end() only applies to level L1; ignored.")
            return
        if not State.enabled:
            logger.error(
                "debugger.forward_backward_dump_end() should be called between debugger.start() and debugger.stop()"
            )
            raise Exception("debugger.stop() is already called. ")
        logger.info("msprobe: debugger.forward_backward_dump_end() is set successfully. ")
        H.api_registry.uninstall()
        H.unhook_primitives()
        H.unhook_jit()
        self.dump_end = True

    def _end(self) -> None:
        State.enabled = False
        H.api_registry.uninstall()
        H.unhook_primitives()
        H.unhook_cells()
        H.unhook_jit()
        self.ended = True
        logger.info("msprobe ends successfully.")
