"""The classic-net aclop types (aclop_nn*.rs) against numpy: data formats, TF padding, batch-norm training
split ops; and the GE operator registry (libcannsimge.so) that MindSpore's aclop path queries."""

import ctypes as C
import os

import numpy as np

from test_aclop import Op

VP = C.c_void_p


def attrs(acl, **kw):
    f, rt = acl.fn, acl.rt
    a = f(rt, "aclopCreateAttr", VP, [])()
    for k, v in kw.items():
        if isinstance(v, bool):
            f(rt, "aclopSetAttrBool", C.c_int, [VP, C.c_char_p, C.c_uint8])(a, k.encode(), v)
        elif isinstance(v, str):
            f(rt, "aclopSetAttrString", C.c_int, [VP, C.c_char_p, C.c_char_p])(a, k.encode(), v.encode())
        elif isinstance(v, float):
            f(rt, "aclopSetAttrFloat", C.c_int, [VP, C.c_char_p, C.c_float])(a, k.encode(), v)
        else:
            f(rt, "aclopSetAttrListInt", C.c_int, [VP, C.c_char_p, C.c_int, VP])(
                a, k.encode(), len(v), (C.c_int64 * len(v))(*v)
            )
    return a


def maxpool_ref(x, k, s):
    """TF MaxPool, SAME padding, NCHW."""
    n, c, h, w = x.shape
    ho, wo = -(-h // s), -(-w // s)
    ph, pw = max((ho - 1) * s + k - h, 0) // 2, max((wo - 1) * s + k - w, 0) // 2
    xp = np.full((n, c, h + 2 * k, w + 2 * k), -np.inf)
    xp[:, :, ph : ph + h, pw : pw + w] = x
    return np.stack(
        [
            np.stack([xp[:, :, i * s : i * s + k, j * s : j * s + k].max(axis=(2, 3)) for j in range(wo)], -1)
            for i in range(ho)
        ],
        -2,
    )


def conv_ref(x, wt, pad, stride):
    n, c, h, w = x.shape
    o, _, kh, kw = wt.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho, wo = (h + 2 * pad - kh) // stride + 1, (w + 2 * pad - kw) // stride + 1
    y = np.zeros((n, o, ho, wo))
    for i in range(ho):
        for j in range(wo):
            win = xp[:, :, i * stride : i * stride + kh, j * stride : j * stride + kw]
            y[:, :, i, j] = np.einsum("nchw,ochw->no", win, wt)
    return y


def test_maxpool_same_nchw_and_nhwc(acl):
    op, rng = Op(acl), np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5, 5)).astype(np.float32)
    want = maxpool_ref(x, 3, 2)
    y = acl.tensor(shape=want.shape)
    a = attrs(acl, ksize=[1, 1, 3, 3], strides=[1, 1, 2, 2], padding="SAME", data_format="NCHW")
    assert op.run("aclopCompileAndExecute", "MaxPool", [acl.tensor(x)], [y], a) == 0
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-6)
    yh = acl.tensor(shape=want.transpose(0, 2, 3, 1).shape)
    a = attrs(acl, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="SAME", data_format="NHWC")
    assert op.run("aclopCompileAndExecute", "MaxPool", [acl.tensor(x.transpose(0, 2, 3, 1).copy())], [yh], a) == 0
    np.testing.assert_allclose(yh.numpy(), want.transpose(0, 2, 3, 1), rtol=1e-6)
    # a wrong output shape is refused
    bad = acl.tensor(shape=(2, 3, 2, 2))
    a = attrs(acl, ksize=[1, 1, 3, 3], strides=[1, 1, 2, 2], padding="SAME", data_format="NCHW")
    assert op.run("aclopCompileAndExecute", "MaxPool", [acl.tensor(x)], [bad], a) != 0


def test_conv2d_formats_and_bias(acl):
    op, rng = Op(acl), np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    wt = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    want = conv_ref(x, wt, 1, 2) + b[None, :, None, None]
    y = acl.tensor(shape=want.shape)
    a = attrs(acl, strides=[1, 1, 2, 2], pads=[1, 1, 1, 1], data_format="NCHW")
    assert op.run("aclopCompileAndExecute", "Conv2D", [acl.tensor(x), acl.tensor(wt), acl.tensor(b)], [y], a) == 0
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-5)
    # NHWC activations, filter in NHWC order too ([O, kH, kW, C])
    yh = acl.tensor(shape=want.transpose(0, 2, 3, 1).shape)
    a = attrs(acl, strides=[1, 2, 2, 1], pads=[1, 1, 1, 1], data_format="NHWC")
    ins = [acl.tensor(x.transpose(0, 2, 3, 1).copy()), acl.tensor(wt.transpose(0, 2, 3, 1).copy()), acl.tensor(b)]
    assert op.run("aclopCompileAndExecute", "Conv2D", ins, [yh], a) == 0
    np.testing.assert_allclose(yh.numpy(), want.transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-5)
    a = attrs(acl, strides=[1, 1, 2, 2], pads=[1, 0, 1, 1], data_format="NCHW")  # asymmetric: refused
    assert op.run("aclopCompileAndExecute", "Conv2D", [acl.tensor(x), acl.tensor(wt)], [y], a) != 0


