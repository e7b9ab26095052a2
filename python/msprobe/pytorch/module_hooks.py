"""L0 module hooks (msprobe-format.md §6.2, §7.2): forward pre/post hooks and full backward
pre/post hooks on every submodule (the root model is not hooked), names
``Module.{path}.{Class}.{forward|backward}.{n}`` with per-name counters (backward numbered in
execution order, as 1.1.1 does), and the module stack behind construct.json."""
from __future__ import annotations

import sys
from typing import Any, Callable, Optional

import torch
from torch.utils.hooks import BackwardHook, RemovableHandle

from msprobe.core.native import lib

from .record import recorder
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
        if not lib.msprobe_is_enabled():
            return   # capture off: nothing to number; post/bpost find no entry and return
        n = lib.msprobe_next_index(key)
        name = f"{self.prefix}{direction}.{n}"
        parent = state.parent()
        names.append((name, parent))
        if state.construct:
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
                recorder.record(name, args, kwargs, output, _caller_of_call_impl())
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
                recorder.backward(name, grad_output, grad_input)
                state.note_construct(name, parent)
        finally:
            local.busy = prev
            state.pop_module(name)


def _grads_hook(tensors: list[torch.Tensor], done: Callable[[list], None]) -> None:
    """Calls `done(grads)` once the gradients w.r.t. `tensors` that this backward computes are
    there (None for the others), like the single node of torch's BackwardHookFunction."""
    if len(tensors) == 1:
        tensors[0].register_hook(lambda g: done([g]))
    else:
        torch.autograd.graph.register_multi_grad_hook(tensors, done, mode="all")


class _Call:
    """One forward call of a module at L0: where its tensor inputs/outputs sit and the output
    gradients received so far."""
    __slots__ = ("n_in", "in_idx", "in_meta", "grad_idx", "n_out", "out_idx", "grad_out")

    def __init__(self, n_in: int) -> None:
        self.n_in = n_in
        self.in_idx: Optional[list[int]] = None    # tensor input positions (None: no input requires grad)
        self.in_meta: list[tuple] = []             # (shape, dtype, device) per tensor input
        self.grad_idx: list[int] = []              # the tensor inputs that require grad
        self.n_out = 0
        self.out_idx: list[int] = []
        self.grad_out: tuple = ()


def _pack(n: int, idx: list[int], values: list) -> tuple:
    out: list = [None] * n
    for i, v in zip(idx, values):
        out[i] = v
    return tuple(out)


class _LeanHooks(_ModuleHooks):
    """L0 backward records without torch's full-backward-hook machinery (its Python
    autograd.Function and bookkeeping were most of L0's cost): the forward pre-hook clones the
    tensor inputs (as the 1.1.1-compatible path does anyway) and hooks the clones' gradients;
    the forward hook does the same for the outputs. The records are the same: `bpre` runs when
    the output gradients are there, `bpost` when the input gradients are (at once when no input
    requires grad, as torch does)."""

    def __init__(self, prefix: str) -> None:
        super().__init__(prefix)
        self.calls: list[Optional[_Call]] = []

    def lean_pre(self, module: torch.nn.Module, args: tuple) -> Any:
        self.pre(module, args)
        if not (torch.is_grad_enabled() and lib.msprobe_is_enabled()):
            self.calls.append(None)   # capture off: the module runs exactly as without hooks
            return None
        call = _Call(len(args))
        self.calls.append(call)
        idx = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        grad_idx = [i for i in idx if args[i].requires_grad]
        if not grad_idx:
            return None
        new = list(_clone(tuple(args)))
        call.in_idx, call.grad_idx = idx, grad_idx
        call.in_meta = [(args[i].shape, args[i].dtype, args[i].device) for i in idx]
        _grads_hook([new[i] for i in grad_idx], lambda grads: self._inputs_done(module, call, grads))
        return tuple(new)

    def lean_post(self, module: torch.nn.Module, args: Any, kwargs: dict, output: Any) -> Any:
        self.post(module, args, kwargs, output)
        call = self.calls.pop() if self.calls else None
        if call is None or not torch.is_grad_enabled():
            return None
        single = isinstance(output, torch.Tensor)
        if not (single or (isinstance(output, tuple) and output and all(isinstance(o, torch.Tensor) for o in output))):
            return None   # as 1.1.1: only a tensor or a tuple of tensors gets a backward record
        outs = (output,) if single else output
        call.out_idx = [i for i, o in enumerate(outs) if o.requires_grad]
        if not call.out_idx:
            return None
        call.n_out = len(outs)
        new = _clone(tuple(outs))
        _grads_hook([new[i] for i in call.out_idx], lambda grads: self._outputs_done(module, call, grads))
        return new[0] if single else new

    def _outputs_done(self, module: torch.nn.Module, call: _Call, grads: list) -> None:
        call.grad_out = _pack(call.n_out, call.out_idx, grads)
        self.bpre(module, call.grad_out)
        if call.in_idx is None:
            self.bpost(module, (None,) * call.n_in, call.grad_out)

    def _inputs_done(self, module: torch.nn.Module, call: _Call, grads: list) -> None:
        # torch's node materialises the gradients it does not get (inputs without grad, or not
        # reached) as zeros; so do we.
        got = dict(zip(call.grad_idx, grads))
        full = []
        for i, (shape, dtype, device) in zip(call.in_idx or [], call.in_meta):
            g = got.get(i)
            full.append(g if g is not None else torch.zeros(shape, dtype=dtype, device=device))
        self.bpost(module, _pack(call.n_in, call.in_idx or [], full), call.grad_out)


def hook_module(module: torch.nn.Module, prefix: str) -> list[RemovableHandle]:
    h = _ModuleHooks(prefix)
    return [
        module.register_forward_pre_hook(h.pre),
        module.register_forward_hook(h.post, with_kwargs=True),
        module.register_full_backward_pre_hook(h.bpre),
        module.register_full_backward_hook(h.bpost),
    ]


def hook_module_lean(module: torch.nn.Module, prefix: str) -> list[RemovableHandle]:
    h = _LeanHooks(prefix)
    return [module.register_forward_pre_hook(h.lean_pre), module.register_forward_hook(h.lean_post, with_kwargs=True)]


def hook_model(model: torch.nn.Module, lean: bool = False) -> list[RemovableHandle]:
    """Hooks every submodule of `model` (not the model itself). `lean` (level L0): backward
    records through `_LeanHooks`; at mix level torch's own machinery stays, because 1.1.1's mix
    dumps show the `Tensor.view_as` calls it makes."""
    patch_backward_hook()
    handles: list[RemovableHandle] = []
    for name, mod in model.named_modules():
        if mod is model or name == "":
            continue
        prefix = f"Module.{name}.{type(mod).__name__}."
        handles += hook_module_lean(mod, prefix) if lean else hook_module(mod, prefix)
    return handles
