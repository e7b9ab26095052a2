"""Pooling, resizing and padding (spatial.rs) against numpy references written from torch's definitions
(np.pad for the pads), each backward by the adjoint identity <g, F(x)> = <F'(g), x> (the ops are linear),
and refusals."""

import numpy as np
import pytest

import cannsim_ctypes as cs
from test_ops import DTYPES, Env, dev

ALL = pytest.mark.parametrize("dt", list(DTYPES))


@pytest.fixture
def env(acl):
    return lambda dt: Env(acl, dt)


def avg_pool(x, k, s, p, ceil, include_pad, divisor):
    h, w = x.shape[-2:]

    def olen(n, i):
        o = (n + 2 * p[i] - k[i] + (s[i] - 1 if ceil else 0)) // s[i] + 1
        return o - 1 if ceil and (o - 1) * s[i] >= n + p[i] else o

    oh, ow = olen(h, 0), olen(w, 1)
    y = np.zeros(x.shape[:-2] + (oh, ow))
    for i in range(oh):
        for j in range(ow):
            y0, x0 = i * s[0] - p[0], j * s[1] - p[1]
            y1, x1 = min(y0 + k[0], h + p[0]), min(x0 + k[1], w + p[1])
            size = (y1 - y0) * (x1 - x0)
            y0, x0, y1, x1 = max(y0, 0), max(x0, 0), min(y1, h), min(x1, w)
            d = divisor or (size if include_pad else (y1 - y0) * (x1 - x0))
            y[..., i, j] = x[..., y0:y1, x0:x1].sum(axis=(-2, -1)) / d
    return y


def adaptive_avg(x, oh, ow):
    h, w = x.shape[-2:]
    y = np.zeros(x.shape[:-2] + (oh, ow))
    for i in range(oh):
        for j in range(ow):
            a, b = i * h // oh, -(-(i + 1) * h // oh)
            c, d = j * w // ow, -(-(j + 1) * w // ow)
            y[..., i, j] = x[..., a:b, c:d].mean(axis=(-2, -1))
    return y


def nearest(x, oh, ow):
    def idx(n, o):
        return np.minimum(np.floor(np.arange(o, dtype=np.float32) * np.float32(n / o)).astype(int), n - 1)

    h, w = x.shape[-2:]
    return x[..., idx(h, oh), :][..., idx(w, ow)]


def bilinear_align_corners(x, oh, ow):
    h, w = x.shape[-2:]

    def coords(n, o):
        src = np.arange(o) * ((n - 1) / (o - 1) if o > 1 else 0.0)
        i0 = np.minimum(np.floor(src).astype(int), n - 1)
        return i0, np.minimum(i0 + 1, n - 1), src - i0

    a0, a1, la = coords(h, oh)
    b0, b1, lb = coords(w, ow)
    rows = x[..., a0, :] * (1 - la)[:, None] + x[..., a1, :] * la[:, None]
    return rows[..., b0] * (1 - lb) + rows[..., b1] * lb


def check_linear(e, fwd_name, fwd_args, bwd, x, ref):
    """Run the forward, compare with `ref`, then check the backward by the adjoint identity."""
    xs, xv = dev(e, x)
    y = e.out(*ref.shape)
    e.run(fwd_name, xs, *fwd_args, y)
    e.check(y, ref, rtol=max(e.tol["rtol"], 1e-5), atol=max(e.tol["atol"], 1e-5))
    gs, g = dev(e, e.rand(*ref.shape))
    gx = e.out(*x.shape)
    bwd(gs, xs, gx)
    lhs = (g * ref).sum()
    rhs = (gx.numpy(e.stream).astype(np.float64) * xv).sum()
    assert abs(lhs - rhs) <= 1e-4 * (np.abs(g * ref).sum() + 1) * (1 if e.name == "float32" else 50), (lhs, rhs)


@ALL
@pytest.mark.parametrize(
    "k,s,p,ceil,include_pad,divisor",
    [
        ((2, 2), (2, 2), (0, 0), False, True, 0),
        ((3, 3), (2, 2), (1, 1), True, False, 0),
        ((2, 3), (1, 2), (1, 0), False, True, 5),
    ],
)
def test_avg_pool2d(env, dt, k, s, p, ceil, include_pad, divisor):
    e = env(dt)
    x = e.rand(2, 3, 7, 6)
    ref = avg_pool(x, k, s, p, ceil, include_pad, divisor)
    args = (list(k), list(s), list(p), ceil, include_pad, divisor, 0)
    check_linear(e, "AvgPool2d", args, lambda g, xs, gx: e.run("AvgPool2dBackward", g, xs, *args, gx), x, ref)


@ALL
def test_adaptive_avg_pool2d(env, dt):
    e = env(dt)
    x = e.rand(2, 7, 5)  # 3-D: (C, H, W)
    ref = adaptive_avg(x, 3, 4)
    check_linear(
        e, "AdaptiveAvgPool2d", ([3, 4],), lambda g, xs, gx: e.run("AdaptiveAvgPool2dBackward", g, xs, gx), x, ref
    )


