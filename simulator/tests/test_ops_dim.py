"""The aclnn operators of ops_dim.rs (torch_npu's sort/topk/max(dim)/cumsum/flip/roll/scatter/var/
std/prod/logsumexp/lerp/mse_loss paths) and aclnnSilu/Remainder/Fmod, against numpy, f32/f16/bf16."""

import ctypes as C

import numpy as np
import pytest

import cannsim_ctypes as cs
from test_ops import DTYPES, Env, dev

ALL = pytest.mark.parametrize("dt", list(DTYPES))


@pytest.fixture
def env(acl):
    return lambda dt: Env(acl, dt)


def i64(e, x):
    return e.acl.tensor(np.asarray(x, np.int64), dtype=cs.ACL_INT64)


def ints(e, t):
    return t.numpy(e.stream).astype(np.int64)


@ALL
def test_elementwise(env, dt):
    """Silu and its backward, Remainder (sign of the divisor) and Fmod (sign of the dividend), tensor
    and scalar, out-of-place and in-place; Lerp with a tensor and a scalar weight (both branches)."""
    e = env(dt)
    xs, x = dev(e, e.rand(3, 5, lo=-4, hi=4))
    ys, y = dev(e, e.rand(1, 5, lo=0.5, hi=2) * np.array([1, -1, 1, -1, 1]))
    o = e.out(3, 5)
    e.run("Silu", xs, o)
    sg = 1 / (1 + np.exp(-x))
    e.check(o, x * sg)
    gs, g = dev(e, e.rand(3, 5))
    e.run("SiluBackward", gs, xs, o)
    e.check(o, g * sg * (1 + x * (1 - sg)), rtol=5e-3 if dt != "float32" else 1e-5)
    for name, fn in [("RemainderTensorTensor", np.remainder), ("FmodTensor", np.fmod)]:
        e.run(name, xs, ys, o)
        e.check(o, fn(x, y), err_msg=name)
        it, _ = dev(e, x)
        e.run("Inplace" + name, it, ys)
        e.check(it, fn(x, y), err_msg=name)
    for name, fn in [("RemainderTensorScalar", np.remainder), ("FmodScalar", np.fmod)]:
        for v in (0.75, -1.5):
            e.run(name, xs, v, o)
            e.check(o, fn(x, v), err_msg=f"{name} {v}")
    ends, end = dev(e, e.rand(3, 5))
    ws_, w = dev(e, e.rand(3, 5, lo=-0.2, hi=1.2))
    e.run("Lerp", xs, ends, ws_, o)
    e.check(o, x + w * (end - x))
    for v in (0.25, 0.9):
        e.run("Lerps", xs, ends, v, o)
        e.check(o, x + v * (end - x))
    it, _ = dev(e, x)
    e.run("InplaceLerps", it, ends, 0.9)
    e.check(it, x + 0.9 * (end - x))


