"""ops_misc.rs against numpy: repeat_interleave (np.repeat), index_add (np.add.at in float32, sequential as
torch), bincount (np.bincount), prelu and glu by their formulas, isclose (np.isclose), nansum
(np.nansum); refusals."""

import numpy as np
import pytest

import cannsim_ctypes as cs


def f32(a):
    return np.asarray(a, np.float32)


def test_repeat_interleave(acl):
    s = acl.stream()
    x = f32(np.arange(12).reshape(3, 4))

    def run(name, *args, shape, dtype=cs.ACL_FLOAT):
        o = acl.tensor(shape=shape, dtype=dtype)
        acl.run(name, *args, o, stream=s)
        return o.numpy(s)

    np.testing.assert_array_equal(
        run("RepeatInterleaveIntWithDim", acl.tensor(x), 2, 1, 8, shape=(3, 8)), np.repeat(x, 2, 1)
    )
    np.testing.assert_array_equal(run("RepeatInterleaveInt", acl.tensor(x), 2, 24, shape=(24,)), np.repeat(x, 2))
    reps = acl.tensor(np.array([2, 0, 1], np.int64), dtype=cs.ACL_INT64)
    np.testing.assert_array_equal(
        run("RepeatInterleaveWithDim", acl.tensor(x), reps, 0, 3, shape=(3, 4)), np.repeat(x, [2, 0, 1], 0)
    )
    got = run("RepeatInterleaveTensor", reps, 3, shape=(3,), dtype=cs.ACL_INT64)
    np.testing.assert_array_equal(got, np.repeat(np.arange(3), [2, 0, 1]))


def test_index_add_bincount(acl):
    s = acl.stream()
    rng = np.random.default_rng(1)
    x, src = f32(rng.normal(size=(5, 3))), f32(rng.normal(size=(4, 3)))
    idx = np.array([4, 0, 4, 2], np.int64)
    o = acl.tensor(shape=x.shape)
    acl.run("IndexAdd", acl.tensor(x), 0, acl.tensor(idx, dtype=cs.ACL_INT64), acl.tensor(src), 0.5, o, stream=s)
    ref = x.copy()
    np.add.at(ref, idx, np.float32(0.5) * src)  # float32, in index order, as torch
    np.testing.assert_array_equal(o.numpy(s), ref)
    v = rng.integers(0, 6, 50)
    w = f32(rng.uniform(size=50))
    c = acl.tensor(shape=(8,), dtype=cs.ACL_INT64)
    acl.run("Bincount", acl.tensor(v, dtype=cs.ACL_INT64), None, 8, c, stream=s)
    np.testing.assert_array_equal(c.numpy(s), np.bincount(v, minlength=8))
    c = acl.tensor(shape=(6,))
    acl.run("Bincount", acl.tensor(v, dtype=cs.ACL_INT64), acl.tensor(w), 0, c, stream=s)
    np.testing.assert_allclose(c.numpy(s), np.bincount(v, w), rtol=1e-6)


