"""aclop ReduceMax/ReduceMin, LpNormReduceV2 + LpNormUpdateV2 and Pack (torch_npu's x.max(), x.min(),
x.norm(), torch.stack on npu: msprobe's device statistics, issue #21) against numpy."""

import ctypes as C

import numpy as np
import pytest

import cannsim_ctypes as cs
from test_aclop import VP, Op


def set_bool(acl, attr, name, v):
    acl.fn(acl.rt, "aclopSetAttrBool", C.c_int, [VP, C.c_char_p, C.c_uint8])(attr, name, v)


def set_float(acl, attr, name, v):
    acl.fn(acl.rt, "aclopSetAttrFloat", C.c_int, [VP, C.c_char_p, C.c_float])(attr, name, v)


def set_ints(acl, attr, name, vs):
    f = acl.fn(acl.rt, "aclopSetAttrListInt", C.c_int, [VP, C.c_char_p, C.c_int, VP])
    f(attr, name, len(vs), (C.c_int64 * max(len(vs), 1))(*vs))


@pytest.mark.parametrize("dtype", [cs.ACL_FLOAT, cs.ACL_FLOAT16])
def test_max_min_norm_pack(acl, dtype):
    op, s = Op(acl), acl.stream()
    npt = np.float32 if dtype == cs.ACL_FLOAT else np.float16
    a = np.random.default_rng(3).standard_normal((5, 7)).astype(npt)
    A = acl.tensor(a, dtype=dtype)
    AX = acl.tensor(np.array([0, 1], np.int64), dtype=cs.ACL_INT64)
    got = {}
    for name in ("ReduceMax", "ReduceMin"):
        Y = acl.tensor(shape=(), dtype=dtype)
        attr = op.attr()
        set_bool(acl, attr, b"keep_dims", 0)
        assert op.run("aclopCompileAndExecute", name, [A, AX], [Y], attr, s) == 0, acl.errmsg()
        got[name] = Y.numpy(s)
    assert got["ReduceMax"] == a.max() and got["ReduceMin"] == a.min()
    # the norm: sum |x|^p then the root
    P, N = acl.tensor(shape=(), dtype=dtype), acl.tensor(shape=(), dtype=dtype)
    attr = op.attr()
    set_float(acl, attr, b"p", 2.0)
    set_ints(acl, attr, b"axes", [])
    set_bool(acl, attr, b"keepdim", 0)
    assert op.run("aclopCompileAndExecute", "LpNormReduceV2", [A], [P], attr, s) == 0, acl.errmsg()
    uattr = op.attr()
    set_float(acl, uattr, b"p", 2.0)
    assert op.run("aclopCompileAndExecute", "LpNormUpdateV2", [P], [N], uattr, s) == 0, acl.errmsg()
    want = np.sqrt((a.astype(np.float64) ** 2).sum())
    np.testing.assert_allclose(float(N.numpy(s)), want, rtol=1e-6 if dtype == cs.ACL_FLOAT else 1e-3)
    # Pack of 20 equal-shaped tensors along a new axis 0 (more than 16 inputs: CANN's dynamic input)
    parts = [np.full((4,), i, npt) for i in range(20)]
    T = [acl.tensor(p, dtype=dtype) for p in parts]
    OUT = acl.tensor(shape=(20, 4), dtype=dtype)
    pattr = op.attr()
    acl.fn(acl.rt, "aclopSetAttrInt", C.c_int, [VP, C.c_char_p, C.c_int64])(pattr, b"axis", 0)
    assert op.run("aclopCompileAndExecute", "Pack", T, [OUT], pattr, s) == 0, acl.errmsg()
    np.testing.assert_array_equal(OUT.numpy(s), np.stack(parts))


def test_nan_propagates_and_empty_is_an_error(acl):
    op, s = Op(acl), acl.stream()
    a = np.array([1.0, np.nan, -3.0], np.float32)
    A, AX = acl.tensor(a), acl.tensor(np.array([0], np.int64), dtype=cs.ACL_INT64)
    Y = acl.tensor(shape=())
    attr = op.attr()
    assert op.run("aclopCompileAndExecute", "ReduceMax", [A, AX], [Y], attr, s) == 0, acl.errmsg()
    assert np.isnan(Y.numpy(s))
    E = acl.tensor(shape=(0,))
    assert op.run("aclopCompileAndExecute", "ReduceMin", [E, AX], [Y], attr, s) != 0
