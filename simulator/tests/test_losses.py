"""The pointwise losses of losses.rs against numpy formulas written from torch's definitions: each loss in
reductions none / mean / sum, with and without weight and posWeight, broadcast targets, torch's -100 clamp of
BCE's logs, and each backward kernel as gradOutput · d loss / d self; refusals."""

import numpy as np
import pytest

import cannsim_ctypes as cs
from test_ops import DTYPES, Env, dev

ALL = pytest.mark.parametrize("dt", list(DTYPES))


@pytest.fixture
def env(acl):
    return lambda dt: Env(acl, dt)


def reduce(loss, r):
    return loss if r == 0 else (loss.mean() if r == 1 else loss.sum())


def bce(x, t, w):
    return -w * (t * np.maximum(np.log(x), -100) + (1 - t) * np.maximum(np.log1p(-x), -100))


def bce_logits(x, t, w, pw):
    return w * ((1 - t) * x + (1 + (pw - 1) * t) * (np.log1p(np.exp(-np.abs(x))) + np.maximum(-x, 0)))


def smooth_l1(x, t, beta):
    d = np.abs(x - t)
    return np.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta)


def kl(x, t, log_target):
    if log_target:
        return np.exp(t) * (t - x)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(t == 0, 0.0, t * (np.log(t) - x))


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


@ALL
@pytest.mark.parametrize("r", [0, 1, 2])
def test_losses_and_their_backward(env, dt, r):
    e = env(dt)
    shape = (3, 5)
    ps, p = dev(e, e.rand(*shape, lo=0.02, hi=0.98))
    xs, x = dev(e, e.rand(*shape, lo=-3, hi=3))
    ts, t = dev(e, (e.rand(*shape, lo=0, hi=1) > 0.5).astype(np.float32))
    ys, y = dev(e, e.rand(1, 5, lo=-2, hi=2))  # a target broadcast along dim 0
    qs, q = dev(e, e.rand(*shape, lo=0, hi=1))
    q[0, 0] = 0.0
    qs, q = dev(e, q)
    ws_, w = dev(e, e.rand(1, 5, lo=0.5, hi=2))
    pws, pw = dev(e, e.rand(5, lo=0.5, hi=3))
    gs, g = dev(e, e.rand(*shape) if r == 0 else np.array(1.7))
    out = e.out(*shape) if r == 0 else e.out()
    gi = e.out(*shape)
    tol = {} if dt == "float32" else dict(rtol=2e-2, atol=3e-2) if dt == "bfloat16" else dict(rtol=5e-3, atol=5e-3)
    n = 1 / x.size if r == 1 else 1.0
    cases = [
        (
            "BinaryCrossEntropy",
            (ps, ts, ws_, r, out),
            bce(p, t, w),
            (ps, ts, ws_),
            g * n * w * (p - t) / np.maximum(p * (1 - p), 1e-12),
        ),
        (
            "BinaryCrossEntropy",
            (ps, ts, None, r, out),
            bce(p, t, 1),
            (ps, ts, None),
            g * n * (p - t) / np.maximum(p * (1 - p), 1e-12),
        ),
        (
            "BinaryCrossEntropyWithLogits",
            (xs, ts, ws_, pws, r, out),
            bce_logits(x, t, w, pw),
            (xs, ts, ws_, pws),
            g * n * w * ((pw * t + 1 - t) * sigmoid(x) - pw * t),
        ),
        (
            "BinaryCrossEntropyWithLogits",
            (xs, ts, None, None, r, out),
            bce_logits(x, t, 1, 1),
            (xs, ts, None, None),
            g * n * (sigmoid(x) - t),
        ),
        (
            "SmoothL1Loss",
            (xs, ys, r, 0.5, out),
            smooth_l1(x, y, 0.5),
            (xs, ys, r, 0.5),
            g * n * np.clip((x - y) / 0.5, -1, 1),
        ),
        ("L1Loss", (xs, ys, r, out), np.abs(x - y), (xs, ys, r), g * n * np.sign(x - y)),
        ("KlDiv", (xs, qs, r, False, out), kl(x, q, False), (xs, qs, r, False), g * n * -q),
        ("KlDiv", (xs, ys, r, True, out), kl(x, y, True), (xs, ys, r, True), g * n * -np.exp(y) * np.ones(shape)),
    ]
    for name, args, loss, bargs, grad in cases:
        e.run(name, *args)
        e.check(out, reduce(np.broadcast_to(loss, shape), r), err_msg=name, **tol)
        if name.startswith("BinaryCrossEntropy"):
            bargs = bargs + (r, gi)
        else:
            bargs = bargs + (gi,)
        e.run(name + "Backward", gs, *bargs)
        e.check(gi, np.broadcast_to(grad, shape), err_msg=name + "Backward", **tol)


