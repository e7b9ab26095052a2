"""L2 capture (LD_PRELOAD, simulator) with a writer queue smaller than one launch's tensors
(MSPROBE_QUEUE_MB=1): aclnnAdd on 512×512 floats (1 MiB a tensor, 3 MiB a launch) and on
1024×1024 (4 MiB a tensor), among small launches. The job finishes within a timeout (block mode
used to hang on the first large Add) and the captured tensors' CRCs equal the simulator's
ground-truth trace: every launch in block mode; in drop mode every launch is in the dump, with
all of its tensor files (equal to the trace) or none.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from recorder_testutil import LIB, REPO
from test_l2 import LIB64, check_fidelity, crc_of, record_of, tensor_leaves, traces

TIMEOUT = 120

PROGRAM = """
import sys
sys.path.insert(0, {examples!r})
import numpy as np
import cannsim_ctypes as cs

acl = cs.Acl()
rng = np.random.default_rng(0)
small = [rng.standard_normal((8, 8)).astype(np.float32) for _ in range(2)]
S = [acl.tensor(x) for x in small]
for n in (512, 1024, 512):
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    A, B, C = acl.tensor(a), acl.tensor(b), acl.tensor(shape=(n, n))
    acl.run("Add", A, B, 1.0, C)
    np.testing.assert_allclose(C.numpy(), a + b, rtol=1e-6)
    for _ in range(5):
        D = acl.tensor(shape=(8, 8))
        acl.run("Add", S[0], S[1], 2.0, D)
        np.testing.assert_allclose(D.numpy(), small[0] + 2.0 * small[1], rtol=1e-6)
print("ok")
"""


def check_all_or_nothing(trace: list[dict], rank_dir: Path) -> int:
    """Drop mode: every traced launch is in the dump; a record names all of its tensor files or
    none, and the files it names hold the trace's CRCs. Returns the records without files."""
    data = json.loads((rank_dir / "dump.json").read_text())["data"]
    assert len(data) == len(trace), "the dump holds records the simulator never ran"
    seen: dict[tuple[str, str], int] = {}
    without = 0
    for t in trace:
        key = record_of(t["op"])
        n = seen.get(key, 0)
        seen[key] = n + 1
        name = f"{key[0]}.{key[1]}.{n}.forward"
        rec = data[name]
        ins, outs = tensor_leaves(rec.get("input_args", [])), tensor_leaves(rec.get("output", []))
        named = [x for x in ins + outs if "data_name" in x]
        assert len(named) in (0, len(ins) + len(outs)), f"{name}: {len(named)} of {len(ins) + len(outs)} files kept"
        if not named:
            without += 1
            continue
        want_in = [x["crc_view_before"] for x in t["tensors"] if x["role"] in ("input", "inout")]
        want_out = [x["crc_view_after"] for x in t["tensors"] if x["role"] in ("output", "inout")]
        assert [crc_of(x, rank_dir) for x in ins] == want_in, name
        assert [crc_of(x, rank_dir) for x in outs] == want_out, name
    return without


