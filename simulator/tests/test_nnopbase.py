"""nnopbase: tensors and getters, scalars, arrays, lists, executor life cycle and re-binding."""

import ctypes as C

import numpy as np

import cannsim_ctypes as cs

VP = C.c_void_p
NULLPTR, INVALID = 161001, 161002
I64P = C.POINTER(C.c_int64)


def getter(acl, name):
    return acl.nn_fn(name, C.c_int, [VP, C.POINTER(I64P), C.POINTER(C.c_uint64)])


def test_tensor_getters(acl):
    d = acl.malloc(4096)
    t = acl.create_tensor((2, 3), cs.ACL_FLOAT16, d, strides=(1, 2), offset=5, storage=(64,), fmt=cs.ACL_FORMAT_ND)
    for name, want in (("aclGetViewShape", [2, 3]), ("aclGetViewStrides", [1, 2]), ("aclGetStorageShape", [64])):
        p, n = I64P(), C.c_uint64()
        assert getter(acl, name)(t, C.byref(p), C.byref(n)) == 0
        assert [p[i] for i in range(n.value)] == want
    off, fmt, dt, raw = C.c_int64(), C.c_int(), C.c_int(), VP()
    assert acl.nn_fn("aclGetViewOffset", C.c_int, [VP, C.POINTER(C.c_int64)])(t, C.byref(off)) == 0 and off.value == 5
    assert acl.nn_fn("aclGetFormat", C.c_int, [VP, C.POINTER(C.c_int)])(t, C.byref(fmt)) == 0 and fmt.value == 2
    assert (
        acl.nn_fn("aclGetDataType", C.c_int, [VP, C.POINTER(C.c_int)])(t, C.byref(dt)) == 0
        and dt.value == cs.ACL_FLOAT16
    )
    assert acl.nn_fn("aclGetRawTensorAddr", C.c_int, [VP, C.POINTER(VP)])(t, C.byref(raw)) == 0 and raw.value == d
    assert acl.nn_fn("aclSetRawTensorAddr", C.c_int, [VP, VP])(t, d + 64) == 0
    assert acl.nn_fn("aclGetRawTensorAddr", C.c_int, [VP, C.POINTER(VP)])(t, C.byref(raw)) == 0 and raw.value == d + 64
    assert acl.nn_fn("aclGetViewOffset", C.c_int, [VP, C.POINTER(C.c_int64)])(t, None) == NULLPTR
    # viewDims NULL with viewDimsNum > 0 -> NULL; unknown dtype -> NULL
    f = acl.nn_fn("aclCreateTensor", VP, [VP, C.c_uint64, C.c_int, VP, C.c_int64, C.c_int, VP, C.c_uint64, VP])
    assert f(None, 2, 0, None, 0, 2, None, 0, d) is None
    dims = (C.c_int64 * 1)(4)
    assert f(dims, 1, 99, None, 0, 2, dims, 1, d) is None
    assert acl.destroy_tensor(t) == 0
    assert acl.destroy_tensor(t) == INVALID  # stale handle detected
    assert acl.destroy_tensor(None) == 0
    acl.free(d)


def test_scalar_and_array_copy_at_creation(acl):
    v = C.c_float(3.0)
    s = acl.nn_fn("aclCreateScalar", VP, [VP, C.c_int])(C.byref(v), cs.ACL_FLOAT)
    v.value = 100.0  # the scalar already copied 3.0
    x, o = acl.tensor(np.ones(4, np.float32)), acl.tensor(shape=(4,))
    acl.run("Muls", x, VP(s), o)
    assert o.numpy().tolist() == [3.0] * 4
    vals = (C.c_int64 * 3)(0, 1, 2)
    ia = acl.nn_fn("aclCreateIntArray", VP, [VP, C.c_uint64])(vals, 3)
    vals[0] = 5
    n = C.c_uint64()
    assert acl.nn_fn("aclGetIntArraySize", C.c_int, [VP, C.POINTER(C.c_uint64)])(ia, C.byref(n)) == 0 and n.value == 3
    m = acl.tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    r = acl.tensor(shape=(1, 1, 1))
    acl.run("ReduceSum", m, VP(ia), True, cs.ACL_FLOAT, r)  # dims still [0,1,2]
    assert r.numpy().item() == float(np.arange(24).sum())
    fa = acl.nn_fn("aclCreateFloatArray", VP, [VP, C.c_uint64])((C.c_float * 2)(1, 2), 2)
    ba = acl.bool_array([True, False, True])
    for name, h, want in (("aclGetFloatArraySize", fa, 2), ("aclGetBoolArraySize", ba, 3)):
        assert acl.nn_fn(name, C.c_int, [VP, C.POINTER(C.c_uint64)])(h, C.byref(n)) == 0 and n.value == want
    for name, h in (
        ("aclDestroyScalar", s),
        ("aclDestroyIntArray", ia),
        ("aclDestroyFloatArray", fa),
        ("aclDestroyBoolArray", ba),
    ):
        assert acl.nn_fn(name, C.c_int, [VP])(h) == 0
    assert acl.nn_fn("aclDestroyScalar", C.c_int, [VP])(ia) == INVALID  # wrong type / stale