@ALL
def test_along_a_dim(env, dt):
    """Cumsum, MaxDim/MinDim/ArgMax/ArgMin (first extreme, a NaN wins), Sort (stable; NaN last
    ascending), Topk, Flip and Roll (per dim and flattened)."""
    e = env(dt)
    raw = e.rand(3, 4, 5)
    raw[0, 1, 2], raw[1, 0, 0], raw[2, 3, 4] = np.nan, np.inf, -np.inf
    raw[1, 2], raw[2, :, 1] = [0.5, 1.5, 1.5, -1.0, -1.0], [3.0, -3.0, 3.0, -3.0]  # tied extremes
    xs, x = dev(e, raw)
    for d in (0, 1, -1):
        o = e.out(*x.shape)
        e.run("Cumsum", xs, d, DTYPES[dt][0], o)
        e.check(o, np.cumsum(x, axis=d), equal_nan=True, err_msg=f"cumsum {d}")
    with pytest.raises(cs.AclError):
        e.run("Cumsum", xs, 0, cs.ACL_INT64, e.out(*x.shape))
    for d, keep in [(1, False), (-1, True), (0, False)]:
        shape = tuple(1 if (k == d % 3) else n for k, n in enumerate(x.shape) if keep or k != d % 3)
        for name, fn, amin in [("MaxDim", np.max, False), ("MinDim", np.min, True)]:
            v, i = e.out(*shape), e.acl.tensor(shape=shape, dtype=cs.ACL_INT64)
            e.run(name, xs, d, keep, v, i)
            want_i = (np.argmin if amin else np.argmax)(x, axis=d)
            want_i = np.expand_dims(want_i, d) if keep else want_i
            np.testing.assert_array_equal(ints(e, i), want_i, err_msg=f"{name} {d}")
            e.check(v, fn(x, axis=d, keepdims=keep), equal_nan=True, err_msg=f"{name} {d}")
            a = e.acl.tensor(shape=shape, dtype=cs.ACL_INT64)
            e.run(name.replace("Dim", "").replace("Max", "ArgMax").replace("Min", "ArgMin"), xs, d, keep, a)
            np.testing.assert_array_equal(ints(e, a), want_i, err_msg=f"arg {name} {d}")
    for d in (2, 0):
        v, i = e.out(*x.shape), e.acl.tensor(shape=x.shape, dtype=cs.ACL_INT64)
        e.run("Sort", xs, True, d, False, v, i)
        want_i = np.argsort(x, axis=d, kind="stable")
        np.testing.assert_array_equal(ints(e, i), want_i, err_msg=f"sort {d}")
        e.check(v, np.take_along_axis(x, want_i, d), equal_nan=True)
    fin, fv = dev(e, np.round(e.rand(4, 6) * 2) / 2)  # many ties
    v, i = e.out(4, 6), e.acl.tensor(shape=(4, 6), dtype=cs.ACL_INT64)
    e.run("Sort", fin, True, 1, True, v, i)
    want_i = np.argsort(-fv, axis=1, kind="stable")
    np.testing.assert_array_equal(ints(e, i), want_i)
    v, i = e.out(4, 3), e.acl.tensor(shape=(4, 3), dtype=cs.ACL_INT64)
    e.run("Topk", fin, 3, 1, True, True, v, i)
    np.testing.assert_array_equal(ints(e, i), want_i[:, :3])
    e.check(v, np.take_along_axis(fv, want_i[:, :3], 1))
    e.run("Topk", fin, 3, -1, False, True, v, i)
    np.testing.assert_array_equal(ints(e, i), np.argsort(fv, axis=1, kind="stable")[:, :3])
    with pytest.raises(cs.AclError):
        e.run("Topk", fin, 7, 1, True, True, e.out(4, 7), e.acl.tensor(shape=(4, 7), dtype=cs.ACL_INT64))
    o = e.out(*x.shape)
    for dims in ([0], [2, 1], [-1, 0, 1]):
        e.run("Flip", xs, dims, o)
        e.check(o, np.flip(x, axis=tuple(dims)), equal_nan=True, err_msg=f"flip {dims}")
    for shifts, dims in [([2], [2]), ([-1, 7], [0, 1]), ([5], [])]:
        e.run("Roll", xs, shifts, dims, o)
        want = np.roll(x, shifts[0]) if not dims else np.roll(x, shifts, axis=tuple(dims))
        e.check(o, want, equal_nan=True, err_msg=f"roll {shifts} {dims}")


def scatter_ref(x, d, idx, src, reduce):
    y = x.copy()
    for k in np.ndindex(*idx.shape):
        at = list(k)
        at[d] = idx[k]
        v = src[k] if isinstance(src, np.ndarray) else src
        y[tuple(at)] = y[tuple(at)] + v if reduce == 1 else (y[tuple(at)] * v if reduce == 2 else v)
    return y


@ALL
def test_scatter(env, dt):
    """Scatter (replace, add, multiply), ScatterValue, ScatterAdd with repeated indices (gather's
    backward), in-place forms; src larger than index; out-of-range index fails at the sync."""
    e = env(dt)
    xs, x = dev(e, e.rand(3, 5))
    ss, s = dev(e, e.rand(3, 6))
    idx = np.array([[4, 0], [1, 1], [2, 3]])
    it = i64(e, idx)
    o = e.out(3, 5)
    for reduce in (0, 1, 2):
        e.run("Scatter", xs, 1, it, ss, reduce, o)
        e.check(o, scatter_ref(x, 1, idx, s, reduce), err_msg=f"reduce {reduce}")
    idx0 = np.array([[2, 0, 0, 1, 2]])
    e.run("ScatterAdd", xs, 0, i64(e, idx0), ss, o)
    e.check(o, scatter_ref(x, 0, idx0, s, 1))
    e.run("ScatterValue", xs, 0, i64(e, idx0), -2.5, 0, o)
    e.check(o, scatter_ref(x, 0, idx0, -2.5, 0))
    t, _ = dev(e, x)
    e.run("InplaceScatter", t, 1, it, ss, 0)
    e.check(t, scatter_ref(x, 1, idx, s, 0))
    t, _ = dev(e, x)
    e.run("InplaceScatterValue", t, 1, it, 4.0, 1)
    e.check(t, scatter_ref(x, 1, idx, 4.0, 1))
    with pytest.raises(cs.AclError):
        e.run("Scatter", xs, 1, i64(e, [[5, 0], [0, 0], [0, 0]]), ss, 0, o)
        o.numpy(e.stream)
    with pytest.raises(cs.AclError):  # index does not fit src
        e.run("Scatter", xs, 1, i64(e, np.zeros((4, 2))), ss, 0, o)


