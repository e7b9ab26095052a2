"""The capture paths: Cell hooks (L0), API wrappers and Primitive hooks (L1), jit functions, and the
backward bookkeeping of API/Primitive calls.

Backward of an API or Primitive call (msprobe's method): each tensor input and output of the call
is passed through ``ops.HookBackward``. In PyNative backward the output hooks of a call fire first
(gradients w.r.t. its outputs), then the call's own backward, then its input hooks (gradients w.r.t.
the inputs that are differentiated). A Primitive's lists keep the order in which the gradients
arrived, as msprobe's do (for BiasAdd: the bias gradient, then the input gradient); an API call's
are in argument and output position order, as the backward hook of msprobe's wrapper Cell
(`HOOKCell`) gives them (MindSpore delivers them last first). The call's backward record
is written when all its input gradients arrived, or as soon as anything else happens in backward
(another call's hook, a Cell hook, stop/step) — inputs that are not differentiated never get a
gradient.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Optional

from mindspore import Tensor, ops
from msprobe.core import config

from . import _record as R
from ._record import TENSOR_TYPES, State, logger

try:
    from mindspore.common.api import _pynative_executor
except Exception:  # pragma: no cover
    _pynative_executor = None


def _requires_grad() -> bool:
    try:
        return bool(_pynative_executor.requires_grad())
    except Exception:
        return True


_errors_logged: set = set()


def _log_once(where: str, e: BaseException) -> None:
    k = (where, type(e))
    if k not in _errors_logged:
        _errors_logged.add(k)
        logger.warning(f"msprobe: {where} failed and was skipped: {type(e).__name__}: {e}")


# ------------------------------------------------------------------------------- backward bookkeeping
class _Op:
    __slots__ = ("name", "outs", "ins", "n_in", "n_list", "n_const", "parent", "api", "none_at", "int_outs")

    def __init__(self, name: str, api: bool = False) -> None:
        self.name = name
        # an API call (msprobe's HOOKCell): gradients in position order, `none_at` the positions
        # of arguments that never get one (integer tensors, tensor lists); a Primitive: arrival order
        self.api = api
        self.none_at: list = []
        # an API call's integer/bool outputs (max's indices): None when no gradient reached them
        self.int_outs: list = []
        # construct.json parent: the Cell whose backward was open when the call's first gradient
        # arrived (a deferred record is written later, when another Cell's backward may be open)
        self.parent: Any = R._NOW
        self.outs: dict = {}
        self.ins: dict = {}
        self.n_in = 0
        self.n_list = 0  # list/tuple-of-tensor arguments: no gradient reaches them (None entries)
        self.n_const = 0  # API tensor arguments of an integer/bool dtype: never differentiated (None)


try:
    from mindspore.common import dtype as _mstype

    _DIFF_DTYPES = frozenset(tuple(_mstype.float_type) + tuple(getattr(_mstype, "complex_type", ())))
except Exception:  # pragma: no cover
    _DIFF_DTYPES = frozenset()

_pending: Optional[_Op] = None
# Calls whose tensor inputs all come in lists (cat, stack): msprobe 1.1.1's wrapper Cell gets its
# backward hook only when the whole backward pass is over, so their records follow every other
# backward record of the pass (in the order their output gradients arrived).
_deferred: list = []


def _write(op: _Op) -> None:
    State.depth += 1
    try:
        if op.api:
            grads_in = [g for _, g in sorted([*op.ins.items(), *((i, None) for i in op.none_at)], key=lambda e: e[0])]
            outs = {**{i: None for i in op.int_outs}, **op.outs}
            grads_out = [g for _, g in sorted(outs.items(), key=lambda e: e[0])]
        else:
            grads_in = list(op.ins.values()) + [None] * (op.n_const + op.n_list)
            grads_out = list(op.outs.values())
        R.backward_record(op.name, grads_out, grads_in, op.parent)
    except Exception as e:
        _log_once("backward record " + op.name, e)
    finally:
        State.depth -= 1


def flush_pending() -> None:
    global _pending
    op = _pending
    if op is None:
        return
    _pending = None
    if not op.n_in and op.n_list:
        _deferred.append(op)
    else:
        _write(op)


def end_backward() -> None:
    """The backward pass is over (the next forward call, stop/step): the last call's record and the
    deferred ones are written. Without this the pass's last record waited for the next pass."""
    flush_pending()
    while _deferred:
        _write(_deferred.pop(0))


