"""`msprobe compare` against msprobe 1.1.1's own compare on the differential zoo's dumps (#18): the
same driver and config dumped by msprobe-rs and by msprobe 1.1.1 (scripts/diff_msprobe.py; 1.1.1's
side cached under target/zoo-cache and shared with test_zoo.py), then both compares run on
ours-vs-1.1.1's, 1.1.1's-vs-ours and ours-vs-ours, and every cell of the two compare_result xlsx files
checked (names, dtypes, shapes, statistics, metrics within 1e-6 relative, verdicts, messages, row
colours) as in test_compare.py. Statistics, md5 and tensor modes, L1 and mix."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

import compare_util as cu
from recorder_testutil import REPO

# Models whose records agree between the two tools (names and order; see README "Differential zoo"),
# chosen to cover convolution/BatchNorm, recurrent layers, a GPT trained with AdamW and structured
# outputs; the models that differ by design (selfattn, encdec, ckpt) would only test the matching.
MODELS = ["cnn", "rnn", "gpt_adamw", "outputs"]
CASES = ["L1-statistics", "L1-md5", "L1-tensor", "mix-statistics"]
CACHE = REPO / "target" / "zoo-cache"


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> Path:
    cu.setup_111()
    out = tmp_path_factory.mktemp("zoo")
    # Exit status is test_zoo.py's business (divergence against the baseline); here only the dumps count.
    p = subprocess.run(
        [sys.executable, str(REPO / "scripts/diff_msprobe.py"), "--cases", ",".join(CASES), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    for case in CASES:
        assert (out / case / "dump").is_dir(), p.stdout[-5000:] + p.stderr[-3000:]
    return out


def _reference(case: str) -> Path:
    """1.1.1's run of `case` (the full zoo), found as diff_msprobe.py keys its cache."""
    spec = importlib.util.spec_from_file_location("diff_msprobe", REPO / "scripts" / "diff_msprobe.py")
    dm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dm)
    ref = dm.reference(case, "", dm.torch_version(), CACHE)
    assert (ref / ".done").exists(), ref
    return ref


def _pairs(zoo: Path, case: str) -> list[tuple[str, Path, Path]]:
    ref = _reference(case)
    models = list(json.loads((ref / "crc.json").read_text()))
    pairs = []
    for m in MODELS:
        k = models.index(m)
        pairs.append((m, zoo / case / "dump" / f"step{k}" / "rank", ref / "dump" / f"step{k}" / "rank"))
    return pairs


def _check(tmp: Path, npu: Path, bench: Path, name: str) -> int:
    return cu.check_pair(tmp, npu, bench, name, min_rows=10)


@pytest.mark.parametrize("case", CASES)
def test_zoo_dumps_compare_like_111(zoo, tmp_path, case):
    """Our dump against 1.1.1's for each model; in tensor mode also the reverse and ours against ours."""
    rows = 0
    for m, ours, theirs in _pairs(zoo, case):
        rows += _check(tmp_path, ours, theirs, f"{m}-ours-111")
        if case.endswith("tensor"):
            rows += _check(tmp_path, theirs, ours, f"{m}-111-ours")
            rows += _check(tmp_path, ours, ours, f"{m}-ours-ours")
    print(f"{case}: {rows} rows equal in every cell")