@ALL
@pytest.mark.filterwarnings("ignore:Degrees of freedom")
@pytest.mark.filterwarnings("ignore:divide by zero")
def test_reductions_and_mse(env, dt):
    """VarCorrection/Std (correction 0, 1, 2; N - correction <= 0 gives inf/NaN), Prod and ProdDim,
    LogSumExp (±inf rows), MseLoss (none/mean/sum) and its backward."""
    e = env(dt)
    raw = e.rand(3, 4)
    raw[2] = [-np.inf, 1.0, 2.0, -np.inf]
    xs, x = dev(e, raw)
    fs, f = dev(e, e.rand(3, 4))
    for dims, keep, shape in [([1], False, (3,)), ([0], True, (1, 4)), ([], False, ())]:
        ax = tuple(dims) if dims else None
        for c in (0, 1, 2):
            o = e.out(*shape)
            e.run("VarCorrection", fs, dims, c, keep, o)
            e.check(o, np.var(f, axis=ax, ddof=c, keepdims=keep), err_msg=f"var {dims} {c}")
            e.run("Std", fs, dims, c, keep, o)
            e.check(o, np.std(f, axis=ax, ddof=c, keepdims=keep), err_msg=f"std {dims} {c}")
        o = e.out(*shape)
        e.run("LogSumExp", xs, dims, keep, o)
        m = np.max(x, axis=ax, keepdims=True)
        m = np.where(np.isinf(m), 0, m)
        want = np.log(np.sum(np.exp(x - m), axis=ax, keepdims=True)) + m
        want = want if keep or ax is None else np.squeeze(want, ax)
        e.check(o, want.reshape(shape), err_msg=f"logsumexp {dims}")
    o = e.out(3)
    e.run("VarCorrection", fs, [1], 4, False, o)  # N - correction = 0
    e.check(o, np.var(f, axis=1, ddof=4), equal_nan=True)
    o = e.out(3)
    e.run("ProdDim", fs, 1, False, DTYPES[dt][0], o)
    e.check(o, np.prod(f, axis=1))
    o = e.out()
    e.run("Prod", fs, DTYPES[dt][0], o)
    e.check(o, np.prod(f))
    ii = i64(e, [[1, -2, 3], [4, 5, -1]])
    io = e.acl.tensor(shape=(2,), dtype=cs.ACL_INT64)
    e.run("ProdDim", ii, -1, False, cs.ACL_INT64, io)
    np.testing.assert_array_equal(ints(e, io), [-6, -20])
    ts, tg = dev(e, e.rand(1, 4))
    for reduction, shape in [(0, (3, 4)), (1, ()), (2, ())]:
        o = e.out(*shape)
        e.run("MseLoss", fs, ts, reduction, o)
        sq = (f - tg) ** 2
        e.check(o, [sq, sq.mean(), sq.sum()][reduction], err_msg=f"mse {reduction}")
        gs, g = dev(e, e.rand(*shape)) if reduction == 0 else dev(e, np.array(0.75))
        gi = e.out(3, 4)
        e.run("MseLossBackward", gs, fs, ts, reduction, gi)
        e.check(gi, 2 * (f - tg) * g / (12 if reduction == 1 else 1), err_msg=f"mse bwd {reduction}")


def index_ref(x, idx):
    """numpy advanced indexing with None for a full slice."""
    return x[tuple(slice(None) if i is None else i for i in idx)]


@ALL
def test_index_and_index_put(env, dt):
    """aclnnIndex / aclnnIndexPutImpl (torch's `x[idx]` and `x[idx] = v`, `index_put(accumulate)`):
    one or several int32/int64 index tensors broadcast together, negative indices, slices passed
    as empty tensors of any dtype (adjacent index dims stay in place, separated ones go first),
    repeated positions accumulating; out-of-range indices fail at the sync."""
    e = env(dt)
    xs, x = dev(e, e.rand(4, 5, 3))
    slice_ = e.acl.tensor(shape=(0,), dtype=DTYPES[dt][0])  # torch_npu's `:` (self's dtype)
    i0, i1 = np.array([[0, -1], [2, 2]]), np.array([4, 0])
    i32 = e.acl.tensor(np.array([1, 3, 1], np.int32), dtype=cs.ACL_INT32)
    cases = [
        ([i64(e, i0)], [i0]),
        ([i32], [np.array([1, 3, 1])]),
        ([i64(e, i0), i64(e, i1)], [i0, i1]),  # broadcast to (2, 2), then dim 2
        ([slice_, i64(e, i1)], [None, i1]),  # x[:, idx]
        ([i64(e, i1 - 1), slice_, i64(e, [2, 0])], [i1 - 1, None, np.array([2, 0])]),  # separated: first
    ]
    for k, (handles, idx) in enumerate(cases):
        want = index_ref(x, idx)
        o = e.out(*want.shape)
        e.run("Index", xs, handles, o)
        e.check(o, want, err_msg=f"index case {k}")
        v = e.rand(*want.shape)
        vs, vq = dev(e, v)
        t, _ = dev(e, x)
        e.run("IndexPutImpl", t, handles, vs, False, False)
        ref = x.copy()
        ref[tuple(slice(None) if i is None else i for i in idx)] = vq
        e.check(t, ref, err_msg=f"index_put case {k}")
    x4s, x4 = dev(e, e.rand(2, 4, 5, 3))
    a, b = np.array([3, 1]), np.array([[2], [0]])
    want = index_ref(x4, [None, a, None, b])  # separated after a slice: the broadcast dims first
    assert want.shape == (2, 2, 2, 5)
    o = e.out(*want.shape)
    e.run("Index", x4s, [slice_, i64(e, a), slice_, i64(e, b)], o)
    e.check(o, want)
    rep = np.array([0, 2, 0, 0])
    vs, vq = dev(e, e.rand(4, 5, 3))
    t, _ = dev(e, x)
    e.run("IndexPutImpl", t, [i64(e, rep)], vs, True, False)
    ref = x.copy()
    np.add.at(ref, rep, vq)
    e.check(t, ref, rtol=1e-2 if dt != "float32" else 1e-5)
    t, _ = dev(e, x)
    e.run("IndexPutImpl", t, [i64(e, i1 - 1)], e.t(np.array(7.0)), False, False)  # a 0-d value broadcast
    ref = x.copy()
    ref[i1 - 1] = 7.0
    e.check(t, ref)
    with pytest.raises(cs.AclError):
        o = e.out(1, 5, 3)
        e.run("Index", xs, [i64(e, [4])], o)
        o.numpy(e.stream)
    with pytest.raises(cs.AclError):  # float index values
        e.run("Index", xs, [e.t(np.array([1.0]))], e.out(1, 5, 3))


