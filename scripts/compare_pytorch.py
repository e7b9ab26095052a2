"""msprobe 1.1.1's compare CLI on two msprobe-rs dumps (statistics, md5, tensor modes).

bench = the MLP of run_case.py (seed 0); "npu" = the same with fc2.weight + 1e-3 * N(0, 1)
(msprobe-format.md §9.9). Each dump is one L1 training step made with msprobe.pytorch; the
compare runs in target/venv-msprobe111 and its xlsx is summarised.

usage: python scripts/compare_pytorch.py [--out target/compare-pytorch]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
V111 = REPO / "target/venv-msprobe111/bin"

DUMP = r"""
import sys, torch, torch.nn as nn, torch.nn.functional as F
from msprobe.pytorch import PrecisionDebugger
out, task, summary, perturb = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
import json, os
cfg = {"task": task, "dump_path": out, "rank": [], "step": [], "level": "L1",
       task: {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": summary}}
os.makedirs(os.path.dirname(out), exist_ok=True)
cp = out + ".json"; json.dump(cfg, open(cp, "w"))
torch.manual_seed(0); torch.set_num_threads(1)
class MLP(nn.Module):
    def __init__(self):
        super().__init__(); self.fc1 = nn.Linear(32, 64); self.act = nn.ReLU()
        self.fc2 = nn.Linear(64, 64); self.fc3 = nn.Linear(64, 10)
    def forward(self, x): return self.fc3(self.act(self.fc2(self.act(self.fc1(x)))))
m = MLP()
if perturb:
    with torch.no_grad():
        m.fc2.weight += 1e-3 * torch.randn(m.fc2.weight.shape, generator=torch.Generator().manual_seed(7))
opt = torch.optim.SGD(m.parameters(), lr=0.01)
g = torch.Generator().manual_seed(1234)
x, y = torch.randn(16, 32, generator=g), torch.randint(0, 10, (16,), generator=g)
d = PrecisionDebugger(config_path=cp); d.start()
F.cross_entropy(m(x), y).backward(); opt.step(); opt.zero_grad()
d.stop(); d.step()
"""

SUMMARY = r"""
import sys, glob, collections, pandas as pd
f = sorted(glob.glob(sys.argv[1] + "/compare_result_*.xlsx"))[-1]
df = pd.read_excel(f)
col = "Accuracy Reached or Not" if "Accuracy Reached or Not" in df.columns else "Result"
print(f.split("/")[-1], "rows", len(df), dict(collections.Counter(map(str, df[col]))))
row = df[df["NPU Name"].astype(str).str.contains("Functional.linear.1.forward.input.1")]
cols = [c for c in ("Cosine", "MaxAbsErr", "Max diff", "MaxRelativeErr", "NPU MD5", "BENCH MD5", col)
        if c in df.columns]
print("  Functional.linear.1.forward.input.1:", row[cols].to_dict("records"))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(REPO / "target/compare-pytorch"))
    root = Path(ap.parse_args().out)
    shutil.rmtree(root, ignore_errors=True)
    env = dict(
        os.environ,
        PYTHONPATH=str(REPO / "python"),
        MSPROBE_LIB=str(REPO / "target/release/libmsprobe.so"),
        MSPROBE_LOG_LEVEL="2",
    )
    for mode, task, summary in (
        ("statistics", "statistics", "statistics"),
        ("md5", "statistics", "md5"),
        ("tensor", "tensor", "statistics"),
    ):
        for side, perturb in (("npu", "1"), ("bench", "0")):
            subprocess.run(
                [str(REPO / ".venv/bin/python"), "-c", DUMP, str(root / mode / side), task, summary, perturb],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            )

        npu, bench = (root / mode / side / "step0" / "rank" for side in ("npu", "bench"))
        cj = root / mode / "compare.json"
        cj.write_text(
            json.dumps(
                {
                    "npu_path": str(npu / "dump.json"),
                    "bench_path": str(bench / "dump.json"),
                    "stack_path": str(npu / "stack.json"),
                    "is_print_compare_log": True,
                }
            )
        )
        res = root / mode / "result"
        res.mkdir()
        p = subprocess.run(
            [str(V111 / "msprobe"), "-f", "pytorch", "compare", "-i", str(cj), "-o", str(res)],
            capture_output=True,
            text=True,
            cwd=root / mode,
        )
        print(f"== {mode}: msprobe 1.1.1 compare exit {p.returncode}")
        if p.returncode != 0:
            print(p.stdout[-3000:], p.stderr[-3000:])
            continue
        s = subprocess.run([str(V111 / "python"), "-c", SUMMARY, str(res)], capture_output=True, text=True)
        print(s.stdout + s.stderr[-2000:])


if __name__ == "__main__":
    main()
