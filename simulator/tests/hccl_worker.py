"""One rank of the HCCL tests (spawned by test_hccl.py). Usage: hccl_worker.py ROOTFILE NRANKS RANK MODE"""

import ctypes as C
import os
import sys
import time

import numpy as np

import cannsim_ctypes as cs

VP = C.c_void_p


def data(rank, n, seed=0):
    return np.random.default_rng([seed, rank]).standard_normal(n).astype(np.float32)


def main():
    root_file, n, rank, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    acl = cs.Acl(device=rank)
    with open(root_file, "rb") as f:
        comm = acl.hccl_init(n, f.read(), rank)
    s = acl.stream()

    def h(name, types, *a):
        return acl.hccl_call(name, types, *a)

    rid, rsz = C.c_uint32(), C.c_uint32()
    assert h("HcclGetRankId", [VP, C.POINTER(C.c_uint32)], comm, C.byref(rid)) == 0 and rid.value == rank
    assert h("HcclGetRankSize", [VP, C.POINTER(C.c_uint32)], comm, C.byref(rsz)) == 0 and rsz.value == n
    AR = [VP, VP, C.c_uint64, C.c_int, C.c_int, VP, VP]

    if mode == "die":
        if rank == 1:
            os._exit(0)  # peer dies without taking part
        x = acl.tensor(data(rank, 16))
        t0 = time.time()
        print("enqueue", h("HcclAllReduce", AR, x.ptr, x.ptr, 16, cs.HCCL_FP32, cs.HCCL_SUM, comm, s))
        print("sync", acl.call("aclrtSynchronizeStream", s))
        err = C.c_int32()
        h("HcclGetCommAsyncError", [VP, C.POINTER(C.c_int32)], comm, C.byref(err))
        print("async", err.value)
        print("next", h("HcclAllReduce", AR, x.ptr, x.ptr, 16, cs.HCCL_FP32, cs.HCCL_SUM, comm, s))
        print("fast", time.time() - t0 < 10)
        return 0
    if mode == "mismatch":
        x = acl.tensor(data(rank, 16))
        h("HcclAllReduce", AR, x.ptr, x.ptr, 8 * (rank + 1), cs.HCCL_FP32, cs.HCCL_SUM, comm, s)
        print("sync", acl.call("aclrtSynchronizeStream", s))
        err = C.c_int32()
        h("HcclGetCommAsyncError", [VP, C.POINTER(C.c_int32)], comm, C.byref(err))
        print("async", err.value)
        return 0
    if mode == "hang":
        # Rank 1 stays alive without taking part until rank 0 is done (at most 45 s), so rank 0's
        # wait ends by its timeout, not by seeing a dead peer. The 1 s timeout is set only now,
        # after the rendezvous (read at every wait): the two processes may start seconds apart.
        done = root_file + ".done"
        if rank == 1:
            t0 = time.time()
            while not os.path.exists(done) and time.time() - t0 < 45:
                time.sleep(0.05)
            return 0
        os.environ["CANNSIM_HCCL_TIMEOUT_S"] = "1"
        x = acl.tensor(data(rank, 16))
        t0 = time.time()
        h("HcclAllReduce", AR, x.ptr, x.ptr, 16, cs.HCCL_FP32, cs.HCCL_SUM, comm, s)
        print("sync", acl.call("aclrtSynchronizeStream", s))
        err = C.c_int32()
        h("HcclGetCommAsyncError", [VP, C.POINTER(C.c_int32)], comm, C.byref(err))
        print("async", err.value, "elapsed_ok", 0.8 < time.time() - t0 < 30)
        open(done, "w").close()
        return 0

    alld = [data(r, 300_000) for r in range(n)]  # 1.2 MB: several shared-memory chunks
    # AllReduce sum (large, in place), max/min/prod (small, out of place)
    x = acl.tensor(alld[rank])
    assert h("HcclAllReduce", AR, x.ptr, x.ptr, x.numel, cs.HCCL_FP32, cs.HCCL_SUM, comm, s) == 0
    ref = alld[0].astype(np.float64)
    for r in range(1, n):
        ref = ref + alld[r]
    np.testing.assert_allclose(x.numpy(s), ref, rtol=1e-5, atol=1e-5)
    small = [d[:10] for d in alld]
    for op, fn in [(cs.HCCL_MAX, np.maximum), (cs.HCCL_MIN, np.minimum), (cs.HCCL_PROD, np.multiply)]:
        src, dst = acl.tensor(small[rank]), acl.tensor(shape=(10,))
        assert h("HcclAllReduce", AR, src.ptr, dst.ptr, 10, cs.HCCL_FP32, op, comm, s) == 0
        ref = small[0].astype(np.float64)
        for r in range(1, n):
            ref = fn(ref, small[r])
        np.testing.assert_allclose(dst.numpy(s), ref, rtol=1e-5)
    for acl_dt, hdt in [(cs.ACL_FLOAT16, cs.HCCL_FP16), (cs.ACL_BF16, cs.HCCL_BF16)]:
        t = acl.tensor(small[rank], dtype=acl_dt)
        assert h("HcclAllReduce", AR, t.ptr, t.ptr, 10, hdt, cs.HCCL_SUM, comm, s) == 0
        vals = [acl.tensor(small[r], dtype=acl_dt).numpy().astype(np.float64) for r in range(n)]
        np.testing.assert_allclose(t.numpy(s), sum(vals), rtol=2e-2, atol=2e-2)
    it = acl.tensor(np.arange(5, dtype=np.int32) * (rank + 1), dtype=cs.ACL_INT32)
    assert h("HcclAllReduce", AR, it.ptr, it.ptr, 5, cs.HCCL_INT32, cs.HCCL_SUM, comm, s) == 0
    assert it.numpy(s).tolist() == (np.arange(5) * sum(range(1, n + 1))).tolist()
    # Broadcast from the last rank
    root = n - 1
    b = acl.tensor(small[rank])
    assert (
        h("HcclBroadcast", [VP, C.c_uint64, C.c_int, C.c_uint32, VP, VP], b.ptr, 10, cs.HCCL_FP32, root, comm, s) == 0
    )
    np.testing.assert_array_equal(b.numpy(s), small[root])
    # AllGather
    g = acl.tensor(shape=(n * 10,))
    assert (
        h(
            "HcclAllGather",
            [VP, VP, C.c_uint64, C.c_int, VP, VP],
            acl.tensor(small[rank]).ptr,
            g.ptr,
            10,
            cs.HCCL_FP32,
            comm,
            s,
        )
        == 0
    )
    np.testing.assert_array_equal(g.numpy(s), np.concatenate(small))
    # ReduceScatter: send n*4 elements, receive 4
    rs_in = [data(r, n * 4, seed=7) for r in range(n)]
    rs_out = acl.tensor(shape=(4,))
    assert (
        h(
            "HcclReduceScatter",
            [VP, VP, C.c_uint64, C.c_int, C.c_int, VP, VP],
            acl.tensor(rs_in[rank]).ptr,
            rs_out.ptr,
            4,
            cs.HCCL_FP32,
            cs.HCCL_SUM,
            comm,
            s,
        )
        == 0
    )
    np.testing.assert_allclose(
        rs_out.numpy(s), sum(d.astype(np.float64) for d in rs_in)[rank * 4 : (rank + 1) * 4], rtol=1e-5, atol=1e-6
    )
    # Reduce to rank 0
    red = acl.tensor(np.zeros(10, np.float32))
    assert (
        h(
            "HcclReduce",
            [VP, VP, C.c_uint64, C.c_int, C.c_int, C.c_uint32, VP, VP],
            acl.tensor(small[rank]).ptr,
            red.ptr,
            10,
            cs.HCCL_FP32,
            cs.HCCL_SUM,
            0,
            comm,
            s,
        )
        == 0
    )
    if rank == 0:
        np.testing.assert_allclose(red.numpy(s), sum(d.astype(np.float64) for d in small), rtol=1e-5, atol=1e-6)
    else:
        assert (red.numpy(s) == 0).all()
    # Send/Recv around a ring (400 KB: several mailbox chunks); even ranks send first
    big = [data(r, 100_000, seed=3) for r in range(n)]
    src, dst = acl.tensor(big[rank]), acl.tensor(shape=(100_000,))
    SR = [VP, C.c_uint64, C.c_int, C.c_uint32, VP, VP]
    nxt, prv = (rank + 1) % n, (rank - 1) % n
    order = [("HcclSend", src, nxt), ("HcclRecv", dst, prv)]
    for name, t, peer in order if rank % 2 == 0 else order[::-1]:
        assert h(name, SR, t.ptr, 100_000, cs.HCCL_FP32, peer, comm, s) == 0
    np.testing.assert_array_equal(dst.numpy(s), big[prv])
    # AlltoAll: rank r sends block t (3 elements) to rank t
    a2a = [data(r, n * 3, seed=11) for r in range(n)]
    out = acl.tensor(shape=(n * 3,))
    assert (
        h(
            "HcclAlltoAll",
            [VP, C.c_uint64, C.c_int, VP, C.c_uint64, C.c_int, VP, VP],
            acl.tensor(a2a[rank]).ptr,
            3,
            cs.HCCL_FP32,
            out.ptr,
            3,
            cs.HCCL_FP32,
            comm,
            s,
        )
        == 0
    )
    np.testing.assert_array_equal(out.numpy(s), np.concatenate([a2a[r][rank * 3 : (rank + 1) * 3] for r in range(n)]))

    # AlltoAllV: rank r sends (r + t + 1) elements to rank t
    def cnt(r, t):
        return r + t + 1

    sends = [data(r, sum(cnt(r, t) for t in range(n)), seed=13) for r in range(n)]
    sc = [cnt(rank, t) for t in range(n)]
    sd = list(np.cumsum([0] + sc[:-1]))
    rc = [cnt(r, rank) for r in range(n)]
    rd = list(np.cumsum([0] + rc[:-1]))

    def u64(v):
        return (C.c_uint64 * n)(*[int(x) for x in v])

    outv = acl.tensor(shape=(sum(rc),))
    assert (
        h(
            "HcclAlltoAllV",
            [VP, VP, VP, C.c_int, VP, VP, VP, C.c_int, VP, VP],
            acl.tensor(sends[rank]).ptr,
            u64(sc),
            u64(sd),
            cs.HCCL_FP32,
            outv.ptr,
            u64(rc),
            u64(rd),
            cs.HCCL_FP32,
            comm,
            s,
        )
        == 0
    )
    pieces = []
    for r in range(n):
        off = sum(cnt(r, t) for t in range(rank))
        pieces.append(sends[r][off : off + cnt(r, rank)])
    np.testing.assert_array_equal(outv.numpy(s), np.concatenate(pieces))
    assert h("HcclBarrier", [VP, VP], comm, s) == 0
    acl.sync(s)
    # argument errors
    assert h("HcclAllReduce", AR, x.ptr, x.ptr, 4, cs.HCCL_FP32, 7, comm, s) == 1  # HCCL_E_PARA
    assert h("HcclAllReduce", AR, None, x.ptr, 4, cs.HCCL_FP32, 0, comm, s) == 2  # HCCL_E_PTR
    assert h("HcclAllReduce", AR, x.ptr, x.ptr, 4, 99, 0, comm, s) == 5  # HCCL_E_NOT_SUPPORT
    host = np.zeros(4, np.float32)
    assert h("HcclAllReduce", AR, host.ctypes.data, x.ptr, 4, cs.HCCL_FP32, 0, comm, s) == 1
    assert h("HcclGetRankId", [VP, C.POINTER(C.c_uint32)], comm, None) == 2
    assert h("HcclAllReduce", AR, x.ptr, x.ptr, 4, cs.HCCL_FP32, 0, None, s) == 2
    assert h("HcclCommDestroy", [VP], comm) == 0
    assert h("HcclCommDestroy", [VP], comm) == 1
    print(f"rank {rank} OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
