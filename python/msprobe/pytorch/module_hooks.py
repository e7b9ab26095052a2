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


def _alias(args: tuple) -> list[int]:
    """Per position, the first position holding the same tensor object (itself otherwise)."""
    return [
        next(j for j in range(i + 1) if args[j] is a) if isinstance(a, torch.Tensor) else i for i, a in enumerate(args)
    ]


def _setup_input_hook(self: BackwardHook, args: Any) -> Any:
    # torch's BackwardHookFunction returns a distinct tensor per argument, so a module called
    # with one tensor in several arguments (`attn(x, x, x)`) would take its code path for
    # distinct arguments and compute other bits. Only the first of each repeated tensor is
    # hooked, and its hooked twin is passed in every position: the computation stays the
    # uncaptured one (the repeats' gradients in the backward record are null).
    if isinstance(args, tuple) and len(args) > 1:
        alias = _alias(args)
        if any(a != i for i, a in enumerate(alias)):
            firsts = tuple(a if alias[i] == i else None for i, a in enumerate(args))
            res = _orig_input_hook(self, firsts)
            if res is firsts:
                return args
            res = list(_clone(res))
            for i, a in enumerate(alias):
                if a != i:
                    res[i] = res[a]
            return tuple(res)
    res = _orig_input_hook(self, args)
    return res if res is args else _clone(res)


def _setup_output_hook(self: BackwardHook, args: Any) -> Any:
    # As 1.1.1: only a tensor or a tuple is hooked (a module returning a dict gets no backward
    # record; a tuple's non-tensor items get null gradients), and the hooked values are cloned so
    # in-place ops on them stay legal.
    if not isinstance(args, (torch.Tensor, tuple)):
        return args
    res = _orig_output_hook(self, args)
    return res if res is args else _clone(res)


def patch_backward_hook() -> None:
    BackwardHook.setup_input_hook = _setup_input_hook  # type: ignore[method-assign]
    BackwardHook.setup_output_hook = _setup_output_hook  # type: ignore[method-assign]


class _ModuleHooks:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.fwd_key = (prefix + "forward").encode()
        self.bwd_key = (prefix + "backward").encode()
        self.fwd: list[tuple[str, Optional[str]]] = []
        self.bwd: list[tuple[str, Optional[str]]] = []
        # (name, parent) of the module's latest forward or backward start: see `_LeanHooks.last`
        self.last: tuple[str, Optional[str]] = ("", None)

    def _start(self, key: bytes, direction: str, names: list) -> None:
        if not lib.msprobe_is_enabled():
            return  # capture off: nothing to number; post/bpost find no entry and return
        name = f"{self.prefix}{direction}.{lib.msprobe_next_index(key)}"
        if name == state.scope_start:
            # The recorder's range opens at a record named scope[0]: one begun and dropped here
            # opens it at the module's start, as 1.1.1's MixRangeScope.begin_module does.
            r = lib.msprobe_record_begin(name.encode())
            if r:
                lib.msprobe_record_abort(r)
        if state.module_spans:
            lib.msprobe_module_span(name.encode(), 1)
        self.last = (name, state.enter_module(name))
        names.append(self.last)

    def pre(self, module: torch.nn.Module, args: Any) -> None:
        self._start(self.fwd_key, "forward", self.fwd)

    def post(self, module: torch.nn.Module, args: Any, kwargs: dict, output: Any) -> None:
        if not self.fwd:
            return
        self.fwd.pop()
        name, parent = self.last
        local = state.local
        prev = local.busy
        local.busy = True
        try:
            if lib.msprobe_is_enabled():
                recorder.record(name, args, kwargs, output, sys._getframe(1), "_call_impl")
                state.note_construct(name, parent)
        finally:
            local.busy = prev
            state.pop_module(name)
            if state.module_spans:
                lib.msprobe_module_span(name.encode(), 0)

    def bpre(self, module: torch.nn.Module, grad_output: Any) -> None:
        self._start(self.bwd_key, "backward", self.bwd)

    def bpost(self, module: torch.nn.Module, grad_input: Any, grad_output: Any) -> None:
        if not self.bwd:
            return
        self.bwd.pop()
        name, parent = self.last
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
            if state.module_spans:
                lib.msprobe_module_span(name.encode(), 0)


def _on_grad(t: torch.Tensor, hook: Callable) -> None:
    """`t.register_hook(hook)` for a tensor that has no hook yet (our fresh clones), without
    the RemovableHandle that register_hook builds in Python (most of its cost; ours are never
    removed). Same calls, same effect: the hook dict, then its link to the grad_fn."""
    try:
        t._backward_hooks = d = {}
        t.grad_fn._register_hook_dict(t)
        d[0] = hook
    except (AttributeError, TypeError):  # a torch without these internals
        t._backward_hooks = None
        t.register_hook(hook)


