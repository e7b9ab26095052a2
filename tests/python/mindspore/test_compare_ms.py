"""`msprobe -f mindspore compare` (crates/cli) against msprobe 1.1.1's own MindSpore compare, row by row:
every cell of the compare_result xlsx (names, dtypes, shapes, statistics, metrics within 1e-6 relative,
verdicts, error messages, row colours), on msprobe 1.1.1's MindSpore sample dumps (as they are, perturbed
copies, L1 against mix) and on dumps of the same driver made by our MindSpore layer (statistics, md5,
tensor; against themselves perturbed and against msprobe's samples).

msprobe 1.1.1 runs from target/msprobe-1.1.1 (`scripts/setup-ms.sh --msprobe`) under MindSpore 2.10 with
one import shim (compare_util.RUN_MANY).
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import compare_util as cu  # noqa: E402
from recorder_testutil import CLI, LIB, REPO  # noqa: E402

SAMPLES = REPO / "tests" / "data" / "samples" / "msprobe-1.1.1-mindspore"
DRIVER = HERE / "drivers" / "ms_msprobe_case.py"

# Perturbations of .npy tensor files (numpy only), one kind per file in turn: noise, zeros in the
# bench, matching nan, inf on one side, float16, missing file, affine change, all zeros, reshaped.
PERTURB_NPY = r"""
import sys, glob, os
import numpy as np
npu, bench = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(3)
for i, f in enumerate(sorted(glob.glob(npu + "/dump_tensor_data/*.npy"))):
    b = f.replace(npu, bench)
    t = np.load(f)
    if t.dtype.kind != "f" or t.size < 2:
        continue
    k = i % 9
    if k == 0:
        t = (t + 1e-3 * rng.standard_normal(t.shape)).astype(t.dtype)
    elif k == 1:
        bt = np.load(b).copy(); bt.reshape(-1)[::3] = 0; np.save(b, bt)
    elif k == 2:
        t = t.copy(); t.reshape(-1)[0] = np.nan
        bt = np.load(b).copy(); bt.reshape(-1)[0] = np.nan; np.save(b, bt)
    elif k == 3:
        t = t.copy(); t.reshape(-1)[-1] = np.inf
    elif k == 4:
        t = t.astype(np.float16)
    elif k == 5:
        t = t * 2 + 1
    elif k == 6:
        os.remove(f); continue
    elif k == 7:
        t = np.zeros_like(t)
    elif k == 8:
        t = t.reshape(-1)
    np.save(f, t)
"""

# Statistics and md5 in dump.json changed in turn (as tests/python/test_compare.py does for PyTorch),
# and every sixth leaf's four statistics all scaled by 10.
PERTURB_STATS = r"""
import sys, json
p = sys.argv[1]
d = json.load(open(p))
n = 0
def walk(v):
    global n
    if isinstance(v, dict):
        if isinstance(v.get("type"), str) and "Max" in v:
            n += 1
            k = n % 6
            if k == 0 and isinstance(v["Max"], float): v["Max"] *= 2
            elif k == 1 and isinstance(v["Mean"], float): v["Mean"] += 1e-3
            elif k == 2: v["Norm"] = float("nan")
            elif k == 3 and isinstance(v["Min"], float): v["Min"] = float("-inf")
            elif k == 4 and "md5" in v: v["md5"] = "deadbeef"
            elif k == 5:  # all four far off: MindSpore's Warning needs all four
                for s in ("Max", "Min", "Mean", "Norm"):
                    if isinstance(v[s], float): v[s] *= 10
        for x in v.values(): walk(x)
    elif isinstance(v, list):
        for x in v: walk(x)
