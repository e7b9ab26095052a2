"""The aclnn operators torch_npu's default training paths launch (ops_ext.rs), against numpy, f32/f16/bf16."""

import numpy as np
import pytest

import cannsim_ctypes as cs
from test_ops import DTYPES, Env, q

ALL = pytest.mark.parametrize("dt", list(DTYPES))


@pytest.fixture
def env(acl):
    return lambda dt: Env(acl, dt)


def test_arange_tril_not_fill(env):
    e = env("float32")
    o = e.out(6)
    e.run("Arange", 1.0, 4.0, 0.5, o)
    e.check(o, np.arange(1.0, 4.0, 0.5))
    oi = e.out(5, dtype=cs.ACL_INT64)
    e.run("Arange", 0, 10, 2, oi)
    np.testing.assert_array_equal(oi.numpy(e.stream), np.arange(0, 10, 2))
    with pytest.raises(cs.AclError):
        e.run("Arange", 0.0, 4.0, 0.0, o)  # zero step
    x = e.rand(2, 3, 4)
    for name, fn in [("Tril", np.tril), ("Triu", np.triu)]:
        for d in (-1, 0, 2):
            y = e.out(2, 3, 4)
            e.run(name, e.t(x), d, y)
            e.check(y, fn(x, d))
    b = np.array([[True, False], [False, True]])
    bt, bo = e.acl.tensor(b, dtype=cs.ACL_BOOL), e.acl.tensor(shape=(2, 2), dtype=cs.ACL_BOOL)
    e.run("BitwiseNot", bt, bo)
    np.testing.assert_array_equal(bo.numpy(e.stream), ~b)
    it, io = e.acl.tensor(np.array([0, 5, -3], np.int64), dtype=cs.ACL_INT64), e.out(3, dtype=cs.ACL_INT64)
    e.run("BitwiseNot", it, io)
    np.testing.assert_array_equal(io.numpy(e.stream), ~np.array([0, 5, -3]))
    e.run("LogicalNot", e.t(np.array([[0.0, 2.0], [-1.0, 0.0]])), bo)
    np.testing.assert_array_equal(bo.numpy(e.stream), [[True, False], [False, True]])
    v = e.t(np.array([3.5]))
    ft = e.t(x)
    e.run("InplaceFillTensor", ft, v)
    e.check(ft, np.full(x.shape, 3.5))


_CMP = {
    "Eq": np.equal,
    "Ne": np.not_equal,
    "Gt": np.greater,
    "Ge": np.greater_equal,
    "Lt": np.less,
    "Le": np.less_equal,
}


@ALL
def test_comparisons(env, dt):
    """aclnn{Eq,Ne,Gt,Ge,Lt,Le}{Tensor,Scalar} (torch_npu's and MindSpore's comparison operators)
    into bool outs, against numpy on the values as stored: broadcasting, NaN (unequal to all) and
    ±inf; int64 too; a shape mismatch is refused."""
    e = env(dt)
    x = e.rand(3, 4)
    x[0, 0], x[1, 1], x[2, 2] = np.nan, np.inf, -np.inf
    x[0, 1], x[1, 0] = 0.5, 0.1
    y = e.rand(4)
    y[1] = 0.5
    y[3] = np.nan
    xs, ys = e.t(x), e.t(y)
    xv, yv = xs.numpy(e.stream).astype(np.float64), ys.numpy(e.stream).astype(np.float64)  # the stored values
    for name, fn in _CMP.items():
        o = e.acl.tensor(shape=(3, 4), dtype=cs.ACL_BOOL)
        e.run(f"{name}Tensor", xs, ys, o)
        np.testing.assert_array_equal(o.numpy(e.stream), fn(xv, yv), err_msg=name)
        e.run(f"{name}Scalar", xs, 0.5, o)
        np.testing.assert_array_equal(o.numpy(e.stream), fn(xv, 0.5), err_msg=name)
        # a scalar not exact in the dtype compares as converted to it (x holding 0.1 == 0.1)
        e.run(f"{name}Scalar", xs, 0.1, o)
        np.testing.assert_array_equal(o.numpy(e.stream), fn(xv, q(0.1, e.name)), err_msg=name)
    it = e.acl.tensor(np.array([[-3, 0, 7]], np.int64), dtype=cs.ACL_INT64)
    jt = e.acl.tensor(np.array([[0], [7]], np.int64), dtype=cs.ACL_INT64)
    o = e.acl.tensor(shape=(2, 3), dtype=cs.ACL_BOOL)
    e.run("GeTensor", it, jt, o)
    np.testing.assert_array_equal(o.numpy(e.stream), np.array([[-3, 0, 7]]) >= np.array([[0], [7]]))
    with pytest.raises(cs.AclError):
        e.run("GtTensor", xs, e.t(e.rand(3)), e.acl.tensor(shape=(3, 4), dtype=cs.ACL_BOOL))
    with pytest.raises(cs.AclError):
        e.run("GtScalar", xs, 0.0, e.acl.tensor(shape=(4, 3), dtype=cs.ACL_BOOL))


