"""aclnn operators checked against independent numpy references (forward and backward), f32/f16/bf16."""

import math

import numpy as np
import pytest

import cannsim_ctypes as cs

DTYPES = {
    "float32": (cs.ACL_FLOAT, dict(rtol=1e-5, atol=1e-5)),
    "float16": (cs.ACL_FLOAT16, dict(rtol=3e-3, atol=5e-3)),
    "bfloat16": (cs.ACL_BF16, dict(rtol=2e-2, atol=3e-2)),
}
ALL = pytest.mark.parametrize("dt", list(DTYPES))
ERF = np.vectorize(math.erf)


def gelu_tanh(x):
    """torch's approximate="tanh" form, in float64 (CANN's aclnnGelu computes this form)."""
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def gelu_tanh_grad(x):
    th = np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))
    return 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x * x)


def q(x, dt):
    """Round float values to dtype `dt` (returned as float64)."""
    x = np.asarray(x, dtype=np.float32)
    if dt == "float16":
        x = x.astype(np.float16).astype(np.float32)
    elif dt == "bfloat16":
        x = cs.bf16_bits_to_f32(cs.f32_to_bf16_bits(x))
    return x.astype(np.float64)


class Env:
    def __init__(self, acl, dt, seed=0):
        self.acl, self.name = acl, dt
        self.dt, self.tol = DTYPES[dt]
        self.rng = np.random.default_rng(seed)
        self.stream = acl.stream()

    def rand(self, *shape, lo=-2.0, hi=2.0):
        return q(self.rng.uniform(lo, hi, shape), self.name)

    def t(self, x):
        return self.acl.tensor(np.asarray(x, np.float32), dtype=self.dt)

    def out(self, *shape, dtype=None):
        return self.acl.tensor(shape=shape, dtype=self.dt if dtype is None else dtype)

    def run(self, name, *args):
        self.acl.run(name, *args, stream=self.stream)

    def check(self, dev, ref, **kw):
        tol = dict(self.tol, **kw)
        np.testing.assert_allclose(dev.numpy(self.stream).astype(np.float64), q(ref, self.name), **tol)


def dev(e, x):
    """A device tensor of `x` and its values as stored (rounded to the dtype), float64."""
    t = e.t(x)
    return t, t.numpy(e.stream).astype(np.float64)


@pytest.fixture
def env(acl, request):
    return lambda dt: Env(acl, dt)


@ALL
def test_binary_ops(env, dt):
    e = env(dt)
    a, b = e.rand(3, 4), e.rand(4, lo=0.5, hi=2.0)
    A, B = e.t(a), e.t(b)
    for name, args, ref in [
        ("Add", (2.0,), a + 2.0 * b),
        ("Sub", (0.5,), a - 0.5 * b),
        ("Mul", (), a * b),
        ("Div", (), a / b),
    ]:
        o = e.out(3, 4)
        e.run(name, A, B, *args, o)
        e.check(o, ref)
    for name, args, ref in [
        ("Adds", (1.5, 2.0), a + 3.0),
        ("Subs", (1.5, 2.0), a - 3.0),
        ("Muls", (-1.5,), a * -1.5),
        ("Divs", (4.0,), a / 4.0),
    ]:
        o = e.out(3, 4)
        e.run(name, A, *args, o)
        e.check(o, ref)
    cur = a.copy()
    for name, args, fn in [
        ("InplaceAdd", (B, 2.0), lambda x: x + 2 * b),
        ("InplaceSub", (B, 1.0), lambda x: x - b),
        ("InplaceMul", (B,), lambda x: x * b),
        ("InplaceDiv", (B,), lambda x: x / b),
        ("InplaceAdds", (0.25, 2.0), lambda x: x + 0.5),
        ("InplaceMuls", (3.0,), lambda x: x * 3),
    ]:
        e.run(name, A, *args)
        cur = q(fn(cur), dt)
        e.check(A, cur)


