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
    if mode == "block":
        assert check_fidelity(trace, rank_dir) == 18
        assert "written without their tensor files (writer queue full): 0;" in summary, summary
    else:
        without = check_all_or_nothing(trace, rank_dir)
        assert f"written without their tensor files (writer queue full): {without};" in summary, summary
