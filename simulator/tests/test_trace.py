"""Ground-truth trace (CANNSIM_TRACE): one JSON line per launch with CRC-32 of every tensor span."""

import json

from conftest import run_py

CHILD = r"""
import json, os, zlib
acl = cs.Acl()
s = acl.stream()
rng = np.random.default_rng(0)
a = rng.standard_normal((4, 6)).astype(np.float32)
b = rng.standard_normal((6,)).astype(np.float32)
A, B, O = acl.tensor(a), acl.tensor(b), acl.tensor(shape=(4, 6))
acl.run("Add", A, B, 2.0, O, stream=s)                       # seq 0
V = acl.create_tensor((3, 2), cs.ACL_FLOAT, A.ptr, strides=(1, 6), offset=7, storage=(24,))
W = acl.tensor(shape=(3, 2))
acl.run("Muls", cs.VP(V), 3.0, W, stream=s)                  # seq 1: strided + offset view
acl.run("InplaceAdd", O, B, 1.0, stream=s)                   # seq 2: inout
H = acl.tensor(a, dtype=cs.ACL_BF16)
acl.run("Cast", A, cs.ACL_BF16, H, stream=s)                 # seq 3
root = acl.hccl_root_info()
comm = acl.hccl_init(1, root, 0)
acl.allreduce(O.ptr, O.ptr, 24, cs.HCCL_FP32, cs.HCCL_SUM, comm, s)   # seq 4
acl.sync(s)
o_final = O.numpy(s)
crc = lambda arr: "%08x" % (zlib.crc32(np.ascontiguousarray(arr).tobytes()) & 0xffffffff)
recs = [json.loads(l) for l in open(os.environ["CANNSIM_TRACE"])]
ops = [r["op"] for r in recs]
assert ops == ["aclnnAdd", "aclnnMuls", "aclnnInplaceAdd", "aclnnCast", "HcclAllReduce"], ops
assert [r["seq"] for r in recs] == list(range(5))
assert all(r["stream"] == hex(s) and r["pid"] == os.getpid() for r in recs)
add = recs[0]["tensors"]
assert [(t["role"], t["name"], t["index"]) for t in add] == [
    ("input", "self", 0), ("input", "other", 1), ("output", "out", 2)]
assert add[0]["addr"] == hex(A.ptr) and add[0]["bytes"] == 96
assert add[0]["dtype"] == "float32" and add[0]["acl_dtype"] == 0
assert add[0]["shape"] == [4, 6] and add[0]["strides"] == [6, 1] and add[0]["offset"] == 0
assert add[0]["crc_before"] == crc(a) and add[0]["crc_after"] is None
assert add[1]["crc_before"] == crc(b)
o_add = (a + 2 * b).astype(np.float32)
assert add[2]["crc_after"] == crc(o_add), (add[2], crc(o_add))
mul = recs[1]["tensors"]
span = a.ravel()[7: 7 + (3 - 1) * 1 + (2 - 1) * 6 + 1]       # elements [offset, offset + sum((d-1)*s) + 1)
assert mul[0]["bytes"] == span.nbytes and mul[0]["span_addr"] == hex(A.ptr + 7 * 4)
assert mul[0]["crc_before"] == crc(span)
assert mul[1]["crc_after"] == crc(3 * a.ravel()[7:].reshape(-1)[[0, 6, 1, 7, 2, 8]].reshape(3, 2))
ia = recs[2]["tensors"]
assert ia[0]["role"] == "inout" and ia[0]["crc_before"] == crc(o_add)
assert ia[0]["crc_after"] == crc((o_add + b).astype(np.float32))
cast = recs[3]["tensors"]
assert cast[1]["dtype"] == "bfloat16" and cast[1]["acl_dtype"] == 27
assert cast[1]["crc_after"] == crc(cs.f32_to_bf16_bits(a))
# bfloat16 also as msprobe hashes it (its float32 conversion); other dtypes have no such field
assert cast[1]["crc_f32_view_after"] == crc(cs.bf16_bits_to_f32(cs.f32_to_bf16_bits(a)).astype(np.float32))
assert "crc_f32_view_after" not in cast[0] and "crc_f32_view_after" not in add[2]
hc = recs[4]["tensors"]
assert hc[0]["role"] == "inout" and hc[0]["crc_after"] == crc(o_final)
print("trace OK")
"""


def test_trace_records_every_launch(tmp_path):
    path = tmp_path / "trace.jsonl"
    p = run_py(CHILD, env={"CANNSIM_TRACE": str(path), "CANNSIM_KERNEL_DELAY_US": "1000"})
    assert "trace OK" in p.stdout


def test_trace_aclop_and_pid_placeholder(tmp_path):
    code = r"""
import os
acl = cs.Acl()
A, Y = acl.tensor(np.ones((2, 2), np.float32)), acl.tensor(shape=(2, 2))
d = lambda t: acl.fn(acl.rt, "aclCreateTensorDesc", VP, [C.c_int, C.c_int, VP, C.c_int])(0, 2, (C.c_int64 * 2)(2, 2), 2)
bf = lambda t: acl.fn(acl.rt, "aclCreateDataBuffer", VP, [VP, C.c_size_t])(t.ptr, t.nbytes)
f = acl.fn(acl.rt, "aclopExecuteV2", C.c_int, [C.c_char_p, C.c_int, VP, VP, C.c_int, VP, VP, VP, VP])
arr = lambda *x: (VP * len(x))(*x)
assert f(b"Relu", 1, arr(d(A)), arr(bf(A)), 1, arr(d(Y)), arr(bf(Y)), None, None) == 0
acl.sync()
print(os.getpid())
"""
    p = run_py(code, env={"CANNSIM_TRACE": str(tmp_path / "t-{pid}.jsonl")})
    pid = p.stdout.split()[-1]
    rec = json.loads(open(tmp_path / f"t-{pid}.jsonl").read())
    assert rec["op"] == "aclopExecuteV2:Relu" and rec["stream"] == "0x0"
    assert [t["role"] for t in rec["tensors"]] == ["input", "output"]
    assert rec["tensors"][1]["crc_after"] is not None


def test_trace_indices_count_null_optional_and_lists(tmp_path):
    code = r"""
import json, os
acl = cs.Acl()
x = acl.tensor(np.arange(8, dtype=np.float32).reshape(2, 4))
y, mu, rs = acl.tensor(shape=(2, 4)), acl.tensor(shape=(2, 1)), acl.tensor(shape=(2, 1))
acl.run("LayerNorm", x, [4], None, None, 1e-5, y, mu, rs)
o = acl.tensor(shape=(4, 4))
acl.run("Cat", [x, y], 0, o)
acl.sync()
recs = [json.loads(l) for l in open(os.environ["CANNSIM_TRACE"])]
print(json.dumps([[(t["index"], t.get("list_index"), t["name"]) for t in r["tensors"]] for r in recs]))
"""
    p = run_py(code, env={"CANNSIM_TRACE": str(tmp_path / "t.jsonl")})
    got = json.loads(p.stdout.splitlines()[-1])
    assert got[0] == [[0, None, "input"], [3, None, "out"], [4, None, "meanOutOptional"], [5, None, "rstdOutOptional"]]
    assert got[1] == [[0, 0, "tensors[0]"], [0, 1, "tensors[1]"], [1, None, "out"]]