@ALL
def test_upsample(env, dt):
    e = env(dt)
    x = e.rand(1, 2, 3, 5)
    for oh, ow in [(6, 10), (7, 4), (3, 5)]:
        ref = nearest(x, oh, ow)
        check_linear(
            e,
            "UpsampleNearest2d",
            ([oh, ow],),
            lambda g, xs, gx, o=[oh, ow]: e.run("UpsampleNearest2dBackward", g, o, list(x.shape), -1.0, -1.0, gx),
            x,
            ref,
        )
        # V2 with no scales (-1) is the same op
        y = e.out(*ref.shape)
        e.run("UpsampleNearest2dV2", e.t(x), [oh, ow], -1.0, -1.0, y)
        e.check(y, ref)
    ref = bilinear_align_corners(x, 5, 8)
    bw = lambda g, xs, gx: e.run("UpsampleBilinear2dBackwardV2", g, [5, 8], list(x.shape), True, 0.0, 0.0, gx)  # noqa: E731
    check_linear(e, "UpsampleBilinear2d", ([5, 8], True, 0.0, 0.0), bw, x, ref)


@ALL
@pytest.mark.parametrize("mode", ["reflect", "edge"])
def test_pads(env, dt, mode):
    e = env(dt)
    name = "ReflectionPad" if mode == "reflect" else "ReplicationPad"
    x = e.rand(2, 3, 4, 5)
    pads = [2, 1, 3, 0]  # left, right, top, bottom (torch's order)
    ref = np.pad(x, ((0, 0), (0, 0), (3, 0), (2, 1)), mode=mode)
    check_linear(e, name + "2d", (pads,), lambda g, xs, gx: e.run(name + "2dBackward", g, xs, pads, gx), x, ref)
    x1 = e.rand(3, 6)  # 1-D on a 2-D tensor (C, L)
    ref = np.pad(x1, ((0, 0), (3, 2)), mode=mode)
    check_linear(e, name + "1d", ([3, 2],), lambda g, xs, gx: e.run(name + "1dBackward", g, xs, [3, 2], gx), x1, ref)


def test_refusals(env):
    e = env("float32")
    x = e.t(e.rand(1, 1, 3, 4))
    bad = [
        ("ReflectionPad2d", (x, [4, 0, 0, 0], e.out(1, 1, 3, 8))),  # reflection pad not below the width
        ("ReflectionPad2d", (x, [1, 1], e.out(1, 1, 3, 6))),  # 2 values for a 2-D pad
        ("ReplicationPad2d", (x, [-4, 0, 0, 0], e.out(1, 1, 3, 0))),  # cropped to nothing (torch crops with < 0)
        ("UpsampleBilinear2d", (x, [6, 8], False, -2.0, 2.0, e.out(1, 1, 6, 8))),  # negative scale
        ("UpsampleNearest2d", (x, [6, 8], e.out(1, 1, 6, 7))),  # out shape
        ("AvgPool2d", (x, [3, 3], [1, 1], [2, 2], False, True, 0, 0, e.out(1, 1, 5, 6))),  # pad above k / 2
        ("AvgPool2d", (x, [2, 2], [], [0], False, True, -1, 0, e.out(1, 1, 1, 2))),  # negative divisor
        ("AdaptiveAvgPool2d", (e.acl.tensor(np.ones((1, 2, 2), np.int32), dtype=cs.ACL_INT32), [1, 1], e.out(1, 1, 1))),
    ]
    for name, args in bad:
        with pytest.raises(cs.AclError):
            e.run(name, *args)
    # the same calls well-formed succeed (so each refusal above is for its own reason)
    e.run("ReflectionPad2d", x, [3, 0, 0, 0], e.out(1, 1, 3, 7))
    e.run("AvgPool2d", x, [2, 2], [], [0], False, True, 0, 0, e.out(1, 1, 1, 2))
    e.run("UpsampleBilinear2d", x, [6, 8], False, 2.0, 2.0, e.out(1, 1, 6, 8))


def test_pads_crop_and_move_integers(acl):
    """Negative padding crops (as torch's F.pad); integer tensors are padded and resized by moving their
    values exactly (int64 beyond 2^53 included)."""
    s = acl.stream()
    x = np.arange(20, dtype=np.float32).reshape(1, 4, 5)
    o = acl.tensor(shape=(1, 3, 6))
    acl.run("ReflectionPad2d", acl.tensor(x), [-1, 2, 1, -2], o, stream=s)
    np.testing.assert_array_equal(o.numpy(s), np.pad(x, ((0, 0), (1, 0), (0, 2)), mode="reflect")[:, :3, 1:])
    big = np.array([[2**60 + 1, 2**60 + 3]], np.int64)
    o = acl.tensor(shape=(1, 5), dtype=cs.ACL_INT64)
    acl.run("ReplicationPad1d", acl.tensor(big, dtype=cs.ACL_INT64), [1, 2], o, stream=s)
    np.testing.assert_array_equal(o.numpy(s), np.pad(big, ((0, 0), (1, 2)), mode="edge"))
    u = np.arange(6, dtype=np.uint8).reshape(1, 1, 2, 3)
    o = acl.tensor(shape=(1, 1, 4, 6), dtype=cs.ACL_UINT8)
    acl.run("UpsampleNearest2d", acl.tensor(u, dtype=cs.ACL_UINT8), [4, 6], o, stream=s)
    np.testing.assert_array_equal(o.numpy(s), u.repeat(2, 2).repeat(2, 3))
