"""A conv net (Conv2d, BatchNorm, in-place ReLU, MaxPool, Linear) at mix/tensor: it trains
under the hooks, every .pt loads with weights_only=True and equals the live tensor (captured
by our own forward hooks), and the leaf statistics are torch's."""

import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from _truth import check_leaf, dump, rank_dir
from msprobe.pytorch import PrecisionDebugger, seed_all

out = sys.argv[1]
seed_all(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(8 * 4 * 4, 5)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.relu(self.bn(self.conv1(x)))), 1))


net = Net()
live = {}


def snap(t):
    return t.detach().clone().requires_grad_(t.requires_grad)


for name in ("conv1", "fc"):
    getattr(net, name).register_forward_hook(lambda m, a, o, n=name: live.__setitem__(n, (snap(a[0]), snap(o))))
dbg = PrecisionDebugger(task="tensor", level="mix", dump_path=out, model=net)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x = torch.randn(2, 3, 8, 8)
y = torch.tensor([1, 3])
dbg.start()
loss = F.cross_entropy(net(x), y)
loss.backward()
opt.step()
opt.zero_grad()
dbg.stop()
dbg.step()
d = dump(out)["data"]
names = list(d)
for n in (
    "Functional.conv2d.0.forward",
    "Module.conv1.Conv2d.forward.0",
    "Functional.batch_norm.0.forward",
    "Module.bn.BatchNorm2d.forward.0",
    "Functional.relu.0.forward",
    "Module.relu.ReLU.forward.0",
    "Functional.max_pool2d.0.forward",
    "Torch.flatten.0.forward",
    "Module.fc.Linear.forward.0",
    "Functional.conv2d.0.backward",
    "Module.conv1.Conv2d.backward.0",
    "Module.fc.Linear.backward.0",
):
    assert n in d, (n, names)
assert names.index("Functional.conv2d.0.forward") < names.index("Module.conv1.Conv2d.forward.0")
tdir = os.path.join(rank_dir(out), "dump_tensor_data")
for mod, rec in (("conv1", "Module.conv1.Conv2d.forward.0"), ("fc", "Module.fc.Linear.forward.0")):
    inp, outp = live[mod]
    for leaf, t in ((d[rec]["input_args"][0], inp), (d[rec]["output"][0], outp)):
        check_leaf(leaf, t, rec)
        f = torch.load(os.path.join(tdir, leaf["data_name"]), weights_only=True)
        assert f.dtype == t.dtype and torch.equal(f, t.detach()), rec
# parameters recorded as positional inputs of the functional equal the module's weights at that time
w = torch.load(os.path.join(tdir, d["Functional.conv2d.0.forward"]["input_args"][1]["data_name"]), weights_only=True)
assert w.shape == net.conv1.weight.shape
construct = json.load(open(os.path.join(rank_dir(out), "construct.json")))
assert construct["Functional.conv2d.0.forward"] == "Module.conv1.Conv2d.forward.0"
print("OK", len(d))
