"""The C ABI has one definition, include/msprobe.h, generated from crates/libmsprobe/src/ffi.rs
(crates/libmsprobe/tests/header.rs keeps it current). Its other declarations must match it:

- the ctypes binding, ``msprobe._native`` (``restype``/``argtypes`` as the module set them, and
  the ``MsprobeTensor`` structure);
- the fast path's raw declarations, python/native/src/abi.rs (the ``abi!`` function pointers
  and the ``Tensor`` struct, read from the Rust text);

and the dtype tables that stay in Python must match the library's (``msprobe_dtype_size``, whose
sizes come from the one table in the cann-abi crate).
"""

from __future__ import annotations

import ctypes
import json
import re
import sys

import pytest

from recorder_testutil import LIB, REPO, run_child

sys.path.insert(0, str(REPO / "python"))
from msprobe import _native  # noqa: E402
from msprobe.core import dtypes  # noqa: E402

HEADER = REPO / "include" / "msprobe.h"
FASTPATH_ABI = REPO / "python" / "native" / "src" / "abi.rs"

# C types are compared in one spelling: words and `*` as tokens, `struct` dropped, so
# `const char *const *` or `MsprobeRecord *`.
_TOKEN = re.compile(r"\*|[A-Za-z_]\w*")


def canon(c_type: str) -> str:
    out = ""
    for tok in _TOKEN.findall(c_type):
        if tok == "struct":
            continue
        if tok == "*":
            out += " *"
        else:
            out += tok if not out or out.endswith("*") else " " + tok
    return out


