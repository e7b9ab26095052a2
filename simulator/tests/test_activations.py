"""The math functions and activations of ffi/aclnn_act.rs against numpy in float64, f32/f16/bf16: each
forward on values that cover every branch (and NaN, ±inf where the function defines them), each backward
kernel as gradOutput · f'(x) by the formula CANN documents, the scalar parameters, and the refusals."""

import numpy as np
import pytest

import cannsim_ctypes as cs
from test_ops import DTYPES, Env, dev

ALL = pytest.mark.parametrize("dt", list(DTYPES))


@pytest.fixture
def env(acl):
    return lambda dt: Env(acl, dt)


def softplus(x, beta=1.0, threshold=20.0):
    with np.errstate(over="ignore"):
        return np.where(x * beta > threshold, x, np.log1p(np.exp(x * beta)) / beta)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


UNARY = {
    "Expm1": np.expm1,
    "Log1p": np.log1p,
    "Log2": np.log2,
    "Log10": np.log10,
    "Ceil": np.ceil,
    "Tan": np.tan,
    "Atan": np.arctan,
    "Asin": np.arcsin,
    "Acos": np.arccos,
    "Sinh": np.sinh,
    "Cosh": np.cosh,
    "Hardswish": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "Mish": lambda x: x * np.tanh(softplus(x)),
    "LogSigmoid": lambda x: -softplus(-x),
}
# inputs inside each function's domain (log of x > 0 etc. is tested separately with NaN/inf)
DOMAIN = {"Log1p": (-0.9, 4), "Log2": (0.1, 4), "Log10": (0.1, 4), "Asin": (-1, 1), "Acos": (-1, 1), "Tan": (-1.4, 1.4)}


@ALL
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_forward(env, dt, name):
    e = env(dt)
    lo, hi = DOMAIN.get(name, (-5, 5))
    xs, x = dev(e, e.rand(4, 7, lo=lo, hi=hi))
    o = e.out(4, 7)
    e.run(name, xs, o)
    with np.errstate(all="ignore"):
        e.check(o, UNARY[name](x), err_msg=name)


def test_unary_special_values(env):
    """NaN stays NaN everywhere; ±inf, ±0 and the domain edges give what numpy gives; the odd functions keep
    the sign of zero."""
    e = env("float32")
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -1.0, 1.0, -3.0, 3.0, 50.0, -50.0], np.float32)
    xs = e.acl.tensor(x)
    o = e.acl.tensor(shape=x.shape)
    for name, fn in UNARY.items():
        e.run(name, xs, o)
        with np.errstate(all="ignore"):
            want = fn(x.astype(np.float64)).astype(np.float32)
        got = o.numpy(e.stream)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, equal_nan=True, err_msg=name)
        if name in ("Expm1", "Log1p", "Tan", "Atan", "Asin", "Sinh", "Ceil"):  # odd at 0: -0.0 stays -0.0
            assert np.signbit(got[4]) and not np.signbit(got[3]), name


@ALL
def test_parametrised_activations(env, dt):
    e = env(dt)
    xs, x = dev(e, e.rand(4, 7, lo=-8, hi=8))
    o = e.out(4, 7)
    e.run("LeakyRelu", xs, 0.2, o)
    e.check(o, np.where(x > 0, x, 0.2 * x))
    e.run("Hardtanh", xs, -1.5, 2.5, o)
    e.check(o, np.clip(x, -1.5, 2.5))
    e.run("Hardtanh", xs, 0.0, 6.0, o)  # relu6
    e.check(o, np.clip(x, 0, 6))
    for beta, th in ((1.0, 20.0), (2.0, 3.0), (0.5, 1.0)):
        e.run("Softplus", xs, beta, th, o)
        e.check(o, softplus(x, beta, th), err_msg=f"beta {beta} threshold {th}")
    for alpha, scale, iscale in ((1.0, 1.0, 1.0), (1.6732632, 1.0507010, 1.0), (0.7, 1.0, 1 / 0.7)):  # elu, selu, celu
        e.run("Elu", xs, alpha, scale, iscale, o)
        e.check(o, np.where(x > 0, x * scale, alpha * scale * np.expm1(x * iscale)), err_msg=f"elu {alpha}")