@ALL
def test_unary_math_and_where(env, dt):
    """aclnnSin/Cos/Floor/Round/Reciprocal/Sign (torch_npu's; it fell back to aclop kernels the
    simulator lacks) and aclnnSWhere (torch.where) with broadcasting, against numpy on the values
    as stored: round halves to even (torch.round), sign of ±0 is 0."""
    e = env(dt)
    x = e.rand(3, 4, lo=-3.0, hi=3.0)
    x[0, :4] = [0.5, 1.5, -2.5, 0.0]
    xs = e.t(x)
    xv = xs.numpy(e.stream).astype(np.float64)
    for name, fn in [
        ("Sin", np.sin),
        ("Cos", np.cos),
        ("Floor", np.floor),
        ("Round", np.round),
        ("Reciprocal", np.reciprocal),
        ("Sign", np.sign),
    ]:
        o = e.out(3, 4)
        e.run(name, xs, o)
        with np.errstate(divide="ignore"):  # 1 / 0 = inf, as the device
            e.check(o, fn(xv))
    cond = np.array([True, False, True, False])
    y = e.rand(3, 1)
    o = e.out(3, 4)
    e.run("SWhere", e.acl.tensor(cond, dtype=cs.ACL_BOOL), xs, e.t(y), o)
    e.check(o, np.where(cond, xv, e.t(y).numpy(e.stream).astype(np.float64)))
    with pytest.raises(cs.AclError):
        e.run("SWhere", e.acl.tensor(cond, dtype=cs.ACL_BOOL), xs, e.t(e.rand(2)), o)


