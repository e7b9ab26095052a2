"""`msprobe recover` cannot hurt (issue #17, part 4): a killed run's journal is replayed into that
run's own directories only, never through a link, never with a name that leaves the dump, never
as invalid JSON; it removes only its own temporaries; a kill while a step directory is being
created leaves a directory it completes.

Each test kills a real recording process and looks only at files and at the command's exit
code, so it runs against any build (CARGO_TARGET_DIR=... picks the binaries)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import zlib
from pathlib import Path

from recorder_testutil import CLI, spawn_child

WRITER = """
import ctypes, os, sys, time, numpy as np
from msprobe import _native as n
assert n.lib.msprobe_init(None) == 0
assert n.lib.msprobe_start() == 1
a = np.arange(64, dtype=np.float32)
prefix = os.environ["T_PREFIX"]
count = int(os.environ.get("T_COUNT", "-1"))
i = 0
while i != count:  # count -1: never ends the step, only the journal can save these records
    r = n.lib.msprobe_record_begin(("Torch.%s.%d.forward" % (prefix, i)).encode())
    n.lib.msprobe_record_section(r, b"input_args")
    a[0] = i
    d = n.tensor(0, [64], a.ctypes.data, a.nbytes)
    n.lib.msprobe_record_add_tensor(r, None, ctypes.byref(d))
    n.lib.msprobe_record_end(r)
    i += 1
    if i % 50 == 0:
        time.sleep(0.001)
if count < 0:
    time.sleep(1000)
