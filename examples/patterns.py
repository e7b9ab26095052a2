#!/usr/bin/env python3
"""Reproduce the real clients' calling patterns (cann-abi.md §6) against the simulated CANN.

1. torch_npu task queue: GetWorkspaceSize on the Python thread, the launch on a task-queue thread.
2. MindSpore KBK: repeatable executors re-bound with aclSetInputTensorAddr / aclSetOutputTensorAddr /
   aclSetTensorAddr and launched many times, then aclDestroyAclOpExecutor.
3. aclop: aclopCompileAndExecute(V2) with descriptors, data buffers and attributes.
4. several streams ordered by events (aclrtRecordEvent / aclrtStreamWaitEvent).
Exits 0 and prints "patterns OK" when every result matches numpy.
"""

import ctypes as C
import os
import queue
import sys
import threading

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cannsim_ctypes as cs  # noqa: E402

VP = C.c_void_p


def task_queue_pattern(acl, rng):
    stream = acl.stream()
    q = queue.Queue()
    errors = []

    def consumer():
        while True:
            item = q.get()
            if item is None:
                return
            name, ws, ex, temps = item
            st = acl.launch(name, acl.workspace(ws, stream), ws, ex, stream)
            acl.release(temps)  # ReleaseConvertTypes after phase 2, as op-plugin does
            if st:
                errors.append((name, st))

    t = threading.Thread(target=consumer)
    t.start()
    a, b = rng.standard_normal((8, 16)).astype(np.float32), rng.standard_normal((16, 4)).astype(np.float32)
    A, B, M, S = acl.tensor(a), acl.tensor(b), acl.tensor(shape=(8, 4)), acl.tensor(shape=(8, 4))
    for name, args in [("Mm", (A, B, M, 0)), ("Softmax", (M, -1, S)), ("InplaceMuls", (S, 3.0))]:
        st, ws, ex, temps = acl.prepare(name, *args)
        assert st == 0, (name, st, acl.errmsg())
        q.put((name, ws, ex, temps))
    q.put(None)
    t.join()
    assert not errors, errors
    m = a @ b
    e = np.exp(m - m.max(-1, keepdims=True))
    np.testing.assert_allclose(S.numpy(stream), 3 * e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)


def repeatable_pattern(acl, rng):
    stream = acl.stream()
    n = 32
    xs = [acl.tensor(rng.standard_normal(n).astype(np.float32)) for _ in range(3)]
    ys = [acl.tensor(rng.standard_normal(n).astype(np.float32)) for _ in range(3)]
    outs = [acl.tensor(shape=(n,)) for _ in range(3)]
    # placeholder tensors (GetWorkspaceSize at "resize" time with stale addresses)
    x_t = acl.create_tensor((n,), cs.ACL_FLOAT, xs[0].ptr)
    y_t = acl.create_tensor((n,), cs.ACL_FLOAT, ys[0].ptr)
    o_t = acl.create_tensor((n,), cs.ACL_FLOAT, outs[0].ptr)
    st, ws, ex, temps = acl.prepare("Add", x_t, y_t, 2.0, o_t)
    assert st == 0
    acl.release(temps)
    nn = acl.nn_fn
    assert nn("aclSetAclOpExecutorRepeatable", C.c_int, [VP])(ex) == 0
    set_in = nn("aclSetInputTensorAddr", C.c_int, [VP, C.c_size_t, VP, VP])
    set_out = nn("aclSetOutputTensorAddr", C.c_int, [VP, C.c_size_t, VP, VP])
    set_any = nn("aclSetTensorAddr", C.c_int, [VP, C.c_size_t, VP, VP])
    for i in range(3):
        assert set_in(ex, 0, x_t, xs[i].ptr) == 0
        assert set_any(ex, 1, y_t, ys[i].ptr) == 0  # index over all tensor arguments
        assert set_out(ex, 0, o_t, outs[i].ptr) == 0
        assert acl.launch("Add", acl.workspace(ws, stream), ws, ex, stream) == 0
    assert nn("aclDestroyAclOpExecutor", C.c_int, [VP])(ex) == 0
    for i in range(3):
        np.testing.assert_allclose(outs[i].numpy(stream), xs[i].numpy() + 2 * ys[i].numpy(), rtol=1e-6)


