"""L2 capture of every entry point a client may call, linked by name or looked up with dlsym.

tests/programs/all_entries.c is one client run three ways: every CANN function called by its
name (linked, as torch_npu calls aclop, the descriptor and attribute calls and HCCL), every one
looked up with dlsym, and the two alternating call by call. It runs two ranks (HCCL collectives
and point-to-point), aclnn ops (in-place, repeatable executors re-bound, tensor lists, an address
re-bound after phase 1), aclop through every execute variant and aclopCast (attributes of every
type, host-placed and const inputs) and one launch the library rejects. In each run every launch
of the simulator's ground-truth trace is in the dump exactly once, with the trace's CRCs; the
rejected launch is recorded with its status and inputs; the run summary counts the path.
"""

from __future__ import annotations

import json
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

from test_l2 import LIB64, REPO, crc, record_of, run, summary, tensor_leaves, traces

ATTRS = {
    "a_bool": {"type": "bool", "value": True},
    "a_int": {"type": "int", "value": -7},
    "a_float": {"type": "float", "value": 2.5},
    "a_str": {"type": "str", "value": "NCHW"},
    "a_dtype": {"type": "aclDataType", "value": 1},
    "l_bool": [{"type": "bool", "value": True}, {"type": "bool", "value": False}],
    "l_int": [{"type": "int", "value": v} for v in (4, -5, 6)],
    "l_float": [{"type": "float", "value": 0.5}, {"type": "float", "value": -1.25}],
    "l_str": [{"type": "str", "value": "x"}, {"type": "str", "value": "yz"}],
    "l_dtype": [{"type": "aclDataType", "value": 0}, {"type": "aclDataType", "value": 1}],
    "l_list_int": [[{"type": "int", "value": 1}, {"type": "int", "value": 2}], [{"type": "int", "value": 3}]],
}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    exe = tmp_path_factory.mktemp("bin") / "all_entries"
    libs = ["-lascendcl", "-lnnopbase", "-lopapi", "-lacl_op_compiler", "-lhccl"]
    src = REPO / "tests/programs/all_entries.c"
    cmd = ["cc", "-O1", "-Wall", "-o", str(exe), str(src), f"-L{LIB64}", *libs, "-ldl", f"-Wl,-rpath,{LIB64}"]
    subprocess.run(cmd, check=True)
    return exe


def dump_data(rank_dir: Path) -> dict:
    return json.loads((rank_dir / "dump.json").read_text())["data"]


def check_trace(trace: list[dict], data: dict) -> None:
    """Every traced launch is in `data` once, in order, with the trace's CRCs; the dump holds
    nothing else but launches the library rejected (never traced: the kernel did not run)."""
    seen: dict[tuple[str, str], int] = {}
    names = []
    for t in trace:
        assert t["status"] == 0, t
        key = record_of(t["op"])
        n = seen.get(key, 0)
        seen[key] = n + 1
        name = f"{key[0]}.{key[1]}.{n}.forward"
        assert name in data, f"launch {t['seq']} ({t['op']}) is missing from the dump as {name}"
        names.append(name)
        rec = data[name]
        assert "status" not in rec, rec
        want_in = [x["crc_view_before"] for x in t["tensors"] if x["role"] in ("input", "inout")]
        want_out = [x["crc_view_after"] for x in t["tensors"] if x["role"] in ("output", "inout")]
        got_in = [x["md5"] for x in tensor_leaves(rec.get("input_args", []))]
        got_out = [x["md5"] for x in tensor_leaves(rec.get("output", []))]
        assert got_in == want_in, f"{name}: input CRCs {got_in} != ground truth {want_in}"
        assert got_out == want_out, f"{name}: output CRCs {got_out} != ground truth {want_out}"
    rest = [n for n in data if n not in names]
    assert all("status" in data[n] for n in rest), f"records the simulator never ran: {rest}"
    assert [n for n in data if n in names] == names, "records out of launch order"


