#!/usr/bin/env python3
"""Device cost model of L2 capture (issue #21), from the simulator's exact device-traffic counters.

Runs each example uncaptured and under L2 (statistics: the default hybrid (tensors above
`MSPROBE_L2_DEVICE_STATS_MIN_BYTES`, default 1 MiB, reduced on the device, the rest copied asynchronously),
async copies alone `MSPROBE_L2_DEVICE_STATS=0`, the copy path `MSPROBE_L2_ASYNC_COPY=0` and every tensor
reduced on the device (`MSPROBE_L2_DEVICE_STATS_MIN_BYTES=0`); md5 and tensor with the default async copies
and with the copy path) with `CANNSIM_STATS`, and prints per design:
the counters (exact) and an *estimated* 910B-class step time over low / mid / high constants (a model,
see /work/shared/reference/device-cost-model.md; sources of the constants below).

Model (per run; C = the client's kernels, T = the tool's own kernels, S = host waits the tool adds on the
launching thread, B_sync / B_async = device→host bytes the tool copies synchronously / asynchronously):
  host   = (C + T) × t_launch + (A_client + A + Y) × t_copy + P × t_pin + S × t_sync + B_sync / bw_link
  device = (C + T) × t_kernel + (A_client + A) × t_copy + (B_client + B_tool) / bw_hbm + B_async / bw_link
           + F16 / r16 + F32 / r32
  step   = max(host, device) + min(host, device) × min(1, S / (C + T))
A_client / A = the client's / the tool's stream-ordered copies (`aclrtMemcpyAsync`, any direction), Y = the
tool's synchronous copies (each copy one runtime call on the host and, if async, one DMA task on the
stream), P = the tool's `aclrtMallocHost` calls. Before 2026-12-05 the model charged nothing per copy or
pinning, so one small async copy into a freshly pinned buffer per tensor looked free (1.00× on the GPT
example, with 2224 copies and 2224 pinnings in 410 launches).
The host runs ahead of the device and the two overlap (max) except at a wait: each wait drains the
queue, losing about one launch's share of the overlap (min / launches). A wait per launch or more
(the copy path: 2) gives host + device, no wait gives max(host, device). S is a difference of the
launching threads' waits between two runs, so the client's own run-to-run variation (torch_npu GPT:
±2 waits in ~410 launches) enters it; an all-or-nothing rule turned one such wait into host + device.
t_kernel is the floor of a small kernel (the examples' tensors are KiB-sized, far below bytes / HBM).
B_client = the bytes of every captured tensor (from the copy path's count): a lower bound of the client's
HBM traffic (each input read and output written once; no FLOP term, so large matmuls are undercounted,
which makes the tool's share look larger, not smaller). B_tool = the device reductions' HBM traffic:
each tool kernel reads its tensor once and the NanToNum passes also write it, ≈ 1.5 × tensor bytes per
tool kernel (tool kernels per reduced tensor × 1.5 × the reduced tensors' bytes, these being B_client minus
what was copied asynchronously: all tensors for the pure device design, the large ones in the hybrid).
F16 / F32 = the client's matmul FLOPs (2·M·N·K of every aclnnMm/Matmul/Addmm/BatchMatMul/Bmm/Baddbmm
launch in the uncaptured run's ground-truth trace, CANNSIM_TRACE; half precision = float16/bfloat16),
added to the device time at the cube rates below (the same in both runs: it only stops the model from
treating a matmul-heavy step as pure launches and bytes). Both byte terms matter only for large tensors
(`BENCH_GPT_BIG`, e.g. "--d-model 768 --seq 512 --batch 4 --steps 1": a realistic layer size;
`BENCH_ONLY_BIG=1` runs that size alone).

Constants (low / mid / high):
  t_launch 5 / 10 / 20 µs  aclnn two-phase launch, host side (CANN aclnn two-phase API; op-plugin measurements
                           in torch_npu issues put phase 1 at several µs to tens of µs)
  t_sync   10 / 30 / 50 µs aclrtSynchronizeStream round trip (runtime + driver)
  bw_link  32 / 25 / 20 GB/s  PCIe 4.0 x16 (32 GB/s theoretical per direction, ~25 GB/s achieved pinned)
  t_kernel 3 / 5 / 8 µs    device-side floor of a small kernel (launch + one tiny pass)
  t_copy   2 / 4 / 8 µs    one aclrtMemcpyAsync: host-side submission (runtime task, no tiling: below an aclnn
                           launch) and the DMA task's floor on the stream; an assumption of the same order as
                           published cudaMemcpyAsync call overheads (a few µs), no public Ascend figure
  t_pin    10 / 30 / 100 µs  one aclrtMallocHost + aclrtFreeHost pair of a small buffer, host side (page
                           locking and a device mapping through the driver); an assumption of the order
                           published for cudaHostAlloc/cudaFreeHost, no public Ascend figure
  bw_hbm   1.6 / 1.0 / 0.4 TB/s  910B-class HBM (public figures 0.4–1.6 TB/s; device-cost-model.md)
  r16      320 / 200 / 100 TFLOPS  matmul rate in float16/bfloat16: 910B's public FP16 peak (~320 TFLOPS;
                           Ascend 910: 256, HotChips 2019), then ~60 % and ~30 % of it achieved
  r32      80 / 50 / 25 TFLOPS  matmul rate in float32: a quarter of r16 (the cube computes fp32 matmuls
                           at a fraction of its fp16 rate; an assumption, no public figure)

A lower-bound row per example: any design that reduces *every* captured tensor on the device through its
own aclnn launches (so that ≤ 64 B per tensor cross the link) needs at least one extra launch and one HBM
read per tensor: T = tensors, B_tool = B_client, no waits. When that row is above 1.2×, no such design
reaches 1.2× on that example under this model.

A second bound holds for *any* device design, batched or fused (workspace writes, not in the trace,
only add points): a tensor's bytes must
be read on the device (reduced, or staged into the tool's own buffer) after the launch that produces it and
before the first launch that writes over it (its range, an in-place op, a reused allocation). From the
uncaptured run's ground-truth trace, the fewest tool launches that achieve this for every captured tensor
is the minimum number of points stabbing all [produced, overwritten) intervals, found exactly by the
greedy rule "stage everything pending at the first launch that would overwrite a pending tensor"
(`stage_points`); plus one final reduction. Row: T = stage points + 1, B_tool = B_client, one async copy.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
LIB = TARGET / "release" / "libmsprobe.so"
_CONST_KEYS = ("t_pin", "t_launch", "t_copy", "t_sync", "bw", "t_kernel", "hbm", "r16", "r32")
CONSTS = {
    name: dict(zip(_CONST_KEYS, values))
    for name, values in (
        ("low", (10e-6, 5e-6, 2e-6, 10e-6, 32e9, 3e-6, 1.6e12, 320e12, 80e12)),
        ("mid", (30e-6, 10e-6, 4e-6, 30e-6, 25e9, 5e-6, 1.0e12, 200e12, 50e12)),
        ("high", (100e-6, 20e-6, 8e-6, 50e-6, 20e9, 8e-6, 0.4e12, 100e12, 25e12)),
    )
}
# Matmul-class launches in the ground-truth trace, and the input whose last dimension is K.
MATMUL_OPS = {
    "aclnnMm": "self",
    "aclnnMatmul": "self",
    "aclnnBmm": "self",
    "aclnnBatchMatMul": "self",
    "aclnnAddmm": "mat1",
    "aclnnBaddbmm": "batch1",
}
HALF = ("float16", "bfloat16")


def trace_flops(path: Path) -> tuple[float, float]:
    """The client's matmul FLOPs (half precision, float32) from a ground-truth trace: 2 · numel(out) · K."""
    f16 = f32 = 0.0
    for line in path.read_text().splitlines():
        x = json.loads(line)
        k_input = MATMUL_OPS.get(x["op"])
        if k_input is None:
            continue
        ins = {t["name"]: t for t in x["tensors"] if t["role"] == "input"}
        outs = [t for t in x["tensors"] if t["role"] in ("output", "inout")]
        a = ins.get(k_input)
        if a is None or not a["shape"] or not outs:
            continue
        flops = 2.0 * math.prod(outs[-1]["shape"]) * a["shape"][-1]
        if a["dtype"] in HALF:
            f16 += flops
        else:
            f32 += flops
    return f16, f32


