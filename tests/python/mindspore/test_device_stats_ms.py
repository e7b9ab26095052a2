"""MindSpore Ascend statistics on the device (issue #21, python/msprobe/mindspore/devstats.py).

One PyNative script runs on the simulator's Ascend device three times under msprobe.mindspore at
L1, task statistics: with device statistics (MSPROBE_DEVICE_STATS=1, batches of 8), with the
host path (asnumpy(): the recorder's statistics over the exact bytes), and on CPU. The script
uses elementwise ops only, so the tensors are the same on both devices. Checked: the same records,
keys and key order; Max/Min exact; Mean/Norm within the README tolerance of the host paths;
f16/bf16/int32/f64/0-d/NaN/Inf/empty/bool; the files complete after stop(); and, from the
simulator's counters (CANNSIM_STATS), that the device path moves at most 64 B per tensor to the
host with fewer waits, where the host path copies every tensor whole.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mindspore")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from recorder_testutil import CLI, LIB, LIB64, REPO, run_counted, sim_env  # noqa: E402
from test_device_stats_npu import (  # noqa: E402
    check_equal_but_ambiguous,
    compare,
    d2h,
    leaves,
    waits,
)

pytestmark = pytest.mark.skipif(
    not (LIB64 / "libascendcl.so").exists(), reason="the simulator's CANN tree (scripts/build.sh) is absent"
)

SCRIPT = r"""
import os, shutil, sys
import numpy as np
import mindspore as ms
from mindspore import Tensor, mint
ms.set_context(mode=ms.PYNATIVE_MODE, device_target=sys.argv[1])
from msprobe.mindspore import PrecisionDebugger
out = sys.argv[2]
base = Tensor(np.random.default_rng(0).standard_normal((64, 48)).astype(np.float32))
dbg = PrecisionDebugger(dump_path=out, task="statistics", level="L1")
x = base * 1.0                                   # on the device before the window
dbg.start()
a = mint.add(mint.mul(x, 3.0), 1.0)              # f32
h = mint.mul(x.astype(ms.float16), 2.0)          # f16
b = mint.add(x.astype(ms.bfloat16), 1.0)         # bf16
i = mint.add(mint.mul(x, 100.0).astype(ms.int32), 7)   # int32: reduced as float32
d = mint.mul(x.astype(ms.float64), 0.5)          # f64: reduced as float32
s = mint.mul(x[0, 0], 2.0)                       # 0-d f32
inf = mint.div(x, mint.sub(x, x))                # +-inf (x - x is +0)
nn = mint.sub(inf, inf)                          # all NaN
g = mint.logical_not(x.astype(ms.bool_))        # bool, all False: any / all of the cast
gm = mint.gt(x, 0.0)                             # bool, mixed
gs = mint.gt(s, 0.0)                             # bool, 0-d
dbg.stop()
shutil.copyfile(os.path.join(out, "step0", "rank", "dump.json"), os.path.join(out, "after_stop.json"))
dbg.step()
"""


def ms_env(**extra: str) -> dict:
    """A MindSpore child on the simulator with this checkout's msprobe package and library."""
    return sim_env(
        MS_ALLOC_CONF="enable_vmm:False", GLOG_v="3", PYTHONPATH=str(REPO / "python"), MSPROBE_LIB=str(LIB), **extra
    )


def run(tmp: Path, name: str, device: str, extra: dict) -> tuple[Path, dict, str]:
    out = tmp / name
    stats = tmp / f"{name}.stats.json"
    src = tmp / "script.py"
    src.write_text(SCRIPT)
    counters, log = run_counted([sys.executable, str(src), device, str(out)], ms_env(**extra), stats, cwd=tmp)
    return out, counters, log


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("devstats_ms")
    return {
        "device": run(tmp, "device", "Ascend", {"MSPROBE_DEVICE_STATS": "1", "MSPROBE_DEVICE_BATCH": "8"}),
        # asnumpy() per tensor, not the non-blocking copies (devcopies.py)
        "host": run(tmp, "host", "Ascend", {"MSPROBE_DEVICE_STATS": "0", "MSPROBE_ASYNC_COPY": "0"}),
        "cpu": run(tmp, "cpu", "CPU", {}),
    }


def data(out: Path, f: str = "step0/rank/dump.json") -> dict:
    return json.loads((out / f).read_text())["data"]


def test_values_equal_host_path_and_cpu(runs):
    dev, host, cpu = data(runs["device"][0]), data(runs["host"][0]), data(runs["cpu"][0])
    assert len(dev) >= 9, list(dev)
    for ref in (host, cpu):
        check_equal_but_ambiguous(dev, ref)