@pytest.mark.parametrize("mode", ["linked", "dlsym", "both"])
def test_every_entry_point_captured_once_per_launch(tmp_path: Path, client: Path, mode: str) -> None:
    p = run([str(client), mode, str(tmp_path / "root")], tmp_path, {"MSPROBE_SUMMARY_MODE": "md5", "RANK_ID": "0"})
    assert p.stdout == "ok\nok\n", p.stderr  # both ranks
    ts = traces(tmp_path)
    assert len(ts) == 2
    by_pid = {t[0]["pid"]: t for t in ts}
    rank0 = max(ts, key=len)  # rank 0 runs aclnn and aclop too
    rank1 = next(t for t in ts if t is not rank0)
    assert len(by_pid) == 2
    d0, d1 = dump_data(tmp_path / "dump/step0/rank0"), dump_data(tmp_path / "dump/step0/rank1")
    check_trace(rank0, d0)
    check_trace(rank1, d1)

    # Every kind of launch is there (the trace is the truth; these make sure the client ran them).
    ops0 = [t["op"] for t in rank0]
    for want in (
        "aclnnAdd",
        "aclnnInplaceAdd",
        "aclnnMul",
        "aclnnReduceSum",
        "aclnnCat",
        "aclnnRelu",
        "aclopExecuteV2:Add",
        "aclopExecute:Mul",
        "aclopCompileAndExecute:ReduceSum",
        "aclopCompileAndExecuteV2:ReduceSum",
        "aclopCast:Cast",
    ):
        assert want in ops0, (want, ops0)
    assert ops0.count("aclnnMul") == 2
    hccl = [
        "HcclAllReduce",
        "HcclReduce",
        "HcclBroadcast",
        "HcclAllGather",
        "HcclReduceScatter",
        "HcclAlltoAll",
        "HcclAlltoAllV",
        "HcclSend",
        "HcclRecv",
        "HcclBarrier",
    ]
    for ops in (ops0, [t["op"] for t in rank1]):
        assert sorted(o for o in ops if o.startswith("Hccl")) == sorted(hccl)

    # Attributes of every type, whichever path set them.
    add = d0["Aclop.Add.0.forward"]
    assert add["input_args"][2] == ATTRS
    # The host-placed scalar input holds its value at the launch (3.25; the client changed its
    # variable to -100 right after the call).
    scalar = add["input_args"][1]
    assert scalar["md5"] == crc([3.25]) and scalar["Max"] == 3.25 and scalar["shape"] == [1]
    # Const axes (1, copied at aclSetTensorConst) and host-placed axes (0).
    axes = [d0[f"Aclop.ReduceSum.{i}.forward"]["input_args"][1] for i in (0, 1)]
    assert [a["Max"] for a in axes] == [1, 0]
    assert axes[0]["md5"] == f"{zlib.crc32(np.int64(1).tobytes()):08x}"

    # The rejected launch: status, inputs, attributes, no outputs.
    bad = d0["Aclop.NoSuchOp.0.forward"]
    assert bad["status"] == 100024
    assert len(tensor_leaves(bad["input_args"])) == 2 and bad["input_args"][2] == ATTRS
    assert "output" not in bad

    s = summary(p)  # the last summary printed (both ranks print one; rank 0 exits last)
    total = len(rank0) + 1
    counts = {
        "linked": f"{total} (through dlsym: 0, linked: {total})",
        "dlsym": f"{total} (through dlsym: {total}, linked: 0)",
    }
    block = p.stderr.split("L2 run summary:\n")
    rank0_block = next(b for b in block[1:] if f"launches captured: {total}\n" in b)
    seen = next(line for line in rank0_block.splitlines() if "launches seen" in line).split(": ", 1)[1]
    if mode in counts:
        assert seen == counts[mode]
    else:
        dl, ln = (int(x.split(": ")[1]) for x in seen.split("(")[1].rstrip(")").split(", "))
        assert dl > 0 and ln > 0 and dl + ln == total, seen
    assert "launches rejected by the library (recorded with their status): 1" in rank0_block
    assert "launches passed through, nested in a captured launch: 0" in rank0_block
    assert s["device copies failed (recorded as null)"] == "0"


def test_nested_launches_pass_through_and_are_counted(tmp_path: Path) -> None:
    """A library whose launches make launches of their own through CANN's public names (PLT, so
    they reach our exports): aclopCompileAndExecute runs its op through aclopExecuteV2, and
    HcclAllReduce an aclop "Identity". Each outer launch is recorded once, with its own tensors;
    the nested ones are counted, never recorded; and the guard is restored afterwards: the
    client's own aclopExecuteV2 that follows is recorded (tests/programs/nest_cann.c)."""
    lib = tmp_path / "libnest_cann.so"
    stub = str(REPO / "tests/programs/nest_cann.c")
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(lib), stub], check=True)
    exe = tmp_path / "nest_client"
    src = str(REPO / "tests/programs/nest_client.c")
    link = [f"-L{tmp_path}", "-lnest_cann", f"-Wl,-rpath,{tmp_path}"]
    subprocess.run(["cc", "-O1", "-o", str(exe), src, *link], check=True)
    p = run([str(exe)], tmp_path, {"MSPROBE_SUMMARY_MODE": "md5"}, trace=False, ld_path=False)
    a, b = np.array([1, 2, 3, 4], np.float32), np.array([0.5, -1, 8, 2], np.float32)
    y = a + b
    w = y + a
    assert p.stdout == "rc 0 " + " ".join(f"{v:g}" for v in w) + "\n"
    data = dump_data(tmp_path / "dump/step0/rank")
    assert list(data) == ["Aclop.Add.0.forward", "Hccl.AllReduce.0.forward", "Aclop.Add.1.forward"]
    md5 = lambda side: [x["md5"] for x in tensor_leaves(side)]  # noqa: E731
    want = {
        "Aclop.Add.0.forward": ([crc(a), crc(b)], [crc(y)]),
        "Hccl.AllReduce.0.forward": ([crc(y)], [crc(y)]),
        "Aclop.Add.1.forward": ([crc(y), crc(a)], [crc(w)]),
    }
    for name, (ins, outs) in want.items():
        assert (md5(data[name]["input_args"]), md5(data[name]["output"])) == (ins, outs), name
    s = summary(p)
    assert s["launches seen"] == "5 (through dlsym: 0, linked: 5)"
    assert s["launches captured"] == "3"
    assert s["launches passed through, nested in a captured launch"] == "2"