@ALL
def test_backward_kernels(env, dt):
    """gradInput = gradOutput · f'(x), with CANN's documented boundary rules: aclnnHardswishBackward's
    x/3 + 0.5 on the closed [-3, 3], aclnnHardtanhBackward passing the gradient at the bounds."""
    e = env(dt)
    xv = e.rand(4, 7, lo=-6, hi=6)
    xv[0, :4] = [-3, 3, 0, 6]
    xs, x = dev(e, xv)
    gs, g = dev(e, e.rand(4, 7))
    o = e.out(4, 7)
    tol = {"float32": {}, "float16": dict(rtol=5e-3, atol=5e-3), "bfloat16": dict(rtol=2e-2, atol=3e-2)}[dt]
    sp = softplus(x)
    cases = [
        ("HardswishBackward", (gs, xs, o), g * np.where(x < -3, 0, np.where(x <= 3, x / 3 + 0.5, 1))),
        ("MishBackward", (gs, xs, o), g * (np.tanh(sp) + x * sigmoid(x) * (1 - np.tanh(sp) ** 2))),
        ("LogSigmoidBackward", (gs, xs, None, o), g * sigmoid(-x)),
        ("LeakyReluBackward", (gs, xs, 0.1, False, o), g * np.where(x > 0, 1, 0.1)),
        ("HardtanhBackward", (gs, xs, 0.0, 6.0, o), g * ((x >= 0) & (x <= 6))),
        ("SoftplusBackward", (gs, xs, 2.0, 3.0, o), g * np.where(2 * x > 3, 1, sigmoid(2 * x))),
        ("EluBackward", (gs, 1.3, 1.1, 0.9, False, xs, o), g * np.where(x > 0, 1.1, 0.9 * 1.3 * 1.1 * np.exp(0.9 * x))),
    ]
    for name, args, want in cases:
        e.run(name, *args)
        e.check(o, want, err_msg=name, **tol)
    # isResult: the gradient from the forward's output r = elu(x)
    rs, r = dev(e, np.where(x > 0, x * 1.1, 1.3 * 1.1 * np.expm1(0.9 * x)))
    e.run("EluBackward", gs, 1.3, 1.1, 0.9, True, rs, o)
    e.check(o, g * np.where(r > 0, 1.1, 0.9 * (r + 1.3 * 1.1)), **tol)
    # LogSigmoidForward writes out as LogSigmoid (its buffer is an unused output)
    buf = e.out(0)
    e.run("LogSigmoidForward", xs, o, buf)
    e.check(o, -softplus(-x))


def test_refusals(env):
    e = env("float32")
    xs = e.t(e.rand(3, 4))
    o = e.out(3, 4)
    with pytest.raises(cs.AclError) as r:  # selfIsResult needs a slope >= 0 (CANN)
        e.run("LeakyReluBackward", xs, xs, -0.1, True, o)
    assert r.value.code == 161002
    with pytest.raises(cs.AclError) as r:  # isResult needs alpha >= 0
        e.run("EluBackward", xs, -1.0, 1.0, 1.0, True, xs, o)
    assert r.value.code == 161002
    with pytest.raises(cs.AclError):  # out of another shape
        e.run("Mish", xs, e.out(4, 3))
    with pytest.raises(cs.AclError):  # integer self
        e.run("Expm1", e.acl.tensor(np.arange(12, dtype=np.int64).reshape(3, 4), dtype=cs.ACL_INT64), o)
    with pytest.raises(cs.AclError) as r:  # a NULL scalar
        e.run("LeakyRelu", xs, None, o)
    assert r.value.code == 161001


def test_nan_in_the_backward_kernels(env):
    """A NaN input takes the branch torch's tests send it to: elu's `x <= 0` is false (gradient scale, not
    NaN), leaky_relu's `x > 0` is false (slope), hardtanh's "outside the bounds" is false (1, CANN's
    formula), hardswish's two tests are false (1); mish and softplus stay NaN."""
    e = env("float32")
    x = e.acl.tensor(np.array([np.nan, 1.0], np.float32))
    g = e.acl.tensor(np.array([2.0, 2.0], np.float32))
    o = e.acl.tensor(shape=(2,))
    for name, args, want in [
        ("EluBackward", (g, 1.0, 1.5, 1.0, False, x, o), 3.0),
        ("LeakyReluBackward", (g, x, 0.25, False, o), 0.5),
        ("HardtanhBackward", (g, x, -1.0, 1.0, o), 2.0),
        ("HardswishBackward", (g, x, o), 2.0),
        ("MishBackward", (g, x, o), np.nan),
        ("SoftplusBackward", (g, x, 1.0, 20.0, o), np.nan),
    ]:
        e.run(name, *args)
        np.testing.assert_equal(o.numpy(e.stream)[0], np.float32(want), err_msg=name)