def _first(grad: Any) -> Any:
    return grad[0] if isinstance(grad, tuple) and grad else grad


def _make_hook(op: _Op, idx: int, is_input: bool):
    def hook(grad):
        global _pending
        if _pending is not op:
            flush_pending()
            _pending = op
            if op.parent is R._NOW:
                op.parent = R.api_parent(True)
        if is_input:
            op.ins[idx] = _first(grad)
            if len(op.ins) >= op.n_in:
                flush_pending()
        else:
            op.outs[idx] = _first(grad)
        return None

    return hook


def _hook_inputs(args: tuple, op: _Op, api: bool = True) -> tuple:
    """Hooks every tensor argument. An argument that is a list/tuple of tensors (``cat``, ``stack``)
    is not hooked: as in msprobe 1.1.1 (whose API wrapper is a Cell, and a Cell's backward hook has
    no gradient for a list argument) its entry in the backward record's output is None; the record
    itself is still written from the output gradients."""
    out = []
    n = 0
    for pos, a in enumerate(args):
        if api and isinstance(a, TENSOR_TYPES) and a.dtype not in _DIFF_DTYPES:
            # msprobe 1.1.1's wrapper Cell lists None for an integer input (a class index); a
            # Primitive's record (HookBackward there too) has no entry for it
            op.n_const += 1
            op.none_at.append(pos)
            out.append(a)
        elif isinstance(a, TENSOR_TYPES):
            out.append(ops.HookBackward(_make_hook(op, pos if api else n, True))(a))
            n += 1
        else:
            if isinstance(a, (list, tuple)) and any(isinstance(t, TENSOR_TYPES) for t in a):
                op.n_list += 1
                op.none_at.append(pos)
            out.append(a)
    op.n_in = n
    return tuple(out)


def _hook_outputs(out: Any, op: _Op) -> Any:
    if isinstance(out, TENSOR_TYPES):
        return ops.HookBackward(_make_hook(op, 0, False))(out)
    if isinstance(out, tuple) and any(isinstance(t, TENSOR_TYPES) for t in out):
        res = []
        for i, t in enumerate(out):
            if op.api and isinstance(t, TENSOR_TYPES) and t.dtype not in _DIFF_DTYPES:
                op.int_outs.append(i)
            res.append(ops.HookBackward(_make_hook(op, i, False))(t) if isinstance(t, TENSOR_TYPES) else t)
        return type(out)(res) if type(out) is tuple else type(out)(*res)
    return out


def _call_recorded(key: str, orig, args: tuple, kwargs: dict, inplace: bool, frame: Any = None, api: bool = True):
    """Runs one wrapped call with capture on (State.depth already raised by the caller); stack.json
    from `frame` outwards (default: the caller's, without this package's frames)."""
    if _pending is not None or _deferred:
        end_backward()
    n = R.next_index(key)
    base = f"{key}.{n}"
    op = None
    if not inplace and State.backward and _requires_grad():
        try:
            op = _Op(base + ".backward", api)
            args = _hook_inputs(args, op, api)
        except Exception as e:
            _log_once("input hook of " + base, e)
            op = None
    out = orig(*args, **kwargs)
    try:
        R.forward_record(base + ".forward", args, kwargs, out, frame=frame or sys._getframe(1))
    except Exception as e:
        _log_once("forward record " + base, e)
    if op is not None and (op.n_in or op.n_list or op.n_const):
        try:
            out = _hook_outputs(out, op)
        except Exception as e:
            _log_once("output hook of " + base, e)
    return out


