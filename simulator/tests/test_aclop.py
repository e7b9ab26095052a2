"""aclop: descriptors, data buffers, attributes and single-op execution."""

import ctypes as C

import numpy as np
import pytest

import cannsim_ctypes as cs

VP = C.c_void_p


class Op:
    def __init__(self, acl):
        self.acl, rt, opc = acl, acl.rt, acl.opc
        f = acl.fn
        self.desc = f(rt, "aclCreateTensorDesc", VP, [C.c_int, C.c_int, VP, C.c_int])
        self.buf = f(rt, "aclCreateDataBuffer", VP, [VP, C.c_size_t])
        self.attr = f(rt, "aclopCreateAttr", VP, [])
        self.exec_v2 = f(rt, "aclopExecuteV2", C.c_int, [C.c_char_p, C.c_int, VP, VP, C.c_int, VP, VP, VP, VP])
        sig = [C.c_char_p, C.c_int, VP, VP, C.c_int, VP, VP, VP, C.c_int, C.c_int, C.c_char_p, VP]
        self.cae = f(opc, "aclopCompileAndExecute", C.c_int, sig)
        self.cae2 = f(opc, "aclopCompileAndExecuteV2", C.c_int, sig)

    def io(self, t, shape=None):
        shape = t.shape if shape is None else shape
        return self.desc(t.dtype, len(shape), (C.c_int64 * max(len(shape), 1))(*shape), cs.ACL_FORMAT_ND), self.buf(
            t.ptr, t.nbytes
        )

    def run(self, entry, op_type, ins, outs, attr=None, stream=None):
        def arr(xs):
            return (VP * max(len(xs), 1))(*xs)

        ii, oo = [self.io(t) if not isinstance(t, tuple) else t for t in ins], [self.io(t) for t in outs]
        a = (
            op_type.encode(),
            len(ii),
            arr([x[0] for x in ii]),
            arr([x[1] for x in ii]),
            len(oo),
            arr([x[0] for x in oo]),
            arr([x[1] for x in oo]),
            attr,
        )
        if entry == "aclopExecuteV2":
            return self.exec_v2(*a, stream)
        return (self.cae if entry == "aclopCompileAndExecute" else self.cae2)(*a, 0, 0, None, stream)


def test_descriptor_and_buffer_getters(acl):
    f = acl.fn
    rt = acl.rt
    dims = (C.c_int64 * 3)(2, 3, 4)
    d = f(rt, "aclCreateTensorDesc", VP, [C.c_int, C.c_int, VP, C.c_int])(cs.ACL_FLOAT16, 3, dims, cs.ACL_FORMAT_ND)
    assert f(rt, "aclGetTensorDescType", C.c_int, [VP])(d) == cs.ACL_FLOAT16
    assert f(rt, "aclGetTensorDescFormat", C.c_int, [VP])(d) == cs.ACL_FORMAT_ND
    assert f(rt, "aclGetTensorDescNumDims", C.c_size_t, [VP])(d) == 3
    assert f(rt, "aclGetTensorDescElementCount", C.c_size_t, [VP])(d) == 24
    assert f(rt, "aclGetTensorDescSize", C.c_size_t, [VP])(d) == 48
    v = C.c_int64()
    dimv2 = f(rt, "aclGetTensorDescDimV2", C.c_int, [VP, C.c_size_t, C.POINTER(C.c_int64)])
    assert dimv2(d, 2, C.byref(v)) == 0 and v.value == 4
    assert dimv2(d, 3, C.byref(v)) == 100000
    f(rt, "aclSetTensorDescName", None, [VP, C.c_char_p])(d, b"x0")
    assert f(rt, "aclGetTensorDescName", C.c_char_p, [VP])(d) == b"x0"
    # storage format/shape are settable (no getter in the real ABI); the getters keep the origin values
    assert f(rt, "aclSetTensorFormat", C.c_int, [VP, C.c_int])(d, 29) == 0
    assert f(rt, "aclSetTensorShape", C.c_int, [VP, C.c_int, VP])(d, 1, (C.c_int64 * 1)(24)) == 0
    assert f(rt, "aclGetTensorDescFormat", C.c_int, [VP])(d) == cs.ACL_FORMAT_ND
    assert f(rt, "aclGetTensorDescNumDims", C.c_size_t, [VP])(d) == 3
    f(rt, "aclDestroyTensorDesc", None, [VP])(d)
    b = f(rt, "aclCreateDataBuffer", VP, [VP, C.c_size_t])(0x1000, 64)
    assert f(rt, "aclGetDataBufferAddr", VP, [VP])(b) == 0x1000
    assert f(rt, "aclGetDataBufferSizeV2", C.c_size_t, [VP])(b) == 64
    assert f(rt, "aclUpdateDataBuffer", C.c_int, [VP, VP, C.c_size_t])(b, 0x2000, 32) == 0
    assert f(rt, "aclGetDataBufferSizeV2", C.c_size_t, [VP])(b) == 32
    assert f(rt, "aclDestroyDataBuffer", C.c_int, [VP])(b) == 0
    assert f(rt, "aclDestroyDataBuffer", C.c_int, [VP])(b) == 100000
    assert f(rt, "aclDataTypeSize", C.c_size_t, [C.c_int])(cs.ACL_BF16) == 2