def stage_points(path: Path) -> int:
    """The fewest tool launches that read every captured tensor on the device before it is overwritten.

    Each tensor (input or in-place operand before its launch, output or in-place operand after it) is
    pending from then until a later launch writes over its byte span (outputs, in-place operands); a
    launch that would is preceded by one staging point that takes everything pending. Greedy at the
    latest moment is optimal for stabbing intervals, so this is a lower bound for any design.
    """
    pending: list[tuple[int, int]] = []
    points = 0
    for line in path.read_text().splitlines():
        ts = json.loads(line)["tensors"]
        span = [(int(t["span_addr"], 16), int(t["span_addr"], 16) + t["bytes"]) for t in ts]
        reads = [s for t, s in zip(ts, span) if t["role"] in ("input", "inout") and t["bytes"] > 0]
        writes = [s for t, s in zip(ts, span) if t["role"] in ("output", "inout") and t["bytes"] > 0]
        pending += reads
        if any(a < pe and pa < b for a, b in writes for pa, pe in pending):
            points += 1
            pending = []
        pending += writes
    return points


STATS_COPY = "statistics, copy+sync (MSPROBE_L2_ASYNC_COPY=0)"
# Defaults: statistics by the hybrid, md5/tensor by async copies.
DESIGNS = [
    ("uncaptured", None),
    ("statistics, hybrid (default: > 1 MiB on the device, the rest async copies)", {}),
    ("statistics, async copies (MSPROBE_L2_DEVICE_STATS=0)", {"MSPROBE_L2_DEVICE_STATS": "0"}),
    (STATS_COPY, {"MSPROBE_L2_ASYNC_COPY": "0"}),
    (
        "statistics, all on the device (MSPROBE_L2_DEVICE_STATS_MIN_BYTES=0)",
        {"MSPROBE_L2_DEVICE_STATS_MIN_BYTES": "0"},
    ),
    ("md5, async copies (default)", {"MSPROBE_SUMMARY_MODE": "md5"}),
    ("md5, copy+sync (MSPROBE_L2_ASYNC_COPY=0)", {"MSPROBE_SUMMARY_MODE": "md5", "MSPROBE_L2_ASYNC_COPY": "0"}),
    ("tensor, async copies (default)", {"MSPROBE_TASK": "tensor"}),
    ("tensor, copy+sync (MSPROBE_L2_ASYNC_COPY=0)", {"MSPROBE_TASK": "tensor", "MSPROBE_L2_ASYNC_COPY": "0"}),
]