@ALL
def test_maxmin_logical_anyall_isfinite_index(env, dt):
    """aclnnMaximum/Minimum (NaN propagates), LogicalAnd/Or, Any/All over dims (NaN is non-zero),
    IsFinite, IndexSelect and Gather (torch_npu's; each fell back to a missing aclop kernel)
    against numpy; out-of-range indices and bad shapes are refused."""
    e = env(dt)
    x, y = e.rand(3, 4), e.rand(1, 4)
    x[0, 0], x[1, 1], x[2, 2], x[2, 3] = np.nan, np.inf, -np.inf, 0.0
    xs, ys = e.t(x), e.t(y)
    xv, yv = xs.numpy(e.stream).astype(np.float64), ys.numpy(e.stream).astype(np.float64)
    for name, fn in [("Maximum", np.maximum), ("Minimum", np.minimum)]:
        o = e.out(3, 4)
        e.run(name, xs, ys, o)
        e.check(o, fn(xv, yv))
    bo = e.acl.tensor(shape=(3, 4), dtype=cs.ACL_BOOL)
    for name, fn in [("LogicalAnd", np.logical_and), ("LogicalOr", np.logical_or)]:
        e.run(name, xs, e.t(np.array([[0.0, 1.0, 0.0, 2.0]])), bo)
        np.testing.assert_array_equal(bo.numpy(e.stream), fn(xv, [[0.0, 1.0, 0.0, 2.0]]), err_msg=name)
    it = e.acl.tensor(np.array([[12, -3, 5, 0]], np.int64), dtype=cs.ACL_INT64)
    jt = e.acl.tensor(np.array([[10], [-1]], np.int64), dtype=cs.ACL_INT64)
    ab = e.acl.tensor(m2 := np.array([[True, False, True, False]]), dtype=cs.ACL_BOOL)
    bb = e.acl.tensor(n2 := np.array([[True], [False]]), dtype=cs.ACL_BOOL)
    for name, fn in [
        ("BitwiseAndTensor", np.bitwise_and),
        ("BitwiseOrTensor", np.bitwise_or),
        ("BitwiseXorTensor", np.bitwise_xor),
    ]:
        io = e.acl.tensor(shape=(2, 4), dtype=cs.ACL_INT64)
        e.run(name, it, jt, io)
        want = fn(np.array([[12, -3, 5, 0]]), np.array([[10], [-1]]))
        np.testing.assert_array_equal(io.numpy(e.stream), want, err_msg=name)
        bo2 = e.acl.tensor(shape=(2, 4), dtype=cs.ACL_BOOL)
        e.run(name, ab, bb, bo2)
        np.testing.assert_array_equal(bo2.numpy(e.stream), fn(m2, n2), err_msg=name)
    with pytest.raises(cs.AclError):
        e.run("BitwiseAndTensor", xs, ys, e.out(3, 4))
    e.run("IsFinite", xs, bo)
    np.testing.assert_array_equal(bo.numpy(e.stream), np.isfinite(xv))
    m = np.array([[True, False, False, False], [True, True, True, True], [False, False, False, False]])
    mt = e.acl.tensor(m, dtype=cs.ACL_BOOL)
    for name, fn in [("Any", np.any), ("All", np.all)]:
        for dims, keep, shape in [([], False, ()), ([1], False, (3,)), ([0], True, (1, 4)), ([-1, 0], False, ())]:
            o = e.acl.tensor(shape=shape, dtype=cs.ACL_BOOL)
            e.run(name, mt, dims, keep, o)
            want = fn(m, axis=tuple(dims) if dims else None, keepdims=keep)
            np.testing.assert_array_equal(o.numpy(e.stream), want, err_msg=f"{name} {dims} {keep}")
        o = e.acl.tensor(shape=(3,), dtype=cs.ACL_BOOL)
        e.run(name, xs, [1], False, o)  # floats: non-zero, NaN included
        np.testing.assert_array_equal(o.numpy(e.stream), fn(xv != 0, axis=1), err_msg=name)
    idx = e.acl.tensor(np.array([3, 0, 3], np.int64), dtype=cs.ACL_INT64)
    o = e.out(3, 3)
    e.run("IndexSelect", xs, 1, idx, o)
    e.check(o, xv[:, [3, 0, 3]])
    o = e.out(2, 4)
    e.run("IndexSelect", xs, 0, e.acl.tensor(np.array([2, 1], np.int32), dtype=cs.ACL_INT32), o)
    e.check(o, xv[[2, 1]])
    gi = np.array([[1, 0], [2, 2], [0, 3]])
    o = e.out(3, 2)
    e.run("Gather", xs, 1, e.acl.tensor(gi, dtype=cs.ACL_INT64), o)
    e.check(o, np.take_along_axis(xv, gi, 1))
    gi0 = np.array([[2, 0, 1, 1]])
    o = e.out(1, 4)
    e.run("Gather", xs, 0, e.acl.tensor(gi0, dtype=cs.ACL_INT64), o)
    e.check(o, np.take_along_axis(xv, gi0, 0))
    with pytest.raises(cs.AclError):  # the values are on the device: the kernel fails, seen at the sync
        bad = e.out(3, 1)
        e.run("IndexSelect", xs, 1, e.acl.tensor(np.array([4], np.int64), dtype=cs.ACL_INT64), bad)
        bad.numpy(e.stream)
    with pytest.raises(cs.AclError):
        e.run("Gather", xs, 1, e.acl.tensor(gi, dtype=cs.ACL_INT64), e.out(2, 3))
    with pytest.raises(cs.AclError):
        e.run("Any", mt, [1], False, e.acl.tensor(shape=(4,), dtype=cs.ACL_BOOL))


@ALL
def test_masked_fill_and_addc(env, dt):
    e = env(dt)
    x, a, b = e.rand(3, 4), e.rand(3, 4), e.rand(4, lo=0.5, hi=2.0)
    m = np.array([True, False, True, False])
    xt = e.t(x)
    e.run("InplaceMaskedFillScalar", xt, e.acl.tensor(m, dtype=cs.ACL_BOOL), -7.0)
    e.check(xt, np.where(m, -7.0, x))
    o = e.out(3, 4)
    e.run("Addcdiv", e.t(x), e.t(a), e.t(b), 0.5, o)
    e.check(o, x + 0.5 * a / b)
    e.run("Addcmul", e.t(x), e.t(a), e.t(b), -2.0, o)
    e.check(o, x - 2.0 * a * b)
    xt = e.t(x)
    e.run("InplaceAddcdiv", xt, e.t(a), e.t(b), 0.25)
    e.check(xt, x + 0.25 * a / b)