def test_attrs(acl):
    f, rt = acl.fn, acl.rt
    a = f(rt, "aclopCreateAttr", VP, [])()
    assert f(rt, "aclopSetAttrBool", C.c_int, [VP, C.c_char_p, C.c_uint8])(a, b"b", 1) == 0
    assert f(rt, "aclopSetAttrInt", C.c_int, [VP, C.c_char_p, C.c_int64])(a, b"i", 3) == 0
    assert f(rt, "aclopSetAttrFloat", C.c_int, [VP, C.c_char_p, C.c_float])(a, b"f", 1.5) == 0
    assert f(rt, "aclopSetAttrString", C.c_int, [VP, C.c_char_p, C.c_char_p])(a, b"s", b"NCHW") == 0
    assert f(rt, "aclopSetAttrListInt", C.c_int, [VP, C.c_char_p, C.c_int, VP])(a, b"li", 2, (C.c_int64 * 2)(1, 2)) == 0
    assert f(rt, "aclopSetAttrListFloat", C.c_int, [VP, C.c_char_p, C.c_int, VP])(a, b"lf", 1, (C.c_float * 1)(1)) == 0
    assert f(rt, "aclopSetAttrListBool", C.c_int, [VP, C.c_char_p, C.c_int, VP])(a, b"lb", 1, (C.c_uint8 * 1)(1)) == 0
    assert f(rt, "aclopSetAttrDataType", C.c_int, [VP, C.c_char_p, C.c_int])(a, b"dt", 1) == 0
    strs = (C.c_char_p * 2)(b"a", b"b")
    assert f(rt, "aclopSetAttrListString", C.c_int, [VP, C.c_char_p, C.c_int, VP])(a, b"ls", 2, strs) == 0
    assert (
        f(rt, "aclopSetAttrListListInt", C.c_int, [VP, C.c_char_p, C.c_int, VP, VP])(
            a, b"lli", 1, (C.c_int * 1)(2), (C.POINTER(C.c_int64) * 1)((C.c_int64 * 2)(1, 2))
        )
        == 0
    )
    assert f(rt, "aclopSetAttrInt", C.c_int, [VP, C.c_char_p, C.c_int64])(a, None, 3) == 100000
    assert f(rt, "aclopSetAttrInt", C.c_int, [VP, C.c_char_p, C.c_int64])(0x99, b"i", 3) == 100000
    f(rt, "aclopDestroyAttr", None, [VP])(a)