def test_lists(acl):
    d = acl.malloc(64)
    ts = [acl.create_tensor((2,), cs.ACL_FLOAT, d) for _ in range(3)]
    lst = acl.tensor_list(ts)
    n = C.c_uint64()
    assert (
        acl.nn_fn("aclGetTensorListSize", C.c_int, [VP, C.POINTER(C.c_uint64)])(lst, C.byref(n)) == 0 and n.value == 3
    )
    sc = [acl.scalar(1.0), acl.scalar(2)]
    sl = acl.nn_fn("aclCreateScalarList", VP, [VP, C.c_uint64])((VP * 2)(*sc), 2)
    assert acl.nn_fn("aclGetScalarListSize", C.c_int, [VP, C.POINTER(C.c_uint64)])(sl, C.byref(n)) == 0 and n.value == 2
    assert acl.nn_fn("aclDestroyTensorList", C.c_int, [VP])(lst) == 0
    assert acl.destroy_tensor(ts[0]) == INVALID  # destroying a list destroys its elements
    assert acl.nn_fn("aclDestroyScalarList", C.c_int, [VP])(sl) == 0
    acl.free(d)


def test_executor_freed_after_launch(acl):
    live = acl.nn_fn("cannsimExecutorIsLive", C.c_int, [VP])
    count = acl.nn_fn("cannsimLiveExecutorCount", C.c_uint64, [])
    before = count()
    x, o = acl.tensor(np.ones(8, np.float32)), acl.tensor(shape=(8,))
    st, ws, ex, temps = acl.prepare("Relu", x, o)
    acl.release(temps)
    assert st == 0 and ex and live(ex) == 1 and count() == before + 1
    assert acl.launch("Relu", None, 0, ex) == 0
    assert live(ex) == 0 and count() == before
    assert acl.launch("Relu", None, 0, ex) == INVALID  # launching a freed executor is detected
    assert acl.nn_fn("aclDestroyAclOpExecutor", C.c_int, [VP])(ex) == INVALID
    assert acl.launch("Relu", None, 0, None) == NULLPTR
    # an executor created for one op cannot be launched as another (and is freed on error, like nnopbase)
    st, ws, ex, temps = acl.prepare("Relu", x, o)
    assert acl.launch("Gelu", None, 0, ex) == INVALID
    acl.sync()