@pytest.mark.parametrize("mode", ["block", "drop"])
def test_launches_larger_than_the_queue_finish_with_the_traced_crcs(tmp_path: Path, mode: str) -> None:
    prog = tmp_path / "big_adds.py"
    prog.write_text(PROGRAM.format(examples=str(REPO / "examples")))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MSPROBE_", "CANNSIM_TRACE"))}
    env.update(
        LD_LIBRARY_PATH=str(LIB64),
        CANNSIM_LIB64=str(LIB64),
        LD_PRELOAD=str(LIB),
        MSPROBE_LEVEL="L2",
        MSPROBE_DUMP_PATH=str(tmp_path / "dump"),
        MSPROBE_TASK="tensor",
        MSPROBE_FRAMEWORK="mindspore",
        MSPROBE_QUEUE_MB="1",
        MSPROBE_ON_QUEUE_FULL=mode,
        CANNSIM_TRACE=str(tmp_path / "trace.{pid}.jsonl"),
        CANNSIM_STATS=str(tmp_path / "stats.json"),
    )
    try:
        p = subprocess.run([sys.executable, str(prog)], env=env, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"hung: not finished after {TIMEOUT} s\n{(e.stderr or b'')[-2000:]!r}")
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stdout + p.stderr[-3000:]
    (trace,) = traces(tmp_path)
    assert sum(t["op"] == "aclnnAdd" for t in trace) == 18
    rank_dir = tmp_path / "dump/step0/rank"
    summary = p.stderr[p.stderr.find("L2 run summary") :]
    assert "records dropped: 0" in summary, p.stderr[-3000:]
    # The default async copies (issue #21) hold pinned memory within the same cap: a 4 MiB tensor
    # cannot fit in 1 MiB and takes the copy path; the small ones are copied asynchronously.
    peak = int(re.search(r"pinned peak (\d+) bytes of 1048576 allowed", summary).group(1))
    pinned = json.loads((tmp_path / "stats.json").read_text())["memory"]["pinned_peak_bytes"]
    assert 0 < peak <= 1 << 20 and 0 < pinned <= 1 << 20, (peak, pinned, summary)
    assert int(re.search(r"(\d+) tensors copied asynchronously", summary).group(1)) > 0, summary
    # Pinned once and reused (a driver call on a device, so never one per copy): the simulator's
    # aclrtMallocHost calls against its count of async device→host copies.
    st = json.loads((tmp_path / "stats.json").read_text())
    allocs, copies = st["memory"]["pinned_allocs"], st["copies"]["device_to_host"]["async"]["copies"]
    assert copies >= 30 and allocs * 4 <= copies, (allocs, copies, summary)
    if mode == "block":
        assert check_fidelity(trace, rank_dir) == 18
        assert "written without their tensor files (writer queue full): 0;" in summary, summary
    else:
        without = check_all_or_nothing(trace, rank_dir)
        assert f"written without their tensor files (writer queue full): {without};" in summary, summary


ASYNC_PROGRAM = """
import sys
sys.path.insert(0, {examples!r})
import numpy as np
import cannsim_ctypes as cs

acl = cs.Acl()
rng = np.random.default_rng(1)
# every tensor made first, then the launches back to back with no wait: with slow kernels the
# async copies of several launches are in flight at once
ts = []
for _ in range(6):
    a, b = (rng.standard_normal((256, 256)).astype(np.float32) for _ in range(2))
    ts.append((acl.tensor(a), acl.tensor(b), acl.tensor(shape=(256, 256))))
for A, B, C in ts:
    acl.run("Add", A, B, 1.0, C)
acl.sync()
print("ok")
"""