def test_integers_exact_and_edge_cases(env):
    """int64 beyond 2^53 moves and sums exactly (flip, roll, sort, topk, max, cumsum, prod, scatter,
    index); 0-d flip copies, 0-d roll with dims and repeated flip dims are refused; max over a dim
    of an otherwise empty tensor gives empty results; bad reduction/reduce modes are refused; a
    float64 lerp is computed in float64."""
    e = env("float32")
    big = np.array([[2**53 + 1, 3, -(2**62) + 7], [5, 2**60 + 3, 2**53 + 3]], np.int64)
    bt = i64(e, big)

    o = e.acl.tensor(shape=big.shape, dtype=cs.ACL_INT64)
    e.run("Flip", bt, [1], o)
    np.testing.assert_array_equal(ints(e, o), big[:, ::-1])
    e.run("Roll", bt, [1], [0], o)
    np.testing.assert_array_equal(ints(e, o), np.roll(big, 1, 0))
    e.run("Cumsum", bt, 1, cs.ACL_INT64, o)
    np.testing.assert_array_equal(ints(e, o), np.cumsum(big, 1))
    i = e.acl.tensor(shape=big.shape, dtype=cs.ACL_INT64)
    e.run("Sort", bt, True, 1, False, o, i)
    np.testing.assert_array_equal(ints(e, o), np.sort(big, 1))
    v, i = e.acl.tensor(shape=(2,), dtype=cs.ACL_INT64), e.acl.tensor(shape=(2,), dtype=cs.ACL_INT64)
    e.run("MaxDim", bt, 1, False, v, i)
    np.testing.assert_array_equal(ints(e, v), big.max(1))
    p = e.acl.tensor(shape=(2,), dtype=cs.ACL_INT64)
    e.run("ProdDim", i64(e, [[2**31, 2**31 + 1], [-3, 2**40]]), 1, False, cs.ACL_INT64, p)
    np.testing.assert_array_equal(ints(e, p), [2**62 + 2**31, -3 * 2**40])
    e.run("ScatterAdd", bt, 1, i64(e, [[0], [2]]), i64(e, [[1], [1]]), o)
    np.testing.assert_array_equal(ints(e, o), big + [[1, 0, 0], [0, 0, 1]])
    r = e.acl.tensor(shape=(1, 3), dtype=cs.ACL_INT64)
    e.run("Index", bt, [i64(e, [1])], r)
    np.testing.assert_array_equal(ints(e, r), big[[1]])
    s0 = e.t(np.array(2.5))
    o0 = e.out()
    e.run("Flip", s0, [0], o0)
    e.check(o0, 2.5)
    with pytest.raises(cs.AclError):
        e.run("Roll", s0, [1], [0], e.out())
    xs, x = dev(e, e.rand(2, 3))
    with pytest.raises(cs.AclError):
        e.run("Flip", xs, [1, -1], e.out(2, 3))
    empty = e.acl.tensor(shape=(0, 3), dtype=cs.ACL_FLOAT)
    v, i = e.out(0), e.acl.tensor(shape=(0,), dtype=cs.ACL_INT64)
    e.run("MaxDim", empty, 1, False, v, i)
    with pytest.raises(cs.AclError):
        e.run("MaxDim", empty, 0, False, e.out(3), e.acl.tensor(shape=(3,), dtype=cs.ACL_INT64))
    with pytest.raises(cs.AclError):
        e.run("MseLoss", xs, xs, 5, e.out())
    with pytest.raises(cs.AclError):
        e.run("Scatter", xs, 1, i64(e, [[0], [1]]), xs, 3, e.out(2, 3))
    a64 = e.acl.tensor(np.array([1.0, 2.0]), dtype=cs.ACL_DOUBLE)
    b64 = e.acl.tensor(np.array([1.0 + 1e-12, 2.0 + 1e-12]), dtype=cs.ACL_DOUBLE)
    o64 = e.acl.tensor(shape=(2,), dtype=cs.ACL_DOUBLE)
    e.run("Lerps", a64, b64, 0.5, o64)
    np.testing.assert_allclose(o64.numpy(e.stream), [1.0 + 5e-13, 2.0 + 5e-13], rtol=0, atol=1e-15)


