"""L1 API wrapping from the user-editable support list (support_wrap_ops.yaml).

Each listed API is replaced by a plain function that, for the outermost call only (nested
wrapped calls run unwrapped, msprobe §6.1), takes the next index of ``{Prefix}.{api}.``,
calls the original, records the inputs (after the op runs, as msprobe 1.1.1; before it with
``MSPROBE_INPUTS_PRE_CALL=1``: see README "PyTorch layer") and the output, and hooks the
``grad_fn`` of the first output tensor for the backward record.

While the wrappers are installed, a module of torch (or torch_npu, functorch) imported for the
first time runs its module code with the original APIs in place (`_ImportGuard`): torch's own
modules build tables keyed by API objects when they are imported (``torch._dynamo``, imported
lazily by ``torch.optim``, ``torch.compile`` and torch_npu, looks up
``decomposition_table[torch.ops.aten.rnn_relu.input]``), and a wrapper there is a key no table
holds (KeyError) or a key that stops matching once the originals are restored.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from msprobe.core import config
from msprobe.core.errors import logger

from .record import recorder
from .state import state

YAML = Path(__file__).with_name("support_wrap_ops.yaml")
# 1.1.1 neutralises dropout after wrapping, so these are never recorded (msprobe-format.md §3).
_NEVER = {"functional": {"dropout", "dropout2d", "dropout3d"}}


def load_support_list(path: Optional[str] = None) -> dict[str, list[str]]:
    """The support list: `path`, else ``$MSPROBE_SUPPORT_WRAP_OPS``, else the bundled yaml."""
    env = os.environ.get("MSPROBE_SUPPORT_WRAP_OPS")
    if path:
        return config.read_support_list(str(path))
    if env:
        return config.read_support_list(env, "MSPROBE_SUPPORT_WRAP_OPS")
    return config.read_support_list(str(YAML))


def _first_tensor(v: Any) -> Optional[torch.Tensor]:
    if isinstance(v, torch.Tensor):
        return v
    if isinstance(v, (list, tuple)):
        return _first_tensor(v[0]) if len(v) else None
    if isinstance(v, dict):
        for x in v.values():
            t = _first_tensor(x)
            if t is not None:
                return t
    return None


def _backward_hook(name: str) -> Callable:
    def hook(grad_inputs: tuple, grad_outputs: tuple) -> None:
        local = state.local
        prev = local.busy
        local.busy = True
        try:
            recorder.backward(name, grad_outputs, grad_inputs)
            if state.construct:  # mix
                state.note_construct(name, state.parent())
        finally:
            local.busy = prev

    return hook


def _hook_backward(out: Any, name: str) -> None:
    t = _first_tensor(out)
    if t is not None and t.grad_fn is not None:
        t.grad_fn.register_hook(_backward_hook(name))


def _call(orig: Callable, prefix: str, key: bytes, args: tuple, kwargs: dict, pre: bool, up: int = 1) -> Any:
    """One outermost wrapped call: inputs and stack before the op (`pre`) or after it, as
    msprobe 1.1.1 records them (an in-place op's inputs then show their new values), then the
    output. The stack starts `up` frames above this one (1: the wrapper's frame)."""
    local = state.local
    local.busy = True
    try:
        if pre:
            begun = recorder.api_begin(key, args, kwargs, sys._getframe(up))
            if begun is None:
                return orig(*args, **kwargs)
            r, n, kept = begun
            try:
                out = orig(*args, **kwargs)
            except BaseException:
                recorder.abort(r)
                raise
        else:
            out = orig(*args, **kwargs)
            begun = recorder.api_begin(key, args, kwargs, sys._getframe(up))
            if begun is None:
                return out
            r, n, kept = begun
        recorder.api_end(r, kept, out)
        if state.construct:  # mix
            state.note_construct(f"{prefix}{n}.forward", state.parent())
        _hook_backward(out, f"{prefix}{n}.backward")
        return out
    finally:
        local.busy = False


def inputs_pre_call() -> bool:
    """``MSPROBE_INPUTS_PRE_CALL=1``: every API's inputs are recorded before the call (what an
    in-place op consumed). Default, as msprobe 1.1.1: after the call, except the distributed
    APIs (1.1.1's ``op_is_inplace`` ones)."""
    return config.env_switch("MSPROBE_INPUTS_PRE_CALL", False)


def _make_wrapper(orig: Callable, prefix: str, up: int = 1) -> Callable:
    """The wrapper of `orig`; its records' stacks start `up` frames above `_call` (2: at the
    wrapper's caller, leaving out the wrapper's own frame)."""
    key = prefix.encode()
    local = state.local
    pre = prefix.startswith("Distributed.") or inputs_pre_call()

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if local.busy:
            return orig(*args, **kwargs)
        return _call(orig, prefix, key, args, kwargs, pre, up)

    try:
        functools.update_wrapper(wrapper, orig)
    except (AttributeError, TypeError):
        pass
    wrapper.__wrapped_by_msprobe__ = True  # type: ignore[attr-defined]
    return wrapper


class _AtenPacket:
    """Stands for a `torch.ops.aten.{op}` packet while wrapped (as 1.1.1): calling it records
    ``Aten.{op}.{n}``; an overload taken from it (``torch.ops.aten.add.Tensor``) records
    ``Aten.{op}.{overload}.{n}``; other attributes are the packet's."""

    def __init__(self, packet: Any, op: str) -> None:
        self._packet = packet
        self._call = _make_wrapper(packet, f"Aten.{op}.")
        self._overloads: dict[str, Callable] = {}
        self.__wrapped_by_msprobe__ = True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(*args, **kwargs)

    def __getattr__(self, key: str) -> Any:
        attr = getattr(self._packet, key)
        if not isinstance(attr, torch._ops.OpOverload):
            return attr
        w = self._overloads.get(key)
        if w is None:
            name = attr.name().split("::")[-1]
            if "." + attr._overloadname not in name:
                name += "." + attr._overloadname
            # called directly: 1.1.1's stack has no frame of its own here
            w = self._overloads[key] = _make_wrapper(attr, f"Aten.{name}.", up=2)
        return w

    def overloads(self) -> Any:
        return self._packet.overloads()


def _wrap_aten(names: list[str]) -> list[tuple[Any, str, Any, Callable]]:
    """(torch.ops.aten, op, packet, stand-in) per listed op that is an OpOverloadPacket."""
    out = []
    ns = torch.ops.aten
    for op in dict.fromkeys(names):
        try:
            packet = getattr(ns, op)
        except (AttributeError, RuntimeError):
            continue
        if isinstance(packet, torch._ops.OpOverloadPacket):
            out.append((ns, op, packet, _AtenPacket(packet, op)))
    return out


def _owners(category: str) -> list[tuple[Any, str]]:
    """(namespace object, record prefix) per category."""
    if category == "functional":
        return [(torch.nn.functional, "Functional")]
    if category == "tensor":
        return [(torch.Tensor, "Tensor")]
    if category == "torch":
        return [(torch, "Torch")]
    if category == "_VF":
        return [(torch._VF, "VF")]
    if category == "distributed":
        if not torch.distributed.is_available():
            return []
        import torch.distributed.distributed_c10d as c10d

        return [(torch.distributed, "Distributed"), (c10d, "Distributed")]
    if category == "torch_npu":
        if importlib.util.find_spec("torch_npu") is None:
            return []
        import torch_npu  # type: ignore

        return [(torch_npu, "NPU")]
    return []


def _resolve(owner: Any, dotted: str) -> Optional[tuple[Any, str, Any]]:
    parts = dotted.split(".")
    obj = owner
    for p in parts[:-1]:
        obj = getattr(obj, p, None)
        if obj is None:
            return None
    orig = getattr(obj, parts[-1], None)
    if orig is None or not callable(orig):
        return None
    return obj, parts[-1], orig


# Top-level packages whose modules see the original APIs while they are imported (_ImportGuard).
_TORCH_PACKAGES = frozenset({"torch", "torch_npu", "functorch"})


class _GuardedLoader(importlib.abc.Loader):
    """The loader of a torch module imported while the APIs are wrapped: runs the real loader's
    `exec_module` with the originals in place. The module keeps the real loader as its
    ``__loader__`` and ``__spec__.loader``; only the import itself goes through this one."""

    def __init__(self, loader: Any, wrapper: ApiWrapper) -> None:
        self._loader = loader
        self._wrapper = wrapper

    def create_module(self, spec: Any) -> Any:
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: Any) -> None:
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self._loader
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self._loader
        self._wrapper.suspend(module.__name__)
        try:
            self._loader.exec_module(module)
        finally:
            self._wrapper.resume(module.__name__)

    def __getattr__(self, key: str) -> Any:  # get_source, get_filename, is_package, ...
        return getattr(self._loader, key)


class _ImportGuard(importlib.abc.MetaPathFinder):
    """First on `sys.meta_path` while the APIs are wrapped. For a module of `_TORCH_PACKAGES`
    not imported yet it asks the finders after it for the spec and hands the import to
    `_GuardedLoader`; every other module, and every module already imported, is left alone (a
    meta-path finder is consulted only for modules missing from `sys.modules`, so this costs
    nothing once they are loaded)."""

    def __init__(self, wrapper: ApiWrapper) -> None:
        self._wrapper = wrapper

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname.partition(".")[0] not in _TORCH_PACKAGES:
            return None
        finders = list(sys.meta_path)
        try:
            finders = finders[finders.index(self) + 1 :]
        except ValueError:
            pass
        for finder in finders:
            find = getattr(finder, "find_spec", None)
            if find is None or isinstance(finder, _ImportGuard):
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or isinstance(loader, type) or not hasattr(loader, "exec_module"):
            return spec  # builtin/frozen loaders are classes; legacy loaders are left alone
        if type(loader).__name__ in ("NamespaceLoader", "_NamespaceLoader"):
            return spec  # a namespace package runs no code (and importlib checks this type)
        spec.loader = _GuardedLoader(loader, self._wrapper)
        return spec


class ApiWrapper:
    """Installs and restores the wrappers (msprobe's api_modularity / api_originality).

    `installed` is what the debugger asked for; the wrappers are in place when it is set and no
    torch module is being imported (`suspend`/`resume`, from `_ImportGuard`)."""

    def __init__(self, support: Optional[dict[str, list[str]]] = None) -> None:
        self.support = support
        self.targets: list[tuple[Any, str, Any, Callable]] = []  # (owner, attr, original, wrapper)
        self.installed = False
        self._applied = False  # the wrappers are set on their owners right now
        self._importing = 0  # guarded imports under way (nested and in any thread)
        self._import_start = 0.0
        self._lock = threading.RLock()
        self._guard = _ImportGuard(self)

    def _build(self) -> None:
        support = self.support if self.support is not None else load_support_list()
        for category, names in support.items():
            if category == "aten":
                self.targets += _wrap_aten(names)
                continue
            owners = _owners(category)
            if not owners and category not in ("torch_npu", "distributed"):
                logger.warning(f"support list category {category!r} is unknown; ignored")
            skip = _NEVER.get(category, set())
            for owner, prefix in owners:
                for api in dict.fromkeys(names):
                    if api in skip:
                        continue
                    found = _resolve(owner, api)
                    if found is None:
                        continue
                    obj, attr, orig = found
                    if getattr(orig, "__wrapped_by_msprobe__", False):
                        continue
                    self.targets.append((obj, attr, orig, _make_wrapper(orig, f"{prefix}.{api}.")))

    def _sync(self) -> None:
        """Puts the wrappers or the originals in place, whichever the state asks for."""
        want = self.installed and self._importing == 0
        if want == self._applied:
            return
        for obj, attr, orig, wrapper in self.targets:
            setattr(obj, attr, wrapper if want else orig)
        self._applied = want

    def install(self) -> None:
        with self._lock:
            if self.installed:
                return
            if not self.targets:
                self._build()
            self.installed = True
            if self._guard not in sys.meta_path:
                sys.meta_path.insert(0, self._guard)
            self._sync()

    def restore(self) -> None:
        with self._lock:
            if not self.installed:
                return
            self.installed = False
            self._sync()
            try:
                sys.meta_path.remove(self._guard)
            except ValueError:
                pass

    def suspend(self, module: str) -> None:
        """A torch module's code starts running (`_GuardedLoader`): the originals go in place
        until the outermost such import ends. API calls of other threads in that time are not
        recorded (a lazy import of a torch module happens once per process)."""
        with self._lock:
            self._importing += 1
            if self._importing == 1:
                self._import_start = time.monotonic()
                self._sync()

    def resume(self, module: str) -> None:
        with self._lock:
            self._importing -= 1
            if self._importing == 0:
                if self._applied != self.installed:
                    ms = (time.monotonic() - self._import_start) * 1000
                    logger.debug(f"{module} imported with the original APIs in place ({ms:.0f} ms)")
                self._sync()


api_wrapper = ApiWrapper()
