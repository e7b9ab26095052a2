"""aclnnGroupNorm / aclnnGroupNormBackward against numpy: the forward's out, mean and rstd ([N, group]) with and
without gamma/beta; the backward's three gradients (checked against a vectorised numpy derivation and, for
gradInput, against central differences of the numpy forward in float64), outputMask, and refusals."""

import numpy as np
import pytest

import cannsim_ctypes as cs


def gn(x, g, gamma, beta, eps):
    n, c = x.shape[:2]
    xg = x.reshape(n, g, -1)
    m, v = xg.mean(-1), xg.var(-1)
    r = 1 / np.sqrt(v + eps)
    y = ((xg - m[..., None]) * r[..., None]).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    return y * gamma.reshape(shape) + beta.reshape(shape), m, r


@pytest.mark.parametrize("g,affine", [(3, True), (1, False), (6, True)])
def test_forward_and_backward(acl, g, affine):
    st = acl.stream()
    rng = np.random.default_rng(g)
    x = rng.standard_normal((2, 6, 3, 4)).astype(np.float32)
    gamma = rng.standard_normal(6).astype(np.float32) if affine else np.ones(6, np.float32)
    beta = rng.standard_normal(6).astype(np.float32) if affine else np.zeros(6, np.float32)
    X = acl.tensor(x)
    G, B = (acl.tensor(gamma), acl.tensor(beta)) if affine else (None, None)
    out, mean, rstd = acl.tensor(shape=x.shape), acl.tensor(shape=(2, g)), acl.tensor(shape=(2, g))
    acl.run("GroupNorm", X, G, B, 2, 6, 12, g, 1e-5, out, mean, rstd, stream=st)
    y, m, r = gn(x.astype(np.float64), g, gamma.astype(np.float64), beta.astype(np.float64), 1e-5)
    np.testing.assert_allclose(out.numpy(st), y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mean.numpy(st), m, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rstd.numpy(st), r, rtol=1e-5)

    dy = rng.standard_normal(x.shape).astype(np.float32)
    gi, gg, gb = acl.tensor(shape=x.shape), acl.tensor(shape=(6,)), acl.tensor(shape=(6,))
    acl.run(
        "GroupNormBackward", acl.tensor(dy), X, mean, rstd, G, 2, 6, 12, g, [True, True, True], gi, gg, gb, stream=st
    )
    xh = (y - beta.reshape(1, 6, 1, 1)) / gamma.reshape(1, 6, 1, 1)
    np.testing.assert_allclose(gb.numpy(st), dy.sum((0, 2, 3)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gg.numpy(st), (dy * xh).sum((0, 2, 3)), rtol=1e-4, atol=1e-4)
    # gradInput against central differences of sum(dy · forward(x))
    x64, eps, num = x.astype(np.float64), 1e-6, np.zeros(x.size)
    for k in range(x.size):
        for sgn in (1, -1):
            xp = x64.copy().ravel()
            xp[k] += sgn * eps
            num[k] += (
                sgn
                * (dy * gn(xp.reshape(x.shape), g, gamma.astype(np.float64), beta.astype(np.float64), 1e-5)[0]).sum()
            )
    np.testing.assert_allclose(gi.numpy(st).ravel(), num / (2 * eps), rtol=2e-3, atol=2e-4)

    # outputMask: only gradInput; the others are left as they were
    gg2 = acl.tensor(np.full(6, 7.0, np.float32))
    acl.run(
        "GroupNormBackward", acl.tensor(dy), X, mean, rstd, G, 2, 6, 12, g, [True, False, False], gi, gg2, gb, stream=st
    )
    np.testing.assert_array_equal(gg2.numpy(st), np.full(6, 7.0, np.float32))


def test_refusals(acl):
    """Each case has mean/rstd of the right [N, group] shape, so only the named check can refuse it."""
    x = acl.tensor(np.zeros((2, 6, 3), np.float32))
    out = acl.tensor(shape=(2, 6, 3))
    for args, why in [
        ((2, 6, 3, 4), "group not dividing C"),
        ((2, 5, 3, 1), "C not the input's"),
        ((2, 6, 4, 2), "HxW not the input's"),
    ]:
        m, r = acl.tensor(shape=(2, args[3])), acl.tensor(shape=(2, args[3]))
        st, _, _, temps = acl.prepare("GroupNorm", x, None, None, *args, 1e-5, out, m, r)
        acl.release(temps)
        assert st == 161002, why
    m, r = acl.tensor(shape=(2, 2)), acl.tensor(shape=(2, 2))
    for o, mm, why in [
        (acl.tensor(shape=(2, 6, 3), dtype=cs.ACL_FLOAT16), m, "out dtype"),
        (out, acl.tensor(shape=(2, 2, 1)), "meanOut shape"),
    ]:
        st, _, _, temps = acl.prepare("GroupNorm", x, None, None, 2, 6, 3, 2, 1e-5, o, mm, r)
        acl.release(temps)
        assert st == 161002, why
    st, _, _, temps = acl.prepare("GroupNorm", x, None, None, 2, 6, 3, 2, 1e-5, out, m, r)
    acl.release(temps)
    assert st == 0