@pytest.mark.parametrize("mode", ["linked", "dlsym"])
def test_filtered_launches_are_counted(tmp_path: Path, client: Path, mode: str) -> None:
    """With `list` selecting one record, every other launch passes through and is counted as
    filtered out: aclnn ops by the op prefilter (before any argument is read), aclop and HCCL by
    the recorder; seen = captured + filtered, on the path the client used."""
    env = {"MSPROBE_SUMMARY_MODE": "md5", "RANK_ID": "0", "MSPROBE_LIST": "Aclop.Add."}
    p = run([str(client), mode, str(tmp_path / "root")], tmp_path, env)
    rank0 = max(traces(tmp_path), key=len)
    assert list(dump_data(tmp_path / "dump/step0/rank0")) == ["Aclop.Add.0.forward"]
    total = len(rank0) + 1  # and the rejected launch
    blocks = p.stderr.split("L2 run summary:\n")[1:]
    s = next(b for b in blocks if "launches captured: 1\n" in b and f"seen: {total} " in b)
    path = f"(through dlsym: {total}, linked: 0)" if mode == "dlsym" else f"(through dlsym: 0, linked: {total})"
    assert f"launches seen: {total} {path}" in s, s
    assert f"launches passed through, filtered out: {total - 1}" in s, s


@pytest.mark.parametrize("level", ["L2", "L1", None])
def test_global_lookup_of_a_name_no_library_defines_fails_as_without_us(tmp_path: Path, level: str | None) -> None:
    """Our exports come first in the global scope under LD_PRELOAD, so dlsym(RTLD_DEFAULT, name)
    would find them even in a process without CANN and a client probing for CANN would be misled.
    Before CANN is loaded every such lookup fails, as it does without the preload; once CANN is
    loaded every one succeeds (tests/programs/probe_cann.c). Whatever the level."""
    exe = tmp_path / "probe"
    subprocess.run(["cc", "-O1", "-o", str(exe), str(REPO / "tests/programs/probe_cann.c"), "-ldl"], check=True)
    args = [str(exe), str(LIB64 / "libascendcl.so")]
    base = run(args, tmp_path / "base", preload=False, trace=False, ld_path=False)
    # run() sets MSPROBE_LEVEL=L2 unless told otherwise; an empty value counts as unset.
    p = run(args, tmp_path, {"MSPROBE_LEVEL": level or ""}, trace=False, ld_path=False)
    assert base.stdout.startswith("before:\nafter: aclnnAdd "), base.stdout
    assert p.stdout == base.stdout


def test_a_failed_task_is_left_for_the_clients_own_synchronisation(tmp_path: Path) -> None:
    """A kernel that fails after its launch returned 0: the runtime reports the failure at the
    next aclrtSynchronizeStream and clears it (as the simulator does). The capture waits for the
    stream with an event of its own, so the client's synchronisation still returns the error, as
    without the preload; and both launches are recorded with their true values
    (tests/programs/stub_cann.c built with events, STUB_TASK_RC)."""
    lib = tmp_path / "libstub_events.so"
    src = str(REPO / "tests/programs/stub_cann.c")
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-DEVENTS", "-o", str(lib), src, "-lpthread"], check=True)
    exe = tmp_path / "stub_client"
    subprocess.run(["cc", "-O1", "-o", str(exe), str(REPO / "tests/programs/stub_client.c"), "-ldl"], check=True)
    env = {"STUB_TASK_RC": "507035", "MSPROBE_SUMMARY_MODE": "md5"}
    args = [str(exe), str(lib), "sync"]
    base = run(args, tmp_path / "base", env, preload=False, trace=False, ld_path=False)
    assert base.stdout == "sync 507035\ndone\n"
    p = run(args, tmp_path, env, trace=False, ld_path=False)
    assert p.stdout == base.stdout
    x = [float(i - 4) for i in range(8)]
    y = [max(v, 0.0) for v in x]
    data = dump_data(tmp_path / "dump/step0/rank")
    got = {n: ([v["md5"] for v in r["input_args"]], [v["md5"] for v in r["output"]]) for n, r in data.items()}
    assert got == {"Aclnn.Relu.0.forward": ([crc(x)], [crc(y)]), "Aclnn.Relu.1.forward": ([crc(y)], [crc(y)])}
