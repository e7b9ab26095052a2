"""ACL runtime: init, devices, contexts, streams, events, memory, callbacks, error codes."""

import ctypes as C
import signal

import numpy as np

import cannsim_ctypes as cs
from conftest import run_py

VP = C.c_void_p
INVALID_PARAM, RT_PARAM_INVALID, RT_INVALID_DEVICEID, REPEAT_INIT = 100000, 107000, 107001, 100002


def test_init_device_soc(acl):
    assert acl.call("aclInit", None) == REPEAT_INIT  # second aclInit (torch_npu tolerates it)
    assert acl.soc_name() == "Ascend910B1"
    n = C.c_uint32()
    assert acl.call("aclrtGetDeviceCount", C.byref(n)) == 0 and n.value >= 1
    assert acl.call("aclrtSetDevice", 0) == 0
    d = C.c_int32(-5)
    assert acl.call("aclrtGetDevice", C.byref(d)) == 0 and d.value == 0
    assert acl.call("aclrtSetDevice", n.value) == RT_INVALID_DEVICEID
    assert acl.call("aclrtSetDevice", -1) == RT_INVALID_DEVICEID
    assert "device id" in acl.errmsg()
    assert acl.call("aclrtGetDevice", None) == INVALID_PARAM
    assert acl.call("aclrtGetDeviceCount", None) == INVALID_PARAM


def test_get_device_without_set_device():
    p = run_py("""
        acl = cs.Acl(init=False)
        d = C.c_int32()
        print(acl.call("aclrtGetDevice", C.byref(d)))
        print(acl.call("aclFinalize"))
        print(acl.call("aclInit", None), acl.call("aclFinalize"))
    """)
    assert p.stdout.split() == ["107002", "100037", "0", "0"]


def test_mem_info(acl):
    free, total = C.c_size_t(), C.c_size_t()
    assert acl.call("aclrtGetMemInfo", 1, C.byref(free), C.byref(total)) == 0
    assert total.value > 0 and 0 < free.value <= total.value
    p = acl.malloc(1 << 20)
    free2 = C.c_size_t()
    assert acl.call("aclrtGetMemInfo", 1, C.byref(free2), C.byref(total)) == 0
    assert free2.value <= free.value - (1 << 20)
    acl.free(p)
    assert acl.call("aclrtGetMemInfo", 1, None, C.byref(total)) == INVALID_PARAM


def test_malloc_free_errors(acl):
    p = VP()
    assert acl.call("aclrtMalloc", None, 16, 0) == INVALID_PARAM
    assert acl.call("aclrtMalloc", C.byref(p), 0, 0) == INVALID_PARAM
    assert acl.call("aclrtMalloc", C.byref(p), 16, 99) == INVALID_PARAM
    assert acl.call("aclrtMalloc", C.byref(p), 100, 0) == 0 and p.value % 32 == 0
    assert acl.call("aclrtFree", None) == INVALID_PARAM
    host = np.zeros(4, np.uint8)
    assert acl.call("aclrtFree", host.ctypes.data) == RT_PARAM_INVALID
    assert acl.call("aclrtFree", p) == 0
    assert acl.call("aclrtFree", p) == RT_PARAM_INVALID  # double free detected
    h = VP()
    assert acl.call("aclrtMallocHost", C.byref(h), 64) == 0
    C.memset(h, 7, 64)  # host memory is host-addressable
    assert acl.call("aclrtFreeHost", h) == 0
    assert acl.call("aclrtFreeHost", h) == RT_PARAM_INVALID


def test_memcpy_every_kind(acl):
    src = np.arange(64, dtype=np.uint8)
    d1, d2 = acl.malloc(64), acl.malloc(64)
    assert acl.call("aclrtMemcpy", d1, 64, src.ctypes.data, 64, cs.H2D) == 0
    assert acl.call("aclrtMemcpy", d2, 64, d1, 64, cs.D2D) == 0
    out = np.zeros(64, np.uint8)
    assert acl.call("aclrtMemcpy", out.ctypes.data, 64, d2, 64, cs.D2H) == 0
    assert (out == src).all()
    h2 = np.zeros(64, np.uint8)
    assert acl.call("aclrtMemcpy", h2.ctypes.data, 64, src.ctypes.data, 64, cs.H2H) == 0 and (h2 == src).all()
    # ACL_MEMCPY_DEFAULT infers the direction; 5/6/7 are H2D / D2D variants
    out[:] = 0
    assert acl.call("aclrtMemcpy", d1 + 8, 8, src.ctypes.data, 8, cs.DEFAULT) == 0
    assert acl.call("aclrtMemcpy", d2, 64, d1, 64, 6) == 0
    assert acl.call("aclrtMemcpy", out.ctypes.data, 64, d2, 64, cs.DEFAULT) == 0
    assert (out[8:16] == src[:8]).all()
    assert acl.call("aclrtMemcpy", d1, 64, src.ctypes.data, 64, 5) == 0
    # errors
    assert acl.call("aclrtMemcpy", d1, 8, src.ctypes.data, 64, cs.H2D) == INVALID_PARAM  # count > destMax
    assert acl.call("aclrtMemcpy", d1, 64, src.ctypes.data, 64, 99) == INVALID_PARAM  # bad kind
    assert acl.call("aclrtMemcpy", None, 64, src.ctypes.data, 64, cs.H2D) == INVALID_PARAM
    assert (
        acl.call("aclrtMemcpy", out.ctypes.data, 64, src.ctypes.data, 64, cs.H2D) == RT_PARAM_INVALID
    )  # dst not device
    assert acl.call("aclrtMemcpy", d1, 64, src.ctypes.data, 64, cs.D2H) == RT_PARAM_INVALID  # kind mismatch
    assert acl.call("aclrtMemcpy", d1 + 32, 64, src.ctypes.data, 64, cs.H2D) == RT_PARAM_INVALID  # past the allocation
    assert "device" in acl.errmsg() or "allocation" in acl.errmsg()
    acl.free(d1)
    acl.free(d2)


