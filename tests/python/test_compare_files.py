"""`msprobe compare` and `msprobe summary` are safe with files (the project's file rules): outputs
are new files, 0640, in a 0750 directory; an existing result or a symbolic link at an output name
is never overwritten or followed (the next free name is used, with a warning); inputs that are
symbolic links are refused, and nothing that is not a regular file is read (a FIFO would block the
command forever)."""

from __future__ import annotations

import csv
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from recorder_testutil import CLI, REPO
from test_l2 import tensor_leaves

SAMPLES = REPO / "tests" / "data" / "samples" / "msprobe-1.1.1-pytorch"


def compare(npu: Path, bench: Path, out: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, MSPROBE_COMPARE_TIMESTAMP="t")
    return subprocess.run(
        [str(CLI), "compare", str(npu), str(bench), "-o", str(out), "--no-progress"],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def sample(case: str, dst: Path) -> Path:
    shutil.copytree(SAMPLES / case / "step0" / "rank", dst)
    return dst


def test_results_are_new_files_never_overwritten_nor_followed(tmp_path: Path) -> None:
    d = sample("mlp_L1_statistics", tmp_path / "npu")
    out = tmp_path / "out"
    p = compare(d, d, out)
    assert p.returncode == 0, p.stderr
    first = {f.name: f.read_bytes() for f in out.iterdir()}
    expect = ["compare_result_t.csv", "compare_result_t.html", "compare_result_t.xlsx", "first_divergence_t.txt"]
    assert sorted(first) == expect, first
    assert stat.S_IMODE(out.stat().st_mode) == 0o750
    assert all(stat.S_IMODE((out / n).stat().st_mode) == 0o640 for n in first)
    # a link planted where the next result would go, pointing at a file of the user's
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (out / "compare_result_t_1.csv").symlink_to(victim)
    p = compare(d, d, out)
    assert p.returncode == 0, p.stderr
    assert "writing compare_result_t_2 instead" in p.stderr, p.stderr
    assert victim.read_text() == "keep me\n"
    assert {n: (out / n).read_bytes() for n in first} == first  # the first run's results are intact
    assert (out / "compare_result_t_2.csv").read_bytes() == first["compare_result_t.csv"]
    assert (out / "first_divergence_t_2.txt").read_bytes() == first["first_divergence_t.txt"]
    # an output directory that is a link is refused
    (tmp_path / "outlink").symlink_to(out)
    p = compare(d, d, tmp_path / "outlink")
    assert p.returncode != 0 and "outlink" in p.stderr, p.stderr


def test_links_in_the_inputs_are_refused(tmp_path: Path) -> None:
    d = sample("mlp_L1_tensor", tmp_path / "npu")
    b = sample("mlp_L1_tensor", tmp_path / "bench")
    (tmp_path / "npulink").symlink_to(d)
    p = compare(tmp_path / "npulink", b, tmp_path / "o1")
    assert p.returncode != 0 and "is a symbolic link" in p.stderr, p.stderr
    # a tensor file that is a link (here to a file of another name outside the dump) is not read
    secret = tmp_path / "secret.pt"
    victim = sorted((d / "dump_tensor_data").glob("*.pt"))[0]
    shutil.copy(victim, secret)
    victim.unlink()
    victim.symlink_to(secret)
    p = compare(d, b, tmp_path / "o2")
    assert p.returncode == 0, p.stderr
    text = (tmp_path / "o2" / "compare_result_t.csv").read_text()
    assert f"Dump file: {victim.name} not found." in text, text[:2000]


def test_fifos_are_refused_not_waited_for(tmp_path: Path) -> None:
    d = sample("mlp_L1_tensor", tmp_path / "npu")
    b = sample("mlp_L1_tensor", tmp_path / "bench")
    pt = sorted((d / "dump_tensor_data").glob("*.pt"))[0]
    pt.unlink()
    os.mkfifo(pt)
    p = compare(d, b, tmp_path / "o1", timeout=60)
    assert p.returncode == 0, p.stderr
    assert f"Dump file: {pt.name} not found." in (tmp_path / "o1" / "compare_result_t.csv").read_text()
    (b / "dump.json").unlink()
    os.mkfifo(b / "dump.json")
    p = compare(d, b, tmp_path / "o2", timeout=60)
    assert p.returncode != 0 and "bench" in p.stderr, p.stderr  # no dump.json there: an error, no wait
    p = subprocess.run([str(CLI), "summary", str(b)], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "not a regular file" in p.stderr, p.stderr


NAMES = r"""
import sys, torch
from msprobe.pytorch import PrecisionDebugger
dbg = PrecisionDebugger(dump_path=sys.argv[1], task="tensor", level="L0")
m = torch.nn.Sequential()
m.add_module("a/b", torch.nn.Linear(4, 4))        # a record name that is no file name
m.add_module("a%2Fb", torch.nn.Linear(4, 4))      # the escaped form of that name, as a module name
m.add_module("L" * 300, torch.nn.Linear(4, 4))    # a file name over 255 bytes
torch.manual_seed(0)
dbg.start(model=m)
m(torch.randn(2, 4)).sum().backward()
dbg.stop()
"""


def test_rows_of_records_whose_file_names_were_sanitised(tmp_path: Path) -> None:
    """A dump compared with itself agrees everywhere, also for records whose tensor files our writer
    named apart from the record (msprobe names a tensor row after its file; the bench is looked up
    by the record's name)."""
    src = tmp_path / "names.py"
    src.write_text(NAMES)
    env = dict(
        os.environ, PYTHONPATH=str(REPO / "python"), MSPROBE_LIB=str(REPO / "target" / "release" / "libmsprobe.so")
    )
    p = subprocess.run(
        [sys.executable, str(src), str(tmp_path / "d")], env=env, capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stderr[-3000:]
    rank = tmp_path / "d" / "step0" / "rank"
    data = json.loads((rank / "dump.json").read_text())["data"]
    files = {v["data_name"] for r in data.values() for v in tensor_leaves(r) if v.get("data_name", "-1") != "-1"}
    assert any("%2F" in f for f in files) and any("%252F" in f for f in files), files
    p = compare(rank, rank, tmp_path / "o")
    assert p.returncode == 0, p.stderr
    with (tmp_path / "o" / "compare_result_t.csv").open(newline="") as f:
        # (a None leaf, the gradient of the input, has no file: data_name -1, as msprobe)
        rows = [r for r in csv.DictReader(f) if r["Data_name"] != "-1"]
    assert len(rows) == len(files), (len(rows), len(files))
    assert {r["Data_name"] for r in rows} == files
    bad = [(r["NPU Name"], r["Accuracy Reached or Not"], r["Err_message"]) for r in rows if r["Cosine"] != "1.0"]
    assert not bad, bad
    assert (tmp_path / "o" / "first_divergence_t.txt").read_text().startswith("no divergence")
