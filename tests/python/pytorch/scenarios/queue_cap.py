"""L1 tensor task with a writer queue smaller than one op's tensors (the test sets
MSPROBE_QUEUE_MB=1 and MSPROBE_ON_QUEUE_FULL from argv): torch.sum of 300000 floats (its input
alone, 1.2 MB, exceeds the queue) and torch.add of two such tensors (3.6 MB). In block mode
every tensor file is written and holds torch's values; in drop mode a record keeps all of its
tensor files or none (no data_name then), and every file written holds torch's values."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _truth import check_leaf, dump, rank_dir
from msprobe.pytorch import PrecisionDebugger

out, mode = sys.argv[1], sys.argv[2]
assert os.environ["MSPROBE_QUEUE_MB"] == "1"
os.environ["MSPROBE_ON_QUEUE_FULL"] = mode
dbg = PrecisionDebugger(task="tensor", level="L1", dump_path=out)
x = torch.arange(300_000, dtype=torch.float32) * 0.25 - 1000.0
w = torch.linspace(-3.0, 3.0, 300_000)
small_in = [torch.full((4,), float(i)) for i in range(20)]
dbg.start()
s = torch.sum(x)
y = torch.add(x, w)
small = [torch.mul(t, 2.0) for t in small_in]
dbg.stop()

d = dump(out)["data"]
tensors = os.path.join(rank_dir(out), "dump_tensor_data")
expected = {
    "Torch.sum.0.forward": ([x], [s]),
    "Torch.add.0.forward": ([x, w], [y]),
}
for i, r in enumerate(small):
    expected[f"Torch.mul.{i}.forward"] = ([small_in[i]], [r])
assert sorted(d) == sorted(expected), sorted(d)
files = 0
for name, (ins, outs) in expected.items():
    leaves = [leaf for leaf in d[name]["input_args"] if leaf.get("type") == "torch.Tensor"] + d[name]["output"]
    truth = ins + outs
    assert len(leaves) == len(truth), (name, leaves)
    named = [leaf for leaf in leaves if "data_name" in leaf]
    if mode == "block":
        assert len(named) == len(leaves), (name, "a tensor lost its file in block mode")
    else:
        assert len(named) in (0, len(leaves)), (name, f"{len(named)} of {len(leaves)} files kept")
    for leaf, t in zip(leaves, truth):
        check_leaf(leaf, t, name)
        if "data_name" in leaf:
            got = torch.load(os.path.join(tensors, leaf["data_name"]), weights_only=True)
            assert torch.equal(got, t), (name, leaf["data_name"])
            files += 1
assert files == len(os.listdir(tensors)), "tensor files on disk that dump.json does not name"
assert mode == "drop" or files == 5 + 2 * len(small)
print("OK", files)