@pytest.mark.parametrize("entry", ["aclopExecuteV2", "aclopCompileAndExecute", "aclopCompileAndExecuteV2"])
def test_aclop_ops(acl, entry):
    op = Op(acl)
    rng = np.random.default_rng(1)
    s = acl.stream()
    a, b = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4,)).astype(np.float32)
    A, B, Y = acl.tensor(a), acl.tensor(b), acl.tensor(shape=(3, 4))
    for t, ref in [("Add", a + b), ("Sub", a - b), ("Mul", a * b), ("BiasAdd", a + b)]:
        assert op.run(entry, t, [A, B], [Y], stream=s) == 0, acl.errmsg()
        np.testing.assert_allclose(Y.numpy(s), ref, rtol=1e-6)
    # MatMul with transpose attrs and bias
    m = rng.standard_normal((5, 3)).astype(np.float32)
    M, bias, MY = acl.tensor(m), acl.tensor(np.arange(5, dtype=np.float32)), acl.tensor(shape=(4, 5))
    attr = op.attr()
    acl.fn(acl.rt, "aclopSetAttrBool", C.c_int, [VP, C.c_char_p, C.c_uint8])(attr, b"transpose_x1", 1)
    acl.fn(acl.rt, "aclopSetAttrBool", C.c_int, [VP, C.c_char_p, C.c_uint8])(attr, b"transpose_x2", 1)
    assert op.run(entry, "MatMul", [A, M, bias], [MY], attr, s) == 0, acl.errmsg()
    np.testing.assert_allclose(MY.numpy(s), a.T @ m.T + np.arange(5), rtol=1e-5, atol=1e-5)
    # LogicalAnd / LogicalOr on bool (torch_npu's `&` / `|` of bool tensors), broadcast
    ba, bb = a > 0, b > 0
    BA, BB, BY = (
        acl.tensor(ba, dtype=cs.ACL_BOOL),
        acl.tensor(bb, dtype=cs.ACL_BOOL),
        acl.tensor(shape=(3, 4), dtype=cs.ACL_BOOL),
    )
    for t, ref in [("LogicalAnd", ba & bb), ("LogicalOr", ba | bb)]:
        assert op.run(entry, t, [BA, BB], [BY], stream=s) == 0, acl.errmsg()
        np.testing.assert_array_equal(BY.numpy(s), ref)
    # BroadcastTo(x, shape): b (4,) to (3, 4); a shape that x does not broadcast to is refused
    SH = acl.tensor(np.array([3, 4], np.int64), dtype=cs.ACL_INT64)
    assert op.run(entry, "BroadcastTo", [B, SH], [Y], stream=s) == 0, acl.errmsg()
    np.testing.assert_array_equal(Y.numpy(s), np.broadcast_to(b, (3, 4)))
    assert (
        op.run(entry, "BroadcastTo", [A, acl.tensor(np.array([4, 3], np.int64), dtype=cs.ACL_INT64)], [Y], stream=s)
        != 0
    )
    # Cast (output dtype from the output descriptor)
    H = acl.tensor(shape=(3, 4), dtype=cs.ACL_FLOAT16)
    assert op.run(entry, "Cast", [A], [H], stream=s) == 0
    np.testing.assert_array_equal(H.numpy(s), a.astype(np.float16))
    # ReduceSum with axes as a device tensor, keep_dims attr; ReduceSumD with axes attr
    AX = acl.tensor(np.array([1], np.int64), dtype=cs.ACL_INT64)
    R = acl.tensor(shape=(3, 1))
    kattr = op.attr()
    acl.fn(acl.rt, "aclopSetAttrBool", C.c_int, [VP, C.c_char_p, C.c_uint8])(kattr, b"keep_dims", 1)
    assert op.run(entry, "ReduceSum", [A, AX], [R], kattr, s) == 0, acl.errmsg()
    np.testing.assert_allclose(R.numpy(s), a.sum(1, keepdims=True), rtol=1e-5)
    dattr = op.attr()
    acl.fn(acl.rt, "aclopSetAttrListInt", C.c_int, [VP, C.c_char_p, C.c_int, VP])(dattr, b"axes", 1, (C.c_int64 * 1)(0))
    R0 = acl.tensor(shape=(4,))
    assert op.run(entry, "ReduceSumD", [A], [R0], dattr, s) == 0
    np.testing.assert_allclose(R0.numpy(s), a.sum(0), rtol=1e-5)
    # BiasAdd NCHW: bias along dim 1
    x4 = rng.standard_normal((2, 3, 2, 2)).astype(np.float32)
    X4, C3, O4 = acl.tensor(x4), acl.tensor(np.array([1, 2, 3], np.float32)), acl.tensor(shape=(2, 3, 2, 2))
    fattr = op.attr()
    acl.fn(acl.rt, "aclopSetAttrString", C.c_int, [VP, C.c_char_p, C.c_char_p])(fattr, b"data_format", b"NCHW")
    assert op.run(entry, "BiasAdd", [X4, C3], [O4], fattr, s) == 0
    np.testing.assert_allclose(O4.numpy(s), x4 + np.array([1, 2, 3])[None, :, None, None], rtol=1e-6)


