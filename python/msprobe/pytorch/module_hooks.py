"""L0 module hooks (msprobe-format.md §6.2, §7.2): forward pre/post hooks and full backward
pre/post hooks on every submodule (the root model is not hooked), names
``Module.{path}.{Class}.{forward|backward}.{n}`` with per-name counters (backward numbered in
execution order, as 1.1.1 does), and the module stack behind construct.json."""
from __future__ import annotations

import sys
from typing import Any, Optional

import torch
from torch.utils.hooks import BackwardHook, RemovableHandle

from msprobe.core.native import lib

from . import record
from .state import state


def _clone(res: Any) -> Any:
    local = state.local
    prev = local.busy
    local.busy = True
    try:
        if isinstance(res, torch.Tensor):
            return res.clone()
        if type(res) is tuple:
            return tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in res)
        return res
    finally:
        local.busy = prev


_orig_input_hook = BackwardHook.setup_input_hook
_orig_output_hook = BackwardHook.setup_output_hook


def _setup_input_hook(self: BackwardHook, args: Any) -> Any:
    res = _orig_input_hook(self, args)
    return res if res is args else _clone(res)


def _setup_output_hook(self: BackwardHook, args: Any) -> Any:
    # As 1.1.1: only a tensor or a tuple of tensors is hooked (a module returning a dict gets no
    # backward record), and the hooked values are cloned so in-place ops on them stay legal.
    if not (isinstance(args, torch.Tensor) or (isinstance(args, tuple) and all(isinstance(a, torch.Tensor) for a in args))):
        return args
    res = _orig_output_hook(self, args)
    return res if res is args else _clone(res)


def patch_backward_hook() -> None:
    BackwardHook.setup_input_hook = _setup_input_hook  # type: ignore[method-assign]
    BackwardHook.setup_output_hook = _setup_output_hook  # type: ignore[method-assign]


def _caller_of_call_impl() -> Any:
    """The frame that called Module._call_impl (msprobe's module stacks start there)."""
    f = sys._getframe(2)
    start = f
    while f is not None and f.f_code.co_name != "_call_impl":
        f = f.f_back
    return f.f_back if f is not None else start


class _ModuleHooks:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.fwd_key = (prefix + "forward").encode()
        self.bwd_key = (prefix + "backward").encode()
        self.fwd: list[tuple[str, Optional[str]]] = []
        self.bwd: list[tuple[str, Optional[str]]] = []

    def _start(self, key: bytes, direction: str, names: list) -> None:
        n = lib.msprobe_next_index(key)
        name = f"{self.prefix}{direction}.{n}"
        parent = state.parent()
        names.append((name, parent))
        if state.construct and lib.msprobe_is_enabled():
            state.pending.append((name, parent))
        state.module_stack.append(name)

    def pre(self, module: torch.nn.Module, args: Any) -> None:
        self._start(self.fwd_key, "forward", self.fwd)

    def post(self, module: torch.nn.Module, args: Any, kwargs: dict, output: Any) -> None:
        if not self.fwd:
            return
        name, parent = self.fwd.pop()
        local = state.local
        prev = local.busy
        local.busy = True
        try:
            if lib.msprobe_is_enabled():
                record.record_forward(name, args, kwargs, output, _caller_of_call_impl())
                state.note_construct(name, parent)
        finally:
            local.busy = prev
            state.pop_module(name)

    def bpre(self, module: torch.nn.Module, grad_output: Any) -> None:
        self._start(self.bwd_key, "backward", self.bwd)

    def bpost(self, module: torch.nn.Module, grad_input: Any, grad_output: Any) -> None:
        if not self.bwd:
            return
        name, parent = self.bwd.pop()
        local = state.local
        prev = local.busy
        local.busy = True
        try:
            if lib.msprobe_is_enabled():
                record.record_backward(name, grad_output, grad_input)
                state.note_construct(name, parent)
        finally:
            local.busy = prev
            state.pop_module(name)


def hook_module(module: torch.nn.Module, prefix: str) -> list[RemovableHandle]:
    h = _ModuleHooks(prefix)
    return [
        module.register_forward_pre_hook(h.pre),
        module.register_forward_hook(h.post, with_kwargs=True),
        module.register_full_backward_pre_hook(h.bpre),
        module.register_full_backward_hook(h.bpost),
    ]


def hook_model(model: torch.nn.Module) -> list[RemovableHandle]:
    """Hooks every submodule of `model` (not the model itself)."""
    patch_backward_hook()
    handles: list[RemovableHandle] = []
    for name, mod in model.named_modules():
        if mod is model or name == "":
            continue
        handles += hook_module(mod, f"Module.{name}.{type(mod).__name__}.")
    return handles
