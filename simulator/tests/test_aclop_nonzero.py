"""aclop NonZero (torch_npu's `x[mask]`): a kernel that decides its output's shape. The output is
allocated for every element; after the client's sync the V2 entries' output descriptor holds the real
count (aclGetTensorDescNumDims / aclGetTensorDescDimV2), as CANN's dynamic-shape ops report it."""

import ctypes as C

import numpy as np
import pytest

import cannsim_ctypes as cs
from test_aclop import VP, Op
from test_aclop_stats_ops import set_bool


def dims_of(acl, d):
    n = acl.fn(acl.rt, "aclGetTensorDescNumDims", C.c_size_t, [VP])(d)
    dimv2 = acl.fn(acl.rt, "aclGetTensorDescDimV2", C.c_int, [VP, C.c_size_t, C.POINTER(C.c_int64)])
    out = []
    for i in range(n):
        v = C.c_int64()
        assert dimv2(d, i, C.byref(v)) == 0
        out.append(v.value)
    return out


def nonzero(acl, entry, a, transpose, dtype=cs.ACL_FLOAT):
    op, s = Op(acl), acl.stream()
    A = acl.tensor(a, dtype=dtype)
    n, r = a.size, a.ndim
    Y = acl.tensor(np.full((r, n) if transpose else (n, r), -7, np.int64), dtype=cs.ACL_INT64)
    yd, yb = op.io(Y)
    attr = op.attr()
    set_bool(acl, attr, b"transpose", int(transpose))
    ins = [op.io(A)]
    arr = lambda xs: (VP * 1)(*xs)  # noqa: E731
    args = (b"NonZero", 1, arr([ins[0][0]]), arr([ins[0][1]]), 1, arr([yd]), arr([yb]), attr)
    rc = (
        op.exec_v2(*args, s)
        if entry == "aclopExecuteV2"
        else getattr(op, "cae2" if entry.endswith("V2") else "cae")(*args, 0, 0, None, s)
    )
    assert rc == 0, acl.errmsg()
    acl.sync(s)
    return dims_of(acl, yd), Y.numpy(s)


@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize(
    "a",
    [
        np.array([[0, 1.5, 0, -2], [np.nan, 0, 0, 3], [0, 0, 0, 0]], np.float32),
        np.arange(-3, 9, dtype=np.float32).reshape(2, 3, 2) % 3,
        np.array([0, 0, 5, 0, 1], np.float32),
        np.zeros((2, 3), np.float32),
    ],
)
def test_nonzero_desc_holds_the_count_after_the_sync(acl, a, transpose):
    want = np.argwhere(a != 0)  # NaN is non-zero
    dims, y = nonzero(acl, "aclopCompileAndExecuteV2", a, transpose)
    got_shape = [want.shape[1], want.shape[0]] if transpose else list(want.shape)
    assert dims == got_shape
    flat = y.reshape(-1)[: want.size]  # the coordinates are the buffer's contiguous head
    np.testing.assert_array_equal(flat, (want.T if transpose else want).reshape(-1))
    assert (y.reshape(-1)[want.size :] == -7).all()  # nothing past the count is written


def test_only_the_v2_entries_update_the_desc(acl):
    a = np.array([[1, 0], [0, 2]], np.float32)
    assert nonzero(acl, "aclopExecuteV2", a, True)[0] == [2, 2]
    # aclopCompileAndExecute takes const output descs: they keep the shape the client gave
    dims, y = nonzero(acl, "aclopCompileAndExecute", a, True)
    assert dims == [2, 4]
    np.testing.assert_array_equal(y.reshape(-1)[:4], [0, 1, 0, 1])


def test_bool_mask_and_wrong_output_shape(acl):
    m = np.array([True, False, True])
    dims, y = nonzero(acl, "aclopExecuteV2", m, True, dtype=cs.ACL_BOOL)
    assert dims == [1, 2] and list(y.reshape(-1)[:2]) == [0, 2]
    op, s = Op(acl), acl.stream()
    A = acl.tensor(np.ones((2, 3), np.float32))
    Y = acl.tensor(shape=(6, 2), dtype=cs.ACL_INT64)  # transposed wants [2, 6]
    attr = op.attr()
    set_bool(acl, attr, b"transpose", 1)
    assert op.run("aclopExecuteV2", "NonZero", [A], [Y], attr, s) == 100000  # ACL_ERROR_INVALID_PARAM


