"""A job dumping into a disk that fills up (tests/python/pytorch/test_diskfull.py runs it into a
small tmpfs and into a roomy directory, and compares): 3 steps of 40 iterations of torch.add and
torch.relu on a seeded 64x64 tensor, at L1 with the task given (tensor or statistics). It must
run to its end whatever the disk does."""

import sys

import torch

from msprobe.pytorch import PrecisionDebugger

out, task = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
dbg = PrecisionDebugger(task=task, level="L1", dump_path=out)
x = torch.randn(64, 64)
for _step in range(3):
    dbg.start()
    for _i in range(40):
        x = torch.relu(torch.add(x, 0.001))
    dbg.stop()
    dbg.step()
assert x.shape == (64, 64)
print("job finished")