@ALL
def test_foreach(env, dt):
    e = env(dt)
    shapes = [(3,), (2, 4), (5, 1)]
    xs = [e.rand(*s) for s in shapes]
    ys = [e.rand(*s) for s in shapes]
    zs = [e.rand(*s, lo=0.5, hi=2.0) for s in shapes]

    def run(name, *lists_and_scalars, ref):
        outs = [e.out(*s) for s in shapes]
        args = [[e.t(v) for v in a] if isinstance(a, list) else a for a in lists_and_scalars]
        e.run(name, *args, outs)
        for o, r in zip(outs, ref):
            e.check(o, r)

    run("ForeachAddScalarV2", xs, 1.5, ref=[x + 1.5 for x in xs])
    run("ForeachMulScalarV2", xs, 0.9, ref=[x * 0.9 for x in xs])
    run("ForeachAddListV2", xs, ys, -0.5, ref=[x - 0.5 * y for x, y in zip(xs, ys)])
    run("ForeachLerpScalar", xs, ys, 0.1, ref=[x + 0.1 * (y - x) for x, y in zip(xs, ys)])
    run("ForeachLerpScalar", xs, ys, 0.75, ref=[y - (y - x) * 0.25 for x, y in zip(xs, ys)])
    run("ForeachAddcmulScalarV2", xs, ys, zs, 0.3, ref=[x + 0.3 * y * z for x, y, z in zip(xs, ys, zs)])
    run("ForeachAddcdivScalarV2", xs, ys, zs, -0.3, ref=[x - 0.3 * y / z for x, y, z in zip(xs, ys, zs)])
    run("ForeachSqrt", zs, ref=[np.sqrt(z) for z in zs])
    # clamp_min / clamp_max (clip_grad_value_): V2 takes an aclScalar, V1 a one-element tensor read at run time
    run("ForeachMaximumScalarV2", xs, 0.1, ref=[np.maximum(x, 0.1) for x in xs])
    run("ForeachMinimumScalarV2", xs, -0.2, ref=[np.minimum(x, -0.2) for x in xs])
    run("ForeachMaximumScalar", xs, e.t(np.array([0.3])), ref=[np.maximum(x, q(0.3, dt)) for x in xs])
    run("ForeachMinimumScalar", xs, e.t(np.array(-0.4)), ref=[np.minimum(x, q(-0.4, dt)) for x in xs])
    run("ForeachMaximumScalarV2", xs, float("nan"), ref=[np.full_like(x, np.nan) for x in xs])  # as torch
    # in place: the output list is a second aclTensorList over the same memory (as torch_npu passes it)
    ts = [e.t(x) for x in xs]
    e.run("ForeachMulScalarV2", ts, 2.0, ts)
    for t, x in zip(ts, xs):
        e.check(t, 2 * x)
    with pytest.raises(cs.AclError):
        e.run("ForeachSqrt", [e.t(xs[0])], [e.out(4)])  # shape mismatch


def conv_ref(x, w, b, stride, pad, groups):
    n, c, h, wd = x.shape
    oc, icg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, oc, oh, ow))
    ocg = oc // groups
    for o in range(oc):
        g = o // ocg
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * icg : (g + 1) * icg, i * stride : i * stride + kh, j * stride : j * stride + kw]
                y[:, o, i, j] = (patch * w[o]).sum(axis=(1, 2, 3)) + (b[o] if b is not None else 0)
    return y


