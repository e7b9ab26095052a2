"""Tensor files and statistics written by the recorder, checked with real torch and numpy.

The independent truth is torch itself: files must load with torch.load(weights_only=True) /
np.load and equal the live tensors, and statistics must equal msprobe 1.1.1's rules computed
with torch reductions (msprobe-format.md §5.4–5.6).
"""

from __future__ import annotations

import json
from pathlib import Path

from recorder_testutil import run_child

# Child-side helper: records a list of (name, torch tensor) as one record per tensor.
RECORD_TORCH = """
import sys, torch, ctypes
sys.path.insert(0, ".")
from msprobe import _native as n
ACL = {torch.float32: 0, torch.float16: 1, torch.int8: 2, torch.int32: 3, torch.uint8: 4,
       torch.int16: 6, torch.uint16: 7, torch.uint32: 8, torch.int64: 9, torch.uint64: 10,
       torch.float64: 11, torch.bool: 12, torch.complex64: 16, torch.complex128: 17, torch.bfloat16: 27}
def record(name, t, key=None):
    r = n.lib.msprobe_record_begin(name.encode())
    assert r, n.last_error()
    n.lib.msprobe_record_section(r, b"input_args")
    st = t.untyped_storage()
    d = n.tensor(ACL[t.dtype], list(t.shape), st.data_ptr(), st.nbytes(), strides=list(t.stride()),
                 offset=t.storage_offset(), requires_grad=t.requires_grad)
    rc = n.lib.msprobe_record_add_tensor(r, n.enc(key), ctypes.byref(d))
    assert rc == 0, n.last_error()
    assert n.lib.msprobe_record_end(r) == 0
"""

CASES = """
torch.manual_seed(0)
base = torch.randn(4, 6)
cases = {
  "f32": torch.randn(16, 32), "f16": torch.randn(5, 7).half(), "bf16": torch.randn(4, 4).bfloat16(),
  "f64": torch.randn(9, dtype=torch.float64), "i8": torch.randint(-100, 100, (13,), dtype=torch.int8),
  "u8": torch.randint(0, 255, (3, 3), dtype=torch.uint8), "i16": torch.arange(-7, 9, dtype=torch.int16),
  "i32": torch.arange(10, dtype=torch.int32), "i64": torch.arange(-5, 5), "u16": torch.arange(6).to(torch.uint16),
  "bool": torch.tensor([True, False, True]), "c64": torch.randn(5, dtype=torch.complex64),
  "c128": torch.randn(3, dtype=torch.complex128), "zero_d": torch.tensor(-0.6157), "zero_d_int": torch.tensor(15),
  "empty": torch.empty(0, 3), "transposed": base.t(), "sliced": base[1:3, ::2],
  "naninf": torch.tensor([1.0, float("nan"), float("inf"), float("-inf"), 2.0]),
  "inf": torch.tensor([float("inf"), -2.0, 1.0]), "big": torch.randn(1000, 333),
}
for k, t in cases.items():
    record(f"Torch.{k}.0.forward", t)
"""


def test_pt_files_load_with_torch_and_equal_the_tensors(tmp_path: Path) -> None:
    code = (
        f"DUMP = {str(tmp_path / 'dump')!r}\n"
        + RECORD_TORCH
        + """
n.lib.msprobe_init(('{"task": "tensor", "level": "L1", "dump_path": "%s"}' % DUMP).encode())
assert n.lib.msprobe_start() == 1
"""
        + CASES
        + """
n.lib.msprobe_stop(); n.lib.msprobe_flush()
for k, t in cases.items():
    loaded = torch.load(f"{DUMP}/step0/rank/dump_tensor_data/Torch.{k}.0.forward.input.0.pt", weights_only=True)
    assert loaded.dtype == t.dtype, (k, loaded.dtype)
    assert loaded.shape == t.shape, (k, loaded.shape)
    assert loaded.is_contiguous() and not loaded.requires_grad
    want = t.contiguous()
    same = torch.equal(loaded, want) or (torch.equal(loaded.isnan(), want.isnan())
                                         and torch.equal(loaded.nan_to_num(), want.nan_to_num()))
    assert same, k
print("OK", len(cases))
"""
    )
    p = run_child(code)
    assert p.returncode == 0, p.stderr
    assert "OK 21" in p.stdout


