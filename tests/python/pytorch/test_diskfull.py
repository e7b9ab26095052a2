"""A full disk (a real tmpfs, mounted by the test: root only) leaves a valid dump: every JSON file
parses, no empty or cut-short tensor file is left, capture stops with one message naming the
dump path and the OS error, the job runs to its end, and the run summary counts exactly what was
lost. Each case runs scenarios/diskfull.py into the small tmpfs and, as the reference, into a
roomy directory (same seed, same names: the same records and tensor files), and compares."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
LIB = REPO / "target" / "release" / "libmsprobe.so"
SCRIPT = HERE / "scenarios" / "diskfull.py"

# name: (task, tmpfs size, fill the tmpfs before the job)
CASES = {
    "tensor": ("tensor", "2m", False),
    "statistics": ("statistics", "96k", False),
    "full_at_start": ("tensor", "256k", True),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (CI runs the suites as root)")
    root = tmp_path_factory.mktemp("diskfull")
    mounts = []
    try:
        jobs = []
        for name, (task, size, fill) in CASES.items():
            mnt = root / f"{name}.mnt"
            mnt.mkdir()
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], check=True)
            mounts.append(mnt)
            if fill:
                (mnt / "dump").mkdir()
                fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
                with pytest.raises(OSError):
                    while True:
                        os.write(fd, b"\0" * 4096)
                os.close(fd)
            for kind, out in (("full", mnt / "dump"), ("ref", root / f"{name}.ref")):
                log = str(root / f"{name}.{kind}.log")
                jobs.append({"script": str(SCRIPT), "argv": [str(out), task], "cwd": str(root), "log": log})
        (root / "jobs.json").write_text(json.dumps(jobs))
        env = {"PYTHONPATH": str(REPO / "python"), "MSPROBE_LIB": str(LIB), "PATH": "/usr/bin:/bin"}
        p = subprocess.run(
            [sys.executable, str(HERE / "forkrun.py"), str(root / "jobs.json")],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert p.returncode == 0, p.stderr[-3000:]
        assert json.loads(p.stdout.splitlines()[-1])["failed"] == [], p.stdout
        yield root
    finally:
        for m in mounts:
            subprocess.run(["umount", "-l", str(m)], check=False)


def summary(log: str) -> dict[str, int]:
    """The run summary's counts."""
    pats = {
        ("records", "tensors", "files", "bytes"): r"records: (\d+) \((\d+) tensors, (\d+) tensor files, (\d+) bytes",
        ("dropped",): r"records dropped: (\d+)",
        ("files_lost", "bytes_lost"): r"tensor files lost to write errors: (\d+) \((\d+) bytes\)",
    }
    out = {}
    for keys, pat in pats.items():
        m = re.search(pat, log)
        assert m, f"no {pat!r} in the run summary:\n{log}"
        out.update(zip(keys, map(int, m.groups())))
    return out


def read_dump(dump: Path) -> tuple[list[tuple[str, dict]], dict[str, bytes]]:
    """(step/record name, body) of every dump.json in step order, and every tensor file's bytes
    by its path under the dump; every JSON file must parse, and no file may be empty."""
    records, files = [], {}
    for p in sorted(dump.rglob("*")):
        if p.is_dir():
            continue
        rel = str(p.relative_to(dump))
        data = p.read_bytes()
        assert data, f"empty file {rel}"
        if p.suffix == ".json":
            v = json.loads(data)  # every JSON file parses
            if p.name == "dump.json":
                step = p.parent.parent.name
                records += [(f"{step}/{k}", body) for k, body in v["data"].items()]
        elif p.parent.name == "dump_tensor_data":
            files[rel] = data
    return records, files


def data_names(body) -> list[str]:
    if isinstance(body, dict):
        return ([body["data_name"]] if "data_name" in body else []) + [n for v in body.values() for n in data_names(v)]
    if isinstance(body, list):
        return [n for v in body for n in data_names(v)]
    return []


def tensor_file(record: str, name: str) -> str:
    step = record.split("/")[0]
    return f"{step}/rank/dump_tensor_data/{name}"


@pytest.mark.parametrize("case", list(CASES))
def test_a_full_disk_leaves_a_valid_dump_and_an_honest_summary(runs: Path, case: str) -> None:
    task = CASES[case][0]
    log = (runs / f"{case}.full.log").read_text()
    ref_log = (runs / f"{case}.ref.log").read_text()
    assert "job finished" in log, log[-3000:]
    dump = runs / f"{case}.mnt" / "dump"
    ref_records, ref_files = read_dump(runs / f"{case}.ref")
    records, files = read_dump(dump)
    s = summary(log)
    assert summary(ref_log)["dropped"] == 0 and not re.search(r"\[(ERROR|WARNING)\]", ref_log), ref_log

    # One message, naming the dump path and the OS error; nothing else warned about.
    msgs = [line for line in log.splitlines() if "[ERROR]" in line or "[WARNING]" in line]
    assert len(msgs) == 1, "\n".join(msgs)
    assert f"cannot write to the dump path {dump} (" in msgs[0], msgs[0]
    assert "No space left on device (os error 28)" in msgs[0] and "Capture is off" in msgs[0], msgs[0]

    # Capture stopped: what was sent is the reference's first records; the first of those
    # are in dump.json, each exactly as in the reference (statistics from memory), the rest
    # counted as dropped. Each record has two tensors (input, output).
    sent = s["records"] + s["dropped"]
    assert s["tensors"] == 2 * sent, s
    # A disk full from the start stops capture when the crash journal is created, before the
    # first record.
    assert (0 if CASES[case][2] else 1) <= sent < len(ref_records), (sent, len(ref_records))
    assert s["records"] == len(records), s
    assert records == ref_records[: len(records)]

    # Tensor files: each on disk is the reference's, byte for byte (never empty or cut short);
    # the summary counts them, and those lost, exactly.
    assert s["files"] == len(files) and s["bytes"] == sum(map(len, files.values())), s
    for rel, data in files.items():
        assert data == ref_files[rel], rel
    if task == "tensor":
        expected = {tensor_file(r, n) for r, body in ref_records[:sent] for n in data_names(body)}
        assert set(files) <= expected
        lost = expected - set(files)
        assert (s["files_lost"], s["bytes_lost"]) == (len(lost), sum(len(ref_files[f]) for f in lost)), s
        # A record in dump.json whose file was lost keeps its entry (and data_name).
        named = {tensor_file(r, n) for r, body in records for n in data_names(body)}
        assert set(files) <= named and len(named - set(files)) <= s["files_lost"]
    else:
        assert (s["files_lost"], s["bytes_lost"], s["files"]) == (0, 0, 0), s

    # Nothing else left behind: no journal, no temporary.
    assert not [p.name for p in dump.iterdir() if p.name.startswith(".")]
    if case == "full_at_start":
        assert list(dump.iterdir()) == [], "nothing is created in a full disk"