def run(lib64: Path, script: list[str], work: Path, extra: dict | None) -> dict:
    root = lib64.parent
    e = {k: v for k, v in os.environ.items() if not k.startswith(("MSPROBE_", "CANNSIM_")) and k != "LD_PRELOAD"}
    e.update(
        ASCEND_TOOLKIT_HOME=str(root),
        ASCEND_HOME_PATH=str(root),
        ASCEND_OPP_PATH=str(root / "opp"),
        LD_LIBRARY_PATH=str(lib64),
        CANNSIM_LIB64=str(lib64),
        CANNSIM_STATS=str(work / "stats.json"),
    )
    if extra is None:  # the uncaptured run: its trace gives the client's matmul FLOPs
        e["CANNSIM_TRACE"] = str(work / "trace.jsonl")
    if extra is not None:
        e.update(LD_PRELOAD=str(LIB), MSPROBE_LEVEL="L2", MSPROBE_DUMP_PATH=str(work / "dump"), **extra)
    work.mkdir(parents=True, exist_ok=True)
    p = subprocess.run(script, env=e, capture_output=True, text=True, timeout=1200)
    if p.returncode != 0:
        sys.exit(f"{script} failed:\n{p.stderr[-3000:]}")
    st = json.loads((work / "stats.json").read_text())
    m = re.search(r"records: \d+ \((\d+) tensors", p.stderr)
    st["tensors"] = int(m.group(1)) if m else 0
    m = re.search(r"\((\d+) tool kernels\)", p.stderr)
    st["tool_kernels"] = int(m.group(1)) if m else 0
    m = re.search(r"device statistics: (\d+) tensors reduced on the device", p.stderr)
    st["device_tensors"] = int(m.group(1)) if m else 0
    if extra is None:
        st["flops"] = trace_flops(work / "trace.jsonl")
        st["stage_points"] = stage_points(work / "trace.jsonl")
    return st