def aclop_pattern(acl, rng):
    stream = acl.stream()
    rt, opc = acl.rt, acl.opc
    desc = acl.fn(rt, "aclCreateTensorDesc", VP, [C.c_int, C.c_int, VP, C.c_int])
    buf = acl.fn(rt, "aclCreateDataBuffer", VP, [VP, C.c_size_t])
    mk_attr = acl.fn(rt, "aclopCreateAttr", VP, [])
    set_bool = acl.fn(rt, "aclopSetAttrBool", C.c_int, [VP, C.c_char_p, C.c_uint8])
    cae = acl.fn(
        opc,
        "aclopCompileAndExecute",
        C.c_int,
        [C.c_char_p, C.c_int, VP, VP, C.c_int, VP, VP, VP, C.c_int, C.c_int, C.c_char_p, VP],
    )

    def d(t):
        dims = (C.c_int64 * len(t.shape))(*t.shape)
        return desc(t.dtype, len(t.shape), dims, cs.ACL_FORMAT_ND), buf(t.ptr, t.nbytes)

    a, b, bias = (
        rng.standard_normal((4, 6)).astype(np.float32),
        rng.standard_normal((5, 6)).astype(np.float32),
        rng.standard_normal(5).astype(np.float32),
    )
    A, B, BI, Y, Z = acl.tensor(a), acl.tensor(b), acl.tensor(bias), acl.tensor(shape=(4, 5)), acl.tensor(shape=(4, 5))
    attr = mk_attr()
    assert set_bool(attr, b"transpose_x1", 0) == 0 and set_bool(attr, b"transpose_x2", 1) == 0
    ins = [d(A), d(B)]
    outs = [d(Y)]

    def arr(xs):
        return (VP * len(xs))(*xs)

    r = cae(
        b"MatMul",
        2,
        arr([x[0] for x in ins]),
        arr([x[1] for x in ins]),
        1,
        arr([x[0] for x in outs]),
        arr([x[1] for x in outs]),
        attr,
        0,
        0,
        None,
        stream,
    )
    assert r == 0, acl.errmsg()
    ins2 = [d(Y), d(BI)]
    outs2 = [d(Z)]
    r = cae(
        b"BiasAdd",
        2,
        arr([x[0] for x in ins2]),
        arr([x[1] for x in ins2]),
        1,
        arr([x[0] for x in outs2]),
        arr([x[1] for x in outs2]),
        None,
        0,
        0,
        None,
        stream,
    )
    assert r == 0, acl.errmsg()
    np.testing.assert_allclose(Z.numpy(stream), a @ b.T + bias, rtol=1e-5, atol=1e-5)


def event_pattern(acl, rng):
    s1, s2 = acl.stream(), acl.stream()

    def ev():
        e = VP()
        acl.check("aclrtCreateEvent", acl.call("aclrtCreateEvent", C.byref(e)))
        return e.value

    e1, e2 = ev(), ev()
    a = rng.standard_normal((16, 16)).astype(np.float32)
    A, M, R = acl.tensor(a), acl.tensor(shape=(16, 16)), acl.tensor(shape=(16, 16))
    acl.run("Mm", A, A, M, 0, stream=s1)
    acl.check("aclrtRecordEvent", acl.call("aclrtRecordEvent", e1, s1))
    acl.check("aclrtStreamWaitEvent", acl.call("aclrtStreamWaitEvent", s2, e1))
    acl.run("Relu", M, R, stream=s2)
    acl.check("aclrtRecordEvent", acl.call("aclrtRecordEvent", e2, s2))
    acl.check("aclrtStreamWaitEvent", acl.call("aclrtStreamWaitEvent", s1, e2))
    acl.run("InplaceMuls", R, 0.5, stream=s1)
    acl.sync(s1)  # s1 waited for s2, which waited for s1's matmul
    np.testing.assert_allclose(R.numpy(sync=False), 0.5 * np.maximum(a @ a, 0), rtol=1e-5, atol=1e-5)
    ms = C.c_float()
    acl.check("aclrtEventElapsedTime", acl.call("aclrtEventElapsedTime", C.byref(ms), e1, e2))
    assert ms.value >= 0


def main():
    acl = cs.Acl()
    rng = np.random.default_rng(0)
    task_queue_pattern(acl, rng)
    repeatable_pattern(acl, rng)
    aclop_pattern(acl, rng)
    event_pattern(acl, rng)
    print("patterns OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
