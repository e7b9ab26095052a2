"""ctypes binding of libmsprobe.so's C ABI (include/msprobe.h).

The library is found, in order: already loaded in the process (LD_PRELOAD), ``$MSPROBE_LIB``,
next to this package (``msprobe/lib/libmsprobe.so``), or the repository's cargo build output.
Either way there is one recorder per process.

The hot path of the framework layers, ``msprobe._fastpath`` (a Rust extension module built from
``python/native``), is found the same way: ``$MSPROBE_FASTPATH`` (a path, or ``0`` to run the
pure-Python path), ``msprobe/lib/_fastpath.abi3.so``, or the cargo build output. It talks to the
library loaded here, through its C ABI.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import linecache
import os
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Optional

_HERE = Path(__file__).resolve().parent
_REPO = _HERE.parent.parent


class MsprobeTensor(ctypes.Structure):
    _fields_ = [
        ("dtype", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("offset", ctypes.c_int64),
        ("data", ctypes.c_void_p),
        ("storage_bytes", ctypes.c_uint64),
        ("requires_grad", ctypes.c_int32),
        ("type_name", ctypes.c_char_p),
    ]


def _candidates() -> list[str]:
    out = []
    if os.environ.get("MSPROBE_LIB"):
        out.append(os.environ["MSPROBE_LIB"])
    out.append(str(_HERE / "lib" / "libmsprobe.so"))
    target = Path(os.environ.get("CARGO_TARGET_DIR", _REPO / "target"))
    out += [str(target / "release" / "libmsprobe.so"), str(target / "debug" / "libmsprobe.so")]
    return out


def _load() -> tuple[ctypes.CDLL, bool]:
    """The library and whether it was preloaded (LD_PRELOAD: only then can it interpose CANN)."""
    preloaded = ctypes.CDLL(None)
    if hasattr(preloaded, "msprobe_init"):
        return preloaded, True
    for c in _candidates():
        if os.path.exists(c):
            return ctypes.CDLL(c), False
    raise OSError("libmsprobe.so not found; build it with `cargo build --release` or set MSPROBE_LIB")


def lib_path() -> str:
    """The path of the libmsprobe.so this package uses when not preloaded (for LD_PRELOAD)."""
    return next((c for c in _candidates() if os.path.exists(c)), str(_HERE / "lib" / "libmsprobe.so"))


lib, preloaded = _load()


def _fastpath_candidates() -> list[str]:
    target = Path(os.environ.get("CARGO_TARGET_DIR", _REPO / "target"))
    return [str(_HERE / "lib" / "_fastpath.abi3.so"), str(target / "release" / "lib_fastpath.so")]


@functools.cache
def load_fastpath() -> Optional[ModuleType]:
    """The ``msprobe._fastpath`` extension module, or None (not built, or MSPROBE_FASTPATH=0):
    the layers then record through the pure-Python encoder, with the same output. Loaded once
    per process (a PyO3 module cannot be initialised twice), so every caller gets the same."""
    env = os.environ.get("MSPROBE_FASTPATH", "")
    if env == "0":
        return None
    if env and not os.path.exists(env):
        import logging

        logging.getLogger("msprobe").warning(f"MSPROBE_FASTPATH={env!r} does not exist; using the built extension")
    for c in ([env] if env else []) + _fastpath_candidates():
        if not os.path.exists(c):
            continue
        try:
            spec = importlib.util.spec_from_file_location("msprobe._fastpath", c)
            assert spec is not None and spec.loader is not None
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return mod
        except Exception as e:  # e.g. built for a newer Python: the pure-Python path still works
            import logging

            logging.getLogger("msprobe").warning(f"{c} cannot be loaded ({e}); recording through Python")
            return None
    return None


# Declarations of include/msprobe.h's functions, checked against it by tests/python/test_abi.py.
_P = ctypes.c_void_p
_S = ctypes.c_char_p
_I = ctypes.c_int
_SIGS = {
    "msprobe_init": (_I, [_S]),
    "msprobe_last_error": (_S, []),
    "msprobe_start": (_I, []),
    "msprobe_stop": (_I, []),
    "msprobe_stop_wait": (_I, []),
    "msprobe_step": (_I, []),
    "msprobe_flush": (_I, []),
    "msprobe_finish": (_I, []),
    "msprobe_l2_enable": (_I, []),
    "msprobe_is_enabled": (_I, []),
    "msprobe_steps_done": (_I, []),
    "msprobe_current_step": (ctypes.c_int64, []),
    "msprobe_set_rank": (_I, [ctypes.c_int64]),
    "msprobe_log_rank": (ctypes.c_int64, []),
    "msprobe_next_index": (ctypes.c_int64, [_S]),
    "msprobe_construct_set": (_I, [_S, _S]),
    "msprobe_module_span": (_I, [_S, _I]),
    "msprobe_scope_module": (_I, [_S, _I]),
    "msprobe_dtype_size": (ctypes.c_size_t, [ctypes.c_int32]),
    "msprobe_record_begin": (_P, [_S]),
    "msprobe_record_section": (_I, [_P, _S]),
    "msprobe_record_open": (_I, [_P, _S, _I]),
    "msprobe_record_close": (_I, [_P]),
    "msprobe_record_add_tensor": (_I, [_P, _S, ctypes.POINTER(MsprobeTensor)]),
    "msprobe_record_add_tensor_mean_norm": (
        _I,
        [_P, _S, ctypes.POINTER(MsprobeTensor), ctypes.c_double, ctypes.c_double],
    ),
    "msprobe_record_add_device_tensor": (_I, [_P, _S, ctypes.POINTER(MsprobeTensor)]),
    "msprobe_record_stats_only": (_I, [_P]),
    "msprobe_record_add_tensor_pending": (_I, [_P, _S, ctypes.POINTER(MsprobeTensor), ctypes.c_uint64]),
    "msprobe_queue_bytes": (ctypes.c_uint64, []),
    "msprobe_record_add_tensor_pending_data": (_I, [_P, _S, ctypes.POINTER(MsprobeTensor), ctypes.c_uint64]),
    "msprobe_resolve_tensor": (
        _I,
        [ctypes.c_uint64, ctypes.POINTER(MsprobeTensor), _I, ctypes.c_double, ctypes.c_double],
    ),
    "msprobe_resolve_stats": (_I, [ctypes.c_uint64, ctypes.POINTER(ctypes.c_double), ctypes.c_size_t]),
    "msprobe_resolve_stats_except": (_I, [ctypes.c_uint64, ctypes.POINTER(ctypes.c_double), ctypes.c_size_t]),
    "msprobe_record_add_null": (_I, [_P, _S]),
    "msprobe_record_add_empty": (_I, [_P, _S]),
    "msprobe_record_add_bool": (_I, [_P, _S, _S, _I]),
    "msprobe_record_add_int": (_I, [_P, _S, _S, ctypes.c_int64]),
    "msprobe_record_add_float": (_I, [_P, _S, _S, ctypes.c_double]),
    "msprobe_record_add_str": (_I, [_P, _S, _S, _S, _S]),
    "msprobe_record_add_ints": (
        _I,
        [_P, _S, _S, ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_uint8), ctypes.c_size_t],
    ),
    "msprobe_record_add_group": (_I, [_P, _S, _S, ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t]),
    "msprobe_record_set_stack": (_I, [_P, ctypes.POINTER(_S), ctypes.c_size_t]),
    "msprobe_record_set_parent": (_I, [_P, _S]),
    "msprobe_record_end": (_I, [_P]),
    "msprobe_record_abort": (None, [_P]),
}
for _name, (_res, _args) in _SIGS.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args


def native_encoder(
    kind: str,
    tensor_types: tuple,
    dtype_codes: dict,
    strided: Any,
    fallback: Callable,
    warn: Callable[[str], Any],
    **options: Any,
) -> Any:
    """A ``msprobe._fastpath.Encoder`` recording into `lib`, or None (not built, MSPROBE_FASTPATH=0,
    or unusable, which `warn` reports): the layer then records through its pure-Python path."""
    mod = load_fastpath()
    if mod is None:
        return None
    try:
        return mod.Encoder(
            lib._handle, kind, tensor_types, dtype_codes, strided, fallback, warn, linecache.getline, **options
        )
    except Exception as e:
        warn(f"msprobe._fastpath is unusable ({e}); recording through Python")
        return None


def enc(s: Optional[str]) -> Optional[bytes]:
    return None if s is None else s.encode()


def last_error() -> str:
    return (lib.msprobe_last_error() or b"").decode()


def tensor(
    dtype: int,
    shape: Sequence[int],
    data_ptr: int,
    storage_bytes: int,
    strides: Optional[Sequence[int]] = None,
    offset: int = 0,
    requires_grad: Optional[bool] = None,
    type_name: Optional[str] = None,
) -> MsprobeTensor:
    """Builds a descriptor; the shape/stride arrays are kept alive on the returned object."""
    t = MsprobeTensor()
    t._shape = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    t._strides = (ctypes.c_int64 * max(len(shape), 1))(*strides) if strides is not None else None
    t.dtype = dtype
    t.ndim = len(shape)
    t.shape = ctypes.cast(t._shape, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.cast(t._strides, ctypes.POINTER(ctypes.c_int64)) if t._strides is not None else None
    t.offset = offset
    t.data = data_ptr
    t.storage_bytes = storage_bytes
    t.requires_grad = -1 if requires_grad is None else int(requires_grad)
    t.type_name = enc(type_name)
    return t
