"""Step filter (constructor step=[1, "3-4"]) over 5 steps; counters restart each step; start()
after the last selected step ends the service (APIs restored)."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _truth import check_leaf, dump
from msprobe.pytorch import PrecisionDebugger

out = sys.argv[1]
dbg = PrecisionDebugger(task="statistics", level="L1", dump_path=out, step=[1, "3-4"])
orig_add = torch.add
xs = [torch.full((3,), float(s)) for s in range(6)]
for s in range(6):
    dbg.start()
    x = xs[s]
    torch.add(x, 1)
    torch.add(x, 2)
    dbg.stop()
    dbg.step()
# The process's journal (.msprobe-journal-PID, removed at exit) sits beside the step directories.
assert sorted(f for f in os.listdir(out) if not f.startswith(".msprobe-journal-")) == ["step1", "step3", "step4"], (
    os.listdir(out)
)
for s in (1, 3, 4):
    d = dump(out, s)["data"]
    assert list(d) == ["Torch.add.0.forward", "Torch.add.1.forward"], list(d)
    check_leaf(d["Torch.add.0.forward"]["input_args"][0], xs[s])
assert getattr(torch.add, "__wrapped_by_msprobe__", False) is False  # restored at the 6th start
print("OK")