def test_prelu_glu_isclose_nansum(acl):
    s = acl.stream()
    rng = np.random.default_rng(2)
    x, w, g = f32(rng.normal(size=(2, 3, 4))), f32([0.1, 0.2, 0.3]), f32(rng.normal(size=(2, 3, 4)))
    o = acl.tensor(shape=x.shape)
    acl.run("Prelu", acl.tensor(x), acl.tensor(w), o, stream=s)
    np.testing.assert_allclose(o.numpy(s), np.where(x > 0, x, w[None, :, None] * x), rtol=1e-6)
    gx, gw = acl.tensor(shape=x.shape), acl.tensor(shape=(3,))
    acl.run("PreluBackward", acl.tensor(g), acl.tensor(x), acl.tensor(w), gx, gw, stream=s)
    np.testing.assert_allclose(gx.numpy(s), np.where(x > 0, g, w[None, :, None] * g), rtol=1e-6)
    np.testing.assert_allclose(gw.numpy(s), np.where(x > 0, 0, x * g).sum(axis=(0, 2)), rtol=1e-5)
    o = acl.tensor(shape=(2, 3, 2))
    acl.run("Glu", acl.tensor(x), -1, o, stream=s)
    a, b = x[..., :2].astype(np.float64), x[..., 2:].astype(np.float64)
    np.testing.assert_allclose(o.numpy(s), a / (1 + np.exp(-b)), rtol=1e-6)
    y = x + f32(rng.choice([0, 1e-6, 1e-3], size=x.shape))
    y[0, 0, 0], x[0, 0, 0] = np.nan, np.nan
    for equal_nan in (False, True):
        o = acl.tensor(shape=x.shape, dtype=cs.ACL_BOOL)
        acl.run("IsClose", acl.tensor(x), acl.tensor(y), 1e-5, 1e-8, equal_nan, o, stream=s)
        np.testing.assert_array_equal(o.numpy(s), np.isclose(x, y, 1e-5, 1e-8, equal_nan))
    o = acl.tensor(shape=(2, 1, 4))
    acl.run("ReduceNansum", acl.tensor(y), [1], True, cs.ACL_FLOAT, o, stream=s)
    np.testing.assert_allclose(o.numpy(s), np.nansum(y.astype(np.float64), 1, keepdims=True), rtol=1e-6)
    bad = [
        ("Glu", (acl.tensor(x), 1, acl.tensor(shape=(2, 1, 4)))),  # odd size along dim
        (
            "IsClose",
            (
                acl.tensor(x),
                acl.tensor(x, dtype=cs.ACL_FLOAT16),
                1e-5,
                1e-8,
                False,
                acl.tensor(shape=x.shape, dtype=cs.ACL_BOOL),
            ),
        ),
        ("Prelu", (acl.tensor(x), acl.tensor(f32([0.1, 0.2])), acl.tensor(shape=x.shape))),  # 2 weights, 3 channels
        (
            "IndexAdd",
            (acl.tensor(x), 0, acl.tensor(f32([0.0])), acl.tensor(x[:1]), 1.0, acl.tensor(shape=x.shape)),
        ),  # float index
    ]
    for name, args in bad:
        with pytest.raises(cs.AclError):
            acl.run(name, *args, stream=s)


def test_index_fill(acl):
    """aclnnIndexFillTensor (index a host array, negative from the end) and its in-place form."""
    s = acl.stream()
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    o = acl.tensor(shape=x.shape)
    acl.run("IndexFillTensor", acl.tensor(x), 1, [0, -1], 2.5, o, stream=s)
    ref = x.copy()
    ref[:, [0, 5]] = 2.5
    np.testing.assert_array_equal(o.numpy(s), ref)
    t = acl.tensor(np.arange(6, dtype=np.int64).reshape(2, 3), dtype=cs.ACL_INT64)
    acl.run("InplaceIndexFillTensor", t, 0, [1], -7, stream=s)
    np.testing.assert_array_equal(t.numpy(s), [[0, 1, 2], [-7, -7, -7]])
    with pytest.raises(cs.AclError):  # index out of range
        acl.run("IndexFillTensor", acl.tensor(x), 0, [4], 1.0, acl.tensor(shape=x.shape), stream=s)


def test_std_mean_dot_kthvalue_cummax_cross(acl):
    """aclnnStdMeanCorrection, Dot, Kthvalue, Cummax and LinalgCross against numpy."""
    s = acl.stream()
    rng = np.random.default_rng(4)
    x = f32(rng.normal(size=(3, 5)))
    sd, mean = acl.tensor(shape=(3,)), acl.tensor(shape=(3,))
    acl.run("StdMeanCorrection", acl.tensor(x), [1], 1, False, sd, mean, stream=s)
    np.testing.assert_allclose(sd.numpy(s), x.astype(np.float64).std(1, ddof=1), rtol=1e-6)
    np.testing.assert_allclose(mean.numpy(s), x.astype(np.float64).mean(1), rtol=1e-6, atol=1e-7)
    o = acl.tensor(shape=())
    acl.run("Dot", acl.tensor(x[0]), acl.tensor(x[1]), o, stream=s)
    np.testing.assert_allclose(o.numpy(s), np.dot(x[0].astype(np.float64), x[1]), rtol=1e-6)
    v, i = acl.tensor(shape=(3,)), acl.tensor(shape=(3,), dtype=cs.ACL_INT64)
    acl.run("Kthvalue", acl.tensor(x), 2, 1, False, v, i, stream=s)
    order = np.argsort(x, axis=1, kind="stable")[:, 1]
    np.testing.assert_array_equal(i.numpy(s), order)
    np.testing.assert_array_equal(v.numpy(s), x[np.arange(3), order])
    v, i = acl.tensor(shape=x.shape), acl.tensor(shape=x.shape, dtype=cs.ACL_INT64)
    acl.run("Cummax", acl.tensor(x), 1, v, i, stream=s)
    np.testing.assert_array_equal(v.numpy(s), np.maximum.accumulate(x, axis=1))
    a, b = f32(rng.normal(size=(4, 3))), f32(rng.normal(size=(1, 3)))
    o = acl.tensor(shape=(4, 3))
    acl.run("LinalgCross", acl.tensor(a), acl.tensor(b), -1, o, stream=s)
    np.testing.assert_allclose(o.numpy(s), np.cross(a.astype(np.float64), b), rtol=1e-5, atol=1e-6)
    with pytest.raises(cs.AclError):  # k beyond the axis
        acl.run(
            "Kthvalue",
            acl.tensor(x),
            6,
            1,
            False,
            acl.tensor(shape=(3,)),
            acl.tensor(shape=(3,), dtype=cs.ACL_INT64),
            stream=s,
        )
    with pytest.raises(cs.AclError):  # the cross axis is not of size 3
        acl.run("LinalgCross", acl.tensor(x), acl.tensor(x), 1, acl.tensor(shape=x.shape), stream=s)