def test_memset_and_async(acl):
    s = acl.stream()
    d = acl.malloc(32)
    assert acl.call("aclrtMemset", d, 32, 0x5A, 32) == 0
    assert (acl.d2h(d, 32) == 0x5A).all()
    assert acl.call("aclrtMemset", d, 16, 0, 32) == INVALID_PARAM
    assert acl.call("aclrtMemsetAsync", d, 32, 1, 16, s) == 0
    src = np.full(8, 9, np.uint8)
    assert acl.call("aclrtMemcpyAsync", d + 16, 16, src.ctypes.data, 8, cs.H2D, s) == 0
    out = np.zeros(32, np.uint8)
    assert acl.call("aclrtMemcpyAsync", out.ctypes.data, 32, d, 32, cs.D2H, s) == 0
    acl.sync(s)
    assert (out[:16] == 1).all() and (out[16:24] == 9).all() and (out[24:] == 0x5A).all()
    assert acl.call("aclrtMemcpyAsync", d, 32, src.ctypes.data, 8, cs.H2D, 0xDEAD0) == INVALID_PARAM  # bad stream
    acl.free(d)


def test_host_dereference_of_device_pointer_faults():
    p = run_py(
        """
        acl = cs.Acl()
        d = acl.malloc(64)
        acl.h2d(d, np.ones(64, np.uint8))
        print("allocated", flush=True)
        C.string_at(d, 1)   # host read of device memory
        print("NOT REACHED", flush=True)
    """,
        check=False,
    )
    assert "allocated" in p.stdout and "NOT REACHED" not in p.stdout
    assert p.returncode == -signal.SIGSEGV


def test_unsynchronized_memcpy_sees_unfinished_kernel():
    p = run_py(
        """
        acl = cs.Acl()
        s = acl.stream()
        a = acl.tensor(np.ones(16, np.float32)); o = acl.tensor(np.zeros(16, np.float32))
        acl.run("Adds", a, 41.0, 1.0, o, stream=s)
        st = C.c_int32()
        acl.check("q", acl.call("aclrtStreamQuery", s, C.byref(st)))
        early = o.numpy(sync=False)        # synchronous memcpy does not wait for the stream
        acl.sync(s)
        late = o.numpy(sync=False)
        print(st.value, early.sum(), late.sum())
    """,
        env={"CANNSIM_KERNEL_DELAY_US": "2000000"},  # the queries run well within it, also on a busy machine
    )
    assert p.stdout.split() == ["1", "0.0", "672.0"]


def test_streams_and_timeouts():
    p = run_py(
        """
        acl = cs.Acl()
        s = VP()
        print(acl.call("aclrtCreateStreamWithConfig", C.byref(s), 0, 0))
        a = acl.tensor(np.ones(4, np.float32))
        acl.run("InplaceMuls", a, 2.0, stream=s.value)
        print(acl.call("aclrtSynchronizeStreamWithTimeout", s, 10))
        print(acl.call("aclrtSynchronizeStreamWithTimeout", s, -1))
        print(acl.call("aclrtDestroyStream", s), acl.call("aclrtDestroyStream", s),
              acl.call("aclrtDestroyStream", None))
        print(acl.call("aclrtCreateStream", None), acl.call("aclrtSynchronizeStream", 0xBAD0))
        acl.run("InplaceMuls", a, 2.0)       # default (NULL) stream
        print(acl.call("aclrtSynchronizeDevice"), a.numpy(sync=False).tolist())
    """,
        env={"CANNSIM_KERNEL_DELAY_US": "1500000"},  # the 10 ms wait ends well before it
    )
    lines = p.stdout.splitlines()
    assert lines[0] == "0"
    assert lines[1] == "107028"  # timeout expired
    assert lines[2] == "0"
    assert lines[3].split() == ["0", "107000", "100000"]
    assert lines[4].split() == ["100000", "100000"]
    assert lines[5] == "0 [4.0, 4.0, 4.0, 4.0]"