def test_dtypes_inf_nan_and_0d(runs):
    dev = data(runs["device"][0])
    dtypes = {lf["dtype"] for r in dev.values() for lf in leaves(r)}
    assert {"Float16", "BFloat16", "Int32", "Float64", "Bool"} <= dtypes, dtypes
    div = [n for n in dev if n.startswith("Mint.div.")][0]
    out = list(leaves(dev[div]["output"]))[0]
    assert out["Max"] == math.inf and out["Min"] == -math.inf
    sub = [n for n in dev if n.startswith("Mint.sub.")][-1]  # inf - inf (the first is x - x)
    nan = list(leaves(dev[sub]["output"]))[0]
    assert all(math.isnan(nan[k]) for k in ("Max", "Min", "Mean", "Norm"))
    zero_d = [lf for r in dev.values() for lf in leaves(r) if lf["shape"] == [] and lf["dtype"] == "Float32"]
    assert zero_d and all(lf["Max"] == lf["Min"] == lf["Mean"] == lf["Norm"] for lf in zero_d)
    # 1.1.1's MindSpore dumps have no *_except_inf_nan keys (MindsporeDataProcessor._analyze_tensor),
    # on any path; so none is missing or uncertain either
    for run_ in runs.values():
        keys = {k for r in data(run_[0]).values() for lf in leaves(r) for k in lf}
        assert not {"Max_except_inf_nan", "Min_except_inf_nan"} & keys, keys
    assert "NaN/Inf without *_except_inf_nan: 0" in runs["device"][2]
    assert "only NaN/±inf, *_except_inf_nan written as NaN: 0" in runs["device"][2]


def test_files_complete_after_stop(runs):
    out = runs["device"][0]
    after = json.loads((out / "after_stop.json").read_text())["data"]
    assert after == data(out)


def test_counters_no_whole_tensor_copy(runs):
    tensors = sum(1 for r in data(runs["device"][0]).values() for _ in leaves(r))
    bdev, _ = d2h(runs["device"][1])
    bhost, _ = d2h(runs["host"][1])
    # 16 B per reduced tensor (bool ones too)
    assert 0 < bdev <= 64 * tensors, (bdev, tensors)
    assert bhost > 10 * 64 * 48 * 4, bhost  # the host path moves whole tensors
    assert waits(runs["device"][1]) < waits(runs["host"][1]), (
        runs["device"][1]["threads"],
        runs["host"][1]["threads"],
    )


def test_summary_counts_device_tensors(runs):
    # every leaf (bool ones too, written as booleans without Mean/Norm) and the host run's none
    # went by the device
    dev = data(runs["device"][0])
    reduced = sum(1 for r in dev.values() for lf in leaves(r))
    bools = [lf for r in dev.values() for lf in leaves(r) if lf["dtype"] == "Bool"]
    assert {(lf["Max"], lf["Min"]) for lf in bools} == {(False, False), (True, False), (True, True)}, bools
    assert all(lf["Mean"] is None and lf["Norm"] is None for lf in bools), bools
    m = re.search(r"device statistics: (\d+) tensors; never arrived \(null\): (\d+)", runs["device"][2])
    assert m and int(m.group(1)) == reduced and m.group(2) == "0", runs["device"][2][-2000:]
    assert "device statistics:" not in runs["host"][2]


KILL = r"""
import os, signal, sys
import numpy as np
import mindspore as ms
from mindspore import Tensor, mint
ms.set_context(mode=ms.PYNATIVE_MODE, device_target="Ascend")
from msprobe.mindspore import PrecisionDebugger
dbg = PrecisionDebugger(dump_path=sys.argv[1], task="statistics", level="L1")
x = Tensor(np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32))
dbg.start()
for i in range(12):
    x = mint.add(mint.mul(x, 0.5), 1.0)
os.kill(os.getpid(), signal.SIGKILL)   # 48 tensors, batches of 7: the last 6 never fetched
"""


