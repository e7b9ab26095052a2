"""L1 statistics/md5: kwargs, non-tensor arguments, tuple/namedtuple outputs, fp16/bf16,
NaN/Inf, empty and 0-d tensors; leaves checked against torch reductions and zlib."""

import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from _truth import check_leaf, dump
from msprobe.pytorch import PrecisionDebugger

out = sys.argv[1]
os.environ["MSPROBE_SUMMARY_MODE"] = "md5"
dbg = PrecisionDebugger(task="statistics", level="L1", dump_path=out)
torch.manual_seed(0)
x = torch.randn(4, 6)
h = x.half()
b = x.bfloat16()
bad = torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), 2.0])
inf = torch.tensor([float("inf"), 1.0, -2.0])
neg = torch.complex(torch.tensor([1.0, 2.0]), torch.tensor([3.0, -4.0])).conj().imag  # real, with the negative bit
dbg.start()
torch.add(x, other=x, alpha=2)  # Torch.add.0: kwargs
torch.mul(h, 1.5)  # Torch.mul.0: fp16
torch.mul(b, 2)  # Torch.mul.1: bf16
torch.abs(bad)  # Torch.abs.0
torch.abs(inf)  # Torch.abs.1
x[1:3, ::2]  # Tensor.__getitem__.0
x[..., None]  # Tensor.__getitem__.1
x.reshape(torch.Size([3, 8]))  # Tensor.reshape.0
torch.max(x, dim=1)  # Torch.max.0: structseq output
torch.split(x, [1, 3], dim=0)  # Torch.split.0: tuple output
torch.add(x, np.float32(2.0))  # Torch.add.1: numpy scalar
torch.sum(x, dim=0, dtype=torch.float64)  # Torch.sum.0: dtype kwarg
torch.einsum("ij,kj->ik", x, x)  # Torch.einsum.0: str arg
F.softmax(x, dim=-1)  # Functional.softmax.0 (Tensor.softmax inside: not recorded)
torch.abs(torch.empty(0, 3))  # Torch.abs.2: empty
torch.abs(torch.tensor(-2.5))  # Torch.abs.3: 0-d
torch.abs(neg)  # Torch.abs.4: negative-bit view
torch.arange(4, device="cpu")  # Torch.arange.0: device= as a string (1.1.1: a torch.device value)
torch.eye(2, device=torch.device("cpu"))  # Torch.eye.0: device= as a torch.device
dbg.stop()
d = dump(out)["data"]
assert list(d) == [
    "Torch.add.0.forward",
    "Torch.mul.0.forward",
    "Torch.mul.1.forward",
    "Torch.abs.0.forward",
    "Torch.abs.1.forward",
    "Tensor.__getitem__.0.forward",
    "Tensor.__getitem__.1.forward",
    "Tensor.reshape.0.forward",
    "Torch.max.0.forward",
    "Torch.split.0.forward",
    "Torch.add.1.forward",
    "Torch.sum.0.forward",
    "Torch.einsum.0.forward",
    "Functional.softmax.0.forward",
    "Torch.abs.2.forward",
    "Torch.abs.3.forward",
    "Torch.abs.4.forward",
    "Torch.arange.0.forward",
    "Torch.eye.0.forward",
], list(d)
r = d["Torch.add.0.forward"]
check_leaf(r["input_args"][0], x)
check_leaf(r["input_kwargs"]["other"], x)
assert r["input_kwargs"]["alpha"] == {"type": "int", "value": 2}
check_leaf(r["output"][0], torch.add(x, x, alpha=2))
check_leaf(d["Torch.mul.0.forward"]["input_args"][0], h)
check_leaf(d["Torch.mul.0.forward"]["output"][0], h * 1.5)
assert d["Torch.mul.0.forward"]["input_args"][1] == {"type": "float", "value": 1.5}
check_leaf(d["Torch.mul.1.forward"]["output"][0], b * 2)
a0 = d["Torch.abs.0.forward"]["input_args"][0]
check_leaf(a0, bad)
assert a0["Max_except_inf_nan"] == 2.0 and a0["Min_except_inf_nan"] == 1.0, a0
a1 = d["Torch.abs.1.forward"]["input_args"][0]
assert a1["Max"] == float("inf") and a1["Max_except_inf_nan"] == 1.0 and "Min_except_inf_nan" not in a1
g0 = d["Tensor.__getitem__.0.forward"]
assert g0["input_args"][1] == [{"type": "slice", "value": [1, 3, None]}, {"type": "slice", "value": [None, None, 2]}]
check_leaf(g0["output"][0], x[1:3, ::2])
assert d["Tensor.__getitem__.1.forward"]["input_args"][1] == [{"type": "ellipsis", "value": "..."}, None]
assert d["Tensor.reshape.0.forward"]["input_args"][1] == {"type": "torch.Size", "value": [3, 8]}
mx = torch.max(x, dim=1)
o = d["Torch.max.0.forward"]["output"]
assert len(o) == 2
check_leaf(o[0], mx.values)
check_leaf(o[1], mx.indices)
assert d["Torch.max.0.forward"]["input_kwargs"] == {"dim": {"type": "int", "value": 1}}
o = d["Torch.split.0.forward"]["output"]
assert len(o) == 2
check_leaf(o[0], x[:1])
check_leaf(o[1], x[1:])
assert d["Torch.split.0.forward"]["input_args"][1] == [{"type": "int", "value": 1}, {"type": "int", "value": 3}]
assert d["Torch.add.1.forward"]["input_args"][1] == {"type": "float32", "value": 2.0}
assert d["Torch.sum.0.forward"]["input_kwargs"]["dtype"] == {"type": "torch.dtype", "value": "torch.float64"}
check_leaf(d["Torch.sum.0.forward"]["output"][0], torch.sum(x, dim=0, dtype=torch.float64))
assert d["Torch.einsum.0.forward"]["input_args"][0] == {"type": "str", "value": "ij,kj->ik"}
e = d["Torch.abs.2.forward"]["input_args"][0]
assert e["Max"] is None and e["md5"] == "00000000" and e["shape"] == [0, 3]
z = d["Torch.abs.3.forward"]["input_args"][0]
assert z["Norm"] == -2.5 and z["shape"] == []
assert neg.is_neg()
check_leaf(d["Torch.abs.4.forward"]["input_args"][0], neg.resolve_neg())
# msprobe 1.1.1's analyze_device_in_kwargs: a string as it is, a torch.device as "type:index"
assert d["Torch.arange.0.forward"]["input_kwargs"]["device"] == {"type": "torch.device", "value": "cpu"}
assert d["Torch.eye.0.forward"]["input_kwargs"]["device"] == {"type": "torch.device", "value": "cpu:None"}
print("OK")
