"""The Python layers' log lines carry ``[rank R]`` once the rank is known, as the library's do.

Two real gloo ranks (torch.distributed, world size 2) run msprobe.pytorch at L1; the rank comes from
torch.distributed at start(), nowhere else. Truth: each process's own rank as torch reports it, and the
library's lines (stderr) of the same process. A line logged before start() has no rank.
"""

import re

from recorder_testutil import free_port, spawn_child

SCRIPT = """
import os, sys
import torch
import torch.distributed as dist
from msprobe.core.errors import logger
from msprobe.pytorch import PrecisionDebugger

dist.init_process_group("gloo", rank=int(os.environ["RANK"]), world_size=2)
debugger = PrecisionDebugger(dump_path=sys.argv[1] if len(sys.argv) > 1 else os.environ["DUMP"], task="statistics",
                             level="L1")
logger.info("before start")
debugger.start()
torch.relu(torch.ones(3) * dist.get_rank())
logger.info(f"after start, torch rank {dist.get_rank()}")
debugger.forward_backward_dump_end()   # one of the layer's own lines
debugger.stop()
debugger.step()
dist.barrier()
dist.destroy_process_group()
"""

LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \((\d+)\) (\[msprobe\] )?(\[rank (\d+)\] )?\[([A-Z]+)\] (.*)$")


def _lines(text: str) -> list[tuple[str, str, str, str]]:
    """(pid, rank or '', level, message) of each log line."""
    out = []
    for ln in text.splitlines():
        m = LINE.match(ln)
        if m:
            out.append((m.group(1), m.group(4) or "", m.group(5), m.group(6)))
    return out


def test_python_lines_carry_the_rank_once_known(tmp_path):
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": "2"}
    env["DUMP"] = str(tmp_path / "dump")
    procs = [spawn_child(SCRIPT, {**env, "RANK": str(r)}) for r in (0, 1)]
    outs = [p.communicate(timeout=180) for p in procs]
    for p, (_out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    for rank, (out, err) in enumerate(outs):
        py, rs = _lines(out), _lines(err)
        by_msg = {m: (r, lvl) for _, r, lvl, m in py}
        assert by_msg["before start"] == ("", "INFO"), out
        assert by_msg[f"after start, torch rank {rank}"] == (str(rank), "INFO"), out
        assert by_msg["Data needed ends here."] == (str(rank), "INFO"), out
        # The library's lines of the same process name the same rank once they carry one.
        ranked = [r for _, r, _, _ in rs if r]
        assert ranked and set(ranked) == {str(rank)}, err
        assert {pid for pid, *_ in py} == {pid for pid, *_ in rs}, (out, err)
    assert sorted(p.name for p in (tmp_path / "dump" / "step0").iterdir()) == ["rank0", "rank1"]