def _declarations(text: str) -> str:
    """The header without comments and preprocessor lines."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    return text.replace('extern "C" {', "")


def _param(decl: str) -> tuple[str, str]:
    """`const char *key` -> (type, name)."""
    m = re.fullmatch(r"(.*?)(\w+)", decl.strip(), flags=re.S)
    assert m, decl
    return canon(m.group(1)), m.group(2)


def parse_header(text: str) -> tuple[dict[str, tuple[str, list[str]]], dict[str, list[tuple[str, str]]]]:
    """(functions: name -> (return type, parameter types), structs: name -> [(field, type)])."""
    body = _declarations(text)
    structs = {}
    for m in re.finditer(r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*\w+\s*;", body, flags=re.S):
        fields = [_param(f) for f in m.group(2).split(";") if f.strip()]
        structs[m.group(1)] = [(name, t) for t, name in fields]
    body = re.sub(r"typedef[^;]*;", "", re.sub(r"typedef\s+struct\s+\w+\s*\{.*?\}\s*\w+\s*;", "", body, flags=re.S))
    funcs = {}
    for decl in body.split(";"):
        decl = " ".join(decl.split())
        if not decl or decl == "}":
            continue
        m = re.fullmatch(r"(.+?)\b(msprobe_\w+)\s*\((.*)\)", decl)
        assert m, f"not a prototype: {decl!r}"
        ret, name, params = m.groups()
        args = [] if params.strip() in ("", "void") else [_param(p)[0] for p in params.split(",")]
        assert name not in funcs, f"{name} declared twice"
        funcs[name] = (canon(ret), args)
    return funcs, structs


FUNCS, STRUCTS = parse_header(HEADER.read_text())


def test_header_parses_into_the_whole_abi():
    assert len(FUNCS) >= 30 and "MsprobeTensor" in STRUCTS
    assert FUNCS["msprobe_record_set_stack"] == ("int", ["MsprobeRecord *", "const char *const *", "size_t"])
    assert FUNCS["msprobe_record_abort"] == ("void", ["MsprobeRecord *"])
    assert FUNCS["msprobe_last_error"] == ("const char *", [])


# ---- ctypes (msprobe._native) ------------------------------------------------------------------

_CTYPES_BASE = {
    "int": ctypes.c_int,
    "int32_t": ctypes.c_int32,
    "int64_t": ctypes.c_int64,
    "uint8_t": ctypes.c_uint8,
    "uint64_t": ctypes.c_uint64,
    "size_t": ctypes.c_size_t,
    "double": ctypes.c_double,
    "MsprobeTensor": _native.MsprobeTensor,
}
# Structs the header declares without a body: handles, passed as void pointers.
_OPAQUE = {"MsprobeRecord"}


def ctype_of(c_type: str):
    """The ctypes type a declaration of `c_type` must use (None for a void return)."""
    c_type = canon(c_type)
    if c_type == "void":
        return None
    if c_type.endswith("*"):
        pointee = canon(c_type[:-1])
        bare = canon(" ".join(tok for tok in _TOKEN.findall(pointee) if tok != "const"))
        if bare == "char":
            return ctypes.c_char_p
        if bare == "void" or bare in _OPAQUE:
            return ctypes.c_void_p
        return ctypes.POINTER(ctype_of(bare))
    return _CTYPES_BASE[c_type]


def _name(t) -> str:
    return "void" if t is None else getattr(t, "__name__", repr(t))


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_ctypes_declaration_matches_header(name):
    ret, params = FUNCS[name]
    assert hasattr(_native.lib, name), f"{LIB} does not export {name}"
    f = getattr(_native.lib, name)
    want = [ctype_of(p) for p in params]
    assert f.argtypes is not None, f"msprobe._native does not declare {name} (add it to _SIGS)"
    got = list(f.argtypes)
    assert got == want, f"{name} parameters: _native has {[_name(t) for t in got]}, header {params}"
    assert f.restype == ctype_of(ret), f"{name} returns {ret} in the header, _native says {_name(f.restype)}"


def test_ctypes_declares_nothing_the_header_lacks():
    assert sorted(set(_native._SIGS) - set(FUNCS)) == []


def test_ctypes_tensor_struct_matches_header():
    want = [(field, ctype_of(t)) for field, t in STRUCTS["MsprobeTensor"]]
    got = [(field, t) for field, t in _native.MsprobeTensor._fields_]
    assert got == want


# ---- the fast path (python/native/src/abi.rs) ---------------------------------------------------

_RUST_BASE = {
    "c_int": "int",
    "c_char": "char",
    "c_void": "void",
    "i32": "int32_t",
    "i64": "int64_t",
    "u8": "uint8_t",
    "u64": "uint64_t",
    "usize": "size_t",
    "f64": "double",
    "Tensor": "MsprobeTensor",
}


def rust_to_c(t: str, aliases: dict[str, str]) -> str:
    """A Rust FFI type of abi.rs in the header's spelling (`*const Key` -> `const char *const *`).
    The fast path declares the opaque record handle as `*mut c_void`, i.e. `void *`."""
    t = t.strip()
    if t in aliases:
        return rust_to_c(aliases[t], aliases)
    for prefix, const in (("*const ", True), ("*mut ", False)):
        if t.startswith(prefix):
            inner = rust_to_c(t[len(prefix) :], aliases)
            if const:
                inner = inner + "const" if inner.endswith("*") else "const " + inner
            return canon(inner + " *")
    return _RUST_BASE[t]


def parse_fastpath(text: str) -> tuple[dict[str, tuple[str, list[str]]], list[tuple[str, str]]]:
    aliases = dict(re.findall(r"^type\s+(\w+)\s*=\s*([^;]+);", text, flags=re.M))
    block = re.search(r"^abi!\s*\{(.*?)^\}", text, flags=re.S | re.M)
    assert block, "abi! { ... } not found in abi.rs"
    funcs = {}
    for m in re.finditer(r"(\w+)\s*=\s*\"(\w+)\"\s*:\s*fn\((.*?)\)\s*(?:->\s*([^;]+))?;", block.group(1)):
        _, sym, args, ret = m.groups()
        params = [rust_to_c(a, aliases) for a in args.split(",") if a.strip()]
        funcs[sym] = (rust_to_c(ret, aliases) if ret else "void", params)
    struct = re.search(r"pub struct Tensor\s*\{(.*?)\}", text, flags=re.S)
    assert struct, "struct Tensor not found in abi.rs"
    fields = [(n, rust_to_c(t, aliases)) for n, t in re.findall(r"pub (\w+)\s*:\s*([^,]+),", struct.group(1))]
    return funcs, fields


def _opaque_as_void(c_type: str) -> str:
    for name in _OPAQUE:
        c_type = c_type.replace(name + " *", "void *")
    return c_type


FAST_FUNCS, FAST_TENSOR = parse_fastpath(FASTPATH_ABI.read_text())


def test_fastpath_declarations_parse():
    assert len(FAST_FUNCS) >= 15
    assert FAST_FUNCS["msprobe_record_set_stack"] == ("int", ["void *", "const char *const *", "size_t"])


@pytest.mark.parametrize("sym", sorted(FAST_FUNCS))
def test_fastpath_declaration_matches_header(sym):
    assert sym in FUNCS, f"abi.rs looks up {sym}, which include/msprobe.h does not declare"
    ret, params = FUNCS[sym]
    want = (_opaque_as_void(ret), [_opaque_as_void(p) for p in params])
    assert FAST_FUNCS[sym] == want, f"{sym}: abi.rs declares {FAST_FUNCS[sym]}, header {want}"


def test_fastpath_tensor_struct_matches_header():
    assert FAST_TENSOR == STRUCTS["MsprobeTensor"]


# ---- dtype sizes: one table, in the library ----------------------------------------------------

_lib = _native.lib


def test_python_dtype_table_is_exactly_what_the_recorder_reads():
    """msprobe.core.dtypes.ACL_DTYPE (name -> aclDataType) stays in Python for speed; every code
    the library reads is in it, and nothing else."""
    read = {code for code in range(-1, 64) if _lib.msprobe_dtype_size(code) > 0}
    assert read == set(dtypes.ACL_DTYPE.values())
    assert _lib.msprobe_dtype_size(13) == 0  # ACL_STRING: not a tensor the recorder reads
    assert _lib.msprobe_dtype_size(-5) == 0


@pytest.mark.parametrize("name", sorted(dtypes.ACL_DTYPE))
def test_python_dtype_codes_have_the_library_sizes(name):
    """Each name's code has that dtype's element size: a code swapped to another width fails."""
    size = _lib.msprobe_dtype_size(dtypes.ACL_DTYPE[name])
    if name == "bfloat16":  # numpy has no bfloat16 (MindSpore reads it through ml_dtypes)
        torch = pytest.importorskip("torch")
        assert size == torch.empty(0, dtype=torch.bfloat16).element_size()
    else:
        np = pytest.importorskip("numpy")
        assert size == np.dtype(name).itemsize


FASTPATH_READS = """
import json, linecache, sys
import torch
from msprobe import _native as n
from msprobe.core.dtypes import ACL_DTYPE
mod = n.load_fastpath()
assert mod is not None, "msprobe._fastpath is not built"
assert n.lib.msprobe_init(json.dumps({{"level": "L1", "dump_path": {dump!r}}}).encode()) == 0, n.last_error()
assert n.lib.msprobe_start() == 1
fallen = []
codes = {{getattr(torch, name): code for name, code in ACL_DTYPE.items()}}
enc = mod.Encoder(n.lib._handle, "torch", (torch.Tensor,), codes, torch.strided,
                  lambda r, key, v, depth: fallen.append(v), print, linecache.getline)
args = tuple(torch.ones(2, 3, dtype=d)[:, 1:] for d in codes)  # strided views: sizes matter
assert enc.record("Functional.dtypes.0.forward", args, None, None, sys._getframe())
assert fallen == [], [getattr(v, "dtype", v) for v in fallen]
assert n.lib.msprobe_stop_wait() == 0
"""


def test_fastpath_reads_every_dtype_of_the_table(tmp_path):
    """The fast path's element sizes come from the library (msprobe_dtype_size): every dtype of
    the Python table is read natively (none falls back to Python), with the right bytes."""
    pytest.importorskip("torch")

    dump = tmp_path / "dump"
    res = run_child(FASTPATH_READS.format(dump=str(dump)))
    assert res.returncode == 0, res.stderr
    rec = json.loads((dump / "step0" / "rank" / "dump.json").read_text())["data"]["Functional.dtypes.0.forward"]
    leaves = rec["input_args"]
    assert [leaf["dtype"] for leaf in leaves] == [f"torch.{name}" for name in dtypes.ACL_DTYPE]
    for leaf in leaves:
        assert leaf["shape"] == [2, 2] and leaf["Max"] in (1, 1.0, True), leaf
