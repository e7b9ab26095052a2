"""torch.distributed at L1 in a one-process gloo group: the collective is recorded, its
ProcessGroup argument written as msprobe writes it (group_ranks, group_id = md5 of str(ranks),
computed here with hashlib), and the dump goes to the process's rank directory."""

import hashlib
import json
import os
import sys

import torch
import torch.distributed as dist

from msprobe.pytorch import PrecisionDebugger

out = sys.argv[1]
dist.init_process_group("gloo", init_method=f"file://{out}.store", rank=0, world_size=1)
group = dist.new_group([0])
dbg = PrecisionDebugger(task="statistics", level="L1", dump_path=out)
dbg.start()
t = torch.arange(4.0)
dist.all_reduce(t, group=group)
dbg.stop()
dbg.step()
data = json.load(open(os.path.join(out, "step0", "rank0", "dump.json")))["data"]
name = next(n for n in data if n.startswith("Distributed.all_reduce."))
leaf = data[name]["input_kwargs"]["group"]
ranks = dist.get_process_group_ranks(group)
want = {"type": "torch.ProcessGroup", "group_ranks": ranks, "group_id": hashlib.md5(str(ranks).encode()).hexdigest()}
assert leaf == want and list(leaf) == list(want), (leaf, want)
dist.destroy_process_group()
print("OK")
