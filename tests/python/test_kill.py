"""A process writing records is SIGKILLed mid-step; `msprobe recover` rebuilds its JSON files
from the journal and loses no record whose data reached disk."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from recorder_testutil import CLI, journal_entries, spawn_child

WRITER = """
import ctypes, numpy as np
from msprobe import _native as n
assert n.lib.msprobe_init(None) == 0
assert n.lib.msprobe_start() == 1
a = np.arange(4096, dtype=np.float32)
i = 0
while True:  # never ends the step: only the journal can save these records
    r = n.lib.msprobe_record_begin(("Torch.add.%d.forward" % i).encode())
    n.lib.msprobe_record_section(r, b"input_args")
    a[0] = i
    d = n.tensor(0, [4096], a.ctypes.data, a.nbytes)
    n.lib.msprobe_record_add_tensor(r, None, ctypes.byref(d))
    n.lib.msprobe_record_add_int(r, None, None, i)
    n.lib.msprobe_record_end(r)
    i += 1
"""


def journal_records(raw: bytes, directory: str) -> list[str]:
    """Names of the complete record entries of `directory` (relative to the dump path)."""
    return [name for kind, d, name, _ in journal_entries(raw) if kind == "R" and d == directory]


def test_sigkill_mid_step_then_recover(tmp_path: Path) -> None:
    dump = tmp_path / "dump"
    rank = dump / "step0" / "rank"
    p = spawn_child(WRITER, {"MSPROBE_TASK": "tensor", "MSPROBE_DUMP_PATH": str(dump)})
    # One journal per process, in the dump path (not one per step directory).
    journal = dump / f".msprobe-journal-{p.pid}"
    deadline = time.time() + 60
    while time.time() < deadline:
        if journal.exists() and len(journal_records(journal.read_bytes(), "step0/rank")) > 300:
            break
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert p.returncode == -signal.SIGKILL
    # Before recovery dump.json holds what the writer had put there while it idled (the files
    # are kept current in the background), or is cut short by the kill: never a record the
    # journal lacks.
    complete = journal_records(journal.read_bytes(), "step0/rank")
    before = (rank / "dump.json").read_text()
    try:
        early = list(json.loads(before)["data"])
        assert early == complete[: len(early)]
    except json.JSONDecodeError:
        pass  # the kill came mid-write

    out = subprocess.run([str(CLI), "recover", str(dump)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    data = json.loads((rank / "dump.json").read_text())["data"]
    assert list(data) == complete and len(complete) > 300
    # Every tensor file that reached disk belongs to a recovered record, with matching content.
    names = {r["input_args"][0]["data_name"]: int(k.split(".")[2]) for k, r in data.items()}
    files = [f for f in (rank / "dump_tensor_data").iterdir() if not f.name.startswith(".")]
    assert files and all(f.name in names for f in files)
    import torch

    for f in files[:: max(1, len(files) // 20)]:
        t = torch.load(f, weights_only=True)
        assert t[0].item() == names[f.name] and t[1].item() == 1.0
    # Records are journaled when their hooked call returns, their tensor files written after:
    # recover names exactly those the kill kept from disk (or cut short, and removed).
    missing = len(names) - len(files)
    assert f"recovered {len(complete)} records" in out.stdout
    assert f"{missing} tensor files missing or cut short" in out.stdout, out.stdout
