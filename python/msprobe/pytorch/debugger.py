"""PrecisionDebugger, module_dump / module_dump_end (msprobe 1.1.1's API, §2.1, §3)."""

from __future__ import annotations

import json
import os
from typing import Any, Optional

import torch

from msprobe.core import config
from msprobe.core.errors import MsprobeException, logger
from msprobe.core.native import init_recorder, l2_enable, l2_preloaded, lib

from .api_wrap import api_wrapper
from .devcopies import devcopies
from .devstats import devstats
from .module_hooks import hook_model, hook_module, patch_backward_hook
from .state import state


def _check_model(model: Any) -> None:
    if model is not None and not isinstance(model, torch.nn.Module):
        msg = f"model must be a torch.nn.Module, got {type(model).__name__}"
        logger.error(msg)
        raise MsprobeException(msg)


def _section_value(config_path: Optional[str], task: str, key: str) -> Any:
    """`key` of the config file's task section (None when absent or unreadable)."""
    path = config_path if config_path is not None else os.environ.get("MSPROBE_CONFIG") or None
    data = config.read_config(path) if path else None
    section = data.get(task) if data else None
    return section.get(key) if isinstance(section, dict) else None


def _asked_file_format(config_path: Optional[str], task: str) -> Optional[str]:
    """The file_format the environment or the config file's task section asks for, if any."""
    env = os.environ.get("MSPROBE_FILE_FORMAT", "").strip()
    if env:
        return env
    v = _section_value(config_path, task, "file_format")
    return v if isinstance(v, str) else None


def _scope_start(config_path: Optional[str], task: str) -> Optional[str]:
    """scope[0] when a two-name scope is configured (MSPROBE_SCOPE wins over the file)."""
    env = os.environ.get("MSPROBE_SCOPE", "").strip()
    if env:
        try:
            scope = json.loads(env) if env.startswith("[") else [p.strip() for p in env.split(",") if p.strip()]
        except ValueError:
            return None
    else:
        scope = _section_value(config_path, task, "scope")
    if isinstance(scope, list) and len(scope) == 2 and all(isinstance(x, str) for x in scope):
        return scope[0]
    return None


def _list_configured(config_path: Optional[str], task: str) -> bool:
    """A non-empty `list` is configured (MSPROBE_LIST or the config file's task section)."""
    if os.environ.get("MSPROBE_LIST", "").strip():
        return True
    v = _section_value(config_path, task, "list")
    return isinstance(v, list) and len(v) > 0


def _drain_launches() -> None:
    """L2: torch_npu launches kernels from its task-queue thread after the Python call returned, so
    the capture window is moved only once what the script queued so far has been launched and run
    (torch.npu.synchronize): start() then excludes the work before it, stop() includes the work
    inside. A no-op without torch_npu or before the device is initialised."""
    npu = getattr(torch, "npu", None)
    if npu is None or not hasattr(npu, "synchronize"):
        return
    try:
        if getattr(npu, "is_initialized", lambda: True)():
            npu.synchronize()
    except Exception as e:  # the window moves anyway; say why it may be off by the queued work
        logger.warning(f"L2: torch.npu.synchronize() failed ({e}); the capture window may include queued work")