def view_shape(e, t):
    """aclGetViewShape of a DevTensor's aclTensor (the array is the caller's, as in CANN: leaked here)."""
    import ctypes as C

    dims, n = C.POINTER(C.c_int64)(), C.c_uint64()
    f = e.acl.nn_fn("aclGetViewShape", C.c_int, [C.c_void_p, C.POINTER(C.POINTER(C.c_int64)), C.POINTER(C.c_uint64)])
    assert f(t.handle, C.byref(dims), C.byref(n)) == 0
    return tuple(dims[k] for k in range(n.value))


@pytest.mark.parametrize("shape", [(3, 4), (5,), (2, 1, 3), ()])
def test_nonzero_and_its_view_shape(env, shape):
    """aclnnNonzero writes the coordinates of the non-zero elements (NaN counts) in row-major order into
    the first rows of the [numel, rank] out, and then the out aclTensor's view shape is [count, rank]
    (what torch_npu reads with aclGetViewShape after syncing), as numpy's argwhere."""
    e = env("float32")
    x = np.round(e.rand(*shape)) if shape else np.array(1.0)
    if x.size > 2:
        x.flat[1] = np.nan
    xs, xv = dev(e, x)
    rank, n = len(shape), max(x.size, 1)
    o = e.acl.tensor(shape=(n if rank else 0, rank), dtype=cs.ACL_INT64)
    before = view_shape(e, o)
    e.run("Nonzero", xs, o)
    e.acl.sync(e.stream)
    want = np.argwhere(xv != 0)
    got = view_shape(e, o)
    assert before == (o.shape[0], rank) and got == want.shape, (before, got, want.shape)
    np.testing.assert_array_equal(ints(e, o).reshape(-1)[: want.size].reshape(want.shape), want)


@pytest.mark.parametrize("shape", [(3, 4), (5,), (2, 1, 3)])
def test_nonzero_v2_and_masked_select(env, shape):
    """aclnnNonzeroV2 (MindSpore's `x[mask]`): aclnnNonzero transposed, out [rank, numel], the view shape
    [rank, count] after the kernel; aclnnMaskedSelect (`masked_select`): self's elements where the bool mask,
    broadcast with self, is true, the view shape [count]. Against numpy."""
    e = env("float32")
    x = np.round(e.rand(*shape))
    x.flat[0] = np.nan
    xs, xv = dev(e, x)
    rank, n = len(shape), x.size
    o = e.acl.tensor(shape=(rank, n), dtype=cs.ACL_INT64)
    e.run("NonzeroV2", xs, o)
    e.acl.sync(e.stream)
    want = np.argwhere(xv != 0).T
    assert view_shape(e, o) == want.shape
    np.testing.assert_array_equal(ints(e, o).reshape(-1)[: want.size].reshape(want.shape), want)
    # the mask broadcasts along the leading dims: its last dim only
    mask = np.random.default_rng(1).random(shape[-1:]) > 0.4
    ms_ = e.acl.tensor(mask, dtype=cs.ACL_BOOL)
    sel = e.acl.tensor(shape=(n,), dtype=cs.ACL_FLOAT)
    e.run("MaskedSelect", xs, ms_, sel)
    e.acl.sync(e.stream)
    want = xv[np.broadcast_to(mask, xv.shape)]
    assert view_shape(e, sel) == want.shape
    np.testing.assert_array_equal(sel.numpy(e.stream)[: want.size], want.astype(np.float32))


def runs(x):
    """numpy reference of unique_consecutive over the flattened x: run values, each element's run, run lengths."""
    x = x.reshape(-1)
    starts = np.flatnonzero(np.r_[True, x[1:] != x[:-1]]) if x.size else np.zeros(0, np.int64)
    inverse = np.cumsum(np.r_[False, x[1:] != x[:-1]]) if x.size else np.zeros(0, np.int64)
    return x[starts], inverse, np.diff(np.r_[starts, x.size])