@ALL
@pytest.mark.parametrize("stride,pad,groups", [(1, 1, 1), (2, 0, 2)])
def test_convolution_forward_backward(env, dt, stride, pad, groups):
    e = env(dt)
    x, w, b = e.rand(2, 4, 5, 5), e.rand(6, 4 // groups, 3, 3), e.rand(6)
    y_ref = conv_ref(x, w, b, stride, pad, groups)
    y = e.out(*y_ref.shape)
    e.run("Convolution", e.t(x), e.t(w), e.t(b), [stride], [pad], [1], False, [0], groups, y, 0)
    e.check(y, y_ref, rtol=max(DTYPES[dt][1]["rtol"], 1e-4), atol=max(DTYPES[dt][1]["atol"] * 10, 1e-4))
    # backward against finite differences of sum(g * conv(x, w)) (linear, so exact up to rounding)
    g = e.rand(*y_ref.shape)
    gx, gw, gb = e.out(*x.shape), e.out(*w.shape), e.out(6)
    e.run(
        "ConvolutionBackward",
        e.t(g), e.t(x), e.t(w), [6], [stride], [pad], [1], False, [0], groups, [True, True, True], 0, gx, gw, gb,
    )  # fmt: skip
    ref_gw = np.zeros_like(w)
    for idx in np.ndindex(*w.shape):
        d = np.zeros_like(w)
        d[idx] = 1.0
        ref_gw[idx] = (g * conv_ref(x, d, None, stride, pad, groups)).sum()
    ref_gx = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        d = np.zeros_like(x)
        d[idx] = 1.0
        ref_gx[idx] = (g * conv_ref(d, w, None, stride, pad, groups)).sum()
    loose = dict(rtol=max(DTYPES[dt][1]["rtol"] * 4, 1e-4), atol=max(DTYPES[dt][1]["atol"] * 20, 1e-4))
    e.check(gx, ref_gx, **loose)
    e.check(gw, ref_gw, **loose)
    e.check(gb, g.sum(axis=(0, 2, 3)), **loose)


def conv_transpose_ref(x, w, stride, pad, out_pad, groups):
    """Transposed 2-D convolution by its definition: each input element scatters its weighted kernel."""
    n, cin, h, wd = x.shape
    _, cog, kh, kw = w.shape
    oh, ow = (h - 1) * stride - 2 * pad + kh + out_pad, (wd - 1) * stride - 2 * pad + kw + out_pad
    y = np.zeros((n, cog * groups, oh + 2 * pad + kh, ow + 2 * pad + kw))
    cig = cin // groups
    for ci in range(cin):
        g = ci // cig
        for i in range(h):
            for j in range(wd):
                patch = x[:, ci, i, j][:, None, None, None] * w[ci][None]
                y[:, g * cog : (g + 1) * cog, i * stride : i * stride + kh, j * stride : j * stride + kw] += patch
    return y[:, :, pad : pad + oh, pad : pad + ow]


@ALL
def test_convolution_1d_and_transposed(env, dt):
    """aclnnConvolution with 3-D tensors (a 1-D convolution) and with transposed=true (outputPadding honoured)."""
    e = env(dt)
    tol = dict(rtol=max(DTYPES[dt][1]["rtol"], 1e-4), atol=max(DTYPES[dt][1]["atol"] * 10, 1e-4))
    x, w = e.rand(2, 4, 7), e.rand(6, 2, 3)
    ref = conv_ref(x[:, :, None, :], w[:, :, None, :], None, 1, 0, 2)[:, :, 0, :]
    # conv_ref pads both axes: with pad 0 and a height of 1 that is the 1-D convolution
    y = e.out(*ref.shape)
    e.run("Convolution", e.t(x), e.t(w), None, [1], [0], [1], False, [0], 2, y, 0)
    e.check(y, ref, **tol)
    with pytest.raises(cs.AclError):  # 2-D parameters for a 1-D convolution
        e.run("Convolution", e.t(x), e.t(w), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 2, e.out(*ref.shape), 0)
    x, w = e.rand(2, 4, 3, 4), e.rand(4, 3, 3, 2)
    ref = conv_transpose_ref(x, w, 2, 1, 1, 2)
    y = e.out(*ref.shape)
    e.run("Convolution", e.t(x), e.t(w), None, [2, 2], [1, 1], [1, 1], True, [1, 1], 2, y, 0)
    e.check(y, ref, **tol)
    with pytest.raises(cs.AclError):  # outputPadding not below the stride or the dilation
        e.run("Convolution", e.t(x), e.t(w), None, [2, 2], [1, 1], [1, 1], True, [2, 2], 2, e.out(*ref.shape), 0)


@ALL
def test_batch_norm_training_and_backward(env, dt):
    e = env(dt)
    x, w, b = e.rand(4, 3, 2, 2), e.rand(3, lo=0.5, hi=1.5), e.rand(3)
    rm, rv = e.t(np.zeros(3)), e.t(np.ones(3))
    y, sm, si = e.out(4, 3, 2, 2), e.acl.tensor(shape=(3,)), e.acl.tensor(shape=(3,))
    e.run("BatchNorm", e.t(x), e.t(w), e.t(b), rm, rv, True, 0.1, 1e-5, y, sm, si)
    mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    inv = 1 / np.sqrt(var + 1e-5)
    xh = (x - mean[None, :, None, None]) * inv[None, :, None, None]
    loose = dict(rtol=max(DTYPES[dt][1]["rtol"] * 4, 1e-4), atol=max(DTYPES[dt][1]["atol"] * 4, 1e-4))
    e.check(y, xh * w[None, :, None, None] + b[None, :, None, None], **loose)
    e.check(rm, 0.1 * mean, **loose)
    e.check(rv, 0.9 + 0.1 * var * 16 / 15, **loose)
    np.testing.assert_allclose(sm.numpy(e.stream), mean, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(si.numpy(e.stream), inv, rtol=1e-3, atol=1e-3)
    g = e.rand(4, 3, 2, 2)
    gx, gw, gb = e.out(4, 3, 2, 2), e.out(3), e.out(3)
    e.run("BatchNormBackward", e.t(g), e.t(x), e.t(w), rm, rv, sm, si, True, 1e-5, [True, True, True], gx, gw, gb)
    n = 16
    sg, sgx = g.sum(axis=(0, 2, 3)), (g * xh).sum(axis=(0, 2, 3))
    ref = (w * inv)[None, :, None, None] * (g - sg[None, :, None, None] / n - xh * sgx[None, :, None, None] / n)
    e.check(gx, ref, **loose)
    e.check(gw, sgx, **loose)
    e.check(gb, sg, **loose)


@ALL
@pytest.mark.parametrize("mask", [True, False])
def test_max_pool2d_forward_backward(env, dt, mask):
    e = env(dt)
    x = e.rand(2, 3, 6, 6)
    y = e.out(2, 3, 3, 3)
    name = "MaxPool2dWithMask" if mask else "MaxPool2dWithIndices"
    if mask:
        ind = e.acl.tensor(shape=(2, 3, 4, ((9 + 15) // 16 + 1) * 32), dtype=cs.ACL_INT8)
    else:
        ind = e.acl.tensor(shape=(2, 3, 3, 3), dtype=cs.ACL_INT32)
    e.run(name, e.t(x), [2], [2], [0], [1], False, y, ind)
    blocks = x.reshape(2, 3, 3, 2, 3, 2).transpose(0, 1, 2, 4, 3, 5).reshape(2, 3, 3, 3, 4)
    e.check(y, blocks.max(-1))
    if not mask:
        am = blocks.argmax(-1)
        rows, cols = np.indices((3, 3))
        flat = (rows[None, None] * 2 + am // 2) * 6 + cols[None, None] * 2 + am % 2
        np.testing.assert_array_equal(ind.numpy(e.stream), flat)
    g = e.rand(2, 3, 3, 3)
    gi = e.out(2, 3, 6, 6)
    e.run(name + "Backward", e.t(g), e.t(x), ind, [2], [2], [0], [1], False, gi)
    ref = np.zeros_like(x)
    am = blocks.argmax(-1)
    for n, c, i, j in np.ndindex(2, 3, 3, 3):
        k = am[n, c, i, j]
        ref[n, c, 2 * i + k // 2, 2 * j + k % 2] += g[n, c, i, j]
    e.check(gi, ref)
    assert q(ref, dt).any()


@ALL
def test_dropout_gen_mask_and_do_mask(env, dt):
    e = env(dt)
    n, p = 1000, 0.3
    nbytes = (n + 127) // 128 * 16
    m1, m2, m3 = (e.acl.tensor(shape=(nbytes,), dtype=cs.ACL_UINT8) for _ in range(3))
    e.run("DropoutGenMaskV2", [10, 100], p, 42, 7, e.dt, m1)
    e.run("DropoutGenMaskV2", [10, 100], p, 42, 7, e.dt, m2)
    e.run("DropoutGenMaskV2", [10, 100], p, 42, 8, e.dt, m3)
    b1, b2, b3 = (np.unpackbits(m.numpy(e.stream), bitorder="little")[:n].astype(bool) for m in (m1, m2, m3))
    assert (b1 == b2).all() and (b1 != b3).any()  # a function of (seed, offset)
    assert abs(b1.mean() - (1 - p)) < 0.05
    x = e.rand(10, 100)
    y = e.out(10, 100)
    e.run("DropoutDoMask", e.t(x), m1, p, y)
    e.check(y, np.where(b1.reshape(10, 100), x / (1 - p), 0.0))
    with pytest.raises(cs.AclError):
        e.run("DropoutGenMaskV2", [10, 100], p, 42, 7, e.dt, e.acl.tensor(shape=(8,), dtype=cs.ACL_UINT8))


def test_amp_unscale_and_update_scale(acl):
    """aclnnForeachNonFiniteCheckAndUnscale: every gradient times invScale, foundInf 1 only when some element is
    NaN/inf (else kept); aclnnAmpUpdateScale: torch's _amp_update_scale_ rules, written into the outputs."""
    st = acl.stream()
    g1, g2 = np.array([1.0, -2.0, 4.0], np.float32), np.array([[0.5, 8.0]], np.float32)
    for bad, want_found in [(False, 0.0), (True, 1.0)]:
        a = g1.copy()
        if bad:
            a[1] = np.inf
        t1, t2 = acl.tensor(a), acl.tensor(g2)
        found, inv_scale = acl.tensor(np.zeros(1, np.float32)), acl.tensor(np.array([0.25], np.float32))
        acl.run("ForeachNonFiniteCheckAndUnscale", [t1, t2], found, inv_scale, stream=st)
        np.testing.assert_array_equal(t1.numpy(st), a * 0.25)
        np.testing.assert_array_equal(t2.numpy(st), g2 * 0.25)
        assert found.numpy(st)[0] == want_found
    scale, tracker = acl.tensor(np.array([8.0], np.float32)), acl.tensor(np.array([0], np.int32), dtype=cs.ACL_INT32)
    seen = []
    for found in (1.0, 0.0, 0.0, 0.0, 0.0):
        f = acl.tensor(np.array([found], np.float32))
        acl.run("AmpUpdateScale", scale, tracker, f, 2.0, 0.5, 2, scale, tracker, stream=st)
        seen.append((float(scale.numpy(st)[0]), int(tracker.numpy(st)[0])))
    assert seen == [(4.0, 0), (4.0, 1), (8.0, 0), (8.0, 1), (16.0, 0)]
    big = acl.tensor(np.array([3e38], np.float32))  # growth overflowing float32 keeps the scale
    acl.run(
        "AmpUpdateScale",
        big,
        acl.tensor(np.array([0], np.int32), dtype=cs.ACL_INT32),
        acl.tensor(np.zeros(1, np.float32)),
        2.0,
        0.5,
        1,
        big,
        acl.tensor(shape=(1,), dtype=cs.ACL_INT32),
        stream=st,
    )
    assert big.numpy(st)[0] == np.float32(3e38)
    # the float scale times the double factor, rounded once (torch: 3 * 1.1 -> 3.2999999523); the interval is
    # reached exactly (a tracker already past it does not grow)
    s3, tr = acl.tensor(np.array([3.0], np.float32)), acl.tensor(np.array([0], np.int32), dtype=cs.ACL_INT32)
    zero = acl.tensor(np.zeros(1, np.float32))
    acl.run("AmpUpdateScale", s3, tr, zero, 1.1, 0.5, 1, s3, tr, stream=st)
    assert s3.numpy(st)[0] == np.float32(3 * 1.1)
    tr5 = acl.tensor(np.array([5], np.int32), dtype=cs.ACL_INT32)
    acl.run("AmpUpdateScale", s3, tr5, zero, 2.0, 0.5, 3, s3, tr5, stream=st)
    assert (s3.numpy(st)[0], tr5.numpy(st)[0]) == (np.float32(3 * 1.1), 6)
    # float16 gradients are unscaled in float32, then rounded (torch rounds twice)
    g16 = acl.tensor(np.array([1 + 2**-10], np.float16), dtype=cs.ACL_FLOAT16)
    inv = np.float32(1 + 2**-11 - 2**-21)
    acl.run(
        "ForeachNonFiniteCheckAndUnscale",
        [g16],
        acl.tensor(np.zeros(1, np.float32)),
        acl.tensor(np.array([inv])),
        stream=st,
    )
    assert g16.numpy(st)[0] == np.float16(np.float32(np.float16(1 + 2**-10)) * inv)


def test_random_fills(acl):
    """aclnnInplaceNormal / InplaceUniform / InplaceRandom: moments and ranges of 40000 draws (5 sigma),
    the same (seed, offset) replaying its values, another offset not; refusals."""
    s = acl.stream()
    n = 40000

    def fill(name, *args, dtype=cs.ACL_FLOAT):
        t = acl.tensor(shape=(n,), dtype=dtype)
        acl.run(name, t, *args, stream=s)
        return t.numpy(s).astype(np.float64)

    g = fill("InplaceNormal", 3.0, 0.5, 11, 0)
    assert abs(g.mean() - 3.0) < 5 * 0.5 / n**0.5 and abs(g.std() - 0.5) < 5 * 0.5 / (2 * n) ** 0.5
    assert np.array_equal(g, fill("InplaceNormal", 3.0, 0.5, 11, 0))
    assert not np.array_equal(g, fill("InplaceNormal", 3.0, 0.5, 11, 4))
    u = fill("InplaceUniform", -2.0, 3.0, 5, 0, dtype=cs.ACL_FLOAT16)
    assert u.min() >= -2.0 and u.max() < 3.0 and abs(u.mean() - 0.5) < 5 * 5 / 12**0.5 / n**0.5
    k = fill("InplaceRandom", 3, 9, 5, 0, dtype=cs.ACL_INT32)
    assert set(np.unique(k)) == set(range(3, 9))
    for name, args, dtype in [
        ("InplaceNormal", (0.0, -1.0, 1, 0), cs.ACL_FLOAT),  # negative std
        ("InplaceUniform", (2.0, 1.0, 1, 0), cs.ACL_FLOAT),  # from > to
        ("InplaceNormal", (0.0, 1.0, 1, 0), cs.ACL_INT32),  # an integer tensor
        ("InplaceRandom", (4, 4, 1, 0), cs.ACL_INT64),  # empty range
    ]:
        with pytest.raises(cs.AclError):
            acl.run(name, acl.tensor(shape=(4,), dtype=dtype), *args, stream=s)


def test_equal(acl):
    """aclnnEqual (torch.equal): one bool, true only for the same shape and equal values (NaN unequal)."""
    s = acl.stream()

    def eq(a, b):
        o = acl.tensor(shape=(1,), dtype=cs.ACL_BOOL)
        acl.run("Equal", acl.tensor(np.asarray(a, np.float32)), acl.tensor(np.asarray(b, np.float32)), o, stream=s)
        return bool(o.numpy(s)[0])

    assert eq([1.0, 2.0], [1.0, 2.0]) and not eq([1.0, 2.0], [1.0, 2.5])
    assert not eq([1.0, 2.0], [[1.0, 2.0]]) and not eq([np.nan], [np.nan])


def test_cumprod_linspace_eye(acl):
    """aclnnCumprod (dim as an aclScalar, dtype -1 = out's) against np.cumprod, aclnnLinspace against
    np.linspace, aclnnEye against np.eye; refusals."""
    s = acl.stream()
    x = np.random.default_rng(3).uniform(-2, 2, (3, 5)).astype(np.float32)
    for d in (0, 1, -1):
        o = acl.tensor(shape=x.shape)
        acl.run("Cumprod", acl.tensor(x), d, -1, o, stream=s)
        np.testing.assert_allclose(o.numpy(s), np.cumprod(x.astype(np.float64), axis=d), rtol=1e-6)
    o = acl.tensor(shape=(9,))
    acl.run("Linspace", -1.5, 2.5, 9, o, stream=s)
    np.testing.assert_allclose(o.numpy(s), np.linspace(-1.5, 2.5, 9), rtol=1e-7)
    o = acl.tensor(shape=(3, 4), dtype=cs.ACL_INT32)
    acl.run("Eye", 3, 4, o, stream=s)
    np.testing.assert_array_equal(o.numpy(s), np.eye(3, 4))
    with pytest.raises(cs.AclError):  # dtype given and not out's
        acl.run("Cumprod", acl.tensor(x), 0, cs.ACL_INT32, acl.tensor(shape=x.shape), stream=s)
    with pytest.raises(cs.AclError):  # out of the wrong length
        acl.run("Linspace", 0.0, 1.0, 5, acl.tensor(shape=(4,)), stream=s)
