#!/usr/bin/env python3
"""Device cost of the framework layer's statistics (issue #21), at L1 statistics: the torch_npu GPT example
and the MindSpore PyNative MLP (examples/train_ms_graph.py --mode pynative on the Ascend backend).

Runs each example on the simulator uncaptured and under PrecisionDebugger (task statistics, level L1;
started before the example's first step, stopped after its last) in three designs, side by side in one
run, each with CANNSIM_STATS:
  hybrid (default)    tensors larger than MSPROBE_DEVICE_STATS_MIN_BYTES (1 MiB) reduced on the device, the
                      others copied without blocking
  device              MSPROBE_DEVICE_STATS=1: every device tensor reduced by the framework's own device ops,
                      results fetched in batches (also with async_dump: fetched only at step end)
  copy                MSPROBE_DEVICE_STATS=0: every device tensor copied to the host without blocking
                      (and, torch, with .cpu(): a wait per tensor), host statistics
and md5 by non-blocking and blocking copies (torch). BENCH_GPT_BIG="--d-model 768 --seq 512 --batch 4
--steps 1" adds the GPT at a realistic layer size (BENCH_ONLY_BIG=1: that alone); BENCH_DESIGNS
(";"-separated parts of design names) runs only those designs beside the uncaptured one.
and prints the exact counters (device→host bytes per captured tensor, host waits on the training thread per
record, the tool's kernels = kernels beyond the uncaptured run) and the *estimated* 910B-class step time
from the model and constants of scripts/bench_device.py (imported, not duplicated).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
_spec = importlib.util.spec_from_file_location("bench_device", REPO / "scripts" / "bench_device.py")
bd = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bd)

DRIVER = r"""
import os, runpy, sys
sys.path.insert(0, os.environ["MSPROBE_PY"])
example, rest = sys.argv[1], sys.argv[2:]
sys.argv = [example] + rest
mod = runpy.run_path(example, run_name="bench")  # imports only; main() below
if os.environ.get("BENCH_CAPTURE") == "1":
    fw = os.environ["BENCH_FW"]
    PrecisionDebugger = __import__(f"msprobe.{fw}", fromlist=["PrecisionDebugger"]).PrecisionDebugger
    dbg = PrecisionDebugger(dump_path=os.environ["BENCH_DUMP"], task="statistics", level="L1")
    dbg.start()
mod["main"]()
if os.environ.get("BENCH_CAPTURE") == "1":
    dbg.stop()
    dbg.step()