def test_bn_training_split_ops(acl):
    op, rng = Op(acl), np.random.default_rng(2)
    x = rng.standard_normal((4, 3, 2, 2)).astype(np.float32) * 2 + 1
    s, q = acl.tensor(shape=(3,)), acl.tensor(shape=(3,))
    assert op.run("aclopCompileAndExecute", "BNTrainingReduce", [acl.tensor(x)], [s, q], None) == 0
    np.testing.assert_allclose(s.numpy(), x.sum((0, 2, 3)), rtol=1e-5)
    np.testing.assert_allclose(q.numpy(), (x * x).sum((0, 2, 3)), rtol=1e-5)
    scale, off = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    mean, var = np.zeros(3, np.float32), np.ones(3, np.float32)
    outs = [acl.tensor(shape=x.shape)] + [acl.tensor(shape=(3,)) for _ in range(4)]
    ins = [acl.tensor(v) for v in (x, s.numpy(), q.numpy(), scale, off, mean, var)]
    a = attrs(acl, factor=0.1, epsilon=1e-5)
    assert op.run("aclopCompileAndExecute", "BNTrainingUpdate", ins, outs, a) == 0
    bm, bv = x.mean((0, 2, 3)), x.var((0, 2, 3))
    y = (x - bm[:, None, None]) / np.sqrt(bv[:, None, None] + 1e-5) * scale[:, None, None] + off[:, None, None]
    np.testing.assert_allclose(outs[0].numpy(), y, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(outs[1].numpy(), 0.1 * bm, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outs[2].numpy(), 0.9 + 0.1 * x.var((0, 2, 3), ddof=1), rtol=1e-5)
    np.testing.assert_allclose(outs[3].numpy(), bm, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outs[4].numpy(), bv, rtol=1e-5)


def test_ge_registry_lists_the_classic_ir(acl):
    ge = C.CDLL(os.path.join(str(acl.lib64), "libcannsimge.so"))
    ge.cannsimGeRegisteredOps.restype = C.c_size_t
    buf = C.create_string_buffer(1 << 16)
    n = ge.cannsimGeRegisteredOps(buf, len(buf))
    names = buf.value.decode().split()
    assert n == len(names)
    for t in ("Conv2D", "Conv2DBackpropFilter", "BNTrainingUpdate", "LayerNormGrad", "ApplyAdamD", "AddN", "OneHot"):
        assert t in names


def test_layer_norm_and_grad_match_finite_differences(acl):
    op, rng = Op(acl), np.random.default_rng(3)
    x = rng.standard_normal((3, 4, 6))
    g, b, dy = rng.standard_normal(6), rng.standard_normal(6), rng.standard_normal((3, 4, 6))
    eps = 1e-5

    def ln(x, g, b):
        m, v = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - m) / np.sqrt(v + eps) * g + b

    y, mean, var = acl.tensor(shape=x.shape), acl.tensor(shape=(3, 4, 1)), acl.tensor(shape=(3, 4, 1))
    a = attrs(acl, epsilon=eps)
    f = acl.fn(acl.rt, "aclopSetAttrInt", C.c_int, [VP, C.c_char_p, C.c_int64])
    f(a, b"begin_norm_axis", -1)
    f(a, b"begin_params_axis", -1)
    f32 = [acl.tensor(v.astype(np.float32)) for v in (x, g, b)]
    assert op.run("aclopCompileAndExecute", "LayerNorm", f32, [y, mean, var], a) == 0
    np.testing.assert_allclose(y.numpy(), ln(x, g, b), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(var.numpy()[..., 0], x.var(-1), rtol=1e-5)
    outs = [acl.tensor(shape=x.shape), acl.tensor(shape=(6,)), acl.tensor(shape=(6,))]
    ins = [acl.tensor(v.astype(np.float32)) for v in (dy, x)] + [var, mean, acl.tensor(g.astype(np.float32))]
    assert op.run("aclopCompileAndExecute", "LayerNormGrad", ins, outs, None) == 0
    h = 1e-6

    def num_grad(fn, p):
        out = np.zeros_like(p)
        for i in np.ndindex(p.shape):
            d = np.zeros_like(p)
            d[i] = h
            out[i] = ((dy * fn(p + d)).sum() - (dy * fn(p - d)).sum()) / (2 * h)
        return out

    np.testing.assert_allclose(outs[0].numpy(), num_grad(lambda v: ln(v, g, b), x), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(outs[1].numpy(), num_grad(lambda v: ln(x, v, b), g), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(outs[2].numpy(), dy.sum((0, 1)), rtol=1e-4, atol=1e-4)


def test_confusion_transpose_moves_exactly_and_refuses_bad_attrs(acl):
    """ConfusionTransposeD (torch_npu.npu_confusion_transpose): permute then reshape, or reshape then permute,
    as numpy; a perm that is not a permutation or a shape that does not fit is refused."""
    op = Op(acl)
    x = np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5)
    y = acl.tensor(shape=(2, 4, 15))
    a = attrs(acl, perm=[0, 2, 1, 3], shape=[2, 4, 15], transpose_first=True)
    assert op.run("aclopCompileAndExecute", "ConfusionTransposeD", [acl.tensor(x)], [y], a) == 0
    np.testing.assert_array_equal(y.numpy(), x.transpose(0, 2, 1, 3).reshape(2, 4, 15))
    y = acl.tensor(shape=(5, 6, 4))
    a = attrs(acl, perm=[2, 0, 1], shape=[6, 4, 5], transpose_first=False)
    assert op.run("aclopCompileAndExecute", "ConfusionTransposeD", [acl.tensor(x)], [y], a) == 0
    np.testing.assert_array_equal(y.numpy(), x.reshape(6, 4, 5).transpose(2, 0, 1))
    for perm, shape in [([0, 0, 1], [6, 4, 5]), ([2, 0, 1], [6, 4, 4])]:
        a = attrs(acl, perm=perm, shape=shape, transpose_first=False)
        assert (
            op.run("aclopCompileAndExecute", "ConfusionTransposeD", [acl.tensor(x)], [acl.tensor(shape=(5, 6, 4))], a)
            != 0
        )
