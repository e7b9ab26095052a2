"""Misuse is raised where the user made it; the debugger is a process-wide singleton; seed_all
does the seed's table; dropout is neutral after import."""

import os
import random
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from msprobe.core.errors import MsprobeException
from msprobe.pytorch import PrecisionDebugger, module_dump, seed_all

out = sys.argv[1]


def raises(fn, text):
    try:
        fn()
    except MsprobeException as e:
        assert text in str(e), (text, str(e))
        return
    raise AssertionError("no MsprobeException for " + text)


raises(lambda: PrecisionDebugger(task=3), "task is invalid")
raises(lambda: PrecisionDebugger(level="L9"), "level is invalid")
raises(lambda: PrecisionDebugger(step="0"), "step is invalid, it should be a list")
raises(lambda: PrecisionDebugger(step=[-1]), "non-negative")
raises(lambda: PrecisionDebugger(step=["5-3"]), "left boundary")
raises(lambda: PrecisionDebugger(dump_path=1), "dump_path is invalid")
raises(lambda: PrecisionDebugger(config_path="/nonexistent.json"), "is not an existing file")
raises(lambda: PrecisionDebugger(model="not a module"), "model must be a torch.nn.Module")
raises(lambda: module_dump("x", "n"), "module_dump must be a torch.nn.Module")
d1 = PrecisionDebugger(level="L0", dump_path=out)
assert PrecisionDebugger(level="L1") is d1 and d1.level == "L0"  # singleton: later args ignored
raises(lambda: d1.start(), "missing the parameter 'model'")
raises(lambda: seed_all(seed=-1), "seed must be")
raises(lambda: seed_all(mode=1), "mode must be a bool")
# seed_all
seed_all(seed=42, mode=True)
assert os.environ["PYTHONHASHSEED"] == "42" and os.environ["HCCL_DETERMINISTIC"] == "True"
assert torch.are_deterministic_algorithms_enabled()
if torch.version.cuda:
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
a = (random.random(), np.random.rand(), torch.rand(1).item())
seed_all(seed=42)
assert not torch.are_deterministic_algorithms_enabled() and os.environ["HCCL_DETERMINISTIC"] == "False"
assert a == (random.random(), np.random.rand(), torch.rand(1).item())
# dropout neutralised (functional and modules), in training mode
x = torch.randn(100)
assert torch.equal(F.dropout(x, 0.5, True), x) and torch.equal(nn.Dropout(0.9).train()(x), x)
assert torch.equal(nn.Dropout2d(0.5).train()(x.view(1, 4, 25)), x.view(1, 4, 25))
print("OK")