"""

DESIGNS = [
    ("uncaptured", None),
    ("L1 statistics, hybrid by size (default)", {}),
    ("L1 statistics, device, every tensor", {"MSPROBE_DEVICE_STATS": "1"}),
    ("L1 statistics, device, every tensor, async_dump", {"MSPROBE_DEVICE_STATS": "1", "async": True}),
    ("L1 statistics, copy every tensor, non-blocking", {"MSPROBE_DEVICE_STATS": "0"}),
    # torch only (as above, with a wait per tensor: .cpu(), MSPROBE_ASYNC_COPY=0), and md5
    ("L1 statistics, copy, blocking .cpu()", {"MSPROBE_DEVICE_STATS": "0", "MSPROBE_ASYNC_COPY": "0", "torch": True}),
    ("L1 md5, non-blocking copies (default)", {"md5": True, "torch": True}),
    ("L1 md5, blocking .cpu()", {"md5": True, "MSPROBE_ASYNC_COPY": "0", "torch": True}),
]


def run(lib64: Path, py: Path, fw: str, args: list[str], work: Path, design: dict | None) -> dict:
    root = lib64.parent
    work.mkdir(parents=True, exist_ok=True)
    e = {k: v for k, v in os.environ.items() if not k.startswith(("MSPROBE_", "CANNSIM_")) and k != "LD_PRELOAD"}
    e.update(
        ASCEND_TOOLKIT_HOME=str(root),
        ASCEND_HOME_PATH=str(root),
        ASCEND_OPP_PATH=str(root / "opp"),
        LD_LIBRARY_PATH=str(lib64),
        CANNSIM_LIB64=str(lib64),
        CANNSIM_STATS=str(work / "stats.json"),
        MSPROBE_PY=str(REPO / "python"),
        BENCH_DUMP=str(work / "dump"),
        BENCH_FW=fw,
        MS_ALLOC_CONF="enable_vmm:False",
        GLOG_v="3",
    )
    if design is not None:
        e["BENCH_CAPTURE"] = "1"
        design = dict(design)
        design.pop("torch", None)
        cfg = {"task": "statistics", "level": "L1"}
        if design.pop("async", False):
            cfg["async_dump"] = True
        if design.pop("md5", False):
            cfg["statistics"] = {"summary_mode": "md5"}
        if len(cfg) > 2:
            (work / "config.json").write_text(json.dumps(cfg))
            e["MSPROBE_CONFIG"] = str(work / "config.json")
        e.update(design)
    drv = work / "driver.py"
    drv.write_text(DRIVER)
    p = subprocess.run([str(py), str(drv), *args], env=e, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        sys.exit(f"{args} failed:\n{p.stderr[-3000:]}")
    st = json.loads((work / "stats.json").read_text())
    m = re.search(r"records: (\d+) \((\d+) tensors", p.stderr)
    st["records"], st["tensors"] = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    return st


def table(title: str, lib64: Path, py: Path, fw: str, args: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        designs = [(n, d) for n, d in DESIGNS if fw == "pytorch" or not (d or {}).get("torch")]
        # BENCH_DESIGNS="hybrid;device, every tensor": only the designs whose names contain one of
        # these (";"-separated), besides the uncaptured baseline
        only = [w.strip() for w in os.environ.get("BENCH_DESIGNS", "").split(";") if w.strip()]
        if only:
            designs = [(n, d) for n, d in designs if d is None or any(w in n for w in only)]
        runs = {name: run(lib64, py, fw, args, Path(tmp) / str(i), d) for i, (name, d) in enumerate(designs)}
    base = runs["uncaptured"]
    kern0 = sum(v["launches"] for v in base["kernels"].values())
    print(f"\n## {title}, L1 statistics, framework layer\n")
    print("counters (exact): D→H bytes per captured tensor, host waits added on the training threads per record,")
    print("tool kernels (beyond the uncaptured run); modelled step (estimate, scripts/bench_device.py) vs uncaptured\n")
    print(
        "| design | records | tensors | tool kernels | tool waits / record | D→H B / tensor (sync+async) "
        "| est. step ×uncaptured low / mid / high |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in runs:
        st = runs[name]
        st["tool_kernels"] = max(0, sum(v["launches"] for v in st["kernels"].values()) - kern0)
        c = bd.counters(st, base)
        c0 = {**c, **bd.TOOL_ZERO}
        per_t = (c["sync_bytes"] + c["async_bytes"]) / c["tensors"] if c["tensors"] else 0.0
        per_r = c["tool_waits"] / st["records"] if st["records"] else 0.0
        ratios = " / ".join(f"{bd.step_time(c, k) / bd.step_time(c0, k):.2f}" for k in bd.CONSTS.values())
        print(
            f"| {name} | {st['records']} | {c['tensors']} | {c['tool_kernels']} | {per_r:.3f} | "
            f"{per_t:.1f} ({c['sync_bytes']}+{c['async_bytes']} B) | {ratios} |"
        )


def main() -> None:
    lib64 = Path(sys.argv[1]) if len(sys.argv) > 1 else TARGET / "cann" / "latest" / "lib64"
    npu_py = REPO / "target" / "venv-npu" / "bin" / "python"
    ms_py = REPO / "target" / "venv-ms" / "bin" / "python"
    steps = os.environ.get("BENCH_STEPS", "2")
    big = os.environ.get("BENCH_GPT_BIG", "").split()
    if npu_py.exists():
        args = [str(REPO / "examples" / "train_torch_npu.py"), "--model", "gpt", "--steps", steps]
        if not os.environ.get("BENCH_ONLY_BIG"):
            table(f"torch_npu GPT ({steps} steps)", lib64, npu_py, "pytorch", args)
        if big:  # a realistic layer size, where the tensors are MiB (the hybrid reduces them on the device)
            table(f"torch_npu GPT {' '.join(big)}", lib64, npu_py, "pytorch", args[:3] + big)
    else:
        print("target/venv-npu is absent (scripts/setup-torchnpu.sh): torch_npu skipped")
    if os.environ.get("BENCH_ONLY_BIG"):
        return
    if ms_py.exists():
        args = [str(REPO / "examples" / "train_ms_graph.py"), "--mode", "pynative", "--steps", steps]
        table(f"MindSpore PyNative MLP on Ascend ({steps} steps)", lib64, ms_py, "mindspore", args)
    else:
        print("target/venv-ms is absent (scripts/setup-ms.sh): MindSpore skipped")


if __name__ == "__main__":
    main()
