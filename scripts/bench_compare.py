"""Side-by-side benchmark of `msprobe compare` against msprobe 1.1.1's compare.

The dumps: one L1 step of a GPT-style model (token embedding, N pre-norm blocks with causal
self-attention and a GELU MLP, tied LM head) dumped by our package, bench and "NPU" (one block's
MLP weights perturbed), in tensor and in statistics mode; made once under target/bench-compare.
Each tool runs from a cold process start with its output in a fresh directory; we report the
median wall time of --runs runs and the peak RSS (ru_maxrss of the largest process; msprobe's
worker processes are counted one by one, so its figure is a lower bound).

usage: python scripts/bench_compare.py [--runs 3] [--layers 24] [--out target/bench-compare]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
V111 = REPO / "target/venv-msprobe111/bin"
CLI = REPO / "target/release/msprobe"

DUMP = r"""
import sys, json, os, math, torch, torch.nn as nn, torch.nn.functional as F
from msprobe.pytorch import PrecisionDebugger
out, task, perturb, layers = sys.argv[1], sys.argv[2], sys.argv[3] == "1", int(sys.argv[4])
cfg = {"task": task, "dump_path": out, "rank": [], "step": [], "level": "L1",
       task: {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"}}
os.makedirs(os.path.dirname(out), exist_ok=True)
cp = out + ".json"; json.dump(cfg, open(cp, "w"))
torch.manual_seed(0); torch.set_num_threads(1)
D, H, T, B, V = 144, 4, 64, 2, 512
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(D); self.qkv = nn.Linear(D, 3 * D); self.proj = nn.Linear(D, D)
        self.ln2 = nn.LayerNorm(D); self.fc = nn.Linear(D, 4 * D); self.out = nn.Linear(4 * D, D)
    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
        q, k, v = (t.view(B, T, H, D // H).transpose(1, 2) for t in (q, k, v))
        att = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(D // H)
        att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        y = torch.matmul(F.softmax(att, dim=-1), v).transpose(1, 2).reshape(B, T, D)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))
class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(V, D); self.wpe = nn.Embedding(T, D)
        self.blocks = nn.ModuleList(Block() for _ in range(layers)); self.ln = nn.LayerNorm(D)
    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.blocks: x = b(x)
        return F.linear(self.ln(x), self.wte.weight)
m = GPT()
if perturb:
    with torch.no_grad():
        m.blocks[layers // 2].fc.weight += 1e-3 * torch.randn(m.blocks[layers // 2].fc.weight.shape,
                                                                generator=torch.Generator().manual_seed(7))
g = torch.Generator().manual_seed(1234)
idx = torch.randint(0, V, (B, T), generator=g)
d = PrecisionDebugger(config_path=cp); d.start()
logits = m(idx)
F.cross_entropy(logits.view(-1, V), idx.view(-1)).backward()
d.stop(); d.step()
"""

MEASURE = r"""
import sys, time, resource, subprocess, json
t = time.perf_counter()
p = subprocess.run(sys.argv[2:], cwd=sys.argv[1], capture_output=True, text=True)
dt = time.perf_counter() - t
print(json.dumps({"rc": p.returncode, "s": dt, "rss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
                  "err": (p.stdout + p.stderr)[-1500:] if p.returncode else ""}))
"""


def make_dumps(root: Path, layers: int) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"), MSPROBE_LIB=str(REPO / "target/release/libmsprobe.so"))
    env["MSPROBE_LOG_LEVEL"] = "2"
    for task in ("tensor", "statistics"):
        for side, perturb in (("npu", "1"), ("bench", "0")):
            d = root / task / side
            if (d / "step0" / "rank" / "dump.json").exists():
                continue
            shutil.rmtree(d, ignore_errors=True)
            subprocess.run(
                [str(REPO / ".venv/bin/python"), "-c", DUMP, str(d), task, perturb, str(layers)], env=env, check=True
            )


def measure(cmd: list[str], cwd: Path) -> dict:
    p = subprocess.run([sys.executable, "-c", MEASURE, str(cwd), *cmd], capture_output=True, text=True, check=True)
    return json.loads(p.stdout)


def du(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--out", default=str(REPO / "target/bench-compare"))
    a = ap.parse_args()
    root = Path(a.out)
    make_dumps(root, a.layers)
    print(
        f"{'mode':<11}{'records':>8}{'rows':>7}{'files':>7}{'MB/side':>9}"
        f"  {'msprobe 1.1.1':>22}  {'msprobe-rs':>20}  speed-up"
    )
    for task in ("tensor", "statistics"):
        npu, bench = (root / task / s / "step0" / "rank" for s in ("npu", "bench"))
        cfg = root / task / "compare.json"
        cfg.write_text(
            json.dumps(
                {
                    "npu_path": str(npu / "dump.json"),
                    "bench_path": str(bench / "dump.json"),
                    "stack_path": str(npu / "stack.json"),
                    "is_print_compare_log": False,
                }
            )
        )
        recs = len(json.loads((npu / "dump.json").read_text())["data"])
        files = len(list((npu / "dump_tensor_data").glob("*"))) if (npu / "dump_tensor_data").exists() else 0
        res: dict[str, list[dict]] = {"111": [], "rs": []}
        rows = 0
        for i in range(a.runs):
            for tool in ("111", "rs"):
                out = root / task / f"out-{tool}-{i}"
                shutil.rmtree(out, ignore_errors=True)
                out.mkdir(parents=True)
                if tool == "111":
                    cmd = [str(V111 / "msprobe"), "-f", "pytorch", "compare", "-i", str(cfg), "-o", str(out)]
                else:
                    cmd = [str(CLI), "-f", "pytorch", "compare", "-i", str(cfg), "-o", str(out), "--no-progress"]
                r = measure(cmd, out)
                if r["rc"] != 0:
                    sys.exit(f"{tool} failed: {r['err']}")
                res[tool].append(r)
                if tool == "rs":
                    csvs = list(out.glob("compare_result*.csv"))
                    rows = csvs[0].read_text().count("\n") - 1 if csvs else 0
        t111 = statistics.median(r["s"] for r in res["111"])
        trs = statistics.median(r["s"] for r in res["rs"])
        m111 = max(r["rss_kib"] for r in res["111"]) / 1024
        mrs = max(r["rss_kib"] for r in res["rs"]) / 1024
        print(
            f"{task:<11}{recs:>8}{rows:>7}{files:>7}{du(npu) / 1e6:>9.0f}  {t111:>9.2f} s {m111:>6.0f} MiB  "
            f"{trs:>7.3f} s {mrs:>6.0f} MiB  {t111 / trs:>6.1f}x"
        )


if __name__ == "__main__":
    main()
