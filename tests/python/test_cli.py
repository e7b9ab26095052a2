"""The `msprobe` command line's conventions (crates/cli, clap): help and version on stdout with exit 0,
usage errors on stderr with exit 2, several directories for `summary`, a quiet exit when the reader of
stdout has gone (`msprobe summary A B | head -1`). The record counts `summary` prints are checked against
the dump.json files themselves."""

import json
import os
import subprocess
from pathlib import Path

from recorder_testutil import CLI, REPO

SAMPLES = REPO / "tests" / "data" / "samples" / "msprobe-1.1.1-pytorch"


def run(*args, **kw):
    return subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True, timeout=60, **kw)


def test_help_and_version_on_stdout_exit_0():
    for flag in ("--help", "-h"):
        p = run(flag)
        assert p.returncode == 0, p
        assert p.stderr == ""
        for sub in ("summary", "recover", "compare"):
            assert sub in p.stdout
        assert "Exit codes:" in p.stdout
    p = run("--version")
    assert p.returncode == 0 and p.stderr == ""
    # the version is the workspace's
    cargo = (REPO / "Cargo.toml").read_text()
    version = cargo.split("[workspace.package]")[1].split('version = "')[1].split('"')[0]
    assert p.stdout.strip() == f"msprobe {version}"
    for sub in ("summary", "recover", "compare"):
        p = run(sub, "--help")
        assert p.returncode == 0 and p.stdout.startswith(("List", "Rebuild", "Compare")), p
    assert "--input_path" in run("compare", "--help").stdout


def test_usage_errors_exit_2_on_stderr():
    for args in ([], ["frobnicate"], ["summary"], ["recover"], ["compare", "--no-such-flag"], ["compare", "a"]):
        p = run(*args)
        assert p.returncode == 2, (args, p)
        assert p.stdout == "", (args, p.stdout)
        assert p.stderr.strip(), args
    p = run("compare", "-dm", "x.yaml", "a", "b")
    assert p.returncode == 2 and "not supported" in p.stderr
    p = run("compare", "-cm", "x.yaml", "a", "b")  # a MindSpore-against-PyTorch option
    assert p.returncode == 2 and "need -f mindspore" in p.stderr


def counts(root: Path) -> dict:
    """record counts per directory holding a dump.json, read with json (independent of the CLI)"""
    return {str(p.parent): len(json.loads(p.read_text())["data"]) for p in sorted(root.rglob("dump.json"))}


def test_summary_several_directories(tmp_path):
    a, b = SAMPLES / "mlp_L1_tensor", SAMPLES / "mlp_L0_md5"
    p = run("summary", a, b)
    assert p.returncode == 0, p.stderr
    want = {**counts(a), **counts(b)}
    got = {}
    for line in p.stdout.splitlines():
        d, rest = line.split(": ", 1)
        got[d] = int(rest.split(" records")[0])
    assert got == want and len(got) >= 2
    # a directory without a dump: the others are still listed, exit 2 names it
    p = run("summary", tmp_path, a)
    assert p.returncode == 2
    assert str(tmp_path) in p.stderr
    assert len(p.stdout.splitlines()) == len(counts(a))


def test_closed_pipe_is_a_quiet_exit():
    # the reader is gone before msprobe writes its first line: every write fails with EPIPE
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run(
            [str(CLI), "summary", SAMPLES, SAMPLES], stdout=w, stderr=subprocess.PIPE, text=True, timeout=60
        )
    finally:
        os.close(w)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    # and through a shell pipeline, as a user types it (pipefail: msprobe's own status counts)
    sh = subprocess.run(
        ["bash", "-c", f"set -o pipefail; '{CLI}' summary '{SAMPLES}' '{SAMPLES}' | head -1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert sh.returncode == 0 and sh.stderr == "", sh
    assert len(sh.stdout.splitlines()) == 1
