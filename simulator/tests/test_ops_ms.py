"""The aclnn functions MindSpore 2.10 resolves beyond torch_npu's set (ffi/aclnn_ms.rs), against numpy."""

import ctypes as C
import math

import numpy as np
import pytest

import cannsim_ctypes as cs
from test_ops import DTYPES, Env

ALL = pytest.mark.parametrize("dt", list(DTYPES))
ERF = np.vectorize(math.erf)


@pytest.fixture
def env(acl):
    return lambda dt: Env(acl, dt)


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


@ALL
def test_activations_and_their_backward(env, dt):
    e = env(dt)
    x, g = e.rand(3, 5, lo=-3, hi=3), e.rand(3, 5)
    for name, fn in [("Tanh", np.tanh), ("Sigmoid", lambda v: 1 / (1 + np.exp(-v))), ("Erf", ERF)]:
        o = e.out(3, 5)
        e.run(name, e.t(x), o)
        e.check(o, fn(x))
    y = np.tanh(x)
    o = e.out(3, 5)
    e.run("TanhBackward", e.t(g), e.t(y), o)
    e.check(o, g * (1 - y**2))
    s = 1 / (1 + np.exp(-x))
    e.run("SigmoidBackward", e.t(g), e.t(s), o)
    e.check(o, g * s * (1 - s))
    e.run("GeluV2", e.t(x), 0, o)
    e.check(o, 0.5 * x * (1 + ERF(x / np.sqrt(2))))
    e.run("GeluV2", e.t(x), 1, o)
    e.check(o, gelu_tanh(x))
    h = 1e-3
    # the backward's mode is a C string (CANN: `char *approximate`), not GeluV2's int64
    e.run("GeluBackwardV2", e.t(g), e.t(x), b"tanh", o)
    e.check(o, g * (gelu_tanh(x + h) - gelu_tanh(x - h)) / (2 * h), rtol=1e-2, atol=1e-2)
    e.run("GeluBackwardV2", e.t(g), e.t(x), b"none", o)
    dgelu = 0.5 * (1 + ERF(x / np.sqrt(2))) + x * np.exp(-(x**2) / 2) / np.sqrt(2 * np.pi)
    e.check(o, g * dgelu, rtol=1e-2, atol=1e-2)
    with pytest.raises(cs.AclError):
        e.run("GeluV2", e.t(x), 2, o)
    for bad in (b"erf", None):
        with pytest.raises(cs.AclError):
            e.run("GeluBackwardV2", e.t(g), e.t(x), bad, o)


@ALL
def test_clamp_permute_pow(env, dt):
    e = env(dt)
    x = e.rand(2, 3, 4, lo=-2, hi=2)
    o = e.out(2, 3, 4)
    e.run("Clamp", e.t(x), -0.5, 0.75, o)
    e.check(o, np.clip(x, -0.5, 0.75))
    e.run("Clamp", e.t(x), C.c_void_p(None), 0.25, o)
    e.check(o, np.minimum(x, 0.25))
    p = e.out(4, 2, 3)
    e.run("Permute", e.t(x), [2, 0, 1], p)
    e.check(p, np.transpose(x, (2, 0, 1)))
    with pytest.raises(cs.AclError):
        e.run("Permute", e.t(x), [0, 0, 1], p)
    b, ex = e.rand(2, 3, 4, lo=0.5, hi=2.0), e.rand(4, lo=-1, hi=2)
    e.run("PowTensorTensor", e.t(b), e.t(ex), o)
    e.check(o, b ** ex[None, None, :])
    e.run("PowTensorScalar", e.t(b), 2.0, o)
    e.check(o, b**2)


@pytest.mark.parametrize("amsgrad", [False, True])
def test_apply_adamw_v2(env, amsgrad):
    e = env("float32")
    var, m, v, g = e.rand(6), e.rand(6), e.rand(6, lo=0.1, hi=1), e.rand(6)
    vmax = v + 0.2
    lr, b1, b2, wd, eps, step = 0.01, 0.9, 0.999, 0.1, 1e-8, 3.0
    tv, tm, tvv, tmax = e.t(var), e.t(m), e.t(v), e.t(vmax)
    e.run("ApplyAdamWV2", tv, tm, tvv, tmax, e.t(g), e.t(np.array([step])), lr, b1, b2, wd, eps, amsgrad, False)
    m2 = b1 * m + (1 - b1) * g
    v2 = b2 * v + (1 - b2) * g * g
    vv = np.maximum(vmax, v2) if amsgrad else v2
    want = var * (1 - lr * wd) - lr * (m2 / (1 - b1**step)) / (np.sqrt(vv / (1 - b2**step)) + eps)
    e.check(tm, m2)
    e.check(tvv, v2)
    e.check(tv, want)
    if amsgrad:
        e.check(tmax, vv)