def copies(st: dict, kind: str) -> int:
    """Copies of one kind (`sync`/`async`) in every direction."""
    return sum(v[kind]["copies"] for v in st["copies"].values())


def counters(st: dict, base: dict) -> dict:
    d2h, d2h0 = st["copies"]["device_to_host"], base["copies"]["device_to_host"]
    # The tool counts its own kernels (run summary); the client's are the rest of the simulator's
    # count (torch_npu does not launch exactly the same kernels with and without L2 armed).
    kern = sum(v["launches"] for v in st["kernels"].values())
    tool = st.get("tool_kernels", 0)

    def waits(s: dict) -> dict:
        return {t["name"]: t["stream_syncs"] + t["device_syncs"] + t["event_syncs"] for t in s["threads"]}

    w, w0 = waits(st), waits(base)
    # the launching threads: those that launch in the uncaptured run (python, torch_npu's acl_thread)
    extra_waits = sum(max(0, w.get(n, 0) - w0.get(n, 0)) for n in w0)
    return {
        "client_kernels": kern - tool,
        "tool_kernels": tool,
        "tool_waits": extra_waits,
        "sync_bytes": d2h["sync"]["bytes"] - d2h0["sync"]["bytes"],
        "async_bytes": d2h["async"]["bytes"] - d2h0["async"]["bytes"],
        "client_async_copies": copies(base, "async"),
        "async_copies": max(0, copies(st, "async") - copies(base, "async")),
        "sync_copies": max(0, copies(st, "sync") - copies(base, "sync")),
        "pinned_allocs": max(0, st["memory"].get("pinned_allocs", 0) - base["memory"].get("pinned_allocs", 0)),
        "tensors": st["tensors"],
        "device_tensors": st.get("device_tensors", 0),
    }


# The same client work without the tool's additions.
TOOL_ZERO = dict.fromkeys(
    (
        "tool_kernels",
        "tool_waits",
        "sync_bytes",
        "async_bytes",
        "tool_hbm_bytes",
        "async_copies",
        "sync_copies",
        "pinned_allocs",
    ),
    0,
)


def step_time(c: dict, k: dict) -> float:
    host = (c["client_kernels"] + c["tool_kernels"]) * k["t_launch"] + c["tool_waits"] * k["t_sync"]
    host += c["sync_bytes"] / k["bw"]
    acopies = c.get("client_async_copies", 0) + c.get("async_copies", 0)
    host += (acopies + c.get("sync_copies", 0)) * k["t_copy"] + c.get("pinned_allocs", 0) * k["t_pin"]
    device = (c["client_kernels"] + c["tool_kernels"]) * k["t_kernel"] + c["async_bytes"] / k["bw"]
    device += acopies * k["t_copy"]
    device += (c.get("client_bytes", 0) + c.get("tool_hbm_bytes", 0)) / k["hbm"]
    f16, f32 = c.get("flops", (0.0, 0.0))
    device += f16 / k["r16"] + f32 / k["r32"]
    launches = max(c["client_kernels"] + c["tool_kernels"], 1)
    return max(host, device) + min(host, device) * min(1.0, c["tool_waits"] / launches)


