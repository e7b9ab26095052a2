"""Rank filter: a process that is not distributed counts as rank 0 (README)."""

import json
import os
import sys

import torch

from msprobe.pytorch import PrecisionDebugger

out, ranks = sys.argv[1], sys.argv[2]
cfg = os.path.join(os.path.dirname(out), os.path.basename(out) + ".json")
json.dump({"task": "statistics", "level": "L1", "dump_path": out, "rank": json.loads(ranks)}, open(cfg, "w"))
dbg = PrecisionDebugger(config_path=cfg)
dbg.start()
torch.add(torch.ones(2), 1)
dbg.stop()
dbg.step()
# (the process's journal, .msprobe-journal-PID, sits beside the step directories until exit)
print("OK", os.path.exists(out) and [f for f in os.listdir(out) if not f.startswith(".msprobe-journal-")])