def test_bce_clamps_the_logs_at_minus_100(env):
    """x = 0 or 1 with the wrong target: torch (and CANN's kernel) clamp log at -100, so the loss is 100."""
    e = env("float32")
    x, t = (
        e.acl.tensor(np.array([0.0, 1.0, 0.0, 1.0], np.float32)),
        e.acl.tensor(np.array([1.0, 0.0, 0.0, 1.0], np.float32)),
    )
    o = e.acl.tensor(shape=(4,))
    e.run("BinaryCrossEntropy", x, t, None, 0, o)
    np.testing.assert_array_equal(o.numpy(e.stream), [100, 100, 0, 0])


def test_nan_and_edge_values_as_torch(env):
    """A NaN (or out-of-range) BCE input gives NaN, not a loss clamped at 100; L1's gradient at NaN is 0 (torch's
    sign); KL with target 0 and an infinite input is NaN (torch's xlogy(0, 0) - 0 · inf)."""
    e = env("float32")
    o = e.acl.tensor(shape=(2,))
    e.run(
        "BinaryCrossEntropy",
        e.acl.tensor(np.array([np.nan, 1.5], np.float32)),
        e.acl.tensor(np.ones(2, np.float32)),
        None,
        0,
        o,
    )
    assert np.isnan(o.numpy(e.stream)).all()
    gi = e.acl.tensor(shape=(2,))
    x, t = e.acl.tensor(np.array([np.nan, 3.0], np.float32)), e.acl.tensor(np.array([1.0, 1.0], np.float32))
    e.run("L1LossBackward", e.acl.tensor(np.float32(1.0)), x, t, 2, gi)
    np.testing.assert_array_equal(gi.numpy(e.stream), [0.0, 1.0])
    e.run(
        "KlDiv", e.acl.tensor(np.array([np.inf, 2.0], np.float32)), e.acl.tensor(np.zeros(2, np.float32)), 0, False, o
    )
    r = o.numpy(e.stream)
    assert np.isnan(r[0]) and r[1] == 0


def test_refusals(env):
    e = env("float32")
    x = e.acl.tensor(np.ones((2, 3), np.float32))
    for name, args in [
        ("L1Loss", (x, x, 3, e.acl.tensor(shape=()))),  # reduction 3
        ("L1Loss", (x, x, 1, e.acl.tensor(shape=(2, 3)))),  # mean into a non-0-d out
        ("L1Loss", (x, e.acl.tensor(np.ones((4,), np.float32)), 0, e.acl.tensor(shape=(2, 3)))),  # no broadcast
        ("SmoothL1Loss", (x, x, 0, -1.0, e.acl.tensor(shape=(2, 3)))),  # beta < 0
        ("KlDiv", (x, x, 0, False, e.acl.tensor(shape=(2, 3), dtype=cs.ACL_FLOAT16))),  # out dtype
        ("L1LossBackward", (x, x, x, 1, e.acl.tensor(shape=(2, 3)))),  # gradOutput not 0-d after a mean
    ]:
        with pytest.raises(cs.AclError) as r:
            e.run(name, *args)
        assert r.value.code == 161002, name
