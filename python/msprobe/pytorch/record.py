"""Building records from torch calls (forward: input_args, input_kwargs, output; backward:
input = gradients flowing in, output = gradients produced).

`recorder` is the native encoder (msprobe._fastpath) when it is built, else `PyRecorder`, its
pure-Python twin with the same methods and the same output; the hooks only talk to `recorder`.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import FrameType
from typing import Any, Optional

from msprobe.core import stack
from msprobe.core.native import lib

from .tensors import encoder, fast


def _add_inputs(r: int, args: Iterable[Any], kwargs: Optional[dict]) -> bool:
    kept = False
    if lib.msprobe_record_section(r, b"input_args"):
        kept = True
        for a in args:
            encoder.add(r, None, a)
    if lib.msprobe_record_section(r, b"input_kwargs"):
        kept = True
        if kwargs:
            for k, v in kwargs.items():
                encoder.add(r, k, v)
    return kept


def _add_output(r: int, output: Any) -> bool:
    fields = getattr(output, "_fields", None) if isinstance(output, tuple) else None
    if isinstance(fields, tuple):  # a namedtuple: a dict keyed by field, as msprobe writes it
        if not lib.msprobe_record_section(r, b"output_fields"):
            return False
        for f in fields:
            encoder.add(r, str(f), getattr(output, f))
        return True
    if not lib.msprobe_record_section(r, b"output"):
        return False
    for item in output if isinstance(output, tuple) else (output,):
        encoder.add(r, None, item)
    return True


def _finish(r: int, kept: bool) -> None:
    """Ends the record, also one whose every section data_mode removed (`kept` false): as msprobe
    1.1.1, the writer gives it no dump.json entry but keeps its stack.json and construct.json ones."""
    lib.msprobe_record_end(r)


class PyRecorder:
    """The pure-Python path (msprobe._fastpath not built, or MSPROBE_FASTPATH=0); see the
    native Encoder for what each method does."""

    def api_begin(self, key: bytes, args: tuple, kwargs: Optional[dict], frame: FrameType) -> Optional[tuple]:
        n = lib.msprobe_next_index(key)
        if not lib.msprobe_is_enabled():
            return None
        r = lib.msprobe_record_begin(key + f"{n}.forward".encode())
        if not r:
            return 0, n, False
        kept = _add_inputs(r, args, kwargs)
        stack.set_stack(r, stack.frames(frame))
        return r, n, kept

    def index(self, key: bytes) -> Optional[int]:
        return lib.msprobe_next_index(key) if lib.msprobe_is_enabled() else None

    def construct(self, name: str, parent: Optional[str], pending: list) -> None:
        if not lib.msprobe_is_enabled():
            return
        lib.msprobe_construct_set(name.encode(), None if parent is None else parent.encode())
        for m, p in pending:
            lib.msprobe_construct_set(m.encode(), None if p is None else p.encode())
        pending.clear()

    def api_end(self, r: int, kept: bool, output: Any) -> None:
        if r:
            kept = _add_output(r, output) or kept
            _finish(r, kept)

    def abort(self, r: int) -> None:
        if r:
            lib.msprobe_record_abort(r)

    def record(
        self,
        name: str,
        args: tuple,
        kwargs: Optional[dict],
        output: Any,
        frame: Optional[FrameType],
        caller_of: Optional[str] = None,
        parent: Optional[str] = None,
        pending: Optional[list] = None,
    ) -> bool:
        r = lib.msprobe_record_begin(name.encode())
        if r:
            kept = _add_inputs(r, args, kwargs)
            kept = _add_output(r, output) or kept
            stack.set_stack(r, stack.frames(_caller_of(frame, caller_of) if caller_of else frame))
            _finish(r, kept)
        if pending is not None:
            self.construct(name, parent, pending)
        return bool(r)

    def backward(
        self,
        name: str,
        grads_in: Iterable[Any],
        grads_out: Iterable[Any],
        parent: Optional[str] = None,
        pending: Optional[list] = None,
    ) -> bool:
        r = lib.msprobe_record_begin(name.encode())
        if r:
            kept = False
            for section, grads in ((b"input", grads_in), (b"output", grads_out)):
                if lib.msprobe_record_section(r, section):
                    kept = True
                    for g in grads:
                        encoder.add(r, None, g)
            _finish(r, kept)
        if pending is not None:
            self.construct(name, parent, pending)
        return bool(r)


def _caller_of(frame: Optional[FrameType], func: str) -> Optional[FrameType]:
    """The caller of the innermost frame of function `func` at or above `frame`, else `frame`."""
    f = frame
    while f is not None:
        if f.f_code.co_name == func:
            return f.f_back
        f = f.f_back
    return frame


recorder: Any = fast if fast is not None else PyRecorder()
