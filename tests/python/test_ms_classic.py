"""A classic-API MindSpore 2.10 CNN (Conv2d, BatchNorm2d, MaxPool2d, Dense, Dropout, SoftmaxCrossEntropyWithLogits,
Adam / Momentum, TrainOneStepCell / Model.train) on the simulated Ascend device, captured at L2 with no code change.

MindSpore sends most of this net down its aclop (GE-IR) path: the simulator's GE operator model and op_proto IR
(simulator/cxx) and its aclop kernels (simulator/src/aclop_nn*.rs) run it. Checks: 3 steps in GRAPH_MODE (jit_level
O0) and PyNative give the losses of the same script on MindSpore's CPU backend (within 1e-5); under
LD_PRELOAD=libmsprobe.so MSPROBE_LEVEL=L2 MSPROBE_SUMMARY_MODE=md5 every launch of the simulator's ground-truth
trace, aclop and aclnn, is in the dump with equal CRCs, one step directory per step, and capture changes no result.

Nets: --net cnn (the CNN above) and --net attn (LayerNorm, GELU in both forms, Tanh, Sigmoid, BatchMatMul, Softmax,
Transpose, Tile, AvgPool2d, LogSoftmax, ReduceMean: LayerNorm(Grad) and AvgPool(Grad) take the aclop path, the rest
aclnn).

Dropout: the device's mask generator is not MindSpore CPU's, so the CPU comparison runs with Dropout(p=0) (MindSpore
then launches no dropout kernel) and the capture runs keep p=0.1 so DropOutGenMask / DropOutDoMask are captured.
Runs under target/venv-ms/bin/python (scripts/setup-ms.sh).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from recorder_testutil import LIB, REPO
from test_l2 import check_fidelity
from test_ms_ascend import lib64, pytestmark  # noqa: F401  (fixture and the MindSpore skip mark)

PY = sys.executable
SCRIPT = REPO / "examples" / "train_ms_classic.py"
STEPS = 3
# Trainable parameters per net: the optimizer's update of the last one ends every step.
NPARAMS = {"cnn": 14, "attn": 6}
UPDATE = {"adam": "ApplyAdamD", "momentum": "ApplyMomentum"}
# Launches each net must show (aclop types by name, aclnn functions in full)
KINDS = {
    "cnn": [
        "Conv2D",
        "Conv2DBackpropFilter",
        "BNTrainingUpdate",
        "MaxPool",
        "SoftmaxCrossEntropyWithLogits",
        "DropOutDoMask",
    ],
    "attn": [
        "LayerNorm",
        "LayerNormGrad",
        "AvgPoolGrad",
        "aclnnTanhBackward",
        "aclnnSigmoid",
        "aclnnErf",
        "aclnnGelu",
        "aclnnGeluBackward",
    ],
}


def run(
    lib: Path,
    tmp: Path,
    mode: str,
    opt: str,
    api: str,
    net: str,
    device: str = "Ascend",
    dropout: float = 0.0,
    capture: bool = False,
) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("MSPROBE_", "CANNSIM_TRACE", "LD_PRELOAD"))}
    e.update(LD_LIBRARY_PATH=str(lib), ASCEND_HOME_PATH=str(lib.parent), MS_ALLOC_CONF="enable_vmm:False", GLOG_v="3")
    if capture:
        e.update(
            LD_PRELOAD=str(LIB),
            MSPROBE_LEVEL="L2",
            MSPROBE_DUMP_PATH=str(tmp / "dump"),
            MSPROBE_SUMMARY_MODE="md5",
            MSPROBE_STEP_END_OP=UPDATE[opt],
            MSPROBE_STEP_END_COUNT=str(NPARAMS[net]),
            CANNSIM_TRACE=str(tmp / "trace.{pid}.jsonl"),
        )
    tmp.mkdir(parents=True, exist_ok=True)
    args = ["--mode", mode, "--device", device, "--steps", str(STEPS), "--opt", opt, "--api", api, "--net", net]
    p = subprocess.run(
        [PY, str(SCRIPT), *args, "--dropout", str(dropout)],
        env=e,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp,
    )
    assert p.returncode == 0, p.stderr[-4000:]
    assert p.stdout.rstrip().endswith("done"), p.stdout
    return p


def values(p: subprocess.CompletedProcess) -> list[float]:
    return [float(line.split()[-1]) for line in p.stdout.splitlines() if line.startswith("step ")]


def split_steps(trace: list[dict], end_op: str, nparams: int) -> list[list[dict]]:
    steps, cur, n = [], [], 0
    for t in trace:
        cur.append(t)
        if t["op"] == f"aclopCompileAndExecute:{end_op}":
            n += 1
            if n == nparams:
                steps.append(cur)
                cur, n = [], 0
    assert not cur, "launches after the last step end"
    return steps


@pytest.mark.parametrize(
    ("mode", "opt", "api", "net"),
    [
        ("graph", "adam", "cell", "cnn"),
        ("pynative", "momentum", "model", "cnn"),
        ("graph", "adam", "cell", "attn"),
    ],
)
def test_classic_net_matches_cpu_and_capture_is_faithful(
    mode: str,
    opt: str,
    api: str,
    net: str,
    lib64: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    cpu = values(run(lib64, tmp_path / "cpu", mode, opt, api, net, device="CPU"))
    dev = values(run(lib64, tmp_path / "dev", mode, opt, api, net))
    assert len(dev) == STEPS
    assert dev == pytest.approx(cpu, rel=1e-5, abs=1e-5), (dev, cpu)

    base = run(lib64, tmp_path / "base", mode, opt, api, net, dropout=0.1)
    cap = tmp_path / "cap"
    p = run(lib64, cap, mode, opt, api, net, dropout=0.1, capture=True)
    assert values(p) == values(base), "capture changed a result"
    assert "ops passed through uncaptured: none" in p.stderr
    (tf,) = sorted(cap.glob("trace.*.jsonl"))
    trace = [json.loads(line) for line in tf.read_text().splitlines()]
    kinds = {t["op"].split(":")[-1] for t in trace}
    # the classic ops took the aclop path (others the aclnn path) and were all captured
    for op in [*KINDS[net], UPDATE[opt]]:
        assert op in kinds, (op, sorted(kinds))
    assert any(t["op"].startswith("aclop") for t in trace) and any(t["op"].startswith("aclnn") for t in trace)
    steps = split_steps(trace, UPDATE[opt], NPARAMS[net])
    assert len(steps) == STEPS
    dump = cap / "dump"
    assert sorted(d.name for d in dump.iterdir()) == [f"step{i}" for i in range(STEPS)]
    for i, st in enumerate(steps):
        assert check_fidelity(st, dump / f"step{i}" / "rank") == len(st) >= 40