"""

IDLE = """
import time
from msprobe import _native as n
assert n.lib.msprobe_init(None) == 0
assert n.lib.msprobe_start() == 1
time.sleep(1000)
"""


def journal_of(dump: Path, pid: int) -> Path:
    return dump / f".msprobe-journal-{pid}"


def wait_for(cond, what: str, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def killed_run(dump: Path, task: str = "statistics", prefix: str = "add", code: str = WRITER) -> int:
    """Starts a recording process, waits until its journal holds records (and its step files
    exist), SIGKILLs it; returns its pid."""
    p = spawn_child(code, {"MSPROBE_TASK": task, "MSPROBE_DUMP_PATH": str(dump), "T_PREFIX": prefix})
    j = journal_of(dump, p.pid)
    want = -1 if code is IDLE else 150  # the idle run: its step directory's files exist
    rank = dump / "step0/rank"

    def ready() -> bool:
        if not (j.exists() and (rank / "construct.json").exists()):
            return False
        return sum(1 for e in parse_journal(j.read_bytes())[1] if e[0] == "R") > want

    try:
        wait_for(ready, "records")
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert p.returncode == -signal.SIGKILL
    return p.pid


def finished_run(dump: Path, prefix: str, count: int) -> None:
    p = spawn_child(WRITER, {"MSPROBE_DUMP_PATH": str(dump), "T_PREFIX": prefix, "T_COUNT": str(count)})
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err


def recover(dump: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLI), "recover", str(dump)], capture_output=True, text=True, timeout=120)


def files_under(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file() and not p.is_symlink()}


def all_json_valid(d: Path) -> None:
    for p in d.rglob("*.json"):
        if p.is_file() and not p.is_symlink():
            json.loads(p.read_text())


# ---- the journal formats (to craft entries): version 2 (CRC'd), or the earlier one ----------


def entries_v2(raw: bytes) -> tuple[int, list[tuple[str, str, str, int, int]]]:
    """(end of the complete entries, [(kind, dir, name, text start, text end)])."""
    pos = raw.index(b"\n") + 1
    out, end = [], pos
    while pos < len(raw):
        if raw[pos] == 0:
            pos += 1
            continue
        nl = raw.find(b"\n", pos)
        if nl < 0:
            break
        head = raw[pos:nl].decode(errors="replace")
        try:
            kind, crc, length, rest = head.split(" ", 3)
            d, name = json.JSONDecoder().raw_decode(rest)[0], None
            dlen = len(json.dumps(d))
            name = json.loads(rest[dlen + 1 :])
            t0, t1 = nl + 1, nl + 1 + int(length)
        except (ValueError, IndexError):
            break
        if raw[t1 : t1 + 1] != b"\n" or zlib.crc32(kind.encode() + raw[pos + 11 : t1 + 1]) != int(crc, 16):
            break
        out.append((kind, d, name, t0, t1))
        pos = end = t1 + 1
    return end, out


def entries_v1(raw: bytes) -> tuple[int, list[tuple[str, str, str, int, int]]]:
    pos, out, end, current = 0, [], 0, None
    while pos < len(raw):
        nl = raw.find(b"\n", pos)
        if nl < 0:
            break
        kind, rest = raw[pos:nl].decode().split(" ", 1)
        name, length = rest.rsplit(" ", 1)
        t0, t1 = nl + 1, nl + 1 + int(length)
        if raw[t1 : t1 + 1] != b"\n":
            break
        if kind == "D":
            current = json.loads(name)
        out.append((kind, current, json.loads(name), t0, t1))
        pos = end = t1 + 1
    return end, out


def parse_journal(raw: bytes):
    return entries_v2(raw) if raw.startswith(b"msprobe-journal 2 ") else entries_v1(raw)


def craft(raw: bytes, kind: str, d: str, name: str, text: str) -> bytes:
    """`raw` cut after its last complete entry, plus one well-formed entry of its format."""
    end, _ = parse_journal(raw)
    t = text.encode()
    if raw.startswith(b"msprobe-journal 2 "):
        rest = f"{len(t)} {json.dumps(d)} {json.dumps(name)}\n".encode() + t + b"\n"
        return raw[:end] + f"{kind} {zlib.crc32(kind.encode() + rest):08x} ".encode() + rest
    return raw[:end] + f"{kind} {json.dumps(name)} {len(t)}\n".encode() + t + b"\n"


# ---- the tests -------------------------------------------------------------------------------


def test_a_stale_journal_is_never_replayed_over_a_later_run(tmp_path: Path) -> None:
    dump = tmp_path / "dump"
    killed_run(dump, prefix="add")
    finished_run(dump, prefix="mul", count=30)
    later = (dump / "step0/rank/dump.json").read_bytes()
    assert list(json.loads(later)["data"]) == [f"Torch.mul.{i}.forward" for i in range(30)]
    for _ in range(2):  # and again: nothing is replayed twice
        recover(dump)
        assert (dump / "step0/rank/dump.json").read_bytes() == later, "the later run's dump.json was replaced"
        all_json_valid(dump)
    (aside,) = (dump / "step0").glob("rank.replaced-*")
    names = list(json.loads((aside / "dump.json").read_text())["data"])
    assert len(names) > 100 and all(n.startswith("Torch.add.") for n in names)


def test_a_symlinked_step_directory_is_never_followed(tmp_path: Path) -> None:
    dump, outside = tmp_path / "dump", tmp_path / "outside"
    killed_run(dump)
    (dump / "step0").rename(tmp_path / "real_step0")
    (outside / "rank").mkdir(parents=True)
    (outside / "rank/dump.json").write_text("{}")
    (dump / "step0").symlink_to(outside)
    before = files_under(outside)
    recover(dump)
    assert files_under(outside) == before, "recover wrote through a symbolic link"
    assert (dump / "step0").is_symlink()
    all_json_valid(dump)


def test_a_crafted_data_name_never_reaches_outside_the_dump(tmp_path: Path) -> None:
    dump, outside = tmp_path / "dump", tmp_path / "outside"
    pid = killed_run(dump, task="tensor")
    outside.mkdir()
    (outside / "victim.pt").write_bytes(b"PK not a whole zip")
    j = journal_of(dump, pid)
    leaf = {
        "type": "torch.Tensor",
        "dtype": "torch.float32",
        "shape": [1],
        "data_name": "../../../../outside/victim.pt",
    }
    text = json.dumps({"input_args": [leaf]}, indent=1)
    j.write_bytes(craft(j.read_bytes(), "R", "step0/rank", "Torch.evil.0.forward", text))
    recover(dump)
    assert (outside / "victim.pt").read_bytes() == b"PK not a whole zip", "a file outside the dump was removed"
    all_json_valid(dump)


def test_a_flipped_byte_never_makes_invalid_json(tmp_path: Path) -> None:
    dump = tmp_path / "dump"
    pid = killed_run(dump)
    j = journal_of(dump, pid)
    raw = bytearray(j.read_bytes())
    end, entries = parse_journal(bytes(raw))
    kind, d, name, t0, t1 = next(e for e in entries[len(entries) // 2 :] if e[0] == "R")
    at = raw.index(b'"Max": ', t0, t1) + 5
    raw[at] = ord(";")  # one byte: no longer JSON
    j.write_bytes(bytes(raw))
    out = recover(dump)
    data = json.loads((dump / "step0/rank/dump.json").read_text())["data"]  # valid JSON
    assert len(data) > 100
    assert out.returncode == 1 and "1 damaged entries skipped" in out.stdout, (out.returncode, out.stdout, out.stderr)


def test_only_its_own_temporaries_are_removed(tmp_path: Path) -> None:
    dump = tmp_path / "dump"
    pid = killed_run(dump)
    mine = dump / "step0/rank" / f".dump.json.tmp{pid}"
    mine.write_text("left by the killed run")
    theirs = [dump / "notes/.dump.json.tmp12345", dump / "step0/rank/.stack.json.tmp1"]
    for t in theirs:
        t.parent.mkdir(parents=True, exist_ok=True)
        t.write_text("not msprobe's")
    recover(dump)
    assert all(t.read_text() == "not msprobe's" for t in theirs), "recover removed files that are not its own"
    assert not mine.exists(), "the killed run's own temporary is left behind"


def test_a_kill_while_a_step_directory_is_created_is_recoverable(tmp_path: Path) -> None:
    """The kill came while the step's files were being created: dump.json empty, stack.json and
    construct.json not there yet."""
    dump = tmp_path / "dump"
    killed_run(dump, code=IDLE)
    rank = dump / "step0/rank"
    (rank / "dump.json").write_bytes(b"")
    for f in ("stack.json", "construct.json"):
        (rank / f).unlink()
    out = recover(dump)
    assert out.returncode == 0, out.stderr
    d = json.loads((rank / "dump.json").read_text())
    assert d["task"] == "statistics" and d["data"] == {}
    assert json.loads((rank / "stack.json").read_text()) == {}
    assert json.loads((rank / "construct.json").read_text()) == {}
    assert os.listdir(dump) == ["step0"], "the replayed journal is removed"


def test_one_recover_at_a_time(tmp_path: Path) -> None:
    """While another recover holds the dump (its directory's flock), a second refuses, saying so,
    and changes nothing; once free, recover runs. Two at once raced: one failed midway, the other
    took the first's new directories for another run's and wrote the steps again beside them."""
    import fcntl

    dump = tmp_path / "dump"
    killed_run(dump)
    before = files_under(dump)
    fd = os.open(dump, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        p = recover(dump)
        assert p.returncode != 0 and "another msprobe recover is working on" in p.stderr, p.stderr
        assert files_under(dump) == before
    finally:
        os.close(fd)
    p = recover(dump)
    assert p.returncode == 0, p.stderr
    all_json_valid(dump)
    assert files_under(dump) != before


def test_a_journal_that_is_a_link_or_fifo_is_named_not_read(tmp_path: Path) -> None:
    dump = tmp_path / "dump"
    dump.mkdir()
    secret = tmp_path / "secret"
    secret.write_bytes(b"x" * 64)
    (dump / ".msprobe-journal-1").symlink_to(secret)
    os.mkfifo(dump / ".msprobe-journal-2")
    p = recover(dump)
    assert p.returncode != 0 and "nothing to recover" in p.stderr, p.stderr
    for n in (1, 2):
        assert f".msprobe-journal-{n} is not a regular file: not replayed" in p.stderr, p.stderr
    assert secret.read_bytes() == b"x" * 64
