"""Differential harness: the zoo (scripts/zoo/zoo_pt.py; with --framework ms scripts/zoo/zoo_ms.py)
under msprobe 1.1.1 and under msprobe-rs, same driver, same config; every dump compared record by
record and leaf by leaf.

MindSpore (--framework ms): both sides run in target/venv-ms (MindSpore 2.10, PyNative on CPU);
1.1.1 from target/msprobe-1.1.1 (scripts/setup-ms.sh --msprobe) with the driver's --shim (its two
import/kernel workarounds for 2.10), ours with PYTHONPATH=python; tensor files are .npy (np.load);
cache under target/zoo-cache-ms, baseline tests/data/zoo_ms_baseline.json.

For each case (level x task x summary mode, plus a few scope/list/data_mode filters) both sides
run the driver in a fresh process (1.1.1 in target/venv-msprobe111, ours in .venv with
PYTHONPATH=python). 1.1.1's runs are cached under target/zoo-cache/{hash of driver, case, torch, checkout path}.
Compared per step (one zoo model per step):
- record names and their order in dump.json;
- every leaf of every record: statistics Max/Min exact, Mean/Norm within the README's tolerance
  (1e-6 relative + 1e-6 x max|x| for float32, 2^-7 relative for 16-bit floats), everything else
  (md5, shapes, dtypes, values, data_name, requires_grad...) exact;
- tensor files: same file names, dtype, shape and bit-identical contents (torch.load);
- stack.json and construct.json: same keys in the same order, same values.
And the computation: every loss, gradient and parameter CRC of our captured run equals those of
an uncaptured run of the same driver (`--off`).

usage: python scripts/diff_msprobe.py [--framework pt|ms] [--cases a,b] [--models m1,m2] [--out target/zoo] [--json F]
Exit status 1 when a case diverges beyond tests/data/zoo_baseline.json (or --strict: at all). The baseline
counts record-name and leaf differences over the models whose 1.1.1 run computed what an uncaptured run
computes (CRCs); a model 1.1.1 perturbs (selfattn, encdec) is reported but not counted, because the number of
leaves its rounding touches depends on the machine.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DRIVER = REPO / "scripts/zoo/zoo_pt.py"
V111 = REPO / "target/venv-msprobe111/bin/python"
# .venv may be a symlink (a worktree sharing the main checkout's venv): run it by its real
# directory, as 1.1.1's venv reaches torch, so both sides' stack.json name the same torch files
OURS = (REPO / ".venv").resolve() / "bin/python"
BASELINE = REPO / "tests/data/zoo_baseline.json"

# id -> (level, task, summary_mode, extra driver args)
CASES: dict[str, tuple[str, str, str, list[str]]] = {}
for _lv in ("L0", "L1", "mix"):
    CASES[f"{_lv}-statistics"] = (_lv, "statistics", "statistics", [])
    CASES[f"{_lv}-md5"] = (_lv, "statistics", "md5", [])
    CASES[f"{_lv}-tensor"] = (_lv, "tensor", "statistics", [])
CASES["L1-list"] = ("L1", "statistics", "statistics", ["--list", "linear,softmax,add_"])
CASES["L1-forward"] = ("L1", "statistics", "md5", ["--data-mode", "forward"])
CASES["mix-scope"] = (
    "mix",
    "statistics",
    "statistics",
    ["--scope", "Module.gpt_adamw.block.Block.forward.0,Module.gpt_adamw.head.Linear.forward.0"],
)
CASES["L0-input"] = ("L0", "statistics", "statistics", ["--data-mode", "input"])
# mix list: an entry naming a module dumps every API inside it (1.1.1's MixRangeScope); "block"
# also names modules nested in the Block (their end clears 1.1.1's one flag)
CASES["mix-list"] = ("mix", "statistics", "statistics", ["--list", "block,fc1,softmax"])

# MindSpore: the same levels and tasks; list/scope name MindSpore APIs and Cells
CASES_MS: dict[str, tuple[str, str, str, list[str]]] = dict(CASES)
del CASES_MS["mix-list"]  # PyTorch only (MindSpore's Cell spans are not reported yet)
CASES_MS["L1-list"] = ("L1", "statistics", "statistics", ["--list", "cat,stack,matmul"])
CASES_MS["mix-scope"] = (
    "mix",
    "statistics",
    "statistics",
    ["--scope", "Cell.catlist.CatList.forward.0,Cell.catlist.out.Dense.forward.0"],
)
# mix list: a Cell name (everything inside it passes, 1.1.1's MixRangeScope.in_list) and an API
CASES_MS["mix-list"] = ("mix", "statistics", "statistics", ["--list", "bprop.sq,stack"])
MS_PY = REPO / "target/venv-ms/bin/python"
FRAMEWORK = "pt"

HALF = {"torch.float16", "torch.bfloat16", "Float16", "BFloat16"}
# dtypes whose Mean/Norm the PyTorch layer takes from torch itself (tensors.py mean_norm; integers
# and float64 cast to float32 first, as 1.1.1)
TORCH_OWN_MEAN_NORM = {
    *(f"torch.{t}" for t in ("float32", "float16", "bfloat16", "float64")),
    *(f"torch.{t}{n}" for t in ("int", "uint") for n in (8, 16, 32, 64)),
}


def use_framework(fw: str) -> None:
    """Point the harness at the MindSpore zoo (same comparison, other driver, venvs, cache, baseline)."""
    global DRIVER, V111, OURS, BASELINE, CASES, FRAMEWORK
    FRAMEWORK = fw
    if fw == "ms":
        DRIVER, V111, OURS = REPO / "scripts/zoo/zoo_ms.py", MS_PY, MS_PY
        BASELINE = REPO / "tests/data/zoo_ms_baseline.json"
        CASES = CASES_MS


def torch_version() -> str:
    mod = "mindspore" if FRAMEWORK == "ms" else "torch"
    return subprocess.run(
        [str(OURS), "-c", f"import {mod}; print({mod}.__version__)"], capture_output=True, text=True, check=True
    ).stdout.strip()


def case_args(case: str, models: str, ref: bool = False) -> list[str]:
    level, task, summary, extra = CASES[case]
    shim = ["--shim"] if ref and FRAMEWORK == "ms" else []
    return [level, task, summary, *extra, *shim] + (["--models", models] if models else [])


def run_side(python: Path, out: Path, args: list[str], env: dict[str, str]) -> float:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    t = time.monotonic()
    p = subprocess.run(
        [str(python), str(DRIVER), str(out), *args], env=env, capture_output=True, text=True, timeout=1800
    )
    (out / "log.txt").write_text(p.stdout + p.stderr)
    if p.returncode != 0:
        raise RuntimeError(f"{python} {DRIVER.name} {' '.join(args)}: exit {p.returncode}\n{p.stderr[-3000:]}")
    return time.monotonic() - t


def env_111() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("MSPROBE")}
    e.pop("PYTHONPATH", None)
    if FRAMEWORK == "ms":
        e["PYTHONPATH"] = str(REPO / "target/msprobe-1.1.1")
    return e


OURS_ROOT = REPO  # --ours-root: another checkout (with its release build), e.g. for before/after numbers


def env_ours() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("MSPROBE")}
    e.update(
        PYTHONPATH=str(OURS_ROOT / "python"),
        MSPROBE_LIB=str(OURS_ROOT / "target/release/libmsprobe.so"),
        MSPROBE_FASTPATH=str(OURS_ROOT / "target/release/lib_fastpath.so"),
        MSPROBE_LOG_LEVEL="2",
    )
    return e


def reference(case: str, models: str, tv: str, cache: Path) -> Path:
    """1.1.1's run of `case`, from the cache when the driver, the case, torch and the checkout's path
    (stack.json names files by path) are unchanged."""
    key = hashlib.sha256(
        DRIVER.read_bytes() + json.dumps([case_args(case, models), "mindstudio-probe 1.1.1", tv, str(REPO)]).encode()
    ).hexdigest()[:20]
    d = cache / f"{case}-{key}"
    for old in cache.glob(f"{case}-*"):  # runs of an older driver or torch
        if old != d and len(old.name) == len(d.name):
            shutil.rmtree(old, ignore_errors=True)
    if (d / ".done").exists():
        return d
    run_side(V111, d, case_args(case, models, ref=True), env_111())
    (d / ".done").write_text("")
    return d


# ---------------------------------------------------------------- comparison


def load(p: Path) -> Any:
    with open(p) as f:
        return json.load(f, object_pairs_hook=collections.OrderedDict)


def leaves(v: Any, path: str, out: list, ctx: dict) -> None:
    if isinstance(v, dict):
        if "type" in v and ("Max" in v or "md5" in v or "data_name" in v):
            ctx = v
        for k, x in v.items():
            leaves(x, f"{path}.{k}", out, ctx)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            leaves(x, f"{path}[{i}]", out, ctx)
        if not v:
            out.append((path, "[]", ctx))
    else:
        out.append((path, v, ctx))


def same_float(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b and type(a) is type(b)


def leaf_ok(path: str, a: Any, b: Any, ctx: dict) -> bool:
    key = path.rsplit(".", 1)[-1]
    if key in ("Mean", "Norm") and isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if same_float(float(a), float(b)):
            return True
        if FRAMEWORK == "pt" and ctx.get("dtype") in TORCH_OWN_MEAN_NORM:
            return False  # the PyTorch layer writes torch's own values: bit for bit
        if any(isinstance(x, float) and not math.isfinite(x) for x in (a, b)):
            return False
        if ctx.get("dtype") in HALF:
            return abs(a - b) <= 2**-7 * abs(b) + 1e-12
        mx = max(abs(float(ctx.get("Max") or 0)), abs(float(ctx.get("Min") or 0)))
        return abs(a - b) <= 1e-6 * abs(b) + (1e-6 * mx if key == "Mean" else 0.0) + 1e-30
    return same_float(a, b)


class CaseResult:
    def __init__(self) -> None:
        self.records = [0, 0]  # ours, 1.1.1
        self.names_equal = True
        self.leaves = 0
        self.leaf_diffs = 0
        self.diffs: list[str] = []
        self.kinds: collections.Counter = collections.Counter()

    def diff(self, kind: str, text: str) -> None:
        self.leaf_diffs += 1
        self.kinds[kind] += 1
        if len(self.diffs) < 400:
            self.diffs.append(text)


def api_of(name: str) -> str:
    parts = name.split(".")
    if parts[0] == "Module":
        return ".".join(parts[:-2] if parts[-2] in ("forward", "backward") else parts)
    return ".".join(parts[:2])


def compare_tensor_files(r: CaseResult, ours_dir: Path, ref_dir: Path, names: list[str]) -> None:
    if FRAMEWORK == "ms":
        compare_npy_files(r, ours_dir, ref_dir, names)
        return
    import torch

    for n in names:
        a, b = ours_dir / n, ref_dir / n
        r.leaves += 1
        if not a.exists() or not b.exists():
            r.diff(
                "tensor-file-missing",
                f"tensor file {n}: ours {'ok' if a.exists() else 'missing'}, 1.1.1 {'ok' if b.exists() else 'missing'}",
            )
            continue
        ta, tb = torch.load(a, weights_only=True), torch.load(b, weights_only=True)
        if (
            ta.dtype != tb.dtype
            or ta.shape != tb.shape
            or not torch.equal(
                ta.view(-1).view(torch.uint8) if ta.numel() else ta, tb.view(-1).view(torch.uint8) if tb.numel() else tb
            )
        ):
            r.diff("tensor-file-value", f"tensor file {n}: values differ")


def compare_npy_files(r: CaseResult, ours_dir: Path, ref_dir: Path, names: list[str]) -> None:
    import numpy as np

    for n in names:
        a, b = ours_dir / n, ref_dir / n
        r.leaves += 1
        if not a.exists() or not b.exists():
            r.diff(
                "tensor-file-missing",
                f"tensor file {n}: ours {'ok' if a.exists() else 'missing'}, 1.1.1 {'ok' if b.exists() else 'missing'}",
            )
            continue
        ta, tb = np.load(a, allow_pickle=False), np.load(b, allow_pickle=False)
        if ta.dtype != tb.dtype or ta.shape != tb.shape or ta.tobytes() != tb.tobytes():
            r.diff("tensor-file-value", f"tensor file {n}: values differ")


def compare_step(r: CaseResult, ours: Path, ref: Path) -> None:
    files = ("dump.json", "stack.json", "construct.json")
    for f in files:
        if (ours / f).exists() != (ref / f).exists():
            r.names_equal = False
            r.diffs.append(f"{ours}: {f} exists only on one side")
    if not (ref / "dump.json").exists() or not (ours / "dump.json").exists():
        return
    da, db = load(ours / "dump.json"), load(ref / "dump.json")
    for k in ("task", "level"):
        r.leaves += 1
        if da.get(k) != db.get(k):
            r.diff("header", f"dump.json {k}: ours {da.get(k)!r} 1.1.1 {db.get(k)!r}")
    ra, rb = da.get("data", {}), db.get("data", {})
    r.records[0] += len(ra)
    r.records[1] += len(rb)
    if list(ra) != list(rb):
        r.names_equal = False
        only_a = [n for n in ra if n not in rb]
        only_b = [n for n in rb if n not in ra]
        r.diffs.append(
            f"{ours.parent.name}: record names differ: only ours {only_a[:8]}{'...' if len(only_a) > 8 else ''}"
            f" ({len(only_a)}), only 1.1.1 {only_b[:8]}{'...' if len(only_b) > 8 else ''} ({len(only_b)})"
        )
        if not only_a and not only_b:
            r.diffs.append(f"{ours.parent.name}: same names, other order")
    tensor_names: list[str] = []
    for name in rb:
        la: list = []
        lb: list = []
        leaves(rb[name], "", lb, {})
        if name not in ra:
            r.leaves += len(lb)
            r.leaf_diffs += len(lb)
            r.kinds["record-missing"] += len(lb)
            continue
        leaves(ra[name], "", la, {})
        pa = {p: (v, c) for p, v, c in la}
        r.leaves += len(lb)
        if [p for p, _, _ in la] != [p for p, _, _ in lb]:
            extra = [p for p, _, _ in la if p not in {q for q, _, _ in lb}]
            if extra:
                r.diff(f"{api_of(name)}:extra-leaves", f"{name}: leaves only ours {extra[:5]}")
        for p, v, c in lb:
            if p not in pa:
                r.diff(f"{api_of(name)}:{p.rsplit('.', 1)[-1]}:missing", f"{name}{p}: missing in ours (1.1.1 {v!r})")
                continue
            va = pa[p][0]
            if p.endswith(".data_name") and isinstance(v, str) and v == va:
                tensor_names.append(v)
            if not leaf_ok(p, va, v, c):
                kind = p.rsplit(".", 1)[-1]
                r.diff(f"{api_of(name)}:{kind}", f"{name}{p}: ours {va!r} 1.1.1 {v!r}")
    if tensor_names:
        compare_tensor_files(r, ours / "dump_tensor_data", ref / "dump_tensor_data", tensor_names)
    for f in ("dump.json", "stack.json", "construct.json"):
        # our JSON text is Python's json.dump(indent=1) of the same data, byte for byte
        text = (ours / f).read_text() if (ours / f).exists() else None
        if text is not None:
            r.leaves += 1
            if json.dumps(json.loads(text), indent=1) != text:
                r.diff("json-text", f"{ours.parent.name}/{f}: text is not Python's json.dump(indent=1) of its data")
    for f in ("stack.json", "construct.json"):
        if not (ref / f).exists() or not (ours / f).exists():
            continue
        sa, sb = load(ours / f), load(ref / f)
        if f == "stack.json":
            sa, sb = tool_frames(sa), tool_frames(sb)
        if list(sa) != list(sb):
            r.diff(f"{f}:keys", f"{ours.parent.name}/{f}: keys differ ({len(sa)} ours, {len(sb)} 1.1.1)")
        for k, v in sb.items():
            r.leaves += 1
            if k not in sa:
                r.diff(f"{f}:missing", f"{f} {k}: missing in ours")
            elif sa[k] != v:
                r.diff(f"{f}:value", f"{f} {k}: ours {sa[k]!r} 1.1.1 {v!r}")


def ms_tool_frames(frames: list) -> list:
    """MindSpore: 1.1.1 calls an API through a wrapper Cell (HOOKCell), so its stacks start with
    MindSpore's Cell-call frames and its own; that leading run (up to its last msprobe frame) is
    the tool's calling machinery, not the user's, and is dropped."""
    last = -1
    for i, x in enumerate(frames):
        f = x.split(",", 1)[0] if isinstance(x, str) else ""
        if "/msprobe/" in f:
            last = i
        elif "/site-packages/mindspore/" not in f:
            break
    return frames[last + 1 :]


def tool_frames(stack: dict) -> dict:
    """stack.json with each run of the tool's own frames (its API wrapper, its hooks: files in a
    `msprobe` package) replaced by one token: they name the tool's code, which differs by design."""

    def norm(frames: Any) -> Any:
        if not isinstance(frames, list):
            return frames
        if FRAMEWORK == "ms":
            frames = ms_tool_frames(frames)
        out: list = []
        for x in frames:
            if isinstance(x, str) and "/msprobe/" in x.split(",", 1)[0]:
                x = "<msprobe frames>"
                if out and out[-1] == x:
                    continue
            out.append(x)
        return out

    return collections.OrderedDict((k, norm(v)) for k, v in stack.items())


