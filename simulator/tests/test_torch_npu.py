"""Unmodified torch_npu 2.14 scripts on the simulator (issue #19).

examples/train_torch_npu.py (a small GPT with the default foreach AdamW, a small CNN with SGD momentum,
and 2-rank DDP over `hccl` under torchrun) runs 3 steps on `npu` in target/venv-npu
(scripts/setup-torchnpu.sh) and the same script runs on CPU torch in the main venv; the losses must
agree within 1e-5. Dropout: the GPT runs with `--dropout 0` on both sides (torch_npu's dropout returns
its input for p=0, so no random mask is involved; the comparison is deterministic).
"""

import json
import os
import socket
import subprocess
import sys

import pytest

from conftest import LIB64, REPO

EXAMPLE = os.path.join(REPO, "examples", "train_torch_npu.py")
NPU_PY = os.path.join(REPO, "target", "venv-npu", "bin", "python")
TOL = 1e-5


@pytest.fixture(scope="module", autouse=True)
def venv_npu():
    subprocess.run(["bash", os.path.join(REPO, "scripts", "setup-torchnpu.sh")], check=True)


def npu_env(**extra):
    """The environment `source <prefix>/set_env.sh` gives (the simulator's CANN toolkit)."""
    root = os.path.dirname(LIB64)
    e = dict(os.environ)
    e.update(
        ASCEND_TOOLKIT_HOME=root,
        ASCEND_HOME_PATH=root,
        ASCEND_OPP_PATH=os.path.join(root, "opp"),
        LD_LIBRARY_PATH=LIB64 + (":" + e["LD_LIBRARY_PATH"] if e.get("LD_LIBRARY_PATH") else ""),
    )
    for k in ("CANNSIM_TRACE", "CANNSIM_STATS", "LD_PRELOAD"):
        e.pop(k, None)
    e.update(extra)
    return e


def run(cmd, env, timeout=300):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"{cmd} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-6000:]}"
    return [json.loads(line)["loss"] for line in p.stdout.splitlines() if line.startswith("{")]


def cpu_env():
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    return e


def test_import_torch_npu_sees_the_simulated_devices():
    code = (
        "import torch, torch_npu\n"
        "from torch_npu.utils.collect_env import get_cann_version\n"
        "x = torch.arange(6, dtype=torch.float32).reshape(2, 3)\n"
        "y = (x.npu() * 2 + 1).cpu()\n"
        "print(torch.npu.is_available(), torch.npu.device_count(), torch.npu.get_device_name(0), get_cann_version())\n"
        "print((y - (x * 2 + 1)).abs().max().item())\n"
    )
    p = subprocess.run([NPU_PY, "-c", code], env=npu_env(), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-4000:]
    first, second = p.stdout.split("\n")[:2]
    avail, count, name, version = first.split()
    assert (avail, count, name, version) == ("True", "8", "Ascend910B1", "8.3.RC1")
    assert float(second) == 0.0