@pytest.mark.parametrize("case", ["int64", "float32", "empty", "0-d"])
@pytest.mark.parametrize("op", ["Unique", "Unique2", "UniqueConsecutive"])
def test_unique_forms_and_their_view_shapes(env, op, case):
    """aclnnUnique / Unique2 (torch's `unique`) and aclnnUniqueConsecutive (`unique_consecutive`, dim 1000 = none):
    the distinct values (ascending) or the runs, each element's position among them and the counts, in the head
    of the numel-long outputs whose view shape the kernel sets to [distinct] (valueOut, and countsOut when asked
    for); inverseOut keeps self's shape. Against numpy: int64 beyond 2^53 exactly, every NaN distinct."""
    e = env("float32")
    rng = np.random.default_rng(3)
    if case == "int64":
        x = (2**60 + rng.integers(0, 4, (3, 5))).astype(np.int64)
        xs, dtype = i64(e, x), cs.ACL_INT64
    else:
        x = {"float32": np.round(rng.random((4, 3)) * 3), "empty": np.zeros((0, 2)), "0-d": np.array(2.0)}[case]
        x = x.astype(np.float32)
        if x.size > 4:
            x.flat[2] = x.flat[7] = np.nan
        xs, x = dev(e, x)
        dtype = cs.ACL_FLOAT
    n = x.size
    if op == "UniqueConsecutive":
        want_v, want_i, want_c = runs(x)
    else:
        want_v, want_i, want_c = np.unique(x.reshape(-1), return_inverse=True, return_counts=True, equal_nan=False)
    v = e.acl.tensor(shape=(n,), dtype=dtype)
    inv = e.acl.tensor(shape=x.shape, dtype=cs.ACL_INT64)
    cnt = e.acl.tensor(shape=(n,), dtype=cs.ACL_INT64)
    args = {
        "Unique": (xs, True, True, v, inv),
        "Unique2": (xs, True, True, True, v, inv, cnt),
        "UniqueConsecutive": (xs, True, True, 1000, v, inv, cnt),
    }[op]
    e.run(op, *args)
    e.acl.sync(e.stream)
    k = want_v.size
    assert view_shape(e, v) == (k,) and view_shape(e, inv) == x.shape
    got = (ints(e, v) if case == "int64" else v.numpy(e.stream).astype(np.float64)).reshape(-1)[:k]
    np.testing.assert_array_equal(got, want_v)
    np.testing.assert_array_equal(ints(e, inv).reshape(-1), want_i.reshape(-1))
    if op != "Unique":
        assert view_shape(e, cnt) == (k,)
        np.testing.assert_array_equal(ints(e, cnt).reshape(-1)[:k], want_c)


def test_unique_outputs_checked_and_counts_left_alone_when_not_asked_for(env):
    """Without returnCounts/returnInverse the kernel neither writes nor reshapes those outputs (torch_npu then
    passes [0] tensors); a too-short valueOut, a wrong dtype and a real dim of UniqueConsecutive are refused (dim 0
    of a 1-D self is the flattened case)."""
    e = env("float32")
    xs, x = dev(e, np.array([3.0, 1.0, 3.0]))
    v = e.acl.tensor(shape=(3,), dtype=cs.ACL_FLOAT)
    inv, cnt = e.acl.tensor(shape=(0,), dtype=cs.ACL_INT64), e.acl.tensor(shape=(0,), dtype=cs.ACL_INT64)
    e.run("Unique2", xs, False, False, False, v, inv, cnt)
    e.acl.sync(e.stream)
    assert view_shape(e, v) == (2,) and view_shape(e, cnt) == (0,) and view_shape(e, inv) == (0,)
    np.testing.assert_array_equal(v.numpy(e.stream)[:2], [1.0, 3.0])
    v1 = e.acl.tensor(shape=(3,), dtype=cs.ACL_FLOAT)
    e.run("UniqueConsecutive", xs, False, False, 0, v1, inv, cnt)
    e.acl.sync(e.stream)
    assert view_shape(e, v1) == (3,)
    for bad in (
        ("Unique2", xs, True, False, False, e.acl.tensor(shape=(2,), dtype=cs.ACL_FLOAT), inv, cnt),
        ("Unique2", xs, True, False, False, e.acl.tensor(shape=(3,), dtype=cs.ACL_INT32), inv, cnt),
        ("Unique2", xs, True, False, True, v, inv, cnt),
        ("UniqueConsecutive", dev(e, np.ones((3, 1)))[0], False, False, 0, v, inv, cnt),  # a dim of a 2-D self
    ):
        with pytest.raises(cs.AclError, match="161002"):
            e.run(*bad)


def test_unique_uint64_in_unsigned_order_and_counts_alone_fill_the_inverse(env):
    """uint64 values from 2^63 up sort above the small ones (not as negative int64); with returnCounts alone and
    an inverseOut of self's size (what torch_npu passes for `unique(return_counts=True)`) the inverse is written
    too, so no record of it holds uninitialised memory. Against numpy."""
    from types import SimpleNamespace

    e = env("float32")
    acl, u64 = e.acl, 10  # ACL_UINT64
    x = np.array([2**63 + 5, 1, 2**63 + 5, 3], np.uint64)
    xb, vb = i64(e, x.view(np.int64)), i64(e, np.zeros(4, np.int64))
    xh, vh = acl.create_tensor((4,), u64, xb.ptr), acl.create_tensor((4,), u64, vb.ptr)
    inv, cnt = acl.tensor(shape=(4,), dtype=cs.ACL_INT64), acl.tensor(shape=(4,), dtype=cs.ACL_INT64)
    e.run("Unique2", C.c_void_p(xh), True, False, True, C.c_void_p(vh), inv, cnt)
    acl.sync(e.stream)
    want_v, want_i, want_c = np.unique(x, return_inverse=True, return_counts=True)
    assert view_shape(e, SimpleNamespace(handle=vh)) == (3,) and view_shape(e, cnt) == (3,)
    np.testing.assert_array_equal(np.frombuffer(acl.d2h(vb.ptr, 32).tobytes(), np.uint64)[:3], want_v)
    np.testing.assert_array_equal(ints(e, inv), want_i)
    np.testing.assert_array_equal(ints(e, cnt)[:3], want_c)