def compare_case(ours: Path, ref: Path) -> tuple[CaseResult, dict[str, CaseResult]]:
    """The whole case, and per zoo model (model k is step k, in crc.json's order)."""
    r = CaseResult()
    models = list(load(ref / "crc.json"))
    per: dict[str, CaseResult] = {}
    steps = {p.name for p in (ref / "dump").glob("step*")} | {p.name for p in (ours / "dump").glob("step*")}
    for s in sorted(steps, key=lambda n: int(n[4:])):
        k = int(s[4:])
        m = per.setdefault(models[k] if k < len(models) else s, CaseResult())
        for res in (r, m):
            compare_step(res, ours / "dump" / s / "rank", ref / "dump" / s / "rank")
    return r, per


def crc_check(ours: Path, off: Path) -> list[str]:
    a, b = load(ours / "crc.json"), load(off / "crc.json")
    return [m for m in b if a.get(m) != b[m]]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--framework", choices=("pt", "ms"), default="pt")
    ap.add_argument("--cases", default="")
    ap.add_argument("--models", default="")
    ap.add_argument("--out", default=str(REPO / "target/zoo"))
    ap.add_argument("--cache", default=str(REPO / "target/zoo-cache"))
    ap.add_argument("--json", default="")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("--show", type=int, default=12, help="differences listed per case")
    ap.add_argument("--ref-only", action="store_true", help="only fill the 1.1.1 cache")
    ap.add_argument("--write-baseline", action="store_true", help=f"record this run as {BASELINE.name}")
    ap.add_argument("--ours-root", default=str(REPO), help="the msprobe-rs checkout to run (its python/, target/)")
    a = ap.parse_args()
    global OURS_ROOT
    OURS_ROOT = Path(a.ours_root)
    use_framework(a.framework)
    cases = [c for c in (a.cases or ",".join(CASES)).split(",") if c]
    out, cache = Path(a.out), Path(a.cache)
    if a.framework == "ms":
        out = out.with_name(out.name + "-ms") if a.out == ap.get_default("out") else out
        cache = cache.with_name(cache.name + "-ms") if a.cache == ap.get_default("cache") else cache
        subprocess.run(["bash", str(REPO / "scripts/setup-ms.sh"), "--msprobe"], check=True, stdout=sys.stderr)
    elif not (REPO / "target/venv-msprobe111/.ready").exists():
        subprocess.run(["bash", str(REPO / "scripts/setup-msprobe111.sh")], check=True)
    tv = torch_version()
    if a.ref_only:
        with ThreadPoolExecutor(max(1, a.jobs)) as ex:
            list(ex.map(lambda c: reference(c, a.models, tv, cache), cases))
        return 0

    def one(case: str) -> tuple[str, Path, Path, float]:
        ref = reference(case, a.models, tv, cache)
        t = run_side(OURS, out / case, case_args(case, a.models), env_ours())
        return case, out / case, ref, t

    off = out / "off"
    models = ["--models", a.models] if a.models else []
    run_side(OURS, off, ["L1", "statistics", "statistics", "--off", *models], env_ours())
    with ThreadPoolExecutor(max(1, a.jobs)) as ex:
        runs = list(ex.map(one, cases))

    baseline = load(BASELINE) if BASELINE.exists() else {}
    summary: dict[str, Any] = {}
    matrix: dict[str, Any] = {}
    failed = []
    head = f"{'records ours/1.1.1':>19} {'names+order':>11} {'leaves':>8} {'differ':>7} {'agree %':>8}  crc"
    print(f"{'case':<16} {head}")
    for case, ours, ref, t in runs:
        r, per = compare_case(ours, ref)
        matrix[case] = {
            m: {"names_equal": x.names_equal, "leaves": x.leaves, "leaf_diffs": x.leaf_diffs, "records": x.records}
            for m, x in per.items()
        }
        bad_crc = crc_check(ours, off)
        ref_crc = crc_check(ref, off)  # msprobe 1.1.1's own run against the uncaptured one
        errors = {m: v["error"] for m, v in load(ours / "crc.json").items() if "error" in v}
        agree = 100.0 * (r.leaves - r.leaf_diffs) / max(1, r.leaves)
        # The regression check counts only the models whose 1.1.1 run computed what an uncaptured run computes:
        # where 1.1.1 changed the computation (selfattn, encdec: its own CRCs differ), its values differ from
        # ours by rounding, and how many leaves that touches depends on the machine's float kernels.
        trusted = [x for m, x in per.items() if m not in ref_crc]
        summary[case] = {
            "records": r.records,
            "names_equal": all(x.names_equal for x in trusted),
            "leaves": r.leaves,
            "leaf_diffs": sum(x.leaf_diffs for x in trusted),
            "all_models": {"names_equal": r.names_equal, "leaf_diffs": r.leaf_diffs},
            "kinds": dict(r.kinds.most_common()),
            "crc_differs": bad_crc,
            "msprobe111_crc_differs": ref_crc,
            "errors": errors,
            "seconds": round(t, 1),
        }
        print(
            f"{case:<16} {r.records[0]:>9}/{r.records[1]:<9} {'yes' if r.names_equal else 'NO':>11} {r.leaves:>8}"
            f" {r.leaf_diffs:>7} {agree:>8.3f}  {'ok' if not bad_crc else 'DIFFER ' + ','.join(bad_crc)}"
            + (f"  errors: {errors}" if errors else "")
            + (f"  (1.1.1's own run differs from the uncaptured one: {','.join(ref_crc)})" if ref_crc else "")
        )
        for k, n in r.kinds.most_common(a.show):
            print(f"    {n:>6}  {k}")
        for d in r.diffs[: a.show]:
            print(f"      {d[:300]}")
        base = baseline.get(case)
        regress = bool(errors)
        if a.strict or base is None:
            regress = regress or bool(bad_crc) or (a.strict and (not r.names_equal or r.leaf_diffs > 0))
        else:
            regress = (
                regress
                or bool(set(bad_crc) - set(base["crc_differs"]))
                or (base["names_equal"] and not summary[case]["names_equal"])
                or summary[case]["leaf_diffs"] > base["leaf_diffs"]
                # extra or lost records on our side (they add no leaf difference), where pinned
                or ("records" in base and r.records != base["records"])
            )
        if regress:
            failed.append(case)
    # per model x case: "=" records (names, order) equal and every leaf agrees; else
    # "n" (names/order differ) or the count of leaves that differ
    if matrix:
        models = list(next(iter(matrix.values())))
        print("\nper model (=: same records and every leaf agrees; N: record names/order differ; k: leaves differ)")
        print(f"{'model':<11}" + "".join(f"{c:>15}" for c in matrix))
        for m in models:
            cells = []
            for c in matrix:
                x = matrix[c].get(m)
                cell = (
                    "-"
                    if x is None
                    else ("" if x["names_equal"] else "N ")
                    + ("=" if x["names_equal"] and not x["leaf_diffs"] else str(x["leaf_diffs"]))
                )
                cells.append(f"{cell:>15}")
            print(f"{m:<11}" + "".join(cells))
    if a.json:
        Path(a.json).write_text(json.dumps({"cases": summary, "models": matrix}, indent=1))
    if a.write_baseline:
        keep = ("names_equal", "leaf_diffs", "crc_differs") + (("records",) if FRAMEWORK == "ms" else ())
        BASELINE.write_text(json.dumps({c: {k: v[k] for k in keep} for c, v in summary.items()}, indent=1) + "\n")
    if failed:
        print("REGRESSION in:", ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