# ------------------------------------------------------------------------------------------- APIs
def _is_inplace(name: str) -> bool:
    if name.startswith("__"):
        return name.startswith("__i") and name not in ("__invert__", "__index__", "__int__", "__init__", "__iter__")
    return name.endswith("_")


def make_api_wrapper(prefix: str, name: str, orig):
    key = f"{prefix}.{name}"
    inplace = _is_inplace(name)

    def wrapper(*args, **kwargs):
        if not State.enabled or State.depth:
            if not State.depth:
                R.next_index(key)  # outside the window too, as 1.1.1 (its HOOKCell counts every call)
            return orig(*args, **kwargs)
        State.depth += 1
        try:
            return _call_recorded(key, orig, args, kwargs, inplace)
        finally:
            State.depth -= 1

    wrapper.__name__ = getattr(orig, "__name__", name)
    wrapper.__doc__ = getattr(orig, "__doc__", None)
    wrapper.__wrapped__ = orig
    wrapper._msprobe_api = True  # type: ignore[attr-defined]
    return wrapper


_GROUPS = [  # (yaml key, prefix, target getter)
    ("ops", "Functional", lambda: __import__("mindspore").ops),
    ("tensor", "Tensor", lambda: Tensor),
    ("mint.ops", "Mint", lambda: __import__("mindspore").mint),
    ("mint.nn.functional", "MintFunctional", lambda: __import__("mindspore.mint.nn.functional", fromlist=["x"])),
    ("communication.comm_func", "Distributed", lambda: __import__("mindspore.communication.comm_func", fromlist=["x"])),
]


class ApiRegistry:
    def __init__(self) -> None:
        self.ori: list = []  # (target, attr, original)
        self.hooked: list = []  # (target, attr, wrapper)
        self.installed = False

    def _build(self) -> None:
        env = os.environ.get("MSPROBE_MS_WRAP_OPS")
        if env:
            lists = config.read_support_list(env, "MSPROBE_MS_WRAP_OPS")
        else:
            lists = config.read_support_list(os.path.join(os.path.dirname(__file__), "support_wrap_ops.yaml"))
        for key, prefix, get in _GROUPS:
            try:
                target = get()
            except Exception:
                continue
            for name in lists.get(key) or []:
                orig = target.__dict__.get(name) if isinstance(target, type) else None
                if orig is None:
                    orig = getattr(target, name, None)
                # Ours already (another registry): skipped. MindSpore's own decorated functions (a
                # deprecation wrapper, with `__wrapped__`: 33 of ops, 10 of comm_func) are wrapped,
                # as 1.1.1 wraps every listed API; a staticmethod (Tensor.from_numpy) stays one.
                func = orig.__func__ if isinstance(orig, staticmethod) else orig
                if func is None or not callable(func) or getattr(func, "_msprobe_api", False):
                    continue
                w = make_api_wrapper(prefix, name, func)
                self.ori.append((target, name, orig))
                self.hooked.append((target, name, staticmethod(w) if isinstance(orig, staticmethod) else w))

    def install(self) -> None:
        if self.installed:
            return
        if not self.hooked:
            self._build()
        for target, name, w in self.hooked:
            try:
                setattr(target, name, w)
            except Exception:
                pass
        self.installed = True

    def uninstall(self) -> None:
        if not self.installed:
            return
        for target, name, o in self.ori:
            try:
                setattr(target, name, o)
            except Exception:
                pass
        self.installed = False


api_registry = ApiRegistry()


# ------------------------------------------------------------------------------------- Primitives
_prim_swapped: list = []  # (primitive, original class)