@pytest.mark.parametrize("model", ["gpt", "cnn", "moe", "unet", "llama"])
def test_script_trains_like_cpu(model, tmp_path):
    trace = tmp_path / "trace.jsonl"
    args = [EXAMPLE, "--model", model, "--steps", "3", "--dropout", "0"]
    npu = run([NPU_PY, *args], npu_env(CANNSIM_TRACE=str(trace)))
    cpu = run([sys.executable, *args, "--device", "cpu"], cpu_env())
    assert len(npu) == len(cpu) == 3
    assert max(abs(a - b) for a, b in zip(npu, cpu)) < TOL, (npu, cpu)
    assert len(set(cpu)) == 3  # the model really trains (losses move)
    launches = [json.loads(line) for line in trace.read_text().splitlines()]
    assert launches and all(x["status"] == 0 for x in launches)
    ops = {x["op"] for x in launches}
    # the default optimizers run their foreach kernels, the models their own operators
    if model == "gpt":
        assert {"aclnnForeachLerpScalar", "aclnnForeachAddcmulScalarV2", "aclnnTril", "aclnnLayerNorm"} <= ops
    elif model == "cnn":
        assert {"aclnnConvolutionBackward", "aclnnBatchNorm", "aclnnMaxPool2dWithMask", "aclnnForeachAddListV2"} <= ops
    elif model == "unet":  # schedule on the device, GroupNorm, pooling, transposed/1-D conv, resizing, padding
        want = {"aclnnLinspace", "aclnnCumprod", "aclnnGroupNormBackward", "aclnnAvgPool2dBackward", "aclnnPrelu"}
        want |= {"aclnnUpsampleBilinear2dBackwardV2", "aclnnUpsampleNearest2dBackward", "aclnnReflectionPad2dBackward"}
        assert want | {"aclnnSmoothL1LossBackward", "aclnnConvolutionBackward"} <= ops
    elif model == "llama":  # torch_npu's fused RMSNorm and SwiGLU, RoPE, causal SDPA (flash attention)
        want = {"aclnnRmsNorm", "aclnnRmsNormGrad", "aclnnSwiGlu", "aclnnSwiGluGrad", "aclnnFlashAttentionScoreGrad"}
        assert want | {"aclnnCos", "aclnnSin"} <= ops
    else:  # Adam per tensor (lerp_), top-2 routing, SwiGLU, var, cumsum, gather's backward, logsumexp, mse_loss
        want = {"aclnnInplaceLerps", "aclnnTopk", "aclnnSiluBackward", "aclnnVarCorrection", "aclnnCumsum"}
        assert want | {"aclnnScatterAdd", "aclnnLogSumExp", "aclnnMseLossBackward", "aclnnFlip"} <= ops


def test_gpt_with_default_dropout_runs_and_is_reproducible(tmp_path):
    """With the default dropout (0.1) the masks come from the simulator's generator, so the losses are
    not CPU's; they are finite, move, repeat exactly from the same seed, and the dropout kernels ran."""
    trace = tmp_path / "trace.jsonl"
    args = [EXAMPLE, "--model", "gpt", "--steps", "3"]
    a = run([NPU_PY, *args], npu_env(CANNSIM_TRACE=str(trace)))
    b = run([NPU_PY, *args], npu_env())
    assert a == b and len(a) == 3 and all(0 < x < 10 for x in a)
    ops = [json.loads(line)["op"] for line in trace.read_text().splitlines()]
    # 7 dropout sites per forward (embedding + 2 blocks x (attention probs, projection, MLP)), 3 steps:
    # one mask each, applied forward and backward
    assert ops.count("aclnnDropoutGenMaskV2") == 21 and ops.count("aclnnDropoutDoMask") == 42


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(py, *script_args, env):
    args = ["-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1"]
    args += ["--master-port", str(free_port()), EXAMPLE, *script_args]
    return run([py, *args], env, timeout=400)


def test_ddp_two_ranks_hccl_trains_like_cpu_gloo():
    args = ["--model", "gpt", "--steps", "3", "--dropout", "0"]
    npu = torchrun(NPU_PY, *args, env=npu_env())
    cpu = torchrun(sys.executable, *args, "--device", "cpu", env=cpu_env())
    assert len(npu) == len(cpu) == 3
    assert max(abs(a - b) for a, b in zip(npu, cpu)) < TOL, (npu, cpu)


OPS = os.path.join(os.path.dirname(__file__), "torch_npu_ops_sweep.py")


def test_common_ops_match_cpu(tmp_path):
    """Comparisons, where, masked_fill, elementwise math, sort/topk/max along a dim, cumsum, flip, roll,
    scatter (and gather's backward), var/std/prod/logsumexp, lerp and mse_loss of torch_npu on the
    simulator equal CPU torch's (NaN/±inf included), and the simulator logs no error: an aclnn operator the simulator
    lacks makes torch_npu fall back to an aclop kernel, which fails, and every later op of the
    script silently computes nothing (before aclnnEq/Gt/...: `x > 0` did so)."""
    p = subprocess.run([NPU_PY, str(OPS)], env=npu_env(CANNSIM_LOG="1"), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-4000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["bad"] == [] and out["n"] >= 20, out
    errors = [ln for ln in p.stderr.splitlines() if "] error " in ln and "107002" not in ln]
    assert errors == [], errors[:5]