def test_events():
    p = run_py(
        """
        acl = cs.Acl()
        s1, s2 = acl.stream(), acl.stream()
        e0, e1, e2 = VP(), VP(), VP()
        for e in (e0, e1, e2): acl.check("ce", acl.call("aclrtCreateEvent", C.byref(e)))
        a = acl.tensor(np.full(8, 3.0, np.float32)); b = acl.tensor(shape=(8,))
        acl.check("r", acl.call("aclrtRecordEvent", e0, s1))
        acl.run("Muls", a, 2.0, b, stream=s1)
        acl.check("r", acl.call("aclrtRecordEvent", e1, s1))
        st = C.c_int32(7)
        acl.check("q", acl.call("aclrtQueryEventStatus", e1, C.byref(st)))
        print("status_before", st.value)
        acl.check("w", acl.call("aclrtStreamWaitEvent", s2, e1))
        acl.run("InplaceAdds", b, 1.0, 1.0, stream=s2)   # must see s1's result
        acl.check("r", acl.call("aclrtRecordEvent", e2, s2))
        acl.check("s", acl.call("aclrtSynchronizeEvent", e2))
        acl.check("q", acl.call("aclrtQueryEventStatus", e1, C.byref(st)))
        print("status_after", st.value)
        print("value", b.numpy(sync=False).tolist()[0])
        ms = C.c_float()
        acl.check("t", acl.call("aclrtEventElapsedTime", C.byref(ms), e0, e1))
        print("elapsed_ok", ms.value >= 90.0)
        print("bad", acl.call("aclrtRecordEvent", None, s1), acl.call("aclrtEventElapsedTime", None, e0, e1))
        print(acl.call("aclrtDestroyEvent", e0), acl.call("aclrtDestroyEvent", e0))
    """,
        env={"CANNSIM_KERNEL_DELAY_US": "1000000"},  # the first query runs well within it
    )
    out = dict(line.split(" ", 1) for line in p.stdout.splitlines())
    assert out["status_before"] == "0" and out["status_after"] == "1"
    assert out["value"] == "7.0" and out["elapsed_ok"] == "True"
    assert out["bad"] == "100000 100000" and out["0"] == "100000"


def test_contexts(acl):
    ctx, cur = VP(), VP()
    assert acl.call("aclrtCreateContext", C.byref(ctx), 0) == 0 and ctx.value
    assert acl.call("aclrtSetCurrentContext", ctx) == 0
    assert acl.call("aclrtGetCurrentContext", C.byref(cur)) == 0 and cur.value == ctx.value
    assert acl.call("aclrtCreateContext", C.byref(ctx), 4096) == RT_INVALID_DEVICEID
    assert acl.call("aclrtSetCurrentContext", 0x1234) == RT_PARAM_INVALID
    assert acl.call("aclrtDestroyContext", cur) == 0
    assert acl.call("aclrtDestroyContext", cur) == RT_PARAM_INVALID
    assert acl.call("aclrtSetDevice", 0) == 0


def test_callbacks_run_in_stream_order(acl):
    s = acl.stream()
    seen = []
    CB = C.CFUNCTYPE(None, VP)
    cb = CB(lambda ud: seen.append(ud))
    a = acl.tensor(np.zeros(4, np.float32))
    acl.run("InplaceAdds", a, 1.0, 1.0, stream=s)
    assert acl.call("aclrtLaunchCallback", C.cast(cb, VP), 42, 0, s) == 0
    assert acl.call("aclrtLaunchCallback", None, 42, 0, s) == INVALID_PARAM
    acl.sync(s)
    assert seen == [42]


def test_memcpy2d(acl):
    f = acl.fn(acl.rt, "aclrtMemcpy2d", C.c_int, [VP, C.c_size_t, VP, C.c_size_t, C.c_size_t, C.c_size_t, C.c_int])
    src = np.arange(24, dtype=np.uint8).reshape(4, 6)
    d = acl.malloc(4 * 8)
    assert f(d, 8, src.ctypes.data, 6, 4, 4, cs.H2D) == 0  # copy a 4x4 block into rows of pitch 8
    out = acl.d2h(d, 32).reshape(4, 8)
    assert (out[:, :4] == src[:, :4]).all()
    assert f(d, 2, src.ctypes.data, 6, 4, 4, cs.H2D) == INVALID_PARAM  # width > dpitch
    assert f(d, 8, src.ctypes.data, 6, 4, 5, cs.H2D) == RT_PARAM_INVALID  # rows past the allocation
    acl.free(d)
