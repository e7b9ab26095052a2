"""stop() returns only once dump.json and the tensor files are on disk (the seed: the .pt files
are written after each API runs, dump.json is complete once stop() has run): read right after
stop(), before step(), two start/stop spans per step, task tensor."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _truth import dump, rank_dir
from msprobe.pytorch import PrecisionDebugger

out = sys.argv[1]
dbg = PrecisionDebugger(task="tensor", level="L1", dump_path=out)
N = 40
for s in range(2):
    made = []
    for span in range(2):
        dbg.start()
        for i in range(N):
            x = torch.full((4,), float(1000 * s + 100 * span + i))
            torch.add(x, 1)
            made.append(x)
        dbg.stop()
        d = dump(out, s)["data"]
        adds = [k for k in d if k.startswith("Torch.add.")]
        assert adds == [f"Torch.add.{i}.forward" for i in range(len(made))], (s, span, len(adds), len(made))
        for i, x in enumerate(made):
            name = d[f"Torch.add.{i}.forward"]["input_args"][0]["data_name"]
            t = torch.load(os.path.join(rank_dir(out, s), "dump_tensor_data", name), weights_only=True)
            assert torch.equal(t, x), (name, t, x)
    dbg.step()
print("OK")