def test_repeatable_executor_rebinding(acl):
    nn = acl.nn_fn
    xs = [acl.tensor(np.full((2, 3), i + 1, np.float32)) for i in range(3)]
    ys = [acl.tensor(shape=(2, 3)) for _ in range(3)]
    x_t = acl.create_tensor((2, 3), cs.ACL_FLOAT, 0)  # placeholder address at GetWorkspaceSize time
    y_t = acl.create_tensor((2, 3), cs.ACL_FLOAT, 0)
    st, ws, ex, temps = acl.prepare("Muls", x_t, 10.0, y_t)
    acl.release(temps)
    assert st == 0
    assert nn("aclSetAclOpExecutorRepeatable", C.c_int, [VP])(ex) == 0
    assert acl.launch("Muls", None, 0, ex) == INVALID  # NULL addresses are rejected at launch, executor kept
    setters = [
        ("aclSetInputTensorAddr", "aclSetOutputTensorAddr"),
        ("AclSetInputTensorAddr", "AclSetOutputTensorAddr"),
        ("aclSetTensorAddr", "aclSetTensorAddr"),
    ]
    for i, (si, so) in enumerate(setters):
        fi = nn(si, C.c_int, [VP, C.c_size_t, VP, VP])
        fo = nn(so, C.c_int, [VP, C.c_size_t, VP, VP])
        assert fi(ex, 0, x_t, xs[i].ptr) == 0
        assert fo(ex, 0 if so != "aclSetTensorAddr" else 1, y_t, ys[i].ptr) == 0
        assert acl.launch("Muls", None, 0, ex) == 0
    assert nn("aclSetInputTensorAddr", C.c_int, [VP, C.c_size_t, VP, VP])(ex, 5, x_t, xs[0].ptr) == INVALID
    for i in range(3):
        assert (ys[i].numpy() == 10.0 * (i + 1)).all()
    assert nn("aclDestroyAclOpExecutor", C.c_int, [VP])(ex) == 0
    assert acl.launch("Muls", None, 0, ex) == INVALID


def test_dynamic_tensor_addr(acl):
    nn = acl.nn_fn
    a, b, c = (acl.tensor(np.full((2,), v, np.float32)) for v in (1, 2, 3))
    out = acl.tensor(shape=(4,))
    ta, tb = acl.create_tensor((2,), cs.ACL_FLOAT, a.ptr), acl.create_tensor((2,), cs.ACL_FLOAT, b.ptr)
    lst = acl.tensor_list([ta, tb])
    st, ws, ex, temps = acl.prepare("Cat", lst, 0, out)
    assert st == 0
    assert nn("aclSetAclOpExecutorRepeatable", C.c_int, [VP])(ex) == 0
    assert acl.launch("Cat", None, 0, ex) == 0
    assert out.numpy().tolist() == [1, 1, 2, 2]
    f = nn("aclSetDynamicInputTensorAddr", C.c_int, [VP, C.c_size_t, C.c_size_t, VP, VP])
    assert f(ex, 0, 1, lst, c.ptr) == 0
    assert acl.launch("Cat", None, 0, ex) == 0
    assert out.numpy().tolist() == [1, 1, 3, 3]
    g = nn("AclSetDynamicTensorAddr", C.c_int, [VP, C.c_size_t, C.c_size_t, VP, VP])
    assert g(ex, 0, 0, lst, b.ptr) == 0 and g(ex, 1, 0, lst, b.ptr) == INVALID
    assert acl.launch("Cat", None, 0, ex) == 0
    assert out.numpy().tolist() == [2, 2, 3, 3]
    assert nn("aclDestroyAclOpExecutor", C.c_int, [VP])(ex) == 0
    assert nn("aclDestroyTensorList", C.c_int, [VP])(lst) == 0


def test_workspace_checks(acl):
    x, o = acl.tensor(np.ones((4, 8), np.float32)), acl.tensor(shape=(4, 8))
    st, ws, ex, _ = acl.prepare("Softmax", x, -1, o)
    assert st == 0 and ws > 0
    assert acl.launch("Softmax", None, ws, ex) == NULLPTR
    st, ws, ex, _ = acl.prepare("Softmax", x, -1, o)
    w = acl.malloc(ws)
    assert acl.launch("Softmax", w, ws - 1, ex) == INVALID
    st, ws, ex, _ = acl.prepare("Softmax", x, -1, o)
    host = np.zeros(ws, np.uint8)
    assert acl.launch("Softmax", host.ctypes.data, ws, ex) == INVALID
    st, ws, ex, _ = acl.prepare("Softmax", x, -1, o)
    assert acl.launch("Softmax", w, ws, ex) == 0
    np.testing.assert_allclose(o.numpy(), np.full((4, 8), 1 / 8), rtol=1e-6)
    ws_p, ex_p = C.c_uint64(), VP()
    f = acl.fn(acl.op, "aclnnReluGetWorkspaceSize", C.c_int, [VP, VP, C.POINTER(C.c_uint64), C.POINTER(VP)])
    assert f(x.handle, o.handle, None, C.byref(ex_p)) == NULLPTR
    assert f(x.handle, None, C.byref(ws_p), C.byref(ex_p)) == NULLPTR
    acl.free(w)
