"""aclnnMax / aclnnMin (all elements), aclnnNorm and aclnnNanToNum (the reductions L2 device statistics
launch, issue #21) against numpy: dtypes, NaN/±inf, strided views and the error codes of bad input."""

import math

import numpy as np
import pytest

import cannsim_ctypes as cs

ACLNN_ERR_PARAM_INVALID = 161002


@pytest.fixture
def run(acl):
    s = acl.stream()

    def go(name, *args):
        acl.run(name, *args, stream=s)
        acl.sync(s)

    return go


TYPES = [(cs.ACL_FLOAT, np.float32), (cs.ACL_FLOAT16, np.float16), (cs.ACL_INT32, np.int32), (cs.ACL_INT64, np.int64)]


@pytest.mark.parametrize("dt,np_dt", TYPES)
def test_max_min_all(acl, run, dt, np_dt):
    x = (np.random.default_rng(1).standard_normal((7, 13)) * 100).astype(np_dt)
    X = acl.tensor(x, dtype=dt)
    for name, fn in (("Max", np.max), ("Min", np.min)):
        o = acl.tensor(shape=(), dtype=dt)
        run(name, X, o)
        assert o.numpy().item() == fn(x).item()


def test_max_min_nan_inf_and_bad_input(acl, run):
    x = np.array([1, np.inf, -np.inf, 2], np.float32)
    X, o = acl.tensor(x), acl.tensor(shape=())
    run("Max", X, o)
    assert o.numpy().item() == math.inf
    run("Min", X, o)
    assert o.numpy().item() == -math.inf
    Xn = acl.tensor(np.array([1, np.nan, 3], np.float32))
    run("Max", Xn, o)
    assert math.isnan(o.numpy().item())
    with pytest.raises(cs.AclError) as e:  # empty: no identity for max
        run("Max", acl.tensor(shape=(0, 3)), o)
    assert e.value.code == ACLNN_ERR_PARAM_INVALID
    with pytest.raises(cs.AclError) as e:  # out dtype differs from self
        run("Min", X, acl.tensor(shape=(), dtype=cs.ACL_FLOAT16))
    assert e.value.code == ACLNN_ERR_PARAM_INVALID


def test_norm_p2_all_and_dims_strided(acl, run):
    base = np.random.default_rng(2).standard_normal((4, 6)).astype(np.float32)
    B = acl.tensor(base)
    view = acl.create_tensor((6, 4), cs.ACL_FLOAT, B.ptr, strides=(1, 6), offset=0, storage=(24,))
    o = acl.tensor(shape=())
    run("Norm", cs.C.c_void_p(view), 2.0, [], False, o)
    assert o.numpy().item() == pytest.approx(np.linalg.norm(base.astype(np.float64)), rel=1e-6)
    o2 = acl.tensor(shape=(6,))
    run("Norm", cs.C.c_void_p(view), 2.0, [1], False, o2)
    np.testing.assert_allclose(o2.numpy(), np.linalg.norm(base.T, axis=1), rtol=1e-6)
    h = acl.tensor(base.astype(np.float16), dtype=cs.ACL_FLOAT16)
    oh = acl.tensor(shape=(), dtype=cs.ACL_FLOAT16)
    run("Norm", h, 2.0, [], False, oh)
    want = np.float16(np.linalg.norm(base.astype(np.float16).astype(np.float64)))
    assert oh.numpy().item() == want
    with pytest.raises(cs.AclError):
        run("Norm", acl.tensor(np.arange(4, dtype=np.int32), dtype=cs.ACL_INT32), 2.0, [], False, o)


def test_nan_to_num(acl, run):
    x = np.array([1, np.nan, np.inf, -np.inf, -2], np.float32)
    X, o = acl.tensor(x), acl.tensor(shape=(5,))
    run("NanToNum", X, -np.inf, -np.inf, -np.inf, o)
    np.testing.assert_array_equal(o.numpy(), [1, -np.inf, -np.inf, -np.inf, -2])
    run("NanToNum", X, 0.0, 7.0, -7.0, o)
    np.testing.assert_array_equal(o.numpy(), np.nan_to_num(x, nan=0.0, posinf=7.0, neginf=-7.0))


@pytest.mark.parametrize("dt,np_dt", TYPES)
def test_aminmax_all(acl, run, dt, np_dt):
    x = (np.random.default_rng(3).standard_normal((5, 11)) * 100).astype(np_dt)
    X = acl.tensor(x, dtype=dt)
    lo, hi = acl.tensor(shape=(), dtype=dt), acl.tensor(shape=(), dtype=dt)
    run("AminmaxAll", X, lo, hi)
    assert (lo.numpy().item(), hi.numpy().item()) == (np.min(x).item(), np.max(x).item())


def test_aminmax_all_nan_inf_and_bad_input(acl, run):
    lo, hi = acl.tensor(shape=()), acl.tensor(shape=())
    run("AminmaxAll", acl.tensor(np.array([1, np.inf, -np.inf, 2], np.float32)), lo, hi)
    assert (lo.numpy().item(), hi.numpy().item()) == (-math.inf, math.inf)
    run("AminmaxAll", acl.tensor(np.array([1, np.nan, 3], np.float32)), lo, hi)
    assert math.isnan(lo.numpy().item()) and math.isnan(hi.numpy().item())
    with pytest.raises(cs.AclError) as e:  # empty: no identity
        run("AminmaxAll", acl.tensor(shape=(0, 3)), lo, hi)
    assert e.value.code == ACLNN_ERR_PARAM_INVALID
    with pytest.raises(cs.AclError) as e:  # an out dtype differs from self
        run("AminmaxAll", acl.tensor(shape=(2,)), lo, acl.tensor(shape=(), dtype=cs.ACL_FLOAT16))
    assert e.value.code == ACLNN_ERR_PARAM_INVALID


def test_aminmax_dim_rows_strided(acl, run):
    base = np.random.default_rng(4).standard_normal((4, 6)).astype(np.float32)
    base[1, 2] = np.nan
    base[2, 0] = -np.inf
    B = acl.tensor(base)
    view = acl.create_tensor((6, 4), cs.ACL_FLOAT, B.ptr, strides=(1, 6), offset=0, storage=(24,))
    lo, hi = acl.tensor(shape=(4,)), acl.tensor(shape=(4,))
    run("Aminmax", cs.C.c_void_p(view), [0], False, lo, hi)  # reduce the view's rows = base's columns
    np.testing.assert_array_equal(lo.numpy(), np.min(base, axis=1))  # np.min propagates NaN too
    np.testing.assert_array_equal(hi.numpy(), np.max(base, axis=1))
    lo2, hi2 = acl.tensor(shape=(1, 4)), acl.tensor(shape=(1, 4))
    run("Aminmax", cs.C.c_void_p(view), [0], True, lo2, hi2)
    np.testing.assert_array_equal(hi2.numpy()[0], np.max(base, axis=1))
    with pytest.raises(cs.AclError) as e:  # wrong out shape
        run("Aminmax", cs.C.c_void_p(view), [0], False, acl.tensor(shape=(6,)), hi)
    assert e.value.code == ACLNN_ERR_PARAM_INVALID
