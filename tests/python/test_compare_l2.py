"""`msprobe compare` on two L2 (kernel) dumps: the first divergence it reports is the kernel where the
simulator's ground-truth traces of the two runs first part.

Both runs are examples/train.py under the interposer (LD_PRELOAD, MSPROBE_LEVEL=L2) with the
simulator's trace on (CANNSIM_TRACE: every launch with the CRC-32 of each tensor's elements before and
after the kernel). The "NPU" run has one thing perturbed: the second layer's weights, the data of
the second step only, or the learning rate (a scalar argument of the SGD kernels: their tensor inputs
agree and their outputs do not; the dump records the scalar too, so compare sees it as an input that
differs). The truth is taken from the two traces alone: the first launch whose output CRCs differ,
whether its input CRCs agreed, and which outputs differ; our compare, reading only the dumps, must
name that launch's record and say the same about its inputs and outputs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from recorder_testutil import CLI, LIB, REPO, sim_env

# examples/train.py with make_data wrapped: "w2" adds 1e-3 * N(0, 1) to the second layer's weights,
# "x1" adds it to the inputs of step 1 (step 0 unchanged), "none" runs the example as it is.
DRIVER = r"""
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import train
orig = train.make_data
what = sys.argv[2]
def make_data(seed, steps):
    xs, ys, w1, w2 = orig(seed, steps)
    noise = lambda a: (a + 1e-3 * np.random.default_rng(7).standard_normal(a.shape)).astype(np.float32)
    if what == "w2":
        w2 = noise(w2)
    elif what == "x1":
        xs = xs.copy(); xs[1] = noise(xs[1])
    return xs, ys, w1, w2
train.make_data = make_data
sys.argv = ["train.py", *sys.argv[3:]]
sys.exit(train.main())
"""


def l2_run(tmp: Path, perturb: str, summary: str) -> tuple[Path, list[dict]]:
    """Two training steps of examples/train.py captured at L2; returns the rank dir and the trace."""
    tmp.mkdir(parents=True)
    env = sim_env(
        LD_PRELOAD=str(LIB),
        MSPROBE_LEVEL="L2",
        MSPROBE_DUMP_PATH=str(tmp / "dump"),
        CANNSIM_TRACE=str(tmp / "trace.jsonl"),
    )
    if summary.startswith("tensor"):
        env["MSPROBE_TASK"] = "tensor"
    else:
        env["MSPROBE_SUMMARY_MODE"] = summary.removesuffix("-ms")
    if summary.endswith("-ms"):
        # mindspore.Tensor records (.npy files): compare follows msprobe's MindSpore rules
        env["MSPROBE_FRAMEWORK"] = "mindspore"
    args = [sys.executable, "-c", DRIVER, str(REPO / "examples"), perturb, "--steps", "2"]
    if perturb == "lr":
        args += ["--lr", "0.4"]  # the example's default is 0.5
    p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    trace = [json.loads(line) for line in (tmp / "trace.jsonl").read_text().splitlines()]
    return tmp / "dump" / "step0" / "rank", trace


def record_name(op: str, seen: dict[str, int]) -> str:
    """The L2 record name of a traced launch (README "L2 kernel record names")."""
    if op.startswith("aclnn"):
        kind = "Aclnn." + op[len("aclnn") :]
    elif op.startswith("aclop"):
        kind = "Aclop." + op.split(":", 1)[1]
    else:
        assert op.startswith("Hccl"), op
        kind = "Hccl." + op[len("Hccl") :]
    n = seen.get(kind, 0)
    seen[kind] = n + 1
    return f"{kind}.{n}.forward"


def truth(npu: list[dict], bench: list[dict]) -> dict | None:
    """The first launch whose outputs differ between the two traces, from the CRCs alone."""
    assert [t["op"] for t in npu] == [t["op"] for t in bench], "the two runs launched different kernels"
    seen: dict[str, int] = {}
    for a, b in zip(npu, bench):
        name = record_name(a["op"], seen)

        def crcs(t: dict, roles: tuple[str, ...], key: str) -> list[str]:
            return [x[key] for x in t["tensors"] if x["role"] in roles]

        out_a, out_b = crcs(a, ("output", "inout"), "crc_view_after"), crcs(b, ("output", "inout"), "crc_view_after")
        if out_a != out_b:
            in_a, in_b = crcs(a, ("input", "inout"), "crc_view_before"), crcs(b, ("input", "inout"), "crc_view_before")
            return {
                "record": name,
                "differing_input_shapes": [
                    x["shape"]
                    for x, y in zip(a["tensors"], b["tensors"])
                    if x["role"] in ("input", "inout") and x["crc_view_before"] != y["crc_view_before"]
                ],
                "inputs_agree": in_a == in_b,
                "inputs": [f"{name}.input.{i}" for i, (x, y) in enumerate(zip(in_a, in_b)) if x != y],
                "outputs": [f"{name}.output.{i}" for i, (x, y) in enumerate(zip(out_a, out_b)) if x != y],
            }
    return None


def compare(npu: Path, bench: Path, out: Path) -> tuple[str, str]:
    p = subprocess.run(
        [str(CLI), "compare", str(npu), str(bench), "-o", str(out), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    return p.stdout, next(out.glob("first_divergence*.txt")).read_text()


@pytest.mark.parametrize(
    "perturb,summary",
    [
        ("w2", "statistics"),
        ("w2", "md5"),
        ("w2", "tensor"),
        ("x1", "statistics"),
        ("x1", "tensor"),
        ("lr", "statistics"),
        ("lr", "md5"),
        ("lr", "tensor"),
        ("w2", "tensor-ms"),
        ("w2", "statistics-ms"),
    ],  # fmt: skip
)
def test_first_divergence_on_l2_dumps(tmp_path, perturb, summary):
    npu, npu_trace = l2_run(tmp_path / "npu", perturb, summary)
    bench, bench_trace = l2_run(tmp_path / "bench", "none", summary)
    want = truth(npu_trace, bench_trace)
    assert want is not None, "the perturbation changed no kernel's output"
    # Sanity of the setup (not of the compare): the perturbed weights are first read by the second
    # layer's matmul; the perturbed step-1 data by step 1's first matmul (four Mm a step); the learning
    # rate by the first SGD update (InplaceAdd.0 is the first layer's bias add).
    first = {"w2": "Aclnn.Matmul.0.forward", "x1": "Aclnn.Mm.4.forward", "lr": "Aclnn.InplaceAdd.1.forward"}
    assert want["record"] == first[perturb], want
    assert want["inputs_agree"] == (perturb == "lr"), want
    if perturb == "lr":
        # The trace holds tensors only; the dump also records the scalar alpha, argument 2 of
        # aclnnInplaceAdd(self, other, alpha), which is the one input that differs.
        want["inputs_agree"], want["inputs"] = False, [f"{want['record']}.input.2"]
    stdout, text = compare(npu, bench, tmp_path / "out")
    lines = text.splitlines()
    assert lines[0] == f"first divergence (forward): {want['record']}", text
    assert lines[0] in stdout
    if want["inputs_agree"]:
        assert "its inputs agree and its outputs do not" in text, text
    else:
        assert f"its inputs already differ ({', '.join(want['inputs'])})" in text, text
    assert f"differing outputs: {', '.join(want['outputs'])}" in text, text
    # L2 records are all forward: no backward divergence is claimed.
    assert "first divergence (backward)" not in text
    # The run against itself: no divergence.
    _, same = compare(bench, bench, tmp_path / "same")
    assert same.startswith("no divergence"), same


# examples/train_torch_npu.py (torch_npu on the simulator) with blocks[1].fc's weights perturbed on CPU
# before the model moves to the device (a host-to-device copy, not a kernel).
TORCH_DRIVER = r"""
import sys
import torch
sys.path.insert(0, sys.argv[1])
import train_torch_npu as t
orig, what = t.GPT.__init__, sys.argv[2]
def init(self, *a, **k):
    orig(self, *a, **k)
    if what == "fc":
        with torch.no_grad():
            w = self.blocks[1].fc.weight
            w += 1e-3 * torch.randn(w.shape, generator=torch.Generator().manual_seed(7))