walk(d["data"])
json.dump(d, open(p, "w"), indent=1)
"""


@pytest.fixture(scope="module", autouse=True)
def msprobe111():
    cu.setup_111()  # its venv reads the xlsx files (openpyxl)
    subprocess.run(["bash", str(REPO / "scripts" / "setup-ms.sh"), "--msprobe"], check=True, cwd=REPO)


def check(tmp: Path, pairs: list[tuple]) -> int:
    """Both compares on every (npu, bench, name, *extra) pair (`extra`: options of both, e.g. -s);
    every cell equal. Returns the number of rows compared."""
    jobs, dirs = [], []
    for npu, bench, name, *extra in pairs:
        cfg = cu.write_input(tmp / f"{name}.json", npu, bench)
        theirs_dir, ours_dir = tmp / f"{name}-111", tmp / f"{name}-ours"
        jobs.append((cfg, theirs_dir, tuple(extra)))
        dirs.append((name, theirs_dir, ours_dir))
        ours_dir.mkdir(parents=True, exist_ok=True)
        q = subprocess.run(
            [str(CLI), "-f", "mindspore", "compare", "-i", str(cfg), "-o", str(ours_dir), "--no-progress", *extra],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert q.returncode == 0, q.stdout[-2000:] + q.stderr[-2000:]
    p = cu.run_111_many(jobs, tmp, "mindspore")
    assert p.returncode == 0 and "JOB FAILED" not in p.stderr, p.stderr[-3000:]
    flat = [str(d) for _, t, o in dirs for d in (t, o)]
    tables = cu.read_many(flat)
    rows = 0
    for name, t, o in dirs:
        theirs, ours = tables[str(t)], tables[str(o)]
        assert len(theirs["rows"]) > 1, f"{name}: msprobe compared nothing"
        problems = cu.diff_tables(ours, theirs)
        assert not problems, f"{name}: {len(problems)} differences:\n" + "\n".join(problems[:30])
        rows += len(theirs["rows"]) - 1
    return rows


SAMPLE_CASES = [f"{t}_{lv}" for t in ("statistics", "tensor") for lv in ("L0", "L1", "mix")]


@pytest.mark.parametrize("case", SAMPLE_CASES)
def test_samples_against_themselves(tmp_path, case):
    d0, d1 = SAMPLES / case / "step0" / "rank", SAMPLES / case / "step1" / "rank"
    # -s: the stack column (every row of a record carries its stack); step 1 against step 0: other values
    check(tmp_path, [(d0, d0, "step0"), (d0, d0, "stack", "-s"), (d1, d0, "step1-step0")])


@pytest.mark.parametrize("task", ["tensor", "statistics"])
def test_samples_partly_matching(tmp_path, task):
    """L1 against mix: API records match, cell records have no bench (and the reverse)."""
    mix, l1 = SAMPLES / f"{task}_mix/step0/rank", SAMPLES / f"{task}_L1/step0/rank"
    check(tmp_path, [(mix, l1, "mix-L1"), (l1, mix, "L1-mix")])


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


@pytest.mark.parametrize("case", ["tensor_L1", "tensor_mix", "tensor_L0"])
def test_samples_perturbed_tensors(tmp_path, case):
    src = SAMPLES / case / "step0" / "rank"
    npu, bench = _copy(src, tmp_path / "npu"), _copy(src, tmp_path / "bench")
    subprocess.run([sys.executable, "-c", PERTURB_NPY, str(npu), str(bench)], check=True)
    check(tmp_path, [(npu, bench, case)])


@pytest.mark.parametrize("case", ["statistics_L1", "statistics_mix", "statistics_L0"])
def test_samples_perturbed_statistics(tmp_path, case):
    src = SAMPLES / case / "step0" / "rank"
    npu, bench = _copy(src, tmp_path / "npu"), _copy(src, tmp_path / "bench")
    subprocess.run([sys.executable, "-c", PERTURB_STATS, str(npu / "dump.json")], check=True)
    check(tmp_path, [(npu, bench, case)])


def our_dump(tmp: Path, task: str, level: str, summary: str) -> Path:
    """The sample driver's dump made by our MindSpore layer (one step); returns its rank dir."""
    name = f"{task}_{level}_{summary}"
    tmp.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MSPROBE_")}
    env.update(PYTHONPATH=str(REPO / "python"), MSPROBE_LIB=str(LIB), MSPROBE_LOG_LEVEL="2")
    p = subprocess.run(
        [sys.executable, str(DRIVER), name, task, level, "--out", str(tmp), "--steps", "1", "--summary", summary,
         "--cfg_dir", str(tmp / "cfgs")],
        cwd=tmp, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    return tmp / name / "step0" / "rank"


OUR_CASES = [("tensor", "statistics"), ("statistics", "statistics"), ("statistics", "md5")]


@pytest.mark.parametrize("task,summary", OUR_CASES)
@pytest.mark.parametrize("level", ["L1", "mix"])
def test_our_mindspore_dumps(tmp_path, task, summary, level):
    """Our dump against itself perturbed, against msprobe 1.1.1's sample of the same driver (same
    seed) and the reverse: msprobe's compare and ours agree cell by cell."""
    d = our_dump(tmp_path / "run", task, level, summary)
    npu = _copy(d, tmp_path / "npu")
    if task == "tensor":
        bench = _copy(d, tmp_path / "bench")
        subprocess.run([sys.executable, "-c", PERTURB_NPY, str(npu), str(bench)], check=True)
    else:
        bench = d
        subprocess.run([sys.executable, "-c", PERTURB_STATS, str(npu / "dump.json")], check=True)
    pairs = [(npu, bench, "ours-perturbed")]
    sample = SAMPLES / f"{task}_{level}" / "step0" / "rank"
    if summary == "statistics":  # no md5 sample
        pairs += [(d, sample, "ours-111"), (sample, d, "111-ours")]
    check(tmp_path, pairs)


# The sample driver's Block in PyTorch (fc1 = Linear(8, 16), relu, add/sigmoid, silu, mul, clamp,
# fc2 = Linear(16, 4); MSE loss, SGD), dumped by msprobe 1.1.1's PyTorch layer: the bench of -cm.
PT_BLOCK = r"""
import sys, json, os, torch, torch.nn as nn
from msprobe.pytorch import PrecisionDebugger
out, task, level = sys.argv[1:4]
cfg = {"task": task, "dump_path": out, "rank": [], "step": [], "level": level,
       task: {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"}}
os.makedirs(out, exist_ok=True)
json.dump(cfg, open(out + "/cfg.json", "w"))
torch.manual_seed(0)
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16); self.relu = nn.ReLU(); self.fc2 = nn.Linear(16, 4)
    def forward(self, x):
        h = self.relu(self.fc1(x))
        h = torch.add(h, torch.sigmoid(h))
        h = nn.functional.silu(h)
        h = torch.mul(h, 0.5)
        h = h.clamp(-5.0, 5.0)
        return self.fc2(h)
net = Block()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x, y = torch.randn(4, 8), torch.randn(4, 4)
d = PrecisionDebugger(config_path=out + "/cfg.json", model=net)
d.start()
loss = nn.functional.mse_loss(net(x), y); loss.backward(); opt.step(); opt.zero_grad()
d.stop(); d.step()
"""


@pytest.mark.parametrize("level", ["L0", "mix", "L1"])
def test_mappings_against_a_pytorch_bench(tmp_path, level):
    """-cm and -am: msprobe's MindSpore sample against the same net in PyTorch dumped by msprobe
    1.1.1: -cm without a mapping file (only `relu` has the same class name) and with one renaming the
    Dense cells to Linear modules; -am (msprobe's built-in API table); both (the cell mapping wins).
    (Statistics only: 1.1.1's tensor mode across frameworks imports torch, which the MindSpore venv
    does not have.)"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = tmp_path / "pt"
    p = subprocess.run(
        [str(cu.V111 / "python"), "-c", PT_BLOCK, str(out), "statistics", level],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    yaml = tmp_path / "cells.yaml"
    yaml.write_text("# MindSpore cell: PyTorch module\nfc1.Dense: fc1.Linear\n'fc2.Dense': \"fc2.Linear\"\n")
    npu, bench = SAMPLES / f"statistics_{level}" / "step0" / "rank", out / "step0" / "rank"
    pairs = []
    if level != "L1":
        pairs += [(npu, bench, "cm", "-cm"), (npu, bench, "cm-yaml", "-cm", str(yaml))]
    if level != "L0":
        pairs += [(npu, bench, "am", "-am")]
    if level == "mix":
        pairs += [(npu, bench, "cm-am", "-cm", str(yaml), "-am")]
    check(tmp_path, pairs)

    def rows(name):
        with next((tmp_path / f"{name}-ours").glob("compare_result*.csv")).open(newline="") as f:
            return list(csv.reader(f))[1:]

    # the mappings did something: every cell row found its module; -am matched API rows
    if level != "L1":
        cells = [r for r in rows("cm-yaml") if r[0].startswith("Cell.")]
        assert cells and all(r[1].startswith("Module.") for r in cells), cells[:3]
    if level != "L0":
        apis = [r for r in rows("am") if r[1] != "N/A" and r[0] != r[1]]
        assert apis, "-am matched no API under another name"


def test_other_mappings_refused(tmp_path):
    d = SAMPLES / "statistics_L0" / "step0" / "rank"
    cfg = cu.write_input(tmp_path / "c.json", d, d)
    for opt in (["-am", str(cfg)], ["-dm", str(cfg)], ["-lm", str(cfg)], ["-dm"]):
        q = subprocess.run(
            [str(CLI), "-f", "mindspore", "compare", "-i", str(cfg), "-o", str(tmp_path / "o"), *opt],
            capture_output=True, text=True,
        )  # fmt: skip
        assert q.returncode == 2 and "not supported" in q.stderr, q.stderr
    q = subprocess.run([str(CLI), "-f", "pytorch", "compare", "-i", str(cfg), "-o", str(tmp_path / "o"), "-cm"],
                       capture_output=True, text=True)  # fmt: skip
    assert q.returncode == 2 and "-f mindspore" in q.stderr, q.stderr