def main() -> None:
    lib64 = Path(sys.argv[1]) if len(sys.argv) > 1 else TARGET / "cann" / "latest" / "lib64"
    npu_py = REPO / "target" / "venv-npu" / "bin" / "python"
    py = REPO / ".venv" / "bin" / "python"
    scripts = [("examples/train.py --steps 3", [str(py), str(REPO / "examples/train.py"), "--steps", "3"])]
    if npu_py.exists():
        gpt = [str(npu_py), str(REPO / "examples/train_torch_npu.py"), "--model", "gpt", "--steps", "2"]
        scripts.append(("torch_npu GPT, 2 steps", gpt))
        big = os.environ.get("BENCH_GPT_BIG")
        if big:
            # A realistic size: statistics only (the md5/tensor runs would move every byte to the host).
            big_cmd = [str(npu_py), str(REPO / "examples/train_torch_npu.py"), "--model", "gpt", *big.split()]
            scripts.append((f"torch_npu GPT {big}", big_cmd))
    if os.environ.get("BENCH_ONLY_BIG") and len(scripts) == 3:
        scripts = scripts[2:]  # the realistic size alone (it takes long)
    with tempfile.TemporaryDirectory() as tmp:
        for title, cmd in scripts:
            big_run = title.startswith("torch_npu GPT --")
            designs = [d for d in DESIGNS if not big_run or d[1] is None or d[0].startswith("statistics")]
            runs = {name: run(lib64, cmd, Path(tmp) / f"{title[:8]}-{i}", env) for i, (name, env) in enumerate(designs)}
            base = runs["uncaptured"]
            # Bytes of every captured tensor: what the copy path moves (statistics mode).
            copy_c = counters(runs[STATS_COPY], base)
            client_bytes = copy_c["sync_bytes"]
            print(f"\n## {title}\n")
            print("counters (exact): tool kernels, tool host waits on the launching threads,")
            print("device→host bytes (sync / async), per captured tensor; modelled step (estimate) vs uncaptured\n")
            print(
                "| design | client kernels | tool kernels | tool waits / launch | D→H B / tensor (sync+async) "
                "| est. step ×uncaptured low / mid / high |"
            )
            print("|---|---|---|---|---|---|")
            f16, f32 = base["flops"]
            for name, _ in designs:
                c = counters(runs[name], base)
                c["client_bytes"] = client_bytes
                c["flops"] = (f16, f32)
                if c["device_tensors"]:
                    reduced = max(0, client_bytes - c["async_bytes"])
                    c["tool_hbm_bytes"] = c["tool_kernels"] / c["device_tensors"] * 1.5 * reduced
                # the same client work without the tool's additions
                c0 = {**c, **TOOL_ZERO}
                launches = max(c["client_kernels"], 1)
                per_t = (c["sync_bytes"] + c["async_bytes"]) / c["tensors"] if c["tensors"] else 0.0
                ratios = " / ".join(f"{step_time(c, k) / step_time(c0, k):.2f}" for k in CONSTS.values())
                print(
                    f"| {name} | {c['client_kernels']} | {c['tool_kernels']} | {c['tool_waits'] / launches:.2f} | "
                    f"{per_t:.1f} ({c['sync_bytes']}+{c['async_bytes']} B, {c['tensors']} tensors) | {ratios} |"
                )
            # The best any per-tensor device design can do: one launch and one HBM read per tensor.
            c = counters(runs[STATS_COPY], base)
            c.update(client_bytes=client_bytes, flops=(f16, f32))
            c0 = {**c, **TOOL_ZERO}
            lb = dict(c0, tool_kernels=c["tensors"], tool_hbm_bytes=client_bytes, async_copies=1)
            ratios = " / ".join(f"{step_time(lb, k) / step_time(c0, k):.2f}" for k in CONSTS.values())
            print(
                f"| lower bound: every tensor reduced on the device (≥ 1 launch, 1 HBM read each) | "
                f"{c['client_kernels']} | ≥ {c['tensors']} | 0 | – | {ratios} |"
            )
            sp = base["stage_points"]
            lb = dict(c0, tool_kernels=sp + 1, tool_hbm_bytes=client_bytes, async_copies=1)
            ratios = " / ".join(f"{step_time(lb, k) / step_time(c0, k):.2f}" for k in CONSTS.values())
            print(
                f"| lower bound: any device design, each tensor read before it is overwritten "
                f"({sp} stage points in the trace, + 1) | {c['client_kernels']} | ≥ {sp + 1} | 0 | – | {ratios} |"
            )
            print(f"\nclient matmul FLOPs (trace): {f16:.3g} half precision, {f32:.3g} float32")


if __name__ == "__main__":
    main()