t.GPT.__init__ = init
sys.argv = ["train_torch_npu.py", *sys.argv[3:]]
t.main()
"""
NPU_PY = REPO / "target" / "venv-npu" / "bin" / "python"


def torch_npu_run(tmp: Path, perturb: str, summary: str) -> tuple[Path, list[dict]]:
    tmp.mkdir(parents=True)
    env = sim_env(
        LD_PRELOAD=str(LIB),
        MSPROBE_LEVEL="L2",
        MSPROBE_DUMP_PATH=str(tmp / "dump"),
        CANNSIM_TRACE=str(tmp / "trace.jsonl"),
    )
    if summary == "tensor":
        env["MSPROBE_TASK"] = "tensor"
    else:
        env["MSPROBE_SUMMARY_MODE"] = summary
    args = [str(NPU_PY), "-c", TORCH_DRIVER, str(REPO / "examples"), perturb]
    args += ["--model", "gpt", "--steps", "1", "--dropout", "0"]
    p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    trace = [json.loads(line) for line in (tmp / "trace.jsonl").read_text().splitlines()]
    return tmp / "dump" / "step0" / "rank", trace


@pytest.mark.skipif(not NPU_PY.exists(), reason="target/venv-npu (scripts/setup-torchnpu.sh) is absent")
@pytest.mark.parametrize("summary", ["md5", "tensor"])
def test_first_divergence_on_torch_npu_l2_dumps(tmp_path, summary):
    """A PyTorch model at L2: one layer's weights perturbed, the report names that layer's first kernel."""
    npu, npu_trace = torch_npu_run(tmp_path / "npu", "fc", summary)
    bench, bench_trace = torch_npu_run(tmp_path / "bench", "none", summary)
    want = truth(npu_trace, bench_trace)
    assert want is not None, "the perturbation changed no kernel's output"
    # Sanity of the setup: the first kernel to part reads the perturbed (128, 32) weight, transposed
    # (addmm's mat2), and is blocks[1].fc's: the 7th Linear (qkv, proj, fc, out per block).
    assert want["record"] == "Aclnn.Addmm.6.forward", want
    assert want["differing_input_shapes"] == [[32, 128]], want
    stdout, text = compare(npu, bench, tmp_path / "out")
    lines = text.splitlines()
    assert lines[0] == f"first divergence (forward): {want['record']}", text
    assert lines[0] in stdout
    assert f"its inputs already differ ({', '.join(want['inputs'])})" in text, text
    assert f"differing outputs: {', '.join(want['outputs'])}" in text, text
    _, same = compare(bench, bench, tmp_path / "same")
    assert same.startswith("no divergence"), same
