"""A `stop()` that must wait for the writer to drain a large tensor dump shows its progress: a bar on a
terminal, log lines with MSPROBE_PROGRESS=1 when stderr is not one, nothing by default off a terminal,
nothing when the wait is short (MSPROBE_PROGRESS_DELAY_MS, default 1 s).

The workload ends its window with four large records (a 32 MiB tensor in and out each, task tensor),
so tensor bytes are still queued when stop() begins waiting, even if the main thread is held up
for a while after the last one (one record alone could be written by then on a busy machine).
Truth for the byte counts: the sizes of the tensor files on disk after the run (the bytes the
progress counts are those files' bytes).
"""

import os
import pty
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from recorder_testutil import LIB, REPO

SCRIPT = """
import sys
import torch
from msprobe.pytorch import PrecisionDebugger

debugger = PrecisionDebugger(dump_path=sys.argv[1], task="tensor", level="L1")
x = torch.randn({n})
debugger.start()
for _ in range({reps}):
    torch.relu(x)
debugger.stop()
print("stopped")
"""

LINE = re.compile(r"waiting for the writer: (\d+) of (\d+) queued tensor bytes written \((\d+)%\)")
DONE = re.compile(r"the writer has written the (\d+) queued tensor bytes in")


def run(tmp: Path, env: dict[str, str], n: int = 8 << 20, tty: bool = False, reps: int = 4) -> tuple[int, str]:
    """(exit code, stderr text) of the workload."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("MSPROBE_")}
    e.update(PYTHONPATH=str(REPO / "python"), MSPROBE_LIB=str(LIB), **env)
    tmp.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-c", textwrap.dedent(SCRIPT.format(n=n, reps=reps)), str(tmp / "dump")]
    if not tty:
        p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=300)
        assert "stopped" in p.stdout, p.stderr
        return p.returncode, p.stderr
    master, slave = pty.openpty()
    p = subprocess.Popen(cmd, env=e, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return p.wait(timeout=300), out.decode(errors="replace")


def file_bytes(tmp: Path) -> int:
    return sum(f.stat().st_size for f in (tmp / "dump").rglob("*.pt"))


def test_asked_off_a_terminal_logs_progress(tmp_path):
    rc, err = run(tmp_path, {"MSPROBE_PROGRESS": "1", "MSPROBE_PROGRESS_DELAY_MS": "0"})
    assert rc == 0, err
    lines = [tuple(map(int, m.groups())) for m in LINE.finditer(err)]
    assert lines, err
    total = lines[0][1]
    on_disk = file_bytes(tmp_path)
    assert 0 < total <= on_disk, (total, on_disk)
    assert all(t == total and d <= t for d, t, _ in lines)
    done = [int(m.group(1)) for m in DONE.finditer(err)]
    assert done == [total], err
    # more than the last 32 MiB input and output alone
    assert total >= 2 * (32 << 20)


def test_nothing_by_default_off_a_terminal_nor_when_short(tmp_path):
    rc, err = run(tmp_path / "a", {"MSPROBE_PROGRESS_DELAY_MS": "0"})
    assert rc == 0 and not LINE.search(err) and not DONE.search(err), err
    assert file_bytes(tmp_path / "a") > 0
    # asked, but the wait is far shorter than the default second
    rc, err = run(tmp_path / "b", {"MSPROBE_PROGRESS": "1"}, n=1000, reps=1)
    assert rc == 0 and not LINE.search(err) and not DONE.search(err), err
    rc, err = run(tmp_path / "c", {"MSPROBE_PROGRESS": "0", "MSPROBE_PROGRESS_DELAY_MS": "0"}, tty=True)
    assert rc == 0 and "writing tensor files" not in err, err


def test_bar_on_a_terminal(tmp_path):
    rc, out = run(tmp_path, {"MSPROBE_PROGRESS_DELAY_MS": "0"}, tty=True)
    assert rc == 0, out
    assert "msprobe stop(): writing tensor files" in out, out
    assert not LINE.search(out), out  # the bar, not the log lines


def test_bad_value_is_named(tmp_path):
    rc, err = run(tmp_path, {"MSPROBE_PROGRESS": "yes", "MSPROBE_PROGRESS_DELAY_MS": "0"}, n=1000)
    assert rc == 0
    assert err.count('MSPROBE_PROGRESS has value "yes"') == 1, err
