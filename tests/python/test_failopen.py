"""The host job never breaks: bad configuration and unusable dump paths give one clear error
line, capture stays off, and the process carries on."""

from __future__ import annotations

import os
from pathlib import Path

from recorder_testutil import run_child

BODY = """
from msprobe import _native as n
rc = n.lib.msprobe_init(None)
print("init", rc)
print("start", n.lib.msprobe_start())
r = n.lib.msprobe_record_begin(b"Functional.relu.0.forward")
print("record", bool(r))
n.lib.msprobe_record_end(r)
print("job finished")
"""


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "[ERROR]" in line]


def test_bad_config_value_names_key_and_value(tmp_path: Path) -> None:
    p = run_child(BODY, {"MSPROBE_LEVEL": "L9", "MSPROBE_DUMP_PATH": str(tmp_path / "d")})
    assert p.returncode == 0 and "job finished" in p.stdout
    assert "init -1" in p.stdout and "record False" in p.stdout
    errs = error_lines(p.stderr)
    assert len(errs) == 1, p.stderr
    assert "MSPROBE_LEVEL" in errs[0] and '"L9"' in errs[0] and '"L0"' in errs[0]
    assert not (tmp_path / "d").exists()


def test_malformed_config_file(tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text('{"task": "statistics", "level": ')
    p = run_child(BODY, {"MSPROBE_CONFIG": str(cfg)})
    assert p.returncode == 0 and "job finished" in p.stdout
    errs = error_lines(p.stderr)
    assert len(errs) == 1 and str(cfg) in errs[0] and "not valid JSON" in errs[0], p.stderr


def test_uncreatable_dump_path(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    p = run_child(BODY, {"MSPROBE_DUMP_PATH": str(blocker / "dump")})
    assert p.returncode == 0 and "job finished" in p.stdout
    assert "start 0" in p.stdout and "record False" in p.stdout
    errs = error_lines(p.stderr)
    assert len(errs) == 1 and "cannot create the dump directory" in errs[0], p.stderr


def test_symlinked_dump_path_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    os.symlink(real, link)
    p = run_child(BODY, {"MSPROBE_DUMP_PATH": str(link)})
    assert p.returncode == 0 and "start 0" in p.stdout
    assert "symbolic link" in p.stderr
    assert list(real.iterdir()) == []


def test_earlier_dump_is_moved_aside_not_overwritten(tmp_path: Path) -> None:
    env = {"MSPROBE_DUMP_PATH": str(tmp_path / "d")}
    assert run_child(BODY, env).returncode == 0
    first = (tmp_path / "d/step0/rank/dump.json").read_text()
    p = run_child(BODY, env)
    assert p.returncode == 0 and "moved to" in p.stderr
    aside = [x for x in (tmp_path / "d/step0").iterdir() if x.name.startswith("rank.replaced-")]
    assert len(aside) == 1 and (aside[0] / "dump.json").read_text() == first


def test_forked_child_records_nothing_and_never_hangs(tmp_path: Path) -> None:
    code = """
import os, ctypes
from msprobe import _native as n
assert n.lib.msprobe_init(None) == 0
assert n.lib.msprobe_start() == 1
pid = os.fork()
if pid == 0:
    # The child has no writer thread: every record call must be a cheap no-op.
    for i in range(20000):
        r = n.lib.msprobe_record_begin(("Torch.child.%d.forward" % i).encode())
        assert not r
        n.lib.msprobe_record_end(r)
    os._exit(0)
_, status = os.waitpid(pid, 0)
assert status == 0, status
r = n.lib.msprobe_record_begin(b"Torch.parent.0.forward")
n.lib.msprobe_record_section(r, b"input_args")
n.lib.msprobe_record_add_int(r, None, None, 1)
n.lib.msprobe_record_end(r)
print("job finished")
"""
    p = run_child(code, {"MSPROBE_DUMP_PATH": str(tmp_path / "d")}, timeout=60)
    assert p.returncode == 0 and "job finished" in p.stdout, p.stderr
    import json

    data = json.loads((tmp_path / "d/step0/rank/dump.json").read_text())["data"]
    assert list(data) == ["Torch.parent.0.forward"]
