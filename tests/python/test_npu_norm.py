"""Mean and Norm of torch_npu device tensors that reach the host (L1, small tensors: the
non-blocking copies of devcopies.py, and the blocking `.cpu()` path with MSPROBE_ASYNC_COPY=0).

msprobe 1.1.1 reduces them on the device, which is accurate, in the tensor's dtype, and inside the
user's autocast (where `norm` gives float32). CPU torch's float32 and 16-bit reductions of long
tensors are not accurate (`torch.full((100000,), 0.1)`: Norm 31.623825 for 31.622777; in float16
one ulp off), so the host copy's Mean and Norm are computed in float64 and rounded to the dtype the
device's result has. Truth: numpy in float64 over the same values, rounded likewise.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from recorder_testutil import LIB, LIB64, REPO, sim_env

NPU_PY = REPO / "target" / "venv-npu" / "bin" / "python"

pytestmark = pytest.mark.skipif(
    not NPU_PY.exists() or not (LIB64 / "libascendcl.so").exists(),
    reason="target/venv-npu (scripts/setup-torchnpu.sh) or the simulator's CANN tree (scripts/build.sh) is absent",
)

SCRIPT = r"""
import json, os, sys
import torch, torch_npu  # noqa: F401
sys.path.insert(0, os.environ["MSPROBE_PY"])
from msprobe.pytorch import PrecisionDebugger
out = sys.argv[1]
dbg = PrecisionDebugger(dump_path=out, task="statistics", level="L1")
g = torch.Generator().manual_seed(0)
a = torch.full((100000,), 0.1).npu()                           # 400 KB: below the device-statistics size
w = (torch.randn(64, 256, generator=g) / 16).npu()
x = torch.randn(200, 256, generator=g).npu()
dbg.start()
y = torch.mul(a, 1.0)                                          # Torch.mul.0: float32
h = torch.mul(a.half(), 1.0)                                   # Torch.mul.1: float16
with torch.autocast("npu", dtype=torch.float16):
    z = torch.nn.functional.linear(x, w)                       # Functional.linear.0: float16 under autocast
dbg.stop()
with open(out + ".values.json", "w") as f:
    json.dump({"mul0": y.cpu().double().tolist(), "mul1": h.cpu().double().tolist(),
               "linear0": z.cpu().double().flatten().tolist()}, f)
"""


def expected(values: list[float], mean_dtype, norm_dtype) -> tuple[float, float]:
    v = np.asarray(values, dtype=np.float64)
    return float(mean_dtype(v.mean())), float(norm_dtype(np.sqrt(np.dot(v, v))))


@pytest.mark.parametrize("async_copy", ["1", "0"])
def test_device_tensor_mean_norm_as_the_device_computes_them(tmp_path: Path, async_copy: str) -> None:
    src = tmp_path / "norm.py"
    src.write_text(SCRIPT)
    out = tmp_path / "dump"
    env = sim_env(MSPROBE_PY=str(REPO / "python"), MSPROBE_LIB=str(LIB), MSPROBE_ASYNC_COPY=async_copy)
    p = subprocess.run([str(NPU_PY), str(src), str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    vals = json.loads(Path(str(out) + ".values.json").read_text())
    data = json.loads((out / "step0" / "rank" / "dump.json").read_text())["data"]
    cases = {
        "Torch.mul.0.forward": ("mul0", np.float32, np.float32),
        "Torch.mul.1.forward": ("mul1", np.float16, np.float16),
        # torch.norm under autocast gives float32 (1.1.1 reduces inside the user's autocast)
        "Functional.linear.0.forward": ("linear0", np.float16, np.float32),
    }
    for name, (key, mean_dt, norm_dt) in cases.items():
        leaf = data[name]["output"][0]
        mean, norm = expected(vals[key], mean_dt, norm_dt)
        assert leaf["Norm"] == norm, (name, leaf, norm)
        assert leaf["Mean"] == mean, (name, leaf, mean)