def test_floor_and_trunc_division(env):
    """aclnnFloorDivide(s) and aclnnDivMod(s) (mode 0 true, 1 trunc, 2 floor): torch's `//`, floor_divide and
    div(rounding_mode=). Against numpy's floor_divide (Python's rule: the quotient from fmod, so 1 // 0.1 is 9),
    trunc and true division, in float64, float32 (computed in float32 as torch), int64 (exact beyond 2^53) and
    int32 (INT_MIN // -1 wraps); a mode outside 0-2 is refused."""
    e = env("float32")
    a = np.array([7.0, -7.0, 7.0, -7.0, 1.0, -0.0, 5.5, 3.0, -1.0])
    b = np.array([2.0, 2.0, -2.0, -2.0, 0.1, 3.0, np.inf, 0.0, 0.0])
    A, B = (e.acl.tensor(v, dtype=cs.ACL_DOUBLE) for v in (a, b))
    out = e.acl.tensor(shape=a.shape, dtype=cs.ACL_DOUBLE)
    s = float(np.float32(0.3))
    with np.errstate(divide="ignore", invalid="ignore"):
        for name, args, want in [
            ("FloorDivide", (A, B, out), np.floor_divide(a, b)),
            ("DivMod", (A, B, 2, out), np.floor_divide(a, b)),
            ("DivMod", (A, B, 1, out), np.trunc(a / b)),
            ("DivMod", (A, B, 0, out), a / b),
            ("FloorDivides", (A, 0.3, out), np.floor_divide(a, s)),  # the aclScalar is float32
            ("DivMods", (A, -0.3, 1, out), np.trunc(a / -s)),
        ]:
            e.run(name, *args)
            got = out.numpy(e.stream)
            np.testing.assert_array_equal(got, want, err_msg=f"{name} {args[-2]}")
            assert list(np.signbit(got)) == list(np.signbit(want)), (name, got, want)  # -0.0 where numpy has it
    x = np.array([2**60 + 7, -(2**60) - 7, 9, -9], np.int64)
    X, o = i64(e, x), e.acl.tensor(shape=(4,), dtype=cs.ACL_INT64)
    e.run("FloorDivides", X, 4, o)
    e.acl.sync(e.stream)
    np.testing.assert_array_equal(ints(e, o), x // 4)  # exact beyond 2^53
    e.run("DivMods", X, -4, 1, o)
    np.testing.assert_array_equal(ints(e, o), -(np.abs(x) // 4) * np.sign(x))
    # int32: INT_MIN // -1 wraps to INT_MIN (numpy and torch alike)
    x32 = np.array([-(2**31), 7, -7, 2**31 - 1], np.int32)
    d32 = np.array([-1, -2, 2, 3], np.int32)
    X32, D32 = (e.acl.tensor(v, dtype=cs.ACL_INT32) for v in (x32, d32))
    o32 = e.acl.tensor(shape=(4,), dtype=cs.ACL_INT32)
    e.run("FloorDivide", X32, D32, o32)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(o32.numpy(e.stream), np.floor_divide(x32, d32))
    # float32 is computed in float32, as torch (in f64, 3 / 0.1f truncates to 29 and some floors differ)
    rng = np.random.default_rng(5)
    f = np.concatenate([[3.0, 1.0, -7.5], rng.standard_normal(2000) * 1e4]).astype(np.float32)
    g = np.concatenate([[0.1, 0.1, 0.3], rng.standard_normal(2000)]).astype(np.float32)
    F, G = e.acl.tensor(f), e.acl.tensor(g)
    of = e.acl.tensor(shape=f.shape)
    for name, args, want in [
        ("FloorDivide", (F, G, of), np.floor_divide(f, g)),
        ("DivMod", (F, G, 1, of), np.trunc(f / g)),
        ("FloorDivides", (F, 0.1, of), np.floor_divide(f, np.float32(0.1))),
    ]:
        e.run(name, *args)
        np.testing.assert_array_equal(of.numpy(e.stream), want, err_msg=name)
    # the in-place forms write self
    e.run("InplaceDivMod", F, G, 2)
    np.testing.assert_array_equal(F.numpy(e.stream), np.floor_divide(f, g))
    e.run("InplaceDivMods", X, 4, 1)
    np.testing.assert_array_equal(ints(e, X), (np.abs(x) // 4) * np.sign(x))
    with pytest.raises(cs.AclError, match="161002"):
        e.run("DivMod", A, B, 3, out)


def test_clamp_with_one_bound_or_tensor_bounds(env):
    """aclnnClampMin/Max (scalar), aclnnClampTensor (either tensor bound NULL; bounds broadcast to self), the
    in-place tensor form: min(max(x, lo), hi) as numpy, a NaN in self or in a bound giving NaN (as torch)."""
    e = env("float32")
    x = np.array([[-2.0, 0.5, np.nan, 3.0], [1.0, -1.0, 0.0, 9.0]], np.float32)
    lo = np.array([0.0, 1.0, 0.0, np.nan], np.float32)
    hi = np.array([[1.0], [0.5]], np.float32)
    X, LO, HI = (e.acl.tensor(v) for v in (x, lo, hi))
    out = e.acl.tensor(shape=x.shape)

    def nanclip(v, a, b):
        r = v.copy() if a is None else np.maximum(v, a)  # np.maximum propagates NaN from either side
        return r if b is None else np.minimum(r, b)

    big = e.acl.tensor(shape=(3, 2, 4))  # a bound of a larger shape broadcasts self to it (torch)
    e.run("ClampMinTensor", X, e.acl.tensor(np.zeros((3, 1, 4), np.float32)), big)
    np.testing.assert_array_equal(big.numpy(e.stream), nanclip(np.broadcast_to(x, (3, 2, 4)), 0, None))
    for name, args, want in [
        ("ClampMin", (X, 0.25, out), nanclip(x, 0.25, None)),
        ("ClampMax", (X, 0.25, out), nanclip(x, None, np.float32(0.25))),
        ("ClampTensor", (X, LO, HI, out), nanclip(x, lo, hi)),
        ("ClampTensor", (X, None, HI, out), nanclip(x, None, hi)),
        ("ClampMinTensor", (X, LO, out), nanclip(x, lo, None)),
    ]:
        e.run(name, *args)
        np.testing.assert_array_equal(out.numpy(e.stream), want, err_msg=name)
    e.run("InplaceClampMaxTensor", X, HI)
    np.testing.assert_array_equal(X.numpy(e.stream), nanclip(x, None, hi))
    with pytest.raises(cs.AclError):
        e.run("ClampTensor", X, None, None, out)


def test_sort_and_extremes_order_integers_exactly(env):
    """Sort, Topk, MaxDim/ArgMax and MinDim order int64 values that are equal as float64 (2^53 and 2^53 + 1)
    by their integer value, and uint64 from 2^63 up above the small ones: against numpy (they were compared
    through float64, so the stable sort kept the input order of such values)."""
    e = env("float32")
    big = np.array([[2**53 + 1, 2**53, 2**53 + 3, 2**53 + 2, -(2**62)], [7, 2**62 + 1, 2**62, 5, 2**62 + 1]], np.int64)
    bt = i64(e, big)
    o, i = (e.acl.tensor(shape=big.shape, dtype=cs.ACL_INT64) for _ in range(2))
    for desc in (False, True):
        e.run("Sort", bt, True, 1, desc, o, i)
        want = np.argsort(-big if desc else big, 1, kind="stable")
        np.testing.assert_array_equal(ints(e, i), want, err_msg=f"descending={desc}")
        np.testing.assert_array_equal(ints(e, o), np.take_along_axis(big, want, 1))
    v, k = (e.acl.tensor(shape=(2, 2), dtype=cs.ACL_INT64) for _ in range(2))
    e.run("Topk", bt, 2, 1, True, True, v, k)
    np.testing.assert_array_equal(ints(e, v), -np.sort(-big, 1)[:, :2])
    v, k = (e.acl.tensor(shape=(2,), dtype=cs.ACL_INT64) for _ in range(2))
    for name, want_i in [("MaxDim", big.argmax(1)), ("MinDim", big.argmin(1))]:
        e.run(name, bt, 1, False, v, k)
        np.testing.assert_array_equal(ints(e, k), want_i, err_msg=name)
        np.testing.assert_array_equal(ints(e, v), big[np.arange(2), want_i], err_msg=name)
    e.run("ArgMax", bt, 1, False, k)
    np.testing.assert_array_equal(ints(e, k), big.argmax(1))
    # uint64: the bits of values >= 2^63 are negative as int64
    acl, u64 = e.acl, 10  # ACL_UINT64
    x = np.array([2**63 + 1, 1, 2**63, 2**64 - 1], np.uint64)
    xb, vb = i64(e, x.view(np.int64)), i64(e, np.zeros(4, np.int64))
    xh, vh = acl.create_tensor((4,), u64, xb.ptr), acl.create_tensor((4,), u64, vb.ptr)
    idx = acl.tensor(shape=(4,), dtype=cs.ACL_INT64)
    e.run("Sort", C.c_void_p(xh), True, 0, False, C.c_void_p(vh), idx)
    np.testing.assert_array_equal(ints(e, idx), np.argsort(x, kind="stable"))
    np.testing.assert_array_equal(np.frombuffer(acl.d2h(vb.ptr, 32).tobytes(), np.uint64), np.sort(x))