def test_aclop_errors(acl):
    op = Op(acl)
    A, Y = acl.tensor(np.ones((2, 2), np.float32)), acl.tensor(shape=(2, 2))
    assert op.run("aclopExecuteV2", "NoSuchOp", [A], [Y]) == 100024  # ACL_ERROR_OP_NOT_FOUND
    assert op.run("aclopExecuteV2", "Add", [A], [Y]) == 100021  # ACL_ERROR_OP_INPUT_NOT_MATCH
    assert op.run("aclopExecuteV2", "Relu", [A], [Y, Y]) == 100022  # ACL_ERROR_OP_OUTPUT_NOT_MATCH
    assert op.run("aclopExecuteV2", "Add", [A, acl.tensor(np.ones(3, np.float32))], [Y]) == 100000
    small = (op.desc(cs.ACL_FLOAT, 2, (C.c_int64 * 2)(2, 2), 2), op.buf(A.ptr, 8))  # buffer too small
    assert op.run("aclopExecuteV2", "Relu", [small], [Y]) == 100000
    assert op.cae(b"Relu", 1, None, None, 1, None, None, None, 0, 0, None, None) == 100000
    compile_ = acl.fn(
        acl.opc, "aclopCompile", C.c_int, [C.c_char_p, C.c_int, VP, C.c_int, VP, VP, C.c_int, C.c_int, C.c_char_p]
    )
    assert compile_(b"MatMul", 0, None, 0, None, None, 0, 0, None) == 0
    assert compile_(b"Nope", 0, None, 0, None, None, 0, 0, None) == 100024


def test_successful_setters_keep_the_recent_error(acl):
    """A successful descriptor setter must not record an error (the failure message is built lazily)."""
    f, rt = acl.fn, acl.rt
    d = f(rt, "aclCreateTensorDesc", VP, [C.c_int, C.c_int, VP, C.c_int])(
        cs.ACL_FLOAT, 1, (C.c_int64 * 1)(4), cs.ACL_FORMAT_ND
    )
    assert f(rt, "aclDestroyDataBuffer", C.c_int, [VP])(VP(0x1234)) == 100000
    before = acl.errmsg()
    assert "aclDataBuffer" in before
    host = (C.c_float * 4)(1, 2, 3, 4)
    assert f(rt, "aclSetTensorPlaceMent", C.c_int, [VP, C.c_int])(d, 1) == 0
    assert f(rt, "aclSetTensorConst", C.c_int, [VP, VP, C.c_size_t])(d, C.cast(host, VP), 16) == 0
    assert f(rt, "aclSetTensorFormat", C.c_int, [VP, C.c_int])(d, cs.ACL_FORMAT_ND) == 0
    assert f(rt, "aclSetTensorShape", C.c_int, [VP, C.c_int, VP])(d, 1, (C.c_int64 * 1)(4)) == 0
    assert acl.errmsg() == before
    # and a failing setter does record its own message
    assert f(rt, "aclSetTensorPlaceMent", C.c_int, [VP, C.c_int])(VP(0x1234), 1) == 100000
    assert "aclTensorDesc" in acl.errmsg()