def test_npy_files_load_with_numpy(tmp_path: Path) -> None:
    code = (
        f"DUMP = {str(tmp_path / 'd')!r}\n"
        + """
import sys, ctypes, numpy as np
from msprobe import _native as n
n.lib.msprobe_init(('{"task": "tensor", "framework": "mindspore", "dump_path": "%s"}' % DUMP).encode())
assert n.lib.msprobe_start() == 1
rng = np.random.default_rng(0)
arrays = {"f32": (0, rng.standard_normal((3, 4)).astype(np.float32)),
          "f16": (1, rng.standard_normal(7).astype(np.float16)),
          "i64": (9, np.arange(-3, 3)), "bool": (12, np.array([True, False])),
          "c64": (16, (rng.standard_normal(3) + 1j).astype(np.complex64)),
          "zero_d": (0, np.array(2.5, dtype=np.float32))}
bf16_bits = (rng.standard_normal(6).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
arrays["bf16"] = (27, bf16_bits)
for k, (acl, a) in arrays.items():
    r = n.lib.msprobe_record_begin(f"Mint.{k}.0.forward".encode())
    n.lib.msprobe_record_section(r, b"output")
    a = np.require(a, requirements="C")  # keeps 0-d arrays 0-d
    d = n.tensor(acl, list(a.shape), a.ctypes.data, a.nbytes)
    assert n.lib.msprobe_record_add_tensor(r, None, ctypes.byref(d)) == 0, n.last_error()
    n.lib.msprobe_record_end(r)
n.lib.msprobe_stop(); n.lib.msprobe_flush()
for k, (acl, a) in arrays.items():
    got = np.load(f"{DUMP}/step0/rank/dump_tensor_data/Mint.{k}.0.forward.output.0.npy")
    want = (a.astype(np.uint32) << 16).view(np.float32) if k == "bf16" else a
    assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want), k
dump = open(f"{DUMP}/step0/rank/dump.json").read()
assert '"dtype": "BFloat16"' in dump and '"type": "mindspore.Tensor"' in dump and "requires_grad" not in dump
print("OK")
"""
    )
    p = run_child(code)
    assert p.returncode == 0, p.stderr
    assert "OK" in p.stdout


def test_statistics_and_crc_follow_msprobe_rules_computed_with_torch(tmp_path: Path) -> None:
    """Each leaf's Max/Min/Mean/Norm/md5 equals msprobe 1.1.1's formula evaluated with torch."""
    code = (
        RECORD_TORCH
        + f"""
n.lib.msprobe_init(b'{{"task": "statistics", "summary_mode": "md5", "dump_path": "{tmp_path / "dump"}"}}')
assert n.lib.msprobe_start() == 1
"""
        + CASES
        + f"""
n.lib.msprobe_stop(); n.lib.msprobe_flush()
torch.save({{k: v.contiguous() for k, v in cases.items()}}, "{tmp_path}/truth.pt")
print("OK")
"""
    )
    p = run_child(code)
    assert p.returncode == 0, p.stderr
    import zlib

    import torch

    cases = torch.load(tmp_path / "truth.pt", weights_only=True)
    data = json.loads((tmp_path / "dump/step0/rank/dump.json").read_text())["data"]
    assert len(data) == len(cases)

    def expected(t: torch.Tensor) -> dict:
        if t.numel() == 0:
            return dict(Max=None, Min=None, Mean=None, Norm=None)
        if t.dtype == torch.bool:
            return dict(Max=bool(t.any()), Min=bool(t.all()), Mean=None, Norm=None)
        if t.is_complex():
            a = t.abs()
            return dict(Max=a.max().item(), Min=a.min().item(), Mean=a.mean().item(), Norm=None)
        if t.dim() == 0:
            v = t.item()
            return dict(Max=v, Min=v, Mean=v, Norm=v)
        x = t if t.dtype in (torch.float16, torch.bfloat16, torch.float32) else t.float()
        return dict(Max=x.max().item(), Min=x.min().item(), Mean=x.mean().item(), Norm=x.norm().item())

    for name, t in cases.items():
        leaf = data[f"Torch.{name}.0.forward"]["input_args"][0]
        exp = expected(t)
        tol = {torch.float16: 1e-3, torch.bfloat16: 8e-3}.get(t.dtype, 1e-5)
        for k, v in exp.items():
            got = leaf[k]
            if v is None or isinstance(v, bool):
                assert got == v, (name, k, got, v)
            elif v != v:
                assert got != got, (name, k, got)
            elif k in ("Max", "Min") or v in (float("inf"), float("-inf")):
                assert got == v, (name, k, got, v)
            else:
                scale = max(abs(exp["Max"]) if isinstance(exp["Max"], float) else 0, 1e-30)
                assert abs(got - v) <= tol * abs(v) + 1e-6 * scale, (name, k, got, v)
        raw = t.float() if t.dtype == torch.bfloat16 else t
        crc = zlib.crc32(raw.contiguous().view(-1).view(torch.uint8).numpy().tobytes()) if raw.numel() else 0
        assert leaf["md5"] == f"{crc:08x}", name
        assert leaf["dtype"] == str(t.dtype) and leaf["shape"] == list(t.shape)
    naninf = data["Torch.naninf.0.forward"]["input_args"][0]
    assert (naninf["Max_except_inf_nan"], naninf["Min_except_inf_nan"]) == (2.0, 1.0)
    assert data["Torch.inf.0.forward"]["input_args"][0]["Max_except_inf_nan"] == 1.0