def test_adaptive_max_pool2d(acl):
    """aclnnAdaptiveMaxPool2d: each adaptive window's first maximum and its in-plane index (numpy loop);
    the backward adds each gradient at its index."""
    s = acl.stream()
    x = f32(np.random.default_rng(5).normal(size=(2, 5, 7)))
    o, i = acl.tensor(shape=(2, 3, 2)), acl.tensor(shape=(2, 3, 2), dtype=cs.ACL_INT64)
    acl.run("AdaptiveMaxPool2d", acl.tensor(x), [3, 2], o, i, stream=s)
    ref_i = np.zeros((2, 3, 2), np.int64)
    for p in range(2):
        for a in range(3):
            for b in range(2):
                y0, y1, x0, x1 = a * 5 // 3, -(-(a + 1) * 5 // 3), b * 7 // 2, -(-(b + 1) * 7 // 2)
                win = x[p, y0:y1, x0:x1]
                r, c = np.unravel_index(np.argmax(win), win.shape)
                ref_i[p, a, b] = (y0 + r) * 7 + x0 + c
    np.testing.assert_array_equal(i.numpy(s), ref_i)
    np.testing.assert_array_equal(
        o.numpy(s), np.take_along_axis(x.reshape(2, -1), ref_i.reshape(2, -1), 1).reshape(2, 3, 2)
    )
    g = f32(np.arange(12).reshape(2, 3, 2))
    gx = acl.tensor(shape=x.shape)
    acl.run("AdaptiveMaxPool2dBackward", acl.tensor(g), acl.tensor(x), i, gx, stream=s)
    ref = np.zeros((2, 35))
    for p in range(2):
        np.add.at(ref[p], ref_i[p].ravel(), g[p].ravel())
    np.testing.assert_array_equal(gx.numpy(s), ref.reshape(x.shape))


def test_cdist_and_shifts(acl):
    """aclnnCdist (p = 2, 1, 0, inf) against numpy; LeftShift(s) / RightShift on int32 as torch (a shift
    outside [0, 32) gives 0, or the sign fill to the right)."""
    s = acl.stream()
    rng = np.random.default_rng(6)
    a, b = f32(rng.normal(size=(3, 4))), f32(rng.normal(size=(5, 4)))
    diff = np.abs(a[:, None, :].astype(np.float64) - b[None, :, :])
    for p, ref in [
        (2.0, np.sqrt((diff**2).sum(-1))),
        (1.0, diff.sum(-1)),
        (0.0, (diff != 0).sum(-1)),
        (np.inf, diff.max(-1)),
    ]:
        o = acl.tensor(shape=(3, 5))
        acl.run("Cdist", acl.tensor(a), acl.tensor(b), p, 0, o, stream=s)
        np.testing.assert_allclose(o.numpy(s), ref, rtol=1e-6)
    x = np.array([-5, -1, 0, 1, 7, 1 << 30], np.int32)
    k = np.array([1, 31, 32, 40, -1, 2], np.int32)

    def run(name, *args):
        o = acl.tensor(shape=(6,), dtype=cs.ACL_INT32)
        acl.run(name, acl.tensor(x, dtype=cs.ACL_INT32), *args, o, stream=s)
        return o.numpy(s)

    inside = (k >= 0) & (k < 32)
    kk = np.where(inside, k, 0)
    np.testing.assert_array_equal(
        run("LeftShift", acl.tensor(k, dtype=cs.ACL_INT32)), np.where(inside, np.left_shift(x, kk), 0)
    )
    np.testing.assert_array_equal(
        run("RightShift", acl.tensor(k, dtype=cs.ACL_INT32)), np.where(inside, x >> kk, np.where(x < 0, -1, 0))
    )
    np.testing.assert_array_equal(run("LeftShifts", 3), np.left_shift(x, 3))