def hook_primitives(model) -> None:
    seen = {id(p) for p, _ in _prim_swapped}
    for _, cell in model.cells_and_names():
        prims = getattr(cell, "_primitives", None) or {}
        for attr, prim in list(prims.items()):
            if prim is None or attr.startswith("_") or id(prim) in seen:
                continue
            cls = type(prim)
            if cls.__name__ == "CellBackwardHook" or getattr(cls, "_msprobe_orig", None) is not None:
                continue
            seen.add(id(prim))
            orig_call = cls.__call__
            key = f"Primitive.{attr}.{cls.__name__}"

            def __call__(self, *args, _key=key, _orig=orig_call, **kwargs):
                if not State.enabled or State.depth:
                    if not State.depth:
                        R.next_index(_key)  # 1.1.1 counts before its switch check
                    return _orig(self, *args, **kwargs)
                State.depth += 1
                try:
                    # msprobe 1.1.1 cuts a Primitive's stack at a fixed depth of its own wrapper
                    # (inspect.stack()[5:]), which leaves out the caller's frame and the Cell
                    # __call__ above it: stack.json starts two frames further out, as there.
                    f = sys._getframe(1)
                    for _ in range(2):
                        f = f.f_back if f is not None and f.f_back is not None else f
                    return _call_recorded(_key, lambda *a, **k: _orig(self, *a, **k), args, kwargs, False, f, False)
                finally:
                    State.depth -= 1

            try:
                new_cls = type(
                    cls.__name__, (cls,), {"__call__": __call__, "_msprobe_orig": cls, "__module__": cls.__module__}
                )
                prim.__class__ = new_cls
                _prim_swapped.append((prim, cls))
            except Exception as e:
                _log_once("hooking primitive " + key, e)


def unhook_primitives() -> None:
    for prim, cls in _prim_swapped:
        try:
            prim.__class__ = cls
        except Exception:
            pass
    _prim_swapped.clear()


# ------------------------------------------------------------------------------------------ Cells
_cell_handles: list = []
_hooked_cells: set = set()


def hook_cells(model) -> None:
    for name, cell in model.cells_and_names():
        if cell is model or not name or id(cell) in _hooked_cells:
            continue
        _hooked_cells.add(id(cell))
        prefix = f"Cell.{name}.{cell.__class__.__name__}"
        _cell_handles.extend(_register_cell(cell, prefix))


def _register_cell(cell, prefix: str) -> list:
    fkey, bkey = prefix + ".forward", prefix + ".backward"
    cid = id(cell)

    def pre(c, args):
        if not State.enabled:
            # Outside the window 1.1.1's begin_hook still counts the Cell and notes its
            # construct.json parent (written with the next record of the step); it is on the
            # stack, unrecorded, until its forward hook.
            name = f"{fkey}.{R.next_index(fkey)}"
            if State.construct:
                State.begun.append((name, State.fwd_stack[-1] if State.fwd_stack else None))
            State.fwd_stack.append(name)
            State.fwd_owner.append(("off", cid))
            return None
        n = R.next_index(fkey)
        R.begin_cell(f"{fkey}.{n}", False)
        State.cell_begun = True
        R.scope_module(f"{fkey}.{n}", True)
        State.fwd_stack.append(f"{fkey}.{n}")
        State.fwd_owner.append(cid)
        return None

    def fwd(c, args, output):
        off = ("off", cid)
        if off in State.fwd_owner:  # begun outside the window (with any Cells above it left open)
            i = len(State.fwd_owner) - 1 - State.fwd_owner[::-1].index(off)
            del State.fwd_owner[i:], State.fwd_stack[i:]
            return None
        if cid not in State.fwd_owner:
            return None
        # Cells above this one on the stack never got their forward hook (MindSpore runs none for
        # a Cell with a custom bprop): they are closed with this one, whose record is written.
        i = len(State.fwd_owner) - 1 - State.fwd_owner[::-1].index(cid)
        name = State.fwd_stack[i]
        del State.fwd_owner[i:], State.fwd_stack[i:]
        State.depth += 1
        try:
            # stack.json from the frame that called MindSpore's hook runner (Cell._run_forward_hook),
            # whose own frame msprobe 1.1.1 does not show either
            R.forward_record(name, args, {}, output, frame=sys._getframe(2))
        except Exception as e:
            _log_once("forward record " + name, e)
        finally:
            State.depth -= 1
            R.scope_module(name, False)
        return None

    def bpre(c, grad_output):
        if not State.enabled or not State.backward:
            return None
        flush_pending()
        n = R.next_index(bkey)
        R.begin_cell(f"{bkey}.{n}", True)
        State.cell_begun = True
        R.scope_module(f"{bkey}.{n}", True)
        State.bwd_stack.append(f"{bkey}.{n}")
        State.bwd_owner.append(cid)
        return None

    def bwd(c, grad_input, grad_output):
        flush_pending()
        if cid not in State.bwd_owner:
            return None
        i = len(State.bwd_owner) - 1 - State.bwd_owner[::-1].index(cid)
        name = State.bwd_stack[i]
        saved = State.bwd_stack
        top = i == len(State.bwd_owner) - 1
        if top:
            end_backward()  # 1.1.1: a Cell's backward record follows the list-input calls inside it
            State.bwd_owner.pop()
            State.bwd_stack.pop()
        else:
            # A Cell whose inputs need no gradient (the first Cell applied to the data) gets its
            # backward hook before the Cells inside it have finished theirs: written now, as
            # msprobe 1.1.1 does (grad_input entries None), its parent being the Cell below it; it
            # stays on the stack, marked done, as the parent of the inner Cells' records.
            State.bwd_owner[i] = None
            State.bwd_stack = saved[:i]
        State.depth += 1
        try:
            R.backward_record(name, R.as_list(grad_output), R.as_list(grad_input))
        except Exception as e:
            _log_once("backward record " + name, e)
        finally:
            State.depth -= 1
            State.bwd_stack = saved
            R.scope_module(name, False)
            if top:  # after the record: a Cell written out of order is still this one's parent
                _pop_done()
        return None

    return [
        cell.register_forward_pre_hook(pre),
        cell.register_forward_hook(fwd),
        cell.register_backward_pre_hook(bpre),
        cell.register_backward_hook(bwd),
    ]


