"""Independent truth for the scenarios: msprobe 1.1.1's statistic rules computed with torch
reductions and zlib (msprobe-format.md §5.4-5.6), and dump readers."""

from __future__ import annotations

import glob
import json
import math
import zlib

import torch


def stats(t: torch.Tensor) -> dict:
    t = t.detach()
    if t.numel() == 0:
        return {"Max": None, "Min": None, "Mean": None, "Norm": None}
    if t.dtype == torch.bool:
        return {"Max": bool(t.any()), "Min": bool(t.all()), "Mean": None, "Norm": None}
    if t.is_complex():
        a = t.abs().float()
        return {"Max": a.max().item(), "Min": a.min().item(), "Mean": a.mean().item(), "Norm": None}
    if not t.is_floating_point() or t.dtype == torch.float64:
        t = t.float()
    if t.dim() == 0:
        v = t.item()
        return {"Max": v, "Min": v, "Mean": v, "Norm": v}
    return {"Max": t.max().item(), "Min": t.min().item(), "Mean": t.mean().item(), "Norm": torch.norm(t).item()}


def crc(t: torch.Tensor) -> str:
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        t = t.float()
    return f"{zlib.crc32(t.contiguous().numpy().tobytes()):08x}"


def close(a, b, dtype: torch.dtype = torch.float32, scale: float = 0.0) -> bool:
    if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if math.isnan(b):
        return math.isnan(a)
    if math.isinf(b):
        return a == b
    eps = {torch.float16: 2**-10, torch.bfloat16: 2**-7}.get(dtype, 1e-6)
    return abs(a - b) <= eps * (abs(b) + scale) + 1e-12


def check_leaf(leaf: dict, t: torch.Tensor, what: str = "") -> None:
    assert leaf["type"] == "torch.Tensor" and leaf["dtype"] == str(t.dtype), (what, leaf)
    assert leaf["shape"] == list(t.shape), (what, leaf)
    assert leaf["requires_grad"] == t.requires_grad, (what, leaf)
    s = stats(t)
    fin = [abs(v) for v in (s["Max"], s["Min"]) if isinstance(v, float) and math.isfinite(v)]
    for k, v in s.items():
        assert close(leaf[k], v, t.dtype, max(fin, default=0.0)), (what, k, leaf[k], v)
    if "md5" in leaf:
        assert leaf["md5"] == crc(t), (what, leaf["md5"], crc(t))


def dump(out: str, step: int = 0) -> dict:
    return json.load(open(glob.glob(f"{out}/step{step}/rank*/dump.json")[0]))


def rank_dir(out: str, step: int = 0) -> str:
    return glob.glob(f"{out}/step{step}/rank*")[0]


def write_cfg(path: str, **cfg) -> str:
    json.dump(cfg, open(path, "w"))
    return path
