"""Compare a msprobe-rs MindSpore dump with a msprobe 1.1.1 sample dump (same driver): record names and
order, body structure, leaf keys/types/dtypes/shapes, statistics within tolerance, construct.json and
stack.json keys. Returns a list of differences (empty = match). Also usable as a script:
    python golden_compare.py OURS_STEP_RANK_DIR SAMPLE_STEP_RANK_DIR
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

STATS = ("Max", "Min", "Mean", "Norm")


def _close(a, b, scale) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= 1e-5 * max(abs(a), abs(b)) + 1e-6 * scale + 1e-7


def _leaf(path, a, b, diffs):
    if type(a) is not type(b):
        diffs.append(f"{path}: {json.dumps(a)[:120]} vs {json.dumps(b)[:120]}")
        return
    if isinstance(a, list):
        if len(a) != len(b):
            diffs.append(f"{path}: list length {len(a)} vs {len(b)}")
            return
        for i, (x, y) in enumerate(zip(a, b)):
            _leaf(f"{path}[{i}]", x, y, diffs)
        return
    if isinstance(a, dict):
        if "type" in a and "dtype" in a:  # tensor leaf
            ka = [k for k in a if k not in ("data_name", "md5")]
            kb = [k for k in b if k not in ("data_name", "md5")]
            if ka != kb:
                diffs.append(f"{path}: keys {ka} vs {kb}")
                return
            for k in ("type", "dtype", "shape"):
                if a[k] != b[k]:
                    diffs.append(f"{path}.{k}: {a[k]} vs {b[k]}")
            scale = max(abs(b.get("Max") or 0), abs(b.get("Min") or 0))
            for k in STATS:
                if k in a and not _close(a[k], b[k], scale):
                    diffs.append(f"{path}.{k}: {a[k]} vs {b[k]}")
            if ("data_name" in a) != ("data_name" in b) or a.get("data_name") != b.get("data_name"):
                diffs.append(f"{path}.data_name: {a.get('data_name')} vs {b.get('data_name')}")
            if "md5" in a and (not isinstance(a["md5"], str) or len(a["md5"]) != 8):
                diffs.append(f"{path}.md5 malformed: {a['md5']}")
            return
        if list(a) != list(b):
            diffs.append(f"{path}: keys {list(a)} vs {list(b)}")
            return
        for k in a:
            _leaf(f"{path}.{k}", a[k], b[k], diffs)
        return
    if isinstance(a, float) and isinstance(b, float):
        if not _close(a, b, 1.0):
            diffs.append(f"{path}: {a} vs {b}")
    elif a != b:
        diffs.append(f"{path}: {a} vs {b}")


def compare(ours: Path, sample: Path, check_order: bool = True, values: bool = True) -> list[str]:
    diffs: list[str] = []
    a = json.loads((ours / "dump.json").read_text())
    b = json.loads((sample / "dump.json").read_text())
    for k in ("task", "level"):
        if a.get(k) != b.get(k):
            diffs.append(f"header {k}: {a.get(k)} vs {b.get(k)}")
    if list(a) != list(b):
        diffs.append(f"top-level keys {list(a)} vs {list(b)}")
    na, nb = list(a["data"]), list(b["data"])
    if set(na) != set(nb):
        diffs.append(f"records only in ours: {sorted(set(na) - set(nb))}; only in sample: {sorted(set(nb) - set(na))}")
    elif check_order and na != nb:
        diffs.append(f"record order differs: {[x for x, y in zip(na, nb) if x != y][:5]}")
    if values:
        for k in na:
            if k in b["data"]:
                _leaf(k, a["data"][k], b["data"][k], diffs)
    ca = json.loads((ours / "construct.json").read_text())
    cb = json.loads((sample / "construct.json").read_text())
    if ca != cb:
        diffs.append(f"construct.json differs: {sorted(set(ca.items()) ^ set(cb.items()))[:6]}")
    sa = json.loads((ours / "stack.json").read_text())
    sb = json.loads((sample / "stack.json").read_text())
    if set(sa) != set(sb):
        diffs.append(f"stack.json keys differ: {sorted(set(sa) ^ set(sb))}")
    return diffs


if __name__ == "__main__":
    d = compare(Path(sys.argv[1]), Path(sys.argv[2]))
    print("\n".join(d) if d else "MATCH")
    sys.exit(1 if d else 0)