def _grads_hook(tensors: list[torch.Tensor], done: Callable[[list], None]) -> None:
    """Calls `done(grads)` once the gradients w.r.t. `tensors` (fresh clones) that this backward
    computes are there (None for the others), like the single node of torch's
    BackwardHookFunction."""
    if len(tensors) == 1:
        _on_grad(tensors[0], lambda g: done([g]))
    else:
        torch.autograd.graph.register_multi_grad_hook(tensors, done, mode="all")


class _Call:
    """One forward call of a module at L0: its record name and parent, where its tensor inputs
    and outputs sit, and the output gradients received so far."""

    __slots__ = ("name", "parent", "n_in", "in_idx", "in_meta", "grad_idx", "alias", "n_out", "out_idx", "grad_out")

    def __init__(self, name: str, parent: Optional[str], n_in: int) -> None:
        self.name = name
        self.parent = parent
        self.n_in = n_in
        self.in_idx: Optional[list[int]] = None  # tensor input positions (None: no input requires grad)
        self.in_meta: list[tuple] = []  # (shape, dtype, device) per tensor input
        self.grad_idx: list[int] = []  # the tensor inputs that require grad (first of each distinct tensor)
        self.alias: list[int] = []  # per position, the first position holding the same tensor object
        self.n_out = 0
        self.out_idx: list[int] = []
        self.grad_out: tuple = ()


def _pack(n: int, idx: list[int], values: list) -> tuple:
    out: list = [None] * n
    for i, v in zip(idx, values):
        out[i] = v
    return tuple(out)


