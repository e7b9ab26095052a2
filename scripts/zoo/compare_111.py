"""msprobe 1.1.1's own compare CLI on the zoo: our dump (as "npu") against msprobe 1.1.1's dump
of the same driver and config (as "bench"), per case and zoo model (step), after
`scripts/diff_msprobe.py` made both. Prints the count of each result per case and model.

usage: python scripts/zoo/compare_111.py [--cases L1-tensor,mix-md5] [--models mlp,cnn]
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
V111 = REPO / "target/venv-msprobe111/bin"

SUMMARY = r"""
import sys, glob, json, collections, pandas as pd
f = sorted(glob.glob(sys.argv[1] + "/compare_result_*.xlsx"))[-1]
df = pd.read_excel(f)
col = "Accuracy Reached or Not" if "Accuracy Reached or Not" in df.columns else "Result"
bad = df[~df[col].astype(str).isin(["pass", "Yes", "nan", "Pass"])]
print(json.dumps({"rows": len(df), "results": dict(collections.Counter(map(str, df[col]))),
                  "not_passing": bad["NPU Name"].astype(str).tolist()[:20]}))
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="L1-statistics,L1-md5,L1-tensor")
    ap.add_argument("--models", default="")
    ap.add_argument("--out", default=str(REPO / "target/zoo"))
    ap.add_argument("--cache", default=str(REPO / "target/zoo-cache"))
    a = ap.parse_args()
    out, cache = Path(a.out), Path(a.cache)
    total: dict[str, collections.Counter] = {}
    for case in a.cases.split(","):
        refs = [d for d in cache.glob(f"{case}-*") if (d / ".done").exists() and len(d.name) == len(case) + 21]
        if not refs:
            print(f"{case}: no 1.1.1 run cached (run scripts/diff_msprobe.py first)")
            continue
        ref = refs[0]
        models = list(json.loads((ref / "crc.json").read_text()))
        total[case] = collections.Counter()
        for k, m in enumerate(models):
            if a.models and m not in a.models.split(","):
                continue
            npu, bench = out / case / "dump" / f"step{k}" / "rank", ref / "dump" / f"step{k}" / "rank"
            if not (npu / "dump.json").exists() or not json.loads((bench / "dump.json").read_text()).get("data"):
                print(f"{case} {m}: nothing to compare")
                continue
            with tempfile.TemporaryDirectory() as td:
                cj = Path(td) / "compare.json"
                cj.write_text(
                    json.dumps(
                        {
                            "npu_path": str(npu / "dump.json"),
                            "bench_path": str(bench / "dump.json"),
                            "stack_path": str(npu / "stack.json"),
                            "is_print_compare_log": False,
                        }
                    )
                )
                res = Path(td) / "result"
                res.mkdir()
                p = subprocess.run(
                    [str(V111 / "msprobe"), "-f", "pytorch", "compare", "-i", str(cj), "-o", str(res)],
                    capture_output=True,
                    text=True,
                    cwd=td,
                )
                if p.returncode != 0:
                    print(f"{case} {m}: compare exit {p.returncode}: {p.stderr[-500:]}")
                    continue
                s = subprocess.run([str(V111 / "python"), "-c", SUMMARY, str(res)], capture_output=True, text=True)
                try:
                    r = json.loads(s.stdout.strip().splitlines()[-1])
                except (ValueError, IndexError):
                    print(f"{case} {m}: no summary: {s.stderr[-500:]}")
                    continue
            total[case].update(r["results"])
            print(
                f"{case:<15} {m:<10} rows {r['rows']:>4} {r['results']}"
                + (f" not passing: {r['not_passing'][:6]}" if r["not_passing"] else "")
            )
    for case, c in total.items():
        print(f"{case}: {dict(c)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