def test_v2_returns_with_the_real_shape_without_a_sync(acl):
    """torch_npu reads the output desc right after aclopCompileAndExecuteV2 returns (no sync of its
    own): the call must wait for the kernel. 4M elements keep the kernel busy long enough that a call
    returning at enqueue would be read before the kernel set the dims."""
    op, s = Op(acl), acl.stream()
    a = np.zeros(1 << 22, np.float32)
    a[[5, 77, 4_000_000]] = 1.0
    A = acl.tensor(a)
    Y = acl.tensor(shape=(a.size, 1), dtype=cs.ACL_INT64)
    yd, yb = op.io(Y)
    (ad, ab), arr = op.io(A), lambda x: (VP * 1)(x)
    attr = op.attr()
    rc = op.cae2(b"NonZero", 1, arr(ad), arr(ab), 1, arr(yd), arr(yb), attr, 0, 0, None, s)
    assert rc == 0, acl.errmsg()
    assert dims_of(acl, yd) == [3, 1]
    np.testing.assert_array_equal(Y.numpy(s).reshape(-1)[:3], [5, 77, 4_000_000])


@pytest.mark.parametrize(
    "x,mask",
    [
        (np.arange(12, dtype=np.float32).reshape(3, 4), np.arange(12).reshape(3, 4) % 3 == 0),
        (np.arange(12, dtype=np.float32).reshape(3, 4), np.array([True, False, False, True])),  # broadcast
        (np.array([[1.5], [np.nan]], np.float32), np.array([[True, True, False]])),  # both broadcast
        (np.ones((2, 2), np.float16), np.zeros((2, 2), bool)),  # nothing selected
        (np.array([2**53 + 1, -3, 7], np.int64), np.array([True, False, True])),  # raw moves
    ],
)
def test_masked_select(acl, x, mask):
    op, s = Op(acl), acl.stream()
    want = np.broadcast_to(x, np.broadcast_shapes(x.shape, mask.shape))[
        np.broadcast_to(mask, np.broadcast_shapes(x.shape, mask.shape))
    ]
    n = int(np.prod(np.broadcast_shapes(x.shape, mask.shape)))
    dt = {np.float32: cs.ACL_FLOAT, np.float16: cs.ACL_FLOAT16, np.int64: cs.ACL_INT64}[x.dtype.type]
    X, M = acl.tensor(x, dtype=dt), acl.tensor(mask, dtype=cs.ACL_BOOL)
    Y = acl.tensor(np.zeros(n, x.dtype), dtype=dt)
    ios = [op.io(X), op.io(M), op.io(Y)]
    arr = lambda xs: (VP * len(xs))(*xs)  # noqa: E731
    rc = op.exec_v2(
        b"MaskedSelect",
        2,
        arr([d for d, _ in ios[:2]]),
        arr([b for _, b in ios[:2]]),
        1,
        arr([ios[2][0]]),
        arr([ios[2][1]]),
        None,
        s,
    )
    assert rc == 0, acl.errmsg()
    assert dims_of(acl, ios[2][0]) == [want.size]
    np.testing.assert_array_equal(Y.numpy(s)[: want.size], want)
    # a float mask, and an out of another dtype, are refused
    F = acl.tensor(mask.astype(np.float32))
    assert op.run("aclopExecuteV2", "MaskedSelect", [X, F], [Y], None, s) == 100000
    other = cs.ACL_INT32 if dt != cs.ACL_INT64 else cs.ACL_FLOAT
    Z = acl.tensor(shape=(n,), dtype=other)
    assert op.run("aclopExecuteV2", "MaskedSelect", [X, M], [Z], None, s) == 100000
