"""In-place ops: input_args[0] is recorded after the op, as msprobe 1.1.1 does (so it shows the
new value), or before it with MSPROBE_INPUTS_PRE_CALL=1 (argv[2] == "pre"); the output after it.
See README "PyTorch layer"."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _truth import check_leaf, dump
from msprobe.pytorch import PrecisionDebugger

out = sys.argv[1]
pre = len(sys.argv) > 2 and sys.argv[2] == "pre"
if pre:
    os.environ["MSPROBE_INPUTS_PRE_CALL"] = "1"
dbg = PrecisionDebugger(config_path=None, task="statistics", level="L1", dump_path=out)
torch.manual_seed(0)
x = torch.randn(5, 5)
y = torch.randn(5, 5)
before = [x.clone()]
dbg.start()
x.add_(y, alpha=0.5)
before.append(x.clone())
x += y
before.append(x.clone())
torch.relu_(x)
dbg.stop()
d = dump(out)["data"]
assert list(d) == ["Tensor.add_.0.forward", "Tensor.__iadd__.0.forward", "Torch.relu_.0.forward"], list(d)
for i, name in enumerate(d):
    if pre:
        check_leaf(d[name]["input_args"][0], before[i], name + " input (pre-op)")
    else:  # the tensor as it is after the op
        check_leaf(d[name]["input_args"][0], before[i + 1] if i + 1 < len(before) else x, name + " input (post-op)")
check_leaf(d["Tensor.add_.0.forward"]["output"][0], before[1])
check_leaf(d["Torch.relu_.0.forward"]["output"][0], x)
assert d["Tensor.add_.0.forward"]["input_kwargs"] == {"alpha": {"type": "float", "value": 0.5}}
print("OK")
