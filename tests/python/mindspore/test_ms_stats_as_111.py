"""MindSpore tensor leaves written exactly as msprobe 1.1.1's MindSpore processor writes them, on
MindSpore 2.10 CPU: no `*_except_inf_nan` keys (1.1.1 writes them only for PyTorch), a complex
tensor's Norm (`np.linalg.norm` of |x|; PyTorch's is null), float64 beyond float32 and int64 beyond
2^53 reduced as float32, all-NaN, float16 overflow, -0.0. Truth: msprobe 1.1.1
(target/msprobe-1.1.1) run on the same script in the same interpreter, with the MindSpore 2.10
shim its zoo driver uses (scripts/zoo/zoo_ms.py --shim)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("mindspore")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from as111 import MS111, run_both  # noqa: E402

SCRIPT = r"""
out = sys.argv[1]
cfg = {"task": "statistics", "dump_path": out, "rank": [], "step": [], "level": "L1",
       "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"}}
json.dump(cfg, open(out + ".json", "w"))
from msprobe.mindspore import PrecisionDebugger
dbg = PrecisionDebugger(config_path=out + ".json")
values = [
    np.array([1e300, -1e-300, 2.0]),                                   # float64 beyond float32: inf
    np.array([2**40 + 1, -(2**53) - 1, 5], dtype=np.int64),
    np.array([1 + 2j, 3 - 4j], dtype=np.complex64),
    np.array([np.nan, np.nan], dtype=np.float32),
    np.array([60000, 60000, 1], dtype=np.float16),                     # Norm overflows float16
    np.array([-0.0, 0.0], dtype=np.float32),
    np.array([np.inf, -np.inf, 1.0], dtype=np.float32),                # Max/Min infinite
]
dbg.start()
for v in values:
    ops.neg(Tensor(v))
dbg.stop()
"""


@pytest.mark.skipif(not (MS111 / "msprobe").exists(), reason="msprobe 1.1.1 (scripts/setup-ms.sh --msprobe) is absent")
def test_ms_leaves_equal_111s(tmp_path: Path) -> None:
    outs = run_both(tmp_path, SCRIPT)
    got = {n: json.loads(next(o.glob("step0/rank*/dump.json")).read_text())["data"] for n, o in outs.items()}
    want = got["1.1.1"]
    leaves = [lf for r in want.values() for lf in r["output"]]
    assert len(leaves) == 7 and any(lf["dtype"] == "Complex64" and lf["Norm"] is not None for lf in leaves), leaves
    assert json.dumps(got["ours"]) == json.dumps(want), (got["ours"], want)