def num_grad(fn, p, h=1e-6):
    """Central differences of the scalar fn at float64 p, one element at a time."""
    out = np.zeros_like(p)
    for i in np.ndindex(p.shape):
        hi, lo = p.copy(), p.copy()
        hi[i] += h
        lo[i] -= h
        out[i] = (fn(hi) - fn(lo)) / (2 * h)
    return out


def test_swiglu_and_rms_norm_against_numpy(acl):
    """aclnnSwiGlu(+Grad) (silu(a)·b of the halves) and aclnnRmsNorm(+Grad) (ops-nn's formulas, gamma over
    the last two dims), gradients against central differences of the float64 forward."""
    s, rng = acl.stream(), np.random.default_rng(3)
    x = f32(rng.normal(size=(3, 2, 6)))
    a, b = x[..., :3].astype(np.float64), x[..., 3:].astype(np.float64)
    o = acl.tensor(shape=(3, 2, 3))
    acl.run("SwiGlu", acl.tensor(x), -1, o, stream=s)
    np.testing.assert_allclose(o.numpy(s), a / (1 + np.exp(-a)) * b, rtol=1e-6)
    g = f32(rng.normal(size=(3, 2, 3)))
    o = acl.tensor(shape=x.shape)
    acl.run("SwiGluGrad", acl.tensor(g), acl.tensor(x), 2, o, stream=s)

    def swiglu_sum(v):
        va, vb = v[..., :3], v[..., 3:]
        return (va / (1 + np.exp(-va)) * vb * g).sum()

    np.testing.assert_allclose(o.numpy(s), num_grad(swiglu_sum, x.astype(np.float64)), rtol=1e-5, atol=1e-6)
    o = acl.tensor(shape=(3, 1, 6))
    acl.run("SwiGlu", acl.tensor(x), 1, o, stream=s)  # halves along dim 1
    np.testing.assert_allclose(
        o.numpy(s), (x[:, :1] / (1 + np.exp(-x[:, :1].astype(np.float64)))) * x[:, 1:], rtol=1e-6
    )

    gamma = f32(rng.normal(size=(2, 6)))
    y, rstd = acl.tensor(shape=x.shape), acl.tensor(shape=(3, 1, 1))
    acl.run("RmsNorm", acl.tensor(x), acl.tensor(gamma), 1e-5, y, rstd, stream=s)
    xd = x.astype(np.float64)
    r = 1 / np.sqrt((xd**2).mean(axis=(1, 2), keepdims=True) + 1e-5)
    np.testing.assert_allclose(rstd.numpy(s), r, rtol=1e-6)
    np.testing.assert_allclose(y.numpy(s), xd * r * gamma, rtol=1e-6, atol=1e-7)
    dy = f32(rng.normal(size=x.shape))
    dx, dgamma = acl.tensor(shape=x.shape), acl.tensor(shape=(2, 6))
    acl.run("RmsNormGrad", acl.tensor(dy), acl.tensor(x), rstd, acl.tensor(gamma), dx, dgamma, stream=s)

    def rms_sum(v, gm):
        return (v / np.sqrt((v**2).mean(axis=(1, 2), keepdims=True) + 1e-5) * gm * dy).sum()

    np.testing.assert_allclose(dx.numpy(s), num_grad(lambda v: rms_sum(v, gamma), xd), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(
        dgamma.numpy(s), num_grad(lambda gm: rms_sum(xd, gm), gamma.astype(np.float64)), rtol=1e-4, atol=1e-5
    )
    bad = [
        ("SwiGlu", (acl.tensor(x), 1, acl.tensor(shape=(3, 2, 3)))),  # halves along dim 1 are [3, 1, 6]
        ("SwiGlu", (acl.tensor(x[:, :1]), 1, acl.tensor(shape=(3, 1, 6)))),  # odd size 1 along dim 1
        (
            "RmsNorm",
            (acl.tensor(x), acl.tensor(f32(np.ones(4))), 1e-5, acl.tensor(shape=x.shape), acl.tensor(shape=(3, 2, 1))),
        ),
        ("RmsNorm", (acl.tensor(x), acl.tensor(gamma), 1e-5, acl.tensor(shape=x.shape), acl.tensor(shape=(3, 2, 1)))),
    ]
    for name, args in bad:
        with pytest.raises(cs.AclError):
            acl.run(name, *args, stream=s)


def test_fast_gelu_and_add_rms_norm_against_numpy(acl):
    """aclnnFastGelu(+Backward) (ops-nn's formula; the gradient against central differences, the tails
    included) and aclnnAddRmsNorm (xOut = x1 + x2, then RmsNorm of it)."""
    s, rng = acl.stream(), np.random.default_rng(4)
    x = f32(np.concatenate([rng.normal(size=10) * 3, [-80.0, 80.0]]))
    xd = x.astype(np.float64)

    def fast_gelu(v):
        return v / (1 + np.exp(-1.702 * np.abs(v))) * np.exp(0.851 * (v - np.abs(v)))

    o = acl.tensor(shape=x.shape)
    acl.run("FastGelu", acl.tensor(x), o, stream=s)
    np.testing.assert_allclose(o.numpy(s), fast_gelu(xd), rtol=1e-6, atol=1e-30)
    g = f32(rng.normal(size=x.shape))
    acl.run("FastGeluBackward", acl.tensor(g), acl.tensor(x), o, stream=s)
    np.testing.assert_allclose(o.numpy(s), num_grad(lambda v: (fast_gelu(v) * g).sum(), xd), rtol=1e-5, atol=1e-6)
    a, b, gamma = (f32(rng.normal(size=sh)) for sh in [(3, 4), (3, 4), (4,)])
    y, rstd, xo = acl.tensor(shape=(3, 4)), acl.tensor(shape=(3, 1)), acl.tensor(shape=(3, 4))
    acl.run("AddRmsNorm", acl.tensor(a), acl.tensor(b), acl.tensor(gamma), 1e-6, y, rstd, xo, stream=s)
    xs = a.astype(np.float64) + b
    r = 1 / np.sqrt((xs**2).mean(-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(xo.numpy(s), xs, rtol=1e-6)
    np.testing.assert_allclose(rstd.numpy(s), r, rtol=1e-6)
    np.testing.assert_allclose(y.numpy(s), xs * r * gamma, rtol=1e-6, atol=1e-7)
    # a zero-size gamma: every row is empty, rstd is NaN (torch's mean of nothing), not left unwritten
    stale = acl.tensor(f32(np.full((3, 1), 7.0)))
    acl.run(
        "RmsNorm", acl.tensor(shape=(3, 0)), acl.tensor(shape=(0,)), 1e-6, acl.tensor(shape=(3, 0)), stale, stream=s
    )
    assert np.isnan(stale.numpy(s)).all()
    with pytest.raises(cs.AclError):  # x2 of another shape
        acl.run("AddRmsNorm", acl.tensor(a), acl.tensor(b[:2]), acl.tensor(gamma), 1e-6, y, rstd, xo, stream=s)


def test_scaled_masked_softmax_against_numpy(acl):
    """aclnnScaledMaskedSoftmax(+Backward): softmax of x·scale with masked elements at -10000 (a broadcast mask,
    and the triangle of fixTriuMask), the gradient zero where masked; a fully masked row is uniform."""
    s, rng = acl.stream(), np.random.default_rng(5)
    x = f32(rng.normal(size=(2, 3, 4, 4)))
    mask = rng.random((1, 3, 4, 4)) < 0.3
    mask[0, 0, 1] = True  # one fully masked row
    for triu in (False, True):
        m = np.broadcast_to(mask, x.shape) if not triu else np.broadcast_to(np.triu(np.ones((4, 4)), 1) > 0, x.shape)
        z = np.where(m, -10000.0, x.astype(np.float64) * 0.5)
        e = np.exp(z - z.max(-1, keepdims=True))
        ref = e / e.sum(-1, keepdims=True)
        y = acl.tensor(shape=x.shape)
        acl.run("ScaledMaskedSoftmax", acl.tensor(x), acl.tensor(mask, dtype=cs.ACL_BOOL), 0.5, triu, y, stream=s)
        np.testing.assert_allclose(y.numpy(s), ref, rtol=1e-6, atol=1e-7)
        g = f32(rng.normal(size=x.shape))
        o = acl.tensor(shape=x.shape)
        acl.run(
            "ScaledMaskedSoftmaxBackward", acl.tensor(g), y, acl.tensor(mask, dtype=cs.ACL_BOOL), 0.5, triu, o, stream=s
        )
        yv = y.numpy(s).astype(np.float64)
        gref = np.where(m, 0.0, (g - (g * yv).sum(-1, keepdims=True)) * yv * 0.5)
        np.testing.assert_allclose(o.numpy(s), gref, rtol=1e-6, atol=1e-7)
    with pytest.raises(cs.AclError):  # a float mask
        acl.run("ScaledMaskedSoftmax", acl.tensor(x), acl.tensor(x), 0.5, False, acl.tensor(shape=x.shape), stream=s)