class _LeanHooks:
    """L0 records without torch's full-backward-hook machinery (its Python autograd.Function
    and bookkeeping were most of L0's cost), and with as little Python per call as possible:
    the forward pre-hook clones the tensor inputs that require grad (as the 1.1.1-compatible
    path does anyway) and hooks the clones' gradients; the forward hook records and does the
    same for the outputs. The records are those of `_ModuleHooks`: the backward record starts
    when the output gradients are there and ends when the input gradients are (at once when no
    input requires grad, as torch does). Level L0 wraps no API, so `state.local.busy` is not
    needed here. With msprobe._fastpath built, L0 runs its native twin instead
    (python/native/src/hooks.rs: same calls, same records, its module stack kept natively
    instead of in `state`); the two are kept in step, and the scenario test l0_lean compares
    both with torch's full backward hooks."""

    def __init__(self, prefix: str) -> None:
        self.fwd_key = (prefix + "forward.").encode()
        self.bwd_key = (prefix + "backward.").encode()
        self.fwd_name = prefix + "forward."
        self.bwd_name = prefix + "backward."
        self.calls: list[Optional[_Call]] = []
        self.bwd: list[tuple[str, Optional[str]]] = []
        # (name, parent) of this module's latest forward or backward start. A record is named
        # after it, as 1.1.1 names a module's records after `module.mindstudio_reserved_name`:
        # the same as the call's own name unless the module started again before this record
        # (checkpoint's recomputation inside the module's backward: 1.1.1's backward record is
        # then named after the recomputed forward, e.g. `Tanh.forward.1`).
        self.last: tuple[str, Optional[str]] = ("", None)

    def pre(self, module: torch.nn.Module, args: tuple) -> Any:
        n = recorder.index(self.fwd_key)
        if n is None:
            self.calls.append(None)  # capture off: the module runs exactly as without hooks
            return None
        name = self.fwd_name + str(n)
        call = _Call(name, state.enter_module(name), len(args))
        self.last = (name, call.parent)
        self.calls.append(call)
        if not torch.is_grad_enabled():
            return None
        if len(args) == 1:  # the common case, without the bookkeeping below
            a = args[0]
            if not (isinstance(a, torch.Tensor) and a.requires_grad):
                return None
            call.in_idx = call.grad_idx = [0]
            new = a.clone()
            _on_grad(new, lambda g: self._backward_record(call, (g,)))
            return (new,)
        # one clone per distinct tensor object: `attn(x, x, x)` still sees `q is k is v`
        alias = [next(j for j in range(i + 1) if args[j] is a) for i, a in enumerate(args)]
        grad_idx = [i for i, a in enumerate(args) if alias[i] == i and isinstance(a, torch.Tensor) and a.requires_grad]
        if not grad_idx:
            return None
        idx = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        call.in_idx, call.grad_idx, call.alias = idx, grad_idx, alias
        call.in_meta = [(args[i].shape, args[i].dtype, args[i].device) for i in idx]
        new: list = []
        for i, a in enumerate(args):
            new.append(new[alias[i]] if alias[i] != i else a.clone() if isinstance(a, torch.Tensor) else a)
        _grads_hook([new[i] for i in grad_idx], lambda grads: self._inputs_done(call, grads))
        return tuple(new)

    def post(self, module: torch.nn.Module, args: Any, kwargs: dict, output: Any) -> Any:
        call = self.calls.pop() if self.calls else None
        if call is None:
            return None
        name, parent = self.last
        try:
            # construct entries for filtered-out records too, as 1.1.1
            recorder.record(
                name,
                args,
                kwargs,
                output,
                sys._getframe(1),
                "_call_impl",
                parent,
                state.pending if state.construct else None,
            )
        finally:
            state.pop_module(name)
        if not torch.is_grad_enabled():
            return None
        if isinstance(output, torch.Tensor):
            if not output.requires_grad:
                return None
            call.n_out, call.out_idx = 1, [0]
            new = output.clone()
            _on_grad(new, lambda g: self._outputs_done(call, [g]))
            return new
        # As 1.1.1: a tensor or a tuple gets a backward record; a tuple's top-level tensors are
        # hooked, its other items (None, a nested tuple) get null gradients.
        if not (isinstance(output, tuple) and output):
            return None
        call.out_idx = [i for i, o in enumerate(output) if isinstance(o, torch.Tensor) and o.requires_grad]
        if not call.out_idx:
            return None
        clones = [o.clone() if isinstance(o, torch.Tensor) else o for o in output]
        if type(output) is tuple:
            new = tuple(clones)
        else:  # a namedtuple keeps its type, as torch's BackwardHook does
            try:
                new = type(output)(*clones)
            except Exception:
                return None  # a tuple type that cannot be rebuilt: the output stays, no backward record
        call.n_out = len(output)
        _grads_hook([clones[i] for i in call.out_idx], lambda grads: self._outputs_done(call, grads))
        return new

    def _outputs_done(self, call: _Call, grads: list) -> None:
        call.grad_out = _pack(call.n_out, call.out_idx, grads) if call.n_out > 1 else tuple(grads)
        n = recorder.index(self.bwd_key)
        if n is not None:
            name = self.bwd_name + str(n)
            self.last = (name, state.enter_module(name))
            self.bwd.append(self.last)
        if call.in_idx is None:
            self._backward_record(call, (None,) * call.n_in)

    def _inputs_done(self, call: _Call, grads: list) -> None:
        # torch's node materialises the gradients it does not get (inputs without grad, or not
        # reached) as zeros; so do we.
        got = dict(zip(call.grad_idx, grads))
        full = []
        for i, (shape, dtype, device) in zip(call.in_idx or [], call.in_meta):
            g = got.get(call.alias[i] if call.alias else i)  # a repeated tensor shares its first gradient
            full.append(g if g is not None else torch.zeros(shape, dtype=dtype, device=device))
        self._backward_record(call, _pack(call.n_in, call.in_idx or [], full))

    def _backward_record(self, call: _Call, grad_in: tuple) -> None:
        if not self.bwd:
            return
        self.bwd.pop()
        name, parent = self.last
        try:
            recorder.backward(name, call.grad_out, grad_in, parent, state.pending if state.construct else None)
        finally:
            state.pop_module(name)


def hook_module(module: torch.nn.Module, prefix: str) -> list[RemovableHandle]:
    h = _ModuleHooks(prefix)
    return [
        module.register_forward_pre_hook(h.pre),
        module.register_forward_hook(h.post, with_kwargs=True),
        module.register_full_backward_pre_hook(h.bpre),
        module.register_full_backward_hook(h.bpost),
    ]


def _lean_hooks(prefix: str) -> Any:
    """The native twin of `_LeanHooks` (msprobe._fastpath) when it is there, else `_LeanHooks`."""
    from msprobe._native import load_fastpath

    mod = load_fastpath() if type(recorder).__module__ == "msprobe._fastpath" else None
    make = getattr(mod, "LeanHooks", None)
    if make is not None:
        try:
            return make(
                recorder,
                prefix,
                state,
                torch.is_grad_enabled,
                torch.Tensor,
                torch.autograd.graph.register_multi_grad_hook,
                torch.zeros,
            )
        except Exception as e:  # e.g. an older build of the module: the Python hooks do the same
            from msprobe.core.errors import logger

            logger.warning(f"native L0 hooks unavailable ({e}); using the Python ones")
    return _LeanHooks(prefix)


def hook_module_lean(module: torch.nn.Module, prefix: str) -> list[RemovableHandle]:
    h = _lean_hooks(prefix)
    return [module.register_forward_pre_hook(h.pre), module.register_forward_hook(h.post, with_kwargs=True)]


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