def _pop_done() -> None:
    """Drops the entries of Cells whose backward record was written out of order (see bwd)."""
    while State.bwd_owner and State.bwd_owner[-1] is None:
        State.bwd_owner.pop()
        State.bwd_stack.pop()


def unhook_cells() -> None:
    for h in _cell_handles:
        try:
            h.remove()
        except Exception:
            pass
    _cell_handles.clear()
    _hooked_cells.clear()


# -------------------------------------------------------------------------------------------- jit
_jit_orig = None


def hook_jit() -> None:
    """``Jit.{name}.{n}.forward`` for functions compiled with ``mindspore.jit`` and called in PyNative
    (msprobe's JitDump; n counts from 1 as there). Calls inside the compiled function are not recorded,
    and neither are Cell methods that MindSpore compiles (``self.obj`` set, e.g. an optimizer)."""
    global _jit_orig
    if _jit_orig is not None:
        return
    try:
        from mindspore.graph.api import _JitExecutor
    except Exception:
        try:
            from mindspore.common.api import _JitExecutor  # type: ignore
        except Exception:
            return
    _jit_orig = (_JitExecutor, _JitExecutor.__call__)
    orig = _JitExecutor.__call__

    def __call__(self, *args, **kwargs):
        if not State.enabled or State.depth:
            return orig(self, *args, **kwargs)
        State.depth += 1
        try:
            out = orig(self, *args, **kwargs)
            fn = getattr(self, "fn", None)
            name = getattr(fn, "__name__", None) or "JitFunction"
            if "<" in name:
                name = name[: name.index("<")] or "JitFunction"
            # Cell methods compiled by MindSpore itself (e.g. the optimizer's construct) are not
            # user jit functions: msprobe's samples have no record for them.
            if args and getattr(self, "obj", None) is None:
                rec_args = args
                jname = f"Jit.{name}.{R.next_index('Jit.' + name) + 1}.forward"
                try:
                    R.forward_record(jname, rec_args, {}, out)
                except Exception as e:
                    _log_once("forward record " + jname, e)
            return out
        finally:
            State.depth -= 1

    _JitExecutor.__call__ = __call__


def unhook_jit() -> None:
    global _jit_orig
    if _jit_orig is not None:
        cls, orig = _jit_orig
        cls.__call__ = orig
        _jit_orig = None