@ALL
def test_matmul_family(env, dt):
    e = env(dt)
    a, b, b3 = e.rand(5, 7), e.rand(7, 3), e.rand(2, 5, 7)
    c3 = e.rand(2, 7, 3)
    A, B, A3, C3 = e.t(a), e.t(b), e.t(b3), e.t(c3)
    o = e.out(5, 3)
    e.run("Mm", A, B, o, 0)
    e.check(o, a @ b)
    o = e.out(2, 5, 3)
    e.run("Matmul", A3, B, o, 1)  # broadcast batch
    e.check(o, b3 @ b)
    v = e.rand(7)
    o = e.out(3)
    e.run("Matmul", e.t(v), B, o, 0)  # 1-D @ 2-D
    e.check(o, v @ b)
    o = e.out(2, 5, 3)
    e.run("BatchMatMul", A3, C3, o, 0)
    e.check(o, b3 @ c3)
    bias = e.rand(3)
    o = e.out(5, 3)
    e.run("Addmm", e.t(bias), A, B, 0.5, 2.0, o, 0)
    e.check(o, 0.5 * bias + 2.0 * (a @ b))
    s = e.rand(5, 3)
    S = e.t(s)
    e.run("InplaceAddmm", S, A, B, 1.0, -1.0, 0)
    e.check(S, s - a @ b)


def test_gelu_forms_at_extremes(env):
    """aclnnGelu / GeluBackward (tanh form, CANN's sigmoid spelling) far in the tails, where exp overflows:
    0 and x forward, 0 and 1 times the gradient backward, NaN through; GeluV2 mode 0 stays the erf form."""
    e = env("float32")
    # around -10 a float32 evaluation of CANN's gradient formula overflows (px r), above 1e13 r does
    x = np.array([-200.0, -30.0, -10.05, -10.0, -9.9, -5.0, 0.0, 5.0, 30.0, 200.0, 1e12, 2e13, 1e15, np.nan])
    o = e.out(len(x))
    with np.errstate(over="ignore", invalid="ignore"):
        e.run("Gelu", e.t(x), o)
        np.testing.assert_allclose(o.numpy(e.stream), gelu_tanh(x), rtol=1e-6, atol=1e-7)
        o = e.out(len(x))
        e.run("GeluBackward", e.t(np.ones(len(x))), e.t(x), o)
        want = np.where(x > 1e6, 1.0, np.where(x < -1e6, 0.0, gelu_tanh_grad(x)))
        np.testing.assert_allclose(o.numpy(e.stream), want, rtol=1e-6, atol=1e-7)
    assert not np.isnan(o.numpy(e.stream)[:-1]).any()
    y = np.linspace(-3, 3, 8)
    o = e.out(8)
    e.run("GeluV2", e.t(y), 0, o)
    np.testing.assert_allclose(o.numpy(e.stream), 0.5 * y * (1 + ERF(y / math.sqrt(2))), rtol=1e-6, atol=1e-7)


@ALL
def test_activations_forward_backward(env, dt):
    e = env(dt)
    x, g = e.rand(4, 6), e.rand(4, 6)
    X, G = e.t(x), e.t(g)
    o = e.out(4, 6)
    e.run("Relu", X, o)
    e.check(o, np.maximum(x, 0))
    o = e.out(4, 6)
    e.run("ThresholdBackward", G, X, 0.0, o)
    e.check(o, np.where(x > 0, g, 0))
    o = e.out(4, 6)
    # aclnnGelu is CANN's tanh form (ops-nn activation/gelu), not the exact erf form
    e.run("Gelu", X, o)
    e.check(o, gelu_tanh(x))
    assert np.abs(gelu_tanh(x) - 0.5 * x * (1 + ERF(x / math.sqrt(2)))).max() > 1e-5  # the forms are told apart
    o = e.out(4, 6)
    e.run("GeluBackward", G, X, o)
    e.check(o, g * gelu_tanh_grad(x))
    X2 = e.t(x)
    e.run("InplaceRelu", X2)
    e.check(X2, np.maximum(x, 0))