def run_async_program(d: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    d.mkdir(parents=True, exist_ok=True)
    prog = d / "async_adds.py"
    prog.write_text(ASYNC_PROGRAM.format(examples=str(REPO / "examples")))
    try:
        p = subprocess.run([sys.executable, str(prog)], env=env, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"hung: not finished after {TIMEOUT} s\n{(e.stderr or b'')[-2000:]!r}")
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stdout + p.stderr[-3000:]
    return p


@pytest.mark.parametrize("task", ["tensor", "md5", "statistics"])
@pytest.mark.parametrize("mode", ["block", "drop"])
def test_async_copies_keep_pinned_memory_under_the_cap(tmp_path: Path, mode: str, task: str) -> None:
    """The default async-copy path (md5/tensor, issue #21) with MSPROBE_QUEUE_MB=1: six launches of
    three 256 KiB tensors each (768 KiB a launch) and 20 ms kernels, launched back to back. The
    simulator's own count of pinned memory (`aclrtMallocHost` bytes held at once) and the summary's
    pinned peak never exceed the cap; `block` keeps every tensor (CRCs equal to the trace); `drop`
    drops some (counted) and keeps the rest equal to the trace: md5 per tensor, tensor files all or
    none per record; statistics (the default statistics design, from the same async copies): `block`
    gives exactly the copy path's dump (MSPROBE_L2_ASYNC_COPY=0, same program), `drop` the copy path's
    leaves except the dropped ones, which keep dtype and shape with null statistics (counted)."""
    cap = 1 << 20
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MSPROBE_", "CANNSIM_"))}
    env.update(
        LD_LIBRARY_PATH=str(LIB64),
        CANNSIM_LIB64=str(LIB64),
        LD_PRELOAD=str(LIB),
        MSPROBE_LEVEL="L2",
        MSPROBE_DUMP_PATH=str(tmp_path / "dump"),
        MSPROBE_TASK="tensor" if task == "tensor" else "statistics",
        MSPROBE_SUMMARY_MODE="md5" if task == "md5" else "statistics",
        # statistics from the async copies alone (the hybrid default would reduce these MiB tensors
        # on the device, which holds no pinned bytes)
        MSPROBE_L2_DEVICE_STATS="0",
        MSPROBE_FRAMEWORK="mindspore",
        MSPROBE_QUEUE_MB="1",
        MSPROBE_ON_QUEUE_FULL=mode,
        CANNSIM_TRACE=str(tmp_path / "trace.{pid}.jsonl"),
        CANNSIM_STATS=str(tmp_path / "stats.json"),
        CANNSIM_KERNEL_DELAY_US="20000",
    )
    p = run_async_program(tmp_path, env)
    (trace,) = traces(tmp_path)
    assert [t["op"] for t in trace] == ["aclnnAdd"] * 6
    summary = p.stderr[p.stderr.find("L2 run summary") :]
    m = re.search(
        r"async copies: (\d+) tensors copied asynchronously, (\d+) dropped \(pinned memory full, "
        r"recorded without statistics/md5/file\), pinned peak (\d+) bytes of (\d+) allowed",
        summary,
    )
    assert m, summary
    copied, dropped, peak, allowed = map(int, m.groups())
    st = json.loads((tmp_path / "stats.json").read_text())
    assert allowed == cap
    assert 0 < peak <= cap, summary
    assert 0 < st["memory"]["pinned_peak_bytes"] <= cap, st["memory"]
    assert copied > 0 and "records dropped: 0" in summary, summary
    rank_dir = tmp_path / "dump/step0/rank"
    if task == "statistics":
        ref_dir = tmp_path / "copy"
        ref_env = dict(env, MSPROBE_L2_ASYNC_COPY="0", MSPROBE_DUMP_PATH=str(ref_dir / "dump"))
        ref_env["CANNSIM_TRACE"] = str(ref_dir / "trace.{pid}.jsonl")
        ref_env["CANNSIM_STATS"] = str(ref_dir / "stats.json")
        run_async_program(ref_dir, ref_env)
        ref = json.loads((ref_dir / "dump/step0/rank/dump.json").read_text())["data"]
        data = json.loads((rank_dir / "dump.json").read_text())["data"]
        assert list(data) == list(ref) == [f"Aclnn.Add.{i}.forward" for i in range(6)]
        if mode == "block":
            assert dropped == 0 and copied == 18, summary
            assert json.dumps(data, sort_keys=True) == json.dumps(ref, sort_keys=True)
            return
        assert dropped > 0, summary
        nulls = 0
        for name in data:
            got = [x for k in ("input_args", "output") for x in tensor_leaves(data[name][k])]
            want = [x for k in ("input_args", "output") for x in tensor_leaves(ref[name][k])]
            assert len(got) == len(want) == 3
            for g, w in zip(got, want):
                assert (g["dtype"], g["shape"]) == (w["dtype"], w["shape"])
                if g["Max"] is None:
                    nulls += 1
                    assert g["Min"] is g["Mean"] is g["Norm"] is None, g
                else:
                    assert g == w, (name, g, w)
        assert nulls == dropped, (nulls, dropped)
        return
    if mode == "block":
        assert dropped == 0, summary
        assert copied + int(re.search(r", (\d+) by the copy path", summary).group(1)) == 18, summary
        assert check_fidelity(trace, rank_dir) == 6
        return
    # drop: the second launch finds the first one's 768 KiB still in flight (20 ms kernels)
    assert dropped > 0, summary
    if task == "tensor":
        without = check_all_or_nothing(trace, rank_dir)
        assert without > 0
        assert f"written without their tensor files (writer queue full): {without};" in summary, summary
    else:
        data = json.loads((rank_dir / "dump.json").read_text())["data"]
        assert len(data) == len(trace)
        missing = 0
        for i, t in enumerate(trace):
            rec = data[f"Aclnn.Add.{i}.forward"]
            want = [x["crc_view_before"] for x in t["tensors"] if x["role"] == "input"]
            want += [x["crc_view_after"] for x in t["tensors"] if x["role"] == "output"]
            leaves = tensor_leaves(rec["input_args"]) + tensor_leaves(rec["output"])
            assert [x["shape"] for x in leaves] == [[256, 256]] * 3, rec
            for leaf, crc in zip(leaves, want):
                if "md5" in leaf:
                    assert leaf["md5"] == crc, (i, leaf, crc)
                else:
                    missing += 1
        assert missing == dropped, (missing, dropped)