def test_killed_before_the_fetch_loses_no_record(tmp_path):
    src = tmp_path / "kill.py"
    src.write_text(KILL)
    env = ms_env(MSPROBE_DEVICE_STATS="1", MSPROBE_DEVICE_BATCH="7")
    out = tmp_path / "dump"
    p = subprocess.run(
        [sys.executable, str(src), str(out)], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert p.returncode == -9, p.stderr[-3000:]
    r = subprocess.run([str(CLI), "recover", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "3 records recovered from their launch-time plan" in r.stdout + r.stderr, r.stdout + r.stderr
    d = data(out)
    # every call the script made, in order; the held ones with their device statistics null
    assert list(d) == [f"Mint.{op}.{i}.forward" for i in range(12) for op in ("mul", "add")]
    tensors = [lf for rec in d.values() for lf in leaves(rec)]
    assert len(tensors) == 48
    assert [lf["Max"] is None for lf in tensors] == [False] * 42 + [True] * 6
    assert all(lf["shape"] == [16, 8] and lf["dtype"] == "Float32" for lf in tensors)


_ITEMSIZE = {"Float32": 4, "Float16": 2, "BFloat16": 2, "Int32": 4, "Float64": 8, "Bool": 1}


def test_hybrid_by_size_is_the_default(runs, tmp_path):
    """Default (MSPROBE_DEVICE_STATS unset): tensors larger than MSPROBE_DEVICE_STATS_MIN_BYTES are
    reduced on the device, the others copied without blocking. Truth: each leaf's bytes
    from its dtype and shape in dump.json, the values of the asnumpy() path, the counters."""
    min_bytes = 8192  # the 64x48 float32/int32/float64 tensors reduced, f16/bf16 (6144 B), bool (3072 B), 0-d copied
    out, c, log = run(tmp_path, "hybrid", "Ascend", {"MSPROBE_DEVICE_STATS_MIN_BYTES": str(min_bytes)})
    got = data(out)
    check_equal_but_ambiguous(got, data(runs["host"][0]))
    reduced, copied = [], []
    for r in got.values():
        for lf in leaves(r):
            n = math.prod(lf["shape"]) * _ITEMSIZE[lf["dtype"]]
            (reduced if n > min_bytes else copied).append(n)
    assert len(reduced) >= 8 and len(copied) >= 4, (reduced, copied)
    # every small tensor crossed whole, each large one as its 4 float32 results (16 B); none synchronously
    x = c["copies"]["device_to_host"]
    assert x["sync"]["bytes"] == 0, x
    assert x["async"]["bytes"] == sum(copied) + 16 * len(reduced), (x, sum(copied), len(reduced))
    assert f"device statistics: {len(reduced)} tensors" in log, log[-1500:]
    assert f"copied to the host without blocking: {len(copied)}" in log, log[-1500:]


BACKWARD = r"""
import sys
import numpy as np
import mindspore as ms
from mindspore import Tensor, mint, nn
ms.set_context(mode=ms.PYNATIVE_MODE, device_target=sys.argv[1])
from msprobe.mindspore import PrecisionDebugger
class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(1)
        self.w1 = ms.Parameter(Tensor(rng.standard_normal((48, 96)).astype(np.float32) * 0.1), name="w1")
        self.w2 = ms.Parameter(Tensor(rng.standard_normal((96, 8)).astype(np.float32) * 0.1), name="w2")
    def construct(self, x):
        h = mint.nn.functional.gelu(mint.matmul(x, self.w1))
        t = mint.nn.functional.gelu(mint.matmul(h, self.w2), approximate="tanh")
        return mint.mean(t * t)
net = Net()
x = Tensor(np.random.default_rng(0).standard_normal((64, 48)).astype(np.float32))
grad = ms.grad(net, grad_position=0, weights=net.trainable_params())
dbg = PrecisionDebugger(dump_path=sys.argv[2], task=sys.argv[3], level="L1")
dbg.start()
gx, (gw1, gw2) = grad(x)
dbg.stop()
dbg.step()
np.savez(sys.argv[2] + ".npz", x=x.asnumpy(), w1=net.w1.asnumpy(), w2=net.w2.asnumpy(), gx=gx.asnumpy(),
         gw1=gw1.asnumpy(), gw2=gw2.asnumpy())
"""


def numpy_grads(x, w1, w2):
    """The BACKWARD net's gradients in float64: L = mean(gelu_tanh(gelu_erf(x w1) w2)^2)."""
    from math import erf

    a1 = x @ w1
    phi = np.exp(-(a1**2) / 2) / np.sqrt(2 * np.pi)
    cdf = 0.5 * (1 + np.vectorize(erf)(a1 / np.sqrt(2)))
    h = a1 * cdf
    a2 = h @ w2
    c = np.sqrt(2 / np.pi)
    th = np.tanh(c * (a2 + 0.044715 * a2**3))
    t = 0.5 * a2 * (1 + th)
    d2 = 2 * t / t.size * (0.5 * (1 + th) + 0.5 * a2 * (1 - th**2) * c * (1 + 3 * 0.044715 * a2**2))
    d1 = (d2 @ w2.T) * (cdf + a1 * phi)
    return {"gx": d1 @ w1.T, "gw1": x.T @ d1, "gw2": h.T @ d2}


def test_hybrid_with_backward_against_exact(tmp_path):
    """Backward records (mint gelu, erf and tanh forms) at the default hybrid: the gradients equal
    numpy's (the simulator's gelu backward once read its mode as an int64 where CANN passes a C
    string: the gradient buffer was never written), and the reduced leaves equal float64 over the
    tensor-mode files of the same run."""
    src = tmp_path / "bwd.py"
    src.write_text(BACKWARD)

    def go(name, task, extra):
        out = tmp_path / name
        argv = [sys.executable, str(src), "Ascend", str(out), task]
        _, log = run_counted(argv, ms_env(**extra), tmp_path / f"{name}.stats.json", cwd=tmp_path)
        a = np.load(str(out) + ".npz")
        want = numpy_grads(*(a[k].astype(np.float64) for k in ("x", "w1", "w2")))
        for k, w in want.items():
            np.testing.assert_allclose(a[k], w, rtol=1e-4, atol=1e-4 * np.abs(w).max(), err_msg=k)
        f = out / "step0" / "rank" / "dump.json"
        return json.loads(f.read_text())["data"], f.parent, log

    min_bytes = 8192
    hy, _, log = go("hybrid", "statistics", {"MSPROBE_DEVICE_STATS_MIN_BYTES": str(min_bytes)})
    tn, tdir, _ = go("tensor", "tensor", {"MSPROBE_DEVICE_STATS": "0"})
    assert list(hy) == list(tn)
    assert sum(1 for n in hy if n.startswith("MintFunctional.gelu") and n.endswith(".backward")) == 2, list(hy)
    reduced = 0
    for name in hy:
        for h, t in zip(leaves(hy[name]), leaves(tn[name])):
            x = np.load(tdir / "dump_tensor_data" / t["data_name"]).astype(np.float64)
            if x.size * 4 <= min_bytes or h["dtype"] != "Float32":
                continue
            reduced += 1
            scale = float(np.abs(x).max())
            norm = float(np.linalg.norm(x.ravel()))
            assert (h["Max"], h["Min"]) == (x.max(), x.min()), (name, h)
            assert abs(h["Mean"] - x.mean()) <= 1e-6 * (abs(x.mean()) + scale), (name, h["Mean"], x.mean())
            assert abs(h["Norm"] - norm) <= 1e-6 * norm, (name, h["Norm"], norm)
    assert reduced >= 6, reduced
    assert f"device statistics: {reduced} tensors" in log, log[-1500:]


SIDE = r"""
import sys
import numpy as np
import mindspore as ms
from mindspore import Tensor, mint
ms.set_context(mode=ms.PYNATIVE_MODE, device_target="Ascend")
from msprobe.mindspore import PrecisionDebugger
x = Tensor(np.random.default_rng(0).standard_normal((64, 48)).astype(np.float32)) * 1.0
dbg = PrecisionDebugger(dump_path=sys.argv[1], task="statistics", level="L1")
side = ms.runtime.Stream()
side.wait_stream(ms.runtime.current_stream())
dbg.start()
if sys.argv[2] == "reduce-on-side":
    with ms.runtime.StreamCtx(side):
        a = mint.add(mint.mul(x, 3.0), 1.0)
    dbg.stop()   # fetched on the default stream while the side stream still runs its delayed kernels
else:  # reduced on the default stream, fetched on the side stream
    a = mint.add(mint.mul(x, 3.0), 1.0)
    with ms.runtime.StreamCtx(side):
        dbg.stop()
ms.runtime.current_stream().wait_stream(side)
dbg.step()
"""


def test_results_of_a_side_stream_are_waited_for(tmp_path):
    """As for torch (msprobe.core.devstats orders the streams for both): results reduced under
    ``StreamCtx(side)`` and fetched on the default stream, and the reverse. With every simulated
    kernel delayed, an unordered fetch read the results before they were written (Max 0.0 where
    10.2 is right, silently). Truth: the blocking host path."""
    src = tmp_path / "side.py"
    src.write_text(SIDE)
    for case in ("reduce-on-side", "fetch-on-side"):
        got = {}
        for name, ds in [("device", "1"), ("host", "0")]:
            out = tmp_path / case / name
            extra = {"MSPROBE_DEVICE_STATS": ds, "MSPROBE_ASYNC_COPY": "0", "CANNSIM_KERNEL_DELAY_US": "20000"}
            run_counted([sys.executable, str(src), str(out), case], ms_env(**extra), tmp_path / f"{case}.{name}.json")
            got[name] = data(out)
        assert len(got["device"]) == 2, case
        assert compare(got["device"], got["host"]) == [], case
