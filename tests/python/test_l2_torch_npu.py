"""L2 capture of unmodified torch_npu training scripts (examples/train_torch_npu.py) on the simulator.

Under `LD_PRELOAD=libmsprobe.so MSPROBE_LEVEL=L2 MSPROBE_SUMMARY_MODE=md5`, every launch in the
simulator's ground-truth trace (CANNSIM_TRACE, independent of the interposer) must be captured exactly
once, as the record of the same kind, op and per-op index, with the input/output CRCs the trace computed
(the logic of scripts/torchnpu_capture_coverage.py). GPT (foreach AdamW, dropout) and CNN (conv, batch
norm, max pooling, SGD momentum) on 1 rank, the GPT under 2-rank DDP (HCCL) via torchrun.
"""

import importlib.util
import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

from recorder_testutil import LIB, LIB64, REPO, free_port, sim_env

EXAMPLE = REPO / "examples" / "train_torch_npu.py"
NPU_PY = REPO / "target" / "venv-npu" / "bin" / "python"

pytestmark = pytest.mark.skipif(
    not NPU_PY.exists() or not (LIB64 / "libascendcl.so").exists(),
    reason="target/venv-npu (scripts/setup-torchnpu.sh) or the simulator's CANN tree (scripts/build.sh) is absent",
)


