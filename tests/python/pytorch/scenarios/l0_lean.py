"""L0 with the modules that make backward hooking tricky: several tensor inputs (one without
grad), a non-tensor argument, a tuple output with an unused part, a dict output, a module called
twice, an in-place op on a module input, nesting, a namedtuple output (read by field name, so
its type must survive the hooks), two steps. argv: OUT MODE, MODE "lean" (what L0 uses: the
native hooks of msprobe._fastpath), "pylean" (their pure-Python twin) or "torch" (torch's full
backward hooks, what mix and 1.1.1 use): the test compares the dumps file by file."""

import os
import sys
from collections import namedtuple

import torch
import torch.nn as nn

import msprobe.pytorch.debugger as dbg_mod
import msprobe.pytorch.module_hooks as mh
from msprobe.pytorch import PrecisionDebugger

out, mode = sys.argv[1], sys.argv[2]
if mode == "torch":
    _orig = dbg_mod.hook_model
    dbg_mod.hook_model = lambda m, lean=False: _orig(m, lean=False)
elif mode == "pylean":  # the pure-Python twin of the native L0 hooks
    mh._lean_hooks = mh._LeanHooks
elif hasattr(mh.recorder, "lean_hooks"):  # "lean" with msprobe._fastpath: its native hooks
    assert type(mh._lean_hooks("Module.m.M.")).__name__ == "LeanHooks"


class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, a, b, k, c):  # b requires grad, c does not, k is an int
        return self.lin(a) * b + c * k


class Split(nn.Module):
    def forward(self, x):
        return x * 2, x + 1  # the second output is not used


MinMax = namedtuple("MinMax", ["low", "high"])


class Named(nn.Module):
    def forward(self, x):
        return MinMax(x.clamp(max=0.5), x.clamp(min=-0.5))


class Dicty(nn.Module):
    def forward(self, x):
        return {"y": x.sin()}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(4, 4)
        self.pair = Pair()
        self.split = Split()
        self.act = nn.ReLU(inplace=True)
        self.seq = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
        self.dicty = Dicty()
        self.named = Named()

    def forward(self, x, b):
        h = self.act(self.first(x))
        h = self.pair(h, b, 3, torch.ones(2, 4))
        h, _ = self.split(h)
        m = self.named(h)
        h = m.high * 2 + m.low
        h = self.act(self.seq(h))
        return self.dicty(h)["y"] + self.seq(h)


torch.manual_seed(0)
net = Net()
os.environ["MSPROBE_SUMMARY_MODE"] = "md5"
dbg = PrecisionDebugger(level="L0", dump_path=out, model=net)
for _step in range(2):
    x = torch.randn(2, 4)
    b = torch.randn(2, 4, requires_grad=True)
    dbg.start()
    net(x, b).sum().backward()
    dbg.stop()
    dbg.step()
print("OK")