def test_nan_forward_and_saturated_backward(env):
    """A NaN input stays NaN through the parametrised activations (hardtanh clamps everything else); an inf or
    NaN gradient where hardtanh / hardswish saturate gives 0 (the kernels select, as torch's CPU kernels)."""
    e = env("float32")
    x = e.acl.tensor(np.array([np.nan, 10.0, -10.0], np.float32))
    o = e.acl.tensor(shape=(3,))
    for name, args in [
        ("Hardtanh", (0.0, 6.0)),
        ("LeakyRelu", (0.1,)),
        ("Elu", (1.0, 1.0, 1.0)),
        ("Softplus", (1.0, 20.0)),
    ]:
        e.run(name, x, *args, o)
        assert np.isnan(o.numpy(e.stream)[0]), name
    g = e.acl.tensor(np.array([1.0, np.inf, np.nan], np.float32))
    e.run("HardtanhBackward", g, x, 0.0, 6.0, o)
    np.testing.assert_array_equal(o.numpy(e.stream), [1.0, 0.0, 0.0])
    e.run("HardswishBackward", g, x, o)
    np.testing.assert_array_equal(o.numpy(e.stream), [1.0, np.inf, 0.0])


def test_dtypes_must_agree_and_float64_is_refused(env):
    e = env("float32")
    x32 = e.acl.tensor(np.ones((2, 3), np.float32))
    o16 = e.acl.tensor(shape=(2, 3), dtype=cs.ACL_FLOAT16)
    x64 = e.acl.tensor(np.ones((2, 3)), dtype=cs.ACL_DOUBLE)
    o32 = e.acl.tensor(shape=(2, 3))
    for name, args in [
        ("LeakyRelu", (x32, 0.1, o16)),
        ("Cosh", (x64, e.acl.tensor(shape=(2, 3), dtype=cs.ACL_DOUBLE))),
        ("MishBackward", (x32, e.acl.tensor(np.ones((2, 3), np.float16), dtype=cs.ACL_FLOAT16), o32)),
    ]:
        with pytest.raises(cs.AclError) as r:
            e.run(name, *args)
        assert r.value.code == 161002, name


@ALL
def test_scalar_first_pow_and_remainder(env, dt):
    """aclnnPowScalarTensor (`2 ** t`) and aclnnRemainderScalarTensor (`5 % t`, the sign of t) against numpy."""
    e = env(dt)
    ts, t = dev(e, e.rand(3, 4, lo=-3, hi=3))
    o = e.out(3, 4)
    e.run("PowScalarTensor", 2.0, ts, o)
    e.check(o, 2.0**t)
    e.run("RemainderScalarTensor", 5.0, ts, o)
    e.check(o, np.remainder(5.0, t))
    ints = e.acl.tensor(np.array([1, 2, 3, -4, 7], np.int64), dtype=cs.ACL_INT64)
    io = e.acl.tensor(shape=(5,), dtype=cs.ACL_INT64)
    e.run("RemainderScalarTensor", -7, ints, io)
    np.testing.assert_array_equal(io.numpy(e.stream), np.remainder(-7, [1, 2, 3, -4, 7]))
    e.run("PowScalarTensor", 3, ints, io)
    np.testing.assert_array_equal(io.numpy(e.stream)[[0, 1, 2, 4]], [3, 9, 27, 3**7])


@ALL
def test_in_place_forms(env, dt):
    """aclnnInplaceLeakyRelu / Hardtanh / Hardswish / Mish / Elu write what the out-of-place forms compute."""
    e = env(dt)
    xv = e.rand(4, 7, lo=-6, hi=6)
    for name, args, ref in [
        ("LeakyRelu", (0.2,), lambda x: np.where(x > 0, x, 0.2 * x)),
        ("Hardtanh", (0.0, 6.0), lambda x: np.clip(x, 0, 6)),
        ("Hardswish", (), UNARY["Hardswish"]),
        ("Mish", (), UNARY["Mish"]),
        ("Elu", (1.5, 1.0, 1.0), lambda x: np.where(x > 0, x, 1.5 * np.expm1(x))),
    ]:
        xs, x = dev(e, xv)
        e.run("Inplace" + name, xs, *args)
        e.check(xs, ref(x), err_msg=name)


@ALL
def test_in_place_math(env, dt):
    """aclnnInplaceSigmoid … InplaceLog1p and aclnnInplacePowTensorScalar write what numpy computes."""
    e = env(dt)
    xv = e.rand(3, 5, lo=0.1, hi=3)
    for name, ref in [
        ("Sigmoid", sigmoid),
        ("Tanh", np.tanh),
        ("Exp", np.exp),
        ("Sqrt", np.sqrt),
        ("Log", np.log),
        ("Rsqrt", lambda x: 1 / np.sqrt(x)),
        ("Reciprocal", lambda x: 1 / x),
        ("Sin", np.sin),
        ("Cos", np.cos),
        ("Floor", np.floor),
        ("Round", np.round),
        ("Trunc", np.trunc),
        ("Ceil", np.ceil),
        ("Expm1", np.expm1),
        ("Log1p", np.log1p),
    ]:
        xs, x = dev(e, xv)
        e.run("Inplace" + name, xs)
        e.check(xs, ref(x), err_msg=name)
    xs, x = dev(e, xv)
    e.run("InplacePowTensorScalar", xs, 3.0)
    e.check(xs, x**3)
