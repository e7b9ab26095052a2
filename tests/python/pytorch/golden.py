"""Comparison of our dumps with msprobe 1.1.1's samples (the independent truth).

Same record names in the same order, same keys in the same order, equal non-numeric fields,
equal CRCs and data_name, statistics within tolerance (f32/f64/int: 1e-6 relative + 1e-6 x
max|x| of the leaf; f16/bf16: one rounding step of the dtype).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

# msprobe 1.1.1's samples, vendored in the repository (tests/data/README.md).
SAMPLES = Path(__file__).resolve().parents[2] / "data" / "samples" / "msprobe-1.1.1-pytorch"
FRAME = re.compile(r"^File .+, line \d+, in .+, \n .+$", re.S)
STATS = ("Max", "Min", "Mean", "Norm", "Max_except_inf_nan", "Min_except_inf_nan")
# In-place records whose input_args[0] we record before the op (1.1.1: after). README "PyTorch layer".


def load(p: Path) -> Any:
    return json.loads(p.read_text())


def _close(a: Any, b: Any, dtype: str, scale: float) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a == b
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    if dtype in ("torch.float16", "torch.bfloat16"):
        eps = 2.0**-10 if dtype == "torch.float16" else 2.0**-7
        return abs(a - b) <= eps * max(abs(a), abs(b), scale) + 1e-7
    return abs(a - b) <= 1e-6 * abs(b) + 1e-6 * scale


class Diff:
    """Differences of one comparison: `errs` (failures) and `crc` (CRC mismatches, as key paths
    into the record, left to the caller: they are legitimate only where torch 2.14 and 2.15
    computed different bits, which the tensor-mode twin of the case shows)."""

    def __init__(self, numbers: bool = True) -> None:
        self.errs: list[str] = []
        self.crc: list[tuple] = []
        self.numbers = numbers


def compare_tree(ours: Any, ref: Any, path: tuple, d: Diff, skip_stats: bool = False) -> None:
    errs = d.errs
    skip_stats = skip_stats or not d.numbers
    if isinstance(ref, dict) and isinstance(ours, dict):
        if list(ours.keys()) != list(ref.keys()):
            errs.append(f"{path}: keys {list(ours.keys())} != {list(ref.keys())}")
            return
        if ref.get("type") == "torch.Tensor" and "dtype" in ref:
            scale = max(
                (
                    abs(ref[k])
                    for k in ("Max", "Min")
                    if isinstance(ref.get(k), (int, float))
                    and not isinstance(ref.get(k), bool)
                    and math.isfinite(ref[k])
                ),
                default=0.0,
            )
            for k, v in ref.items():
                if k in STATS:
                    if not skip_stats and not _close(ours[k], v, ref["dtype"], scale):
                        errs.append(f"{_p(path)}.{k}: {ours[k]!r} != {v!r}")
                elif k == "md5" and ours[k] != v:
                    if d.numbers:
                        d.crc.append(path)
                elif ours[k] != v:
                    errs.append(f"{_p(path)}.{k}: {ours[k]!r} != {v!r}")
            return
        for k in ref:
            compare_tree(ours[k], ref[k], path + (k,), d, skip_stats)
    elif isinstance(ref, list) and isinstance(ours, list):
        if len(ours) != len(ref):
            errs.append(f"{_p(path)}: length {len(ours)} != {len(ref)}")
            return
        for i, (o, r) in enumerate(zip(ours, ref)):
            compare_tree(o, r, path + (i,), d, skip_stats)
    elif isinstance(ref, float) and isinstance(ours, (int, float)):
        if not skip_stats and not _close(ours, ref, "", 0.0):
            errs.append(f"{_p(path)}: {ours!r} != {ref!r}")
    elif ours != ref and not (skip_stats and isinstance(ref, (int, float))):
        errs.append(f"{_p(path)}: {ours!r} != {ref!r}")


def _p(path: tuple) -> str:
    return ".".join(str(x) for x in path)


def compare_dump(ours_dir: Path, ref_dir: Path, numbers: bool = True, stack: bool = True) -> Diff:
    """All differences between two rank directories."""
    d = Diff(numbers)
    errs = d.errs
    o, r = load(ours_dir / "dump.json"), load(ref_dir / "dump.json")
    if list(o) != list(r):
        errs.append(f"top-level keys {list(o)} != {list(r)}")
    for k in ("task", "level"):
        if o.get(k) != r.get(k):
            errs.append(f"{k}: {o.get(k)} != {r.get(k)}")
    rd, od = r.get("dump_data_dir"), o.get("dump_data_dir")
    if (rd is None) != (od is None) or (rd and not od.endswith(rd.replace("<dump_path>", ""))):
        errs.append(f"dump_data_dir {od} vs {rd}")
    if list(o["data"]) != list(r["data"]):
        errs.append(f"records {list(o['data'])} != {list(r['data'])}")
        return d
    for name, body in r["data"].items():
        # in-place APIs included: their inputs are recorded after the op, as 1.1.1 does
        compare_tree(o["data"][name], body, (name,), d)
    oc, rc = load(ours_dir / "construct.json"), load(ref_dir / "construct.json")
    if list(oc.items()) != list(rc.items()):
        errs.append(f"construct.json {list(oc.items())} != {list(rc.items())}")
    if stack:
        errs += compare_stack(load(ours_dir / "stack.json"), load(ref_dir / "stack.json"))
    return d


def compare_stack(ours: dict, ref: dict) -> list[str]:
    """Same records in the same order, msprobe's frame format, and the same function names from
    the user side (the innermost msprobe-internal frames differ by construction)."""
    errs = []
    if list(ours) != list(ref):
        return [f"stack.json records {list(ours)} != {list(ref)}"]
    for name, frames in ref.items():
        of = ours[name]
        if not all(isinstance(f, str) and FRAME.match(f) for f in of):
            errs.append(f"stack {name}: bad frame format {of[:1]}")

        def fn(fs):
            return [
                f.split(", in ", 1)[1].split(",", 1)[0]
                for f in fs
                if "msprobe" not in f.split(", line")[0] and "forkrun.py" not in f.split(", line")[0]
            ]

        if fn(of) != fn(frames):
            errs.append(f"stack {name}: functions {fn(of)} != {fn(frames)}")
    return errs