def host_input(op, acl, arr, const=False):
    """An aclop input whose data stays in host memory: placement ACL_MEMTYPE_HOST (or const data)."""
    f = acl.fn
    shape = arr.shape
    d = op.desc(cs.NP2ACL[arr.dtype], len(shape), (C.c_int64 * max(len(shape), 1))(*shape), cs.ACL_FORMAT_ND)
    if const:
        assert f(acl.rt, "aclSetTensorConst", C.c_int, [VP, VP, C.c_size_t])(d, arr.ctypes.data, arr.nbytes) == 0
    else:
        assert f(acl.rt, "aclSetTensorPlaceMent", C.c_int, [VP, C.c_int])(d, 1) == 0
    return d, op.buf(arr.ctypes.data if not const else None, arr.nbytes if not const else 0)


@pytest.mark.parametrize("const", [False, True])
def test_host_placed_and_const_inputs(acl, const):
    """Fill(dims, value), Range(start, limit, delta) and PadV3(x, paddings, value) as torch_npu calls them:
    small inputs in host memory (or const), read when the op is called."""
    op = Op(acl)
    s = acl.stream()
    dims = np.array([2, 3], np.int64)
    V = acl.tensor(np.array(7, np.int64).reshape(()), dtype=cs.ACL_INT64)
    Y = acl.tensor(shape=(2, 3), dtype=cs.ACL_INT64)
    hd = host_input(op, acl, dims, const)
    assert op.run("aclopCompileAndExecute", "Fill", [hd, V], [Y], stream=s) == 0, acl.errmsg()
    dims[:] = 0  # already read at call time: changing the host memory afterwards has no effect
    np.testing.assert_array_equal(Y.numpy(s), np.full((2, 3), 7))
    bounds = [np.array(v, np.float32).reshape(()) for v in (1.0, 3.0, 0.5)]
    R = acl.tensor(shape=(4,))
    ins = [host_input(op, acl, b, const) for b in bounds]
    assert op.run("aclopCompileAndExecute", "Range", ins, [R], stream=s) == 0, acl.errmsg()
    np.testing.assert_array_equal(R.numpy(s), np.arange(1.0, 3.0, 0.5, dtype=np.float32))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    X, P = acl.tensor(x), acl.tensor(shape=(3, 6))
    pads = np.array([0, 1, 2, 1], np.int32)
    attr = op.attr()
    acl.fn(acl.rt, "aclopSetAttrString", C.c_int, [VP, C.c_char_p, C.c_char_p])(attr, b"mode", b"constant")
    PV = acl.tensor(np.array([-1.0], np.float32))
    assert op.run("aclopCompileAndExecute", "PadV3", [X, host_input(op, acl, pads, const), PV], [P], attr, s) == 0
    np.testing.assert_array_equal(P.numpy(s), np.pad(x, ((0, 1), (2, 1)), constant_values=-1))
    # a host buffer smaller than the descriptor is rejected at the call
    if not const:
        d = op.desc(cs.ACL_INT64, 1, (C.c_int64 * 1)(2), cs.ACL_FORMAT_ND)
        acl.fn(acl.rt, "aclSetTensorPlaceMent", C.c_int, [VP, C.c_int])(d, 1)
        assert op.run("aclopCompileAndExecute", "Fill", [(d, op.buf(dims.ctypes.data, 8)), V], [Y], stream=s) == 100000