@ALL
@pytest.mark.parametrize("dim", [-1, 0])
def test_softmax_family(env, dt, dim):
    e = env(dt)
    x, g = e.rand(3, 5), e.rand(3, 5)
    X, G = e.t(x), e.t(g)
    ex = np.exp(x - x.max(dim, keepdims=True))
    sm = ex / ex.sum(dim, keepdims=True)
    lsm = x - x.max(dim, keepdims=True) - np.log(ex.sum(dim, keepdims=True))
    Y, LY = e.out(3, 5), e.out(3, 5)
    e.run("Softmax", X, dim, Y)
    e.run("LogSoftmax", X, dim, LY)
    e.check(Y, sm)
    e.check(LY, lsm)
    y, ly = Y.numpy(e.stream).astype(np.float64), LY.numpy(e.stream).astype(np.float64)
    o = e.out(3, 5)
    e.run("SoftmaxBackward", G, Y, dim, o)
    e.check(o, y * (g - (g * y).sum(dim, keepdims=True)))
    o = e.out(3, 5)
    e.run("LogSoftmaxBackward", G, LY, dim, o)
    e.check(o, g - np.exp(ly) * g.sum(dim, keepdims=True))


@ALL
@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_nll_loss(env, dt, reduction):
    e = env(dt)
    n, c = 6, 4
    x = e.rand(n, c)
    tgt = np.array([0, 3, 1, -100, 2, 3], np.int64)
    w = e.rand(c, lo=0.5, hi=1.5)
    X, T, W = e.t(x), e.acl.tensor(tgt, dtype=cs.ACL_INT64), e.t(w)
    out = e.out(n) if reduction == 0 else e.out()
    tw = e.out()
    e.run("NLLLoss", X, T, W, reduction, -100, out, tw)
    valid = tgt != -100
    per = np.where(valid, -w[np.where(valid, tgt, 0)] * x[np.arange(n), np.where(valid, tgt, 0)], 0)
    total = w[tgt[valid]].sum()
    ref = per if reduction == 0 else (per.sum() / total if reduction == 1 else per.sum())
    e.check(out, ref)
    e.check(tw, total)
    g = e.rand(n) if reduction == 0 else e.rand(1)[0]
    G = e.t(g)
    o = e.out(n, c)
    e.run("NLLLossBackward", G, X, T, W, reduction, -100, tw, o)
    ref = np.zeros((n, c))
    for i in range(n):
        if valid[i]:
            gi = g[i] if reduction == 0 else g
            ref[i, tgt[i]] = -w[tgt[i]] * gi / (q(total, dt) if reduction == 1 else 1)
    e.check(o, ref)


