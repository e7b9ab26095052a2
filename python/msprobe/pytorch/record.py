"""Building records from torch calls (forward: input_args, input_kwargs, output; backward:
input = gradients flowing in, output = gradients produced)."""
from __future__ import annotations

from types import FrameType
from typing import Any, Iterable, Optional

from msprobe.core import stack
from msprobe.core.native import lib

from .tensors import encoder, fast


def add_inputs(r: int, args: Iterable[Any], kwargs: Optional[dict]) -> bool:
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


def add_output(r: int, output: Any) -> bool:
    if not lib.msprobe_record_section(r, b"output"):
        return False
    for item in (output if isinstance(output, tuple) else (output,)):
        encoder.add(r, None, item)
    return True


def finish(r: int, kept: bool) -> None:
    """Ends the record, or drops it when data_mode removed every section."""
    if kept:
        lib.msprobe_record_end(r)
    else:
        lib.msprobe_record_abort(r)


def set_stack(r: int, frame: Optional[FrameType]) -> None:
    stack.set_stack(r, stack.frames(frame))


def record_forward(name: str, args: tuple, kwargs: Optional[dict], output: Any, frame: Optional[FrameType]) -> None:
    """A whole forward record (module hooks): inputs, output, stack."""
    if fast is not None:
        fast.record(name, args, kwargs, output, frame)
        return
    r = lib.msprobe_record_begin(name.encode())
    if r:
        kept = add_inputs(r, args, kwargs)
        kept = add_output(r, output) or kept
        set_stack(r, frame)
        finish(r, kept)


def record_backward(name: str, grads_in: Iterable[Any], grads_out: Iterable[Any]) -> None:
    """`grads_in` = gradients w.r.t. the forward outputs, `grads_out` = w.r.t. its inputs."""
    if fast is not None:
        fast.backward(name, grads_in, grads_out)
        return
    r = lib.msprobe_record_begin(name.encode())
    if not r:
        return
    kept = False
    if lib.msprobe_record_section(r, b"input"):
        kept = True
        for g in grads_in:
            encoder.add(r, None, g)
    if lib.msprobe_record_section(r, b"output"):
        kept = True
        for g in grads_out:
            encoder.add(r, None, g)
    finish(r, kept)