class PrecisionDebugger:
    """Process-wide singleton: later constructions return the first instance unchanged."""

    _instance: Optional[PrecisionDebugger] = None

    def __new__(cls, *args: Any, **kwargs: Any) -> PrecisionDebugger:
        if cls._instance is None:
            inst = super().__new__(cls)
            inst._initialized = False
            cls._instance = inst
        return cls._instance

    def __init__(
        self,
        config_path: Optional[str] = None,
        task: Optional[str] = None,
        dump_path: Optional[str] = None,
        level: Optional[str] = None,
        model: Optional[torch.nn.Module] = None,
        step: Optional[list] = None,
    ) -> None:
        if self._initialized:
            return
        config.check_args(config_path=config_path, task=task, dump_path=dump_path, level=level, step=step)
        _check_model(model)
        self.level = str(config.effective("level", level, config_path, "L1"))
        self.task = str(config.effective("task", task, config_path, "statistics"))
        if _asked_file_format(config_path, self.task) not in (None, "pt"):
            logger.info("file_format is ignored for PyTorch: tensor files are written as .pt, as msprobe 1.1.1 does")
        if self.level == "L2" and not l2_preloaded():
            rc = -1  # said how to enable L2; no recorder, nothing written
        else:
            rc = init_recorder(
                config.init_args(
                    "pytorch", config_path, task=task, dump_path=dump_path, level=level, step=step, file_format="pt"
                )
            )
            if self.level == "L2" and rc >= 0 and not l2_enable():
                rc = -1
        # rc 1: a recorder already runs in this process (e.g. preloaded and started): share it.
        self.off = rc < 0  # bad config: the recorder logged it; capture stays off, the job runs on
        self.model = model
        self._hooked: set[int] = set()
        self._handles: list = []
        self._started = False
        self._ended = False
        self._stop_waits = config.stop_waits()
        self._initialized = True
        devstats.configure(config_path)
        state.construct = self.level in ("L0", "mix")
        # mix: as 1.1.1, a scope that starts at a module starts at that module's forward (or
        # backward) pre-hook, so the records inside it that end before the module's own are in
        state.scope_start = _scope_start(config_path, self.task) if self.level == "mix" else None
        # mix with a `list`: every API inside a listed module is dumped (1.1.1's MixRangeScope)
        state.module_spans = self.level == "mix" and _list_configured(config_path, self.task)

    def start(self, model: Optional[torch.nn.Module] = None) -> None:
        if self.off or self._ended:
            return
        if model is not None:
            _check_model(model)
            self.model = model
        if self.level in ("L0", "mix") and self.model is None:
            logger.error(
                f"For level {self.level}, PrecisionDebugger or start interface must receive a 'model' argument."
            )
            raise MsprobeException("missing the parameter 'model'")
        if lib.msprobe_steps_done():
            api_wrapper.restore()
            self._ended = True
            logger.info("msprobe ends successfully.")
            return
        if not self._started:
            self._started = True
            if torch.distributed.is_available() and torch.distributed.is_initialized():
                lib.msprobe_set_rank(torch.distributed.get_rank())
        if self.level in ("L0", "mix") and not self._hooked:
            self._hooked.add(id(self.model))
            self._handles += hook_model(self.model, lean=self.level == "L0")
        elif self.level in ("L0", "mix") and id(self.model) not in self._hooked:
            # msprobe 1.1.1 hooks the modules of the first start()'s model only (Service.start:
            # register_hook_new on first_start); hooking another too would give its modules names
            # that collide with the first's (both start at Module.{name}...).
            self._hooked.add(id(self.model))
            logger.warning(
                "start() got another model than the first start(): as msprobe 1.1.1, only the first "
                "model's modules are hooked; pass the model to the first start() (or wrap both in one Module)"
            )
        if self.level in ("L1", "mix"):
            api_wrapper.install()
        if self.level == "L2":
            _drain_launches()
        lib.msprobe_start()

    def stop(self) -> None:
        if self.off:
            return
        if not devstats.async_dump:
            devstats.fetch()  # the files are complete after stop()
            devcopies.fetch()
        if self.level == "L2":
            _drain_launches()
        if self._stop_waits:
            lib.msprobe_stop_wait()
        else:
            lib.msprobe_stop()

    def step(self) -> None:
        if self.off:
            return
        devstats.fetch()
        devcopies.fetch()
        lib.msprobe_step()
        state.reset_step()

    def forward_backward_dump_end(self) -> None:
        """Later forward calls are not recorded; backward hooks already set still record."""
        if self.off:
            return
        logger.info("Data needed ends here.")
        api_wrapper.restore()


_module_dump: dict[str, Any] = {}


def module_dump(module: torch.nn.Module, dump_name: str) -> None:
    """Records `module` alone as ``Module.{dump_name}.{Class}.{forward|backward}.{n}``: the
    wrapped APIs are restored (nothing inside the module is recorded) until module_dump_end."""
    if not isinstance(module, torch.nn.Module):
        logger.error("The parameter module in module_dump must be a torch.nn.Module.")
        raise MsprobeException("The parameter module in module_dump must be a torch.nn.Module.")
    if not isinstance(dump_name, str):
        logger.error("The parameter dump_name in module_dump must be a str.")
        raise MsprobeException("The parameter dump_name in module_dump must be a str.")
    _module_dump["reinstall"] = api_wrapper.installed
    api_wrapper.restore()
    patch_backward_hook()
    _module_dump["handles"] = hook_module(module, f"Module.{dump_name}.{type(module).__name__}.")


def module_dump_end() -> None:
    for h in _module_dump.pop("handles", []):
        h.remove()
    if _module_dump.pop("reinstall", False):
        api_wrapper.install()