def ln_ref(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(var + eps)
    return (x - mu) * rstd * w + b, mu, rstd


@ALL
def test_layer_norm(env, dt):
    e = env(dt)
    x, w, b, g = e.rand(2, 3, 8), e.rand(8), e.rand(8), e.rand(2, 3, 8)
    X, W, B, G = e.t(x), e.t(w), e.t(b), e.t(g)
    Y, MU, RS = e.out(2, 3, 8), e.acl.tensor(shape=(2, 3, 1)), e.acl.tensor(shape=(2, 3, 1))
    e.run("LayerNorm", X, [8], W, B, 1e-5, Y, MU, RS)
    y, mu, rstd = ln_ref(x, w, b, 1e-5)
    e.check(Y, y)
    np.testing.assert_allclose(MU.numpy(e.stream), mu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(RS.numpy(e.stream), rstd, rtol=1e-5, atol=1e-6)
    DX, DW, DB = e.out(2, 3, 8), e.out(8), e.out(8)
    e.run("LayerNormBackward", G, X, [8], MU, RS, W, B, [True, True, True], DX, DW, DB)
    xhat = (x - mu) * rstd
    gw = g * w
    dx = rstd * (gw - gw.mean(-1, keepdims=True) - xhat * (gw * xhat).mean(-1, keepdims=True))
    e.check(DX, dx)
    e.check(DW, (g * xhat).sum((0, 1)))
    e.check(DB, g.sum((0, 1)))


def test_layer_norm_backward_matches_finite_differences(acl):
    """Independent check of the backward formulas: numeric gradients of the numpy forward."""
    e = Env(acl, "float32", seed=3)
    x, w, b, g = e.rand(4, 6), e.rand(6), e.rand(6), e.rand(4, 6)
    X, W, B, G = e.t(x), e.t(w), e.t(b), e.t(g)
    Y, MU, RS = e.out(4, 6), e.out(4, 1), e.out(4, 1)
    e.run("LayerNorm", X, [6], W, B, 1e-5, Y, MU, RS)
    DX, DW, DB = e.out(4, 6), e.out(6), e.out(6)
    e.run("LayerNormBackward", G, X, [6], MU, RS, W, None, [True, True, True], DX, DW, DB)

    def f(x, w, b):
        return (ln_ref(x, w, b, 1e-5)[0] * g).sum()

    h = 1e-6

    def num(arr, fn):
        return np.array(
            [(fn(arr + h * d) - fn(arr - h * d)) / (2 * h) for d in np.eye(arr.size).reshape((arr.size,) + arr.shape)]
        ).reshape(arr.shape)

    np.testing.assert_allclose(DX.numpy(e.stream), num(x, lambda v: f(v, w, b)), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(DW.numpy(e.stream), num(w, lambda v: f(x, v, b)), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(DB.numpy(e.stream), num(b, lambda v: f(x, w, v)), rtol=1e-3, atol=1e-4)
    # GELU and log-softmax + NLL backward against numeric gradients too
    xs = e.rand(10)
    GB = e.out(10)
    e.run("GeluBackward", e.t(np.ones(10)), e.t(xs), GB)

    num_grad = (gelu_tanh(xs + h) - gelu_tanh(xs - h)) / (2 * h)
    np.testing.assert_allclose(GB.numpy(e.stream), num_grad, rtol=1e-4, atol=1e-5)


@ALL
def test_embedding(env, dt):
    e = env(dt)
    w = e.rand(7, 4)
    idx = np.array([[1, 0, 6], [6, 3, 1]], np.int64)
    W, IDX = e.t(w), e.acl.tensor(idx, dtype=cs.ACL_INT64)
    o = e.out(2, 3, 4)
    e.run("Embedding", W, IDX, o)
    e.check(o, w[idx])
    g = e.rand(2, 3, 4)
    for pad, scale in [(2**64 - 1, False), (6, True)]:
        o = e.out(7, 4)
        e.run("EmbeddingDenseBackward", e.t(g), IDX, 7, pad, scale, o)
        ref = np.zeros((7, 4))
        cnt = np.bincount(idx.ravel(), minlength=7)
        for r, i in enumerate(idx.ravel()):
            if pad != i:
                ref[i] += g.reshape(-1, 4)[r] / (cnt[i] if scale else 1)
        e.check(o, ref)


@ALL
def test_cast(env, dt):
    e = env(dt)
    x = e.rng.uniform(-50, 50, (3, 5)).astype(np.float32)
    X = e.acl.tensor(x)
    o = e.out(3, 5)
    e.run("Cast", X, e.dt, o)
    e.check(o, x)
    back = e.acl.tensor(shape=(3, 5), dtype=cs.ACL_FLOAT)
    e.run("Cast", o, cs.ACL_FLOAT, back)
    np.testing.assert_array_equal(back.numpy(e.stream), q(x, dt).astype(np.float32))
    i32 = e.acl.tensor(shape=(3, 5), dtype=cs.ACL_INT32)
    e.run("Cast", o, cs.ACL_INT32, i32)
    np.testing.assert_array_equal(i32.numpy(e.stream), np.trunc(q(x, dt)).astype(np.int32))


@ALL
def test_reductions(env, dt):
    e = env(dt)
    x = e.rand(2, 3, 4)
    X = e.t(x)
    for dims, keep, shape in [([0], False, (3, 4)), ([-1], True, (2, 3, 1)), ([0, 2], False, (3,)), ([], False, ())]:
        o = e.out(*shape)
        e.run("ReduceSum", X, dims, keep, e.dt, o)
        e.check(o, x.sum(axis=tuple(dims) if dims else None, keepdims=keep))
        m = e.out(*shape)
        e.run("Mean", X, dims, keep, e.dt, m)
        e.check(m, x.mean(axis=tuple(dims) if dims else None, keepdims=keep))
    o = e.acl.tensor(shape=(3, 4), dtype=cs.ACL_FLOAT)  # f16/bf16 in, f32 accumulate/out
    e.run("ReduceSum", X, [0], False, cs.ACL_FLOAT, o)
    np.testing.assert_allclose(o.numpy(e.stream), x.sum(0), rtol=1e-5, atol=1e-5)


@ALL
def test_copy_zero_fill_cat(env, dt):
    e = env(dt)
    src = e.rand(4)
    dst = e.out(3, 4)
    e.run("InplaceCopy", dst, e.acl.tensor(src.astype(np.float32)))  # broadcast + f32 -> dt
    e.check(dst, np.broadcast_to(src, (3, 4)))
    e.run("InplaceFillScalar", dst, 2.5)
    e.check(dst, np.full((3, 4), 2.5))
    e.run("InplaceZero", dst)
    e.check(dst, np.zeros((3, 4)))
    a, b = e.rand(2, 3), e.rand(2, 2)
    o = e.out(2, 5)
    e.run("Cat", [e.t(a), e.t(b)], 1, o)
    e.check(o, np.concatenate([a, b], 1))


@ALL
@pytest.mark.parametrize("amsgrad", [False, True])
def test_apply_adamw(env, dt, amsgrad):
    e = env(dt)
    var, m, v, g = e.rand(5), e.rand(5), e.rand(5, lo=0, hi=1), e.rand(5)
    mx = e.rand(5, lo=0, hi=1)
    lr, wd, b1, b2, eps, step = 0.01, 0.1, 0.9, 0.999, 1e-8, 3
    V, M, VV, G, MX = e.t(var), e.t(m), e.t(v), e.t(g), e.t(mx)

    def sc(val):
        return e.acl.tensor(np.array([val], np.float32))

    e.run(
        "ApplyAdamW",
        V,
        M,
        VV,
        sc(b1**step),
        sc(b2**step),
        sc(lr),
        sc(wd),
        sc(b1),
        sc(b2),
        sc(eps),
        G,
        MX if amsgrad else None,
        amsgrad,
        False,
    )
    var_r = var * (1 - lr * wd)
    m_r = b1 * m + (1 - b1) * g
    v_r = b2 * v + (1 - b2) * g * g
    vv = np.maximum(mx, v_r) if amsgrad else v_r
    var_r = var_r - lr * (m_r / (1 - b1**step)) / (np.sqrt(vv / (1 - b2**step)) + eps)
    e.check(V, var_r)
    e.check(M, m_r)
    e.check(VV, v_r)
    if amsgrad:
        e.check(MX, vv)


def test_views_with_strides_and_offsets(acl):
    """Strided / offset views are honoured for inputs and outputs; bytes outside the view are untouched."""
    e = Env(acl, "float32", seed=5)
    base = e.rand(6, 5)
    B = e.t(base)
    # input: transposed 3x4 window starting at element (1, 1): shape (4, 3), strides (1, 5), offset 6
    view = acl.create_tensor((4, 3), cs.ACL_FLOAT, B.ptr, strides=(1, 5), offset=6, storage=(30,))
    win = base[1:4, 1:5].T
    o = e.out(4, 3)
    e.run("Adds", cs.VP(view), 1.0, 1.0, o)
    e.check(o, win + 1)
    # output: write every other column of a (4, 6) buffer at offset 1 (strides (6, 2))
    ob = e.t(np.full((4, 6), -7.0))
    oview = acl.create_tensor((4, 3), cs.ACL_FLOAT, ob.ptr, strides=(6, 2), offset=1, storage=(24,))
    e.run("Mul", cs.VP(view), o, cs.VP(oview))
    ref = np.full((4, 6), -7.0)
    ref[:, 1::2] = win * (win + 1)
    e.check(ob, ref)
    # matmul on transposed views
    k = e.rand(5, 2)
    mo = e.out(6, 2)
    bt = acl.create_tensor((5, 6), cs.ACL_FLOAT, B.ptr, strides=(1, 5))
    e.run("Mm", cs.VP(acl.create_tensor((6, 5), cs.ACL_FLOAT, B.ptr)), e.t(k), mo, 0)
    e.check(mo, base @ k)
    mo2 = e.out(5, 2)
    e.run("Mm", cs.VP(bt), e.t(base[:, :2]), mo2, 0)
    e.check(mo2, base.T @ base[:, :2])


def test_bad_arguments(acl):
    NULLPTR, INVALID = 161001, 161002
    a, b, o = acl.tensor(np.ones((2, 3), np.float32)), acl.tensor(np.ones((4,), np.float32)), acl.tensor(shape=(2, 3))

    def st(name, *args):
        r = acl.prepare(name, *args)
        acl.release(r[3])
        return r[0]

    assert st("Add", a, b, 1.0, o) == INVALID  # shapes do not broadcast
    assert st("Add", a, a, 1.0, None) == NULLPTR
    assert st("Add", a, a, None, o) == NULLPTR  # alpha is required
    assert st("Mm", a, a, o, 0) == INVALID  # inner dims differ
    assert st("Mm", a, acl.tensor(np.ones((3, 3), np.float32)), o, 9) == INVALID  # cubeMathType
    i = acl.tensor(np.ones((2, 3), np.int32), dtype=cs.ACL_INT32)
    assert st("Softmax", i, -1, o) == INVALID  # integer softmax unsupported
    assert st("Softmax", a, 2, o) == INVALID  # dim out of range
    assert st("Cast", a, cs.ACL_FLOAT16, o) == INVALID  # out dtype != requested
    assert st("NLLLoss", a, a, None, 1, -100, acl.tensor(shape=()), acl.tensor(shape=())) == INVALID  # float target
    assert st("LayerNorm", a, [4], None, None, 1e-5, o, None, None) == INVALID
    assert "normalizedShape" in acl.errmsg()


def test_int64_beyond_2_53_is_exact_or_refused(acl):
    """int64 arithmetic in i64 (the f64 path rounded 2^60 + 1 to 2^60): Add / Adds / Mul / Remainder wrap as
    torch's integer kernels, a fill of any integer is exact, and an integer scalar that f64 cannot hold is
    refused with an error naming it (not rounded) by the ops that compute with a scalar."""
    s, big = acl.stream(), 2**60 + 1
    x = np.array([big, -big, 2**62, 7], dtype=np.int64)
    y = np.array([1, 3, 2, -(2**62)], dtype=np.int64)

    def run(name, *args, shape=(4,)):
        o = acl.tensor(shape=shape, dtype=cs.ACL_INT64)
        acl.run(name, *args, o, stream=s)
        return o.numpy(s)

    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(
            run("Add", acl.tensor(x, dtype=cs.ACL_INT64), acl.tensor(y, dtype=cs.ACL_INT64), 2), x + 2 * y
        )
        np.testing.assert_array_equal(run("Adds", acl.tensor(x, dtype=cs.ACL_INT64), 5, 3), x + 15)
        np.testing.assert_array_equal(
            run("Mul", acl.tensor(x, dtype=cs.ACL_INT64), acl.tensor(y, dtype=cs.ACL_INT64)), x * y
        )  # wraps
    np.testing.assert_array_equal(
        run("RemainderTensorScalar", acl.tensor(x, dtype=cs.ACL_INT64), 7), np.remainder(x, 7)
    )
    f = acl.tensor(shape=(2,), dtype=cs.ACL_INT64)
    acl.run("InplaceFillScalar", f, big, stream=s)
    np.testing.assert_array_equal(f.numpy(s), [big, big])
    acl.run("InplaceFillScalar", f, 2**63 - 1, stream=s)
    np.testing.assert_array_equal(f.numpy(s), [2**63 - 1] * 2)
    with pytest.raises(cs.AclError, match="beyond 2\\^53"):
        run("Adds", acl.tensor(x, dtype=cs.ACL_INT64), big, 1)
    # a float tensor takes it rounded, as a device does (it computes in the tensor's dtype)
    o = acl.tensor(shape=(4,), dtype=cs.ACL_DOUBLE)
    acl.run("Adds", acl.tensor(np.zeros(4), dtype=cs.ACL_DOUBLE), big, 1, o, stream=s)
    np.testing.assert_array_equal(o.numpy(s), np.full(4, float(big)))
    # bool operands are integers; a zero divisor gives 0 for its element only
    m = acl.tensor(np.array([True, False, True, True]), dtype=cs.ACL_BOOL)
    np.testing.assert_array_equal(run("Add", acl.tensor(x, dtype=cs.ACL_INT64), m, 1), x + [1, 0, 1, 1])
    z = acl.tensor(np.array([7, 0, 7, 7], dtype=np.int64), dtype=cs.ACL_INT64)
    np.testing.assert_array_equal(
        run("RemainderTensorTensor", acl.tensor(x, dtype=cs.ACL_INT64), z), [big % 7, 0, 2**62 % 7, 0]
    )
    # moves are exact: copy, cat, where; casts to narrower integers wrap as torch's
    c = acl.tensor(shape=(4,), dtype=cs.ACL_INT64)
    acl.run("InplaceCopy", c, acl.tensor(x, dtype=cs.ACL_INT64), stream=s)
    np.testing.assert_array_equal(c.numpy(s), x)
    np.testing.assert_array_equal(
        run("Cat", [acl.tensor(x[:2], dtype=cs.ACL_INT64), acl.tensor(x[2:], dtype=cs.ACL_INT64)], 0), x
    )
    i32 = acl.tensor(shape=(4,), dtype=cs.ACL_INT32)
    acl.run("Cast", acl.tensor(x, dtype=cs.ACL_INT64), cs.ACL_INT32, i32, stream=s)
    np.testing.assert_array_equal(i32.numpy(s), x.astype(np.int32))
    np.testing.assert_array_equal(
        run("Adds", acl.tensor(x, dtype=cs.ACL_INT64), 2**63 - 1, 0), x
    )  # i64::MAX converts back exactly


def test_int64_beyond_2_53_through_an_f64_kernel_is_refused(acl):
    """A kernel that still computes in f64 (here ReduceSum, Clamp) and reads an int64 that f64 cannot
    hold fails, naming the value and the op, when its result is an integer: it is never rounded silently.
    A cast to float rounds, as on a device, and passes; small int64 values still compute. Gathers,
    comparisons and extremes read integers exactly."""
    s, big = acl.stream(), 2**60 + 1
    x = np.array([big, 3, -big - 4, 9], dtype=np.int64)
    o = acl.tensor(shape=(), dtype=cs.ACL_INT64)
    with pytest.raises(cs.AclError, match="aclnnReduceSum: .*1152921504606846977 \\(beyond 2\\^53\\)"):
        acl.run("ReduceSum", acl.tensor(x, dtype=cs.ACL_INT64), [0], False, cs.ACL_INT64, o, stream=s)
        o.numpy(s)  # the kernel's error reaches the client at its sync
    c = acl.tensor(shape=(4,), dtype=cs.ACL_INT64)
    with pytest.raises(cs.AclError, match="beyond 2\\^53"):
        acl.run("Clamp", acl.tensor(x, dtype=cs.ACL_INT64), -5, 5, c, stream=s)
        c.numpy(s)
    acl.run("ReduceSum", acl.tensor(x % 1000, dtype=cs.ACL_INT64), [0], False, cs.ACL_INT64, o, stream=s)
    assert o.numpy(s) == (x % 1000).sum()
    f = acl.tensor(shape=(4,), dtype=cs.ACL_DOUBLE)
    acl.run("Cast", acl.tensor(x, dtype=cs.ACL_INT64), cs.ACL_DOUBLE, f, stream=s)
    np.testing.assert_array_equal(f.numpy(s), x.astype(np.float64))
    # exact: a gather, a comparison, a maximum
    g = acl.tensor(shape=(2,), dtype=cs.ACL_INT64)
    acl.run(
        "IndexSelect",
        acl.tensor(x, dtype=cs.ACL_INT64),
        0,
        acl.tensor(np.array([2, 0]), dtype=cs.ACL_INT64),
        g,
        stream=s,
    )
    np.testing.assert_array_equal(g.numpy(s), x[[2, 0]])
    e = acl.tensor(shape=(4,), dtype=cs.ACL_BOOL)
    near = x + 1
    acl.run("EqTensor", acl.tensor(x, dtype=cs.ACL_INT64), acl.tensor(near, dtype=cs.ACL_INT64), e, stream=s)
    np.testing.assert_array_equal(e.numpy(s), np.zeros(4, bool))
    m = acl.tensor(shape=(), dtype=cs.ACL_INT64)
    acl.run("Max", acl.tensor(x, dtype=cs.ACL_INT64), m, stream=s)
    assert m.numpy(s) == big
