"""L0 md5 with a module returning a dict and taking kwargs (no backward record for it, as 1.1.1),
forward_backward_dump_end at L0 (module hooks keep recording), module_dump at mix."""

import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(__file__))
from _truth import check_leaf, dump
from msprobe.pytorch import PrecisionDebugger, module_dump, module_dump_end

out = sys.argv[1]


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x, scale=1.0):
        h = self.lin(x) * scale
        return {"h": h, "t": (h.sum(), 3)}


class Top(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()

    def forward(self, x):
        return self.inner(x, scale=2.0)["h"]


torch.manual_seed(0)
m = Top()
extra = nn.Linear(4, 2)
os.environ["MSPROBE_SUMMARY_MODE"] = "md5"
dbg = PrecisionDebugger(level="mix", dump_path=out)
x = torch.randn(3, 4, requires_grad=True)
dbg.start(model=m)
r = m.inner(x, scale=2.0)
module_dump(extra, "MyHead")
y = extra(r["h"])
module_dump_end()
y.sum().backward()
dbg.stop()
d = dump(out)["data"]
names = list(d)
assert "Module.inner.Inner.forward.0" in d and "Module.inner.Inner.backward.0" not in d, names
assert "Module.inner.lin.Linear.backward.0" in d
rec = d["Module.inner.Inner.forward.0"]
assert rec["input_kwargs"] == {"scale": {"type": "float", "value": 2.0}}
out0 = rec["output"][0]
assert list(out0) == ["h", "t"] and out0["t"][1] == {"type": "int", "value": 3}
check_leaf(out0["h"], r["h"])
check_leaf(out0["t"][0], r["h"].sum())
check_leaf(rec["input_args"][0], x)
# module_dump: only the module's own records, nothing inside it, no API counters used inside
assert "Module.MyHead.Linear.forward.0" in d and "Module.MyHead.Linear.backward.0" in d
check_leaf(d["Module.MyHead.Linear.forward.0"]["output"][0], y)
assert [n for n in names if n.startswith("Functional.linear.")] == [
    "Functional.linear.0.forward",
    "Functional.linear.0.backward",
], names
lb = d["Module.inner.lin.Linear.backward.0"]
assert lb["input"][0]["shape"] == [3, 4] and lb["output"][0]["shape"] == [3, 4]
print("OK")
