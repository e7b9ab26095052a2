"""SIGTERM/SIGINT and the program's own signal dispositions (tests/python/test_kill_matrix.py
covers the default dispositions at many points of real runs): a handler the program set is
called and the program decides (its exit finishes the dump), an ignored signal stays ignored."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from recorder_testutil import spawn_child

RECORDER = """
import ctypes, os, signal, sys, time, numpy as np
from msprobe import _native as n
{before}
assert n.lib.msprobe_init(None) == 0
assert n.lib.msprobe_start() == 1
a = np.arange(64, dtype=np.float32)
side = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
i = 0
while True:
    r = n.lib.msprobe_record_begin(("Torch.add.%d.forward" % i).encode())
    n.lib.msprobe_record_section(r, b"input_args")
    d = n.tensor(0, [64], a.ctypes.data, a.nbytes)
    n.lib.msprobe_record_add_tensor(r, None, ctypes.byref(d))
    n.lib.msprobe_record_end(r)
    if r:
        os.write(side, b"Torch.add.%d.forward\\n" % i)
    i += 1
"""


def start(tmp: Path, before: str) -> tuple[subprocess.Popen, Path, Path]:
    dump, side = tmp / "dump", tmp / "side.txt"
    code = RECORDER.format(before=before).replace("sys.argv[1]", repr(str(side)))
    p = spawn_child(code, {"MSPROBE_DUMP_PATH": str(dump)})
    deadline = time.time() + 60
    while time.time() < deadline and not (side.exists() and side.stat().st_size > 1000):
        time.sleep(0.01)
    assert side.exists() and side.stat().st_size > 1000, "the child never got to recording"
    return p, dump, side


def test_the_programs_own_handler_is_called_and_its_exit_finishes_the_dump(tmp_path: Path) -> None:
    handler = "signal.signal(signal.SIGTERM, lambda s, f: sys.exit(3))"
    p, dump, side = start(tmp_path, handler)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 3, err
    assert "run summary" in err
    assert not list(dump.glob(".msprobe-journal-*"))
    data = json.loads((dump / "step0/rank/dump.json").read_text())["data"]
    assert set(side.read_text().split()) <= set(data)


def test_an_ignored_signal_stays_ignored(tmp_path: Path) -> None:
    p, dump, side = start(tmp_path, "signal.signal(signal.SIGTERM, signal.SIG_IGN)")
    try:
        p.send_signal(signal.SIGTERM)
        time.sleep(0.5)  # the signal has landed
        before = side.stat().st_size
        deadline = time.time() + 20  # a busy machine may hold the child up for a while
        while time.time() < deadline and p.poll() is None and side.stat().st_size <= before:
            time.sleep(0.05)
        assert p.poll() is None and side.stat().st_size > before, "the process stopped recording"
    finally:
        p.kill()
        p.communicate()