def coverage_module():
    spec = importlib.util.spec_from_file_location("cov", REPO / "scripts" / "torchnpu_capture_coverage.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def env(tmp: Path, trace: str) -> dict:
    return sim_env(
        LD_PRELOAD=str(LIB),
        CANNSIM_TRACE=trace,
        MSPROBE_LEVEL="L2",
        MSPROBE_SUMMARY_MODE="md5",
        MSPROBE_DUMP_PATH=str(tmp / "dump"),
    )


def check(trace: Path, rank_dir: Path):
    cov = coverage_module()
    launches = [json.loads(line) for line in trace.read_text().splitlines()]
    data = json.loads((rank_dir / "dump.json").read_text())["data"]
    assert launches and all(t["status"] == 0 for t in launches)
    seen, missed, bad = {}, [], []
    for t in launches:
        key = cov.record_of(t["op"])
        name = f"{key[0]}.{key[1]}.{seen.get(key, 0)}.forward"
        seen[key] = seen.get(key, 0) + 1
        rec = data.get(name)
        if rec is None:
            missed.append(name)
            continue
        want = [cov.md5_of(x, "before") for x in t["tensors"] if x["role"] in ("input", "inout")]
        want += [cov.md5_of(x, "after") for x in t["tensors"] if x["role"] in ("output", "inout")]
        got = [x.get("md5") for x in cov.leaves(rec.get("input_args", []))]
        got += [x.get("md5") for x in cov.leaves(rec.get("output", []))]
        if got != want:
            bad.append((name, got, want))
    assert not missed, f"{len(missed)} of {len(launches)} launches not captured: {missed[:20]}"
    assert not bad, f"{len(bad)} CRC mismatches, first: {bad[:3]}"
    # exactly once: no record beyond the traced launches
    assert len(data) == len(launches), (len(data), len(launches))
    return launches


def run(cmd, e, timeout=300):
    p = subprocess.run([str(c) for c in cmd], env=e, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"{cmd} failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}"
    return p


@pytest.mark.parametrize("model", ["gpt", "cnn", "moe", "unet", "llama"])
def test_one_rank_every_launch_captured_with_matching_crcs(model, tmp_path):
    trace = tmp_path / "trace.jsonl"
    run([NPU_PY, EXAMPLE, "--model", model, "--steps", "2"], env(tmp_path, str(trace)))
    ops = {t["op"] for t in check(trace, tmp_path / "dump" / "step0" / "rank")}
    if model == "gpt":
        assert {"aclnnInplaceAddcdiv", "aclnnForeachLerpScalar", "aclnnTril", "aclnnDropoutDoMask"} <= ops
    elif model == "cnn":
        assert {"aclnnConvolutionBackward", "aclnnBatchNorm", "aclnnMaxPool2dWithMask"} <= ops
    elif model == "unet":
        assert {"aclnnCumprod", "aclnnGroupNorm", "aclnnUpsampleNearest2dV2", "aclnnReflectionPad2dBackward"} <= ops
    elif model == "llama":
        assert {"aclnnRmsNorm", "aclnnRmsNormGrad", "aclnnSwiGlu", "aclnnSwiGluGrad", "aclnnFlashAttentionScore"} <= ops
    else:
        assert {"aclnnTopk", "aclnnScatterAdd", "aclnnInplaceLerps", "aclnnSiluBackward"} <= ops


@pytest.mark.parametrize("async_copy", ["1", "0"])  # pinned async copies / the blocking copy path
def test_common_ops_every_launch_captured(tmp_path, async_copy):
    """The op sweep of simulator/tests/torch_npu_ops_sweep.py (comparisons, where, sort/topk, scatter, indexing,
    cumsum, var, lerp, mse_loss, backward passes...) under L2: every launch captured, CRCs equal to
    the trace, and the script's own results still equal CPU torch's (capture changes nothing)."""
    trace = tmp_path / "trace.jsonl"
    e = {**env(tmp_path, str(trace)), "MSPROBE_L2_ASYNC_COPY": async_copy}
    p = run([NPU_PY, REPO / "simulator" / "tests" / "torch_npu_ops_sweep.py"], e)
    assert json.loads(p.stdout.strip().splitlines()[-1])["bad"] == []
    launches = check(trace, tmp_path / "dump" / "step0" / "rank")
    ops = {t["op"] for t in launches}
    assert {"aclnnSort", "aclnnTopk", "aclnnScatterAdd", "aclnnCumsum", "aclnnLerps", "aclnnMseLossBackward"} <= ops
    assert {"aclnnIndex", "aclnnIndexPutImpl", "aclnnNonzero"} <= ops
    # the kernels L2's own device statistics use are the client's too (they had no wrapper)
    assert {"aclnnAminmax", "aclnnNanToNum"} <= ops
    # nonzero(), x[mask], masked_select, unique and unique_consecutive run aclnnNonzero, aclnnNonzeroV2,
    # aclnnMaskedSelect, aclnnUnique2 and aclnnUniqueConsecutive (torch_npu takes them over the aclop forms
    # when the library has them), whose kernels decide the output shape: L2 reads it after the launch and
    # records the outputs at it (check() above: CRCs equal to the trace's, which the simulator writes at the
    # real shape); none falls back
    by_kernel = ("aclnnNonzero", "aclnnNonzeroV2", "aclnnMaskedSelect", "aclnnUnique2", "aclnnUniqueConsecutive")
    assert set(by_kernel) <= ops
    data = json.loads((tmp_path / "dump" / "step0" / "rank" / "dump.json").read_text())["data"]
    cov, seen, shaped = coverage_module(), {}, 0
    for t in launches:
        key = cov.record_of(t["op"])
        seen[key] = seen.get(key, 0) + 1
        if t["op"] in by_kernel:
            rec = data[f"{key[0]}.{key[1]}.{seen[key] - 1}.forward"]
            want = [x["shape"] for x in t["tensors"] if x["role"] == "output"]
            assert [x["shape"] for x in cov.leaves(rec["output"])] == want, (t["op"], want)
            shaped += any(0 < math.prod(w) < 24 * max(len(w), 1) for w in want)  # fewer than all 24 (4 x 6)
    assert shaped >= 10, shaped
    line = "launches whose kernel decides the output shape (outputs recorded at the launch-time, largest shape)"
    assert f"{line}: 0" in p.stderr and "decides its output shape in its kernel" not in p.stderr, p.stderr[-3000:]
    n = sum(t["op"] in by_kernel for t in launches)
    assert (
        f"launches whose outputs were re-read at the shape their kernel set (one stream sync each on the "
        f"launching thread): {n}" in p.stderr
    )


def test_ddp_two_ranks_every_launch_captured_with_matching_crcs(tmp_path):
    # torchrun gives each worker its RANK; a wrapper names each worker's trace by it.
    wrapper = tmp_path / "worker.sh"
    wrapper.write_text(f'#!/bin/sh\nCANNSIM_TRACE="{tmp_path}/trace-rank$RANK.jsonl" exec "{NPU_PY}" "$@"\n')
    wrapper.chmod(0o755)
    args = ["-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1"]
    args += ["--master-port", free_port(), "--no-python", wrapper, EXAMPLE, "--model", "gpt", "--steps", "2"]
    run([NPU_PY, *args], env(tmp_path, ""), timeout=400)
    for r in (0, 1):
        ops = {t["op"] for t in check(tmp_path / f"trace-rank{r}.jsonl", tmp_path / "dump" / "step0" / f"rank{r}")}
        assert any(op.startswith("Hccl") for op in ops), ops


SHAPED_STATS = r"""
import json, torch, torch_npu
torch.manual_seed(0)
x, i = torch.randn(4, 6), torch.randint(-5, 5, (4, 6))
x[0, 0] = float("nan")
xn, inn = x.npu(), i.npu()
res = {
    "Nonzero.0": [(xn > 0).nonzero()],
    "MaskedSelect.0": [torch.masked_select(xn, xn > 0.5)],
    "MaskedSelect.1": [torch.masked_select(xn, xn != 0.25)],  # NaN selected
    "Unique2.0": list(torch.unique(inn, return_inverse=True, return_counts=True)),
}
print(json.dumps({k: [[str(t.dtype), t.cpu().double().tolist()] for t in v] for k, v in res.items()}))
"""


@pytest.mark.parametrize("device_stats", ["1", "0"])  # reductions on the device / the copy path
def test_kernel_shaped_outputs_statistics_match_numpy(tmp_path, device_stats):
    """Statistics mode: the outputs of nonzero, masked_select (one with a NaN selected) and unique, whose shape
    their kernel decides, are reduced at the real shape, on the device and on the copy path: each record's
    Max/Min/Mean/Norm (and *_except_inf_nan) equal numpy's over the script's own results, by msprobe 1.1.1's
    rules (test_l2_device_stats.truth). At the launch-time shape the rows past the count would be reduced too."""
    from test_l2_device_stats import check_leaf

    src = tmp_path / "shaped.py"
    src.write_text(SHAPED_STATS)
    e = {**env(tmp_path, ""), "MSPROBE_SUMMARY_MODE": "statistics", "MSPROBE_L2_DEVICE_STATS": device_stats}
    p = run([NPU_PY, src], e)
    res = json.loads(p.stdout.strip().splitlines()[-1])
    data = json.loads((tmp_path / "dump" / "step0" / "rank" / "dump.json").read_text())["data"]
    cov = coverage_module()
    for name, outs in res.items():
        leaves = cov.leaves(data[f"Aclnn.{name}.forward"]["output"])
        assert len(leaves) == len(outs), (name, leaves)
        for k, (leaf, (dtype, values)) in enumerate(zip(leaves, outs)):
            x = np.array(values, dtype=np.float64)
            check_leaf(leaf, x, dtype.removeprefix("torch."), False, f"{name} output {k}")
    assert math.isnan(cov.leaves(data["Aclnn.MaskedSelect.1.forward"]["output"])[0]["Max"])
    line = "launches whose kernel decides the output shape (outputs recorded at the launch-time, largest shape)"
    assert f"{line}: 0" in p.stderr, p.stderr[-3000:]
