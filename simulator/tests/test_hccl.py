"""HCCL across processes: collectives on 2 and 4 ranks, peer death, timeout, argument errors."""

import os
import subprocess
import sys
import tempfile

import pytest

import cannsim_ctypes as cs

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples")


def spawn(n, mode, env=None, timeout=60):
    root = cs.Acl(init=False).hccl_root_info()
    with tempfile.NamedTemporaryFile(delete=False) as f:
        f.write(root)
    e = dict(os.environ, PYTHONPATH=EXAMPLES)
    e.update(env or {})
    try:
        procs = [
            subprocess.Popen(
                [sys.executable, os.path.join(HERE, "hccl_worker.py"), f.name, str(n), str(r), mode],
                env=e,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for r in range(n)
        ]
        outs = [p.communicate(timeout=timeout) for p in procs]
    finally:
        for leftover in (f.name, f.name + ".done"):  # .done: the "hang" mode's marker
            if os.path.exists(leftover):
                os.unlink(leftover)
    return [(p.returncode, o, err) for p, (o, err) in zip(procs, outs)]


@pytest.mark.parametrize("n", [2, 4])
def test_collectives(n):
    res = spawn(n, "collectives")
    for r, (code, out, err) in enumerate(res):
        assert code == 0 and f"rank {r} OK" in out, err


def test_peer_death_is_reported():
    (code, out, err), _ = spawn(2, "die", env={"CANNSIM_HCCL_TIMEOUT_S": "20"})
    assert code == 0, err
    lines = dict(line.split(" ", 1) for line in out.splitlines())
    assert lines["enqueue"] == "0"
    assert lines["sync"] != "0"
    assert lines["async"] == "21"  # HCCL_E_REMOTE
    assert lines["next"] == "21"  # later calls fail fast with the pending error
    assert lines["fast"] == "True"
    assert "peer rank 1" in err and "died" in err


def test_size_mismatch_fails_on_every_rank():
    for code, out, err in spawn(2, "mismatch", env={"CANNSIM_HCCL_TIMEOUT_S": "10"}):
        assert code == 0, err
        assert "sync 507000" in out and "async 1" in out  # HCCL_E_PARA on both ranks, no hang
        assert "disagree (different sizes" in err


def test_timeout():
    (code, out, err), _ = spawn(2, "hang")  # the worker sets a 1 s timeout after the rendezvous
    assert code == 0, err
    assert "async 9 elapsed_ok True" in out  # HCCL_E_TIMEOUT
    assert "timed out" in err and "rank 1" in err


def test_root_info_and_bad_init(acl):
    import ctypes as C

    bad = C.create_string_buffer(4108)
    comm = C.c_void_p()
    f = acl.fn(acl.hccl, "HcclCommInitRootInfo", C.c_int, [C.c_uint32, C.c_void_p, C.c_uint32, C.POINTER(C.c_void_p)])
    assert f(2, bad, 0, C.byref(comm)) == 1  # not produced by HcclGetRootInfo
    assert f(2, None, 0, C.byref(comm)) == 2
    root = C.create_string_buffer(acl.hccl_root_info(), 4108)
    assert f(2, root, 5, C.byref(comm)) == 1  # rank >= nRanks
    one = C.create_string_buffer(acl.hccl_root_info(), 4108)
    assert f(1, one, 0, C.byref(comm)) == 0 and comm.value
    assert acl.hccl_call("HcclCommDestroy", [C.c_void_p], comm) == 0


def test_cluster_info_rank_table(tmp_path):
    table = tmp_path / "rank_table.json"
    table.write_text(
        '{"version":"1.0","server_count":"1","server_list":[{"server_id":"127.0.0.1","device":['
        '{"device_id":"0","device_ip":"192.168.1.1","rank_id":"0"},'
        '{"device_id":"1","device_ip":"192.168.1.2","rank_id":"1"}]}],"status":"completed"}'
    )
    code = r"""
import sys
acl = cs.Acl()
rank = int(sys.argv[1]) if len(sys.argv) > 1 else int(__import__("os").environ["RANK_ID"])
comm = VP()
f = acl.fn(acl.hccl, "HcclCommInitClusterInfo", C.c_int, [C.c_char_p, C.c_uint32, C.POINTER(VP)])
assert f(TABLE.encode(), rank, C.byref(comm)) == 0, acl.errmsg()
n = C.c_uint32()
assert acl.hccl_call("HcclGetRankSize", [VP, C.POINTER(C.c_uint32)], comm, C.byref(n)) == 0 and n.value == 2
s = acl.stream()
x = acl.tensor(np.full(4, rank + 1, np.float32))
acl.allreduce(x.ptr, x.ptr, 4, cs.HCCL_FP32, cs.HCCL_SUM, comm, s)
print(x.numpy(s).tolist())
assert f(b"/nonexistent/table.json", 0, C.byref(comm)) == 10
""".replace("TABLE", repr(str(table)))
    import subprocess

    from conftest import LIB64

    env = dict(os.environ, CANNSIM_LIB64=LIB64, PYTHONPATH=EXAMPLES)
    prelude = "import ctypes as C, numpy as np, cannsim_ctypes as cs\nVP = C.c_void_p\n"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", prelude + code],
            env=dict(env, RANK_ID=str(r)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(2)
    ]
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        assert out.strip() == "[3.0, 3.0, 3.0, 3.0]"
