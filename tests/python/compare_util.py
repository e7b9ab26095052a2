"""Helpers for the `msprobe compare` tests: dumps of a small model made by our package and by
msprobe 1.1.1, msprobe 1.1.1's own compare run from its venv, and a cell-by-cell diff of two
compare_result xlsx files (read with openpyxl in msprobe 1.1.1's venv)."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from pathlib import Path

from recorder_testutil import CLI, LIB, REPO

V111 = REPO / "target" / "venv-msprobe111" / "bin"

# The MLP of the samples (run_case.py, seed 0); "npu" = fc2.weight + 1e-3 * N(0, 1) when perturbed.
DUMP = r"""
import sys, json, os, torch, torch.nn as nn, torch.nn.functional as F
from msprobe.pytorch import PrecisionDebugger
out, task, summary, level, perturb = sys.argv[1:6]
cfg = {"task": task, "dump_path": out, "rank": [], "step": [], "level": level,
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
if perturb == "1":
    with torch.no_grad():
        m.fc2.weight += 1e-3 * torch.randn(m.fc2.weight.shape, generator=torch.Generator().manual_seed(7))
opt = torch.optim.SGD(m.parameters(), lr=0.01)
g = torch.Generator().manual_seed(1234)
x, y = torch.randn(16, 32, generator=g), torch.randint(0, 10, (16,), generator=g)
d = PrecisionDebugger(config_path=cp, model=m if level in ("L0", "mix") else None); d.start()
F.cross_entropy(m(x), y).backward(); opt.step(); opt.zero_grad()
d.stop(); d.step()
"""

# Reads every compare_result xlsx of the given dirs (openpyxl in msprobe 1.1.1's venv).
READ_MANY = r"""
import sys, json, glob, openpyxl
res = {}
for d in sys.argv[1:]:
    f = sorted(glob.glob(d + "/compare_result*.xlsx"))[-1]
    ws = openpyxl.load_workbook(f).worksheets[0]
    rows, fills = [], []
    for r in ws.iter_rows():
        rows.append([c.value for c in r])
        rgb = r[0].fill.start_color.rgb if r[0].fill and r[0].fill.fill_type == "solid" else None
        fills.append(str(rgb)[-6:] if rgb else None)
    res[d] = {"file": f, "rows": rows, "fills": fills}
print(json.dumps(res))
"""

# Runs msprobe 1.1.1's CLI once per job ([out dir, args...]) in one process: the framework's import is
# paid once. 1.1.1 appends to its global header lists on every run (NPU_Stack_Info with -s, Data_name
# in tensor mode), so they are put back before each job, as a fresh process would have them. A job
# that raises is reported on stderr and the rest go on. MindSpore: one import shim, kept here
# (1.1.1 imports mindspore.common.api._MindsporeFunctionExecutor, which 2.10 renamed to
# mindspore.graph.api._JitExecutor; its compare never calls it).
RUN_MANY = r"""
import json, os, sys, traceback
if sys.argv[2] == "mindspore":
    import mindspore.common.api as capi
    import mindspore.graph.api as gapi
    capi._MindsporeFunctionExecutor = gapi._JitExecutor  # the name 1.1.1 imports; renamed in MindSpore >= 2.7
from msprobe.msprobe import main
from msprobe.core.common.const import CompareConst
heads = {k: list(v) for k, v in CompareConst.HEAD_OF_COMPARE_MODE.items()}
for out, *args in json.load(open(sys.argv[1])):
    for k, v in heads.items():
        CompareConst.HEAD_OF_COMPARE_MODE[k][:] = v
    os.chdir(out)
    sys.argv = ["msprobe", *args]
    try:
        main()
    except BaseException:
        traceback.print_exc()
        print(f"JOB FAILED: {out}", file=sys.stderr)
"""

# msprobe 1.1.1 for MindSpore: its source tree (scripts/setup-ms.sh --msprobe), run by MindSpore's venv.
MS111 = REPO / "target" / "msprobe-1.1.1"
MS_PY = REPO / "target" / "venv-ms" / "bin" / "python"


def setup_111() -> None:
    subprocess.run(["bash", str(REPO / "scripts" / "setup-msprobe111.sh")], check=True, cwd=REPO)


def make_dump(out: Path, task: str, summary: str, level: str, perturb: bool, ours: bool) -> Path:
    """One training step of the MLP dumped by our package (`ours`) or by msprobe 1.1.1; returns the rank dir."""
    env = dict(os.environ, MSPROBE_LOG_LEVEL="2")
    if ours:
        py = str(REPO / ".venv" / "bin" / "python")
        env.update(PYTHONPATH=str(REPO / "python"), MSPROBE_LIB=str(LIB))
    else:
        py = str(V111 / "python")
        env.pop("PYTHONPATH", None)
    p = subprocess.run(
        [py, "-c", DUMP, str(out), task, summary, level, "1" if perturb else "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return out / "step0" / "rank"


def write_input(path: Path, npu: Path, bench: Path) -> Path:
    path.write_text(
        json.dumps(
            {
                "npu_path": str(npu / "dump.json"),
                "bench_path": str(bench / "dump.json"),
                "stack_path": str(npu / "stack.json"),
                "is_print_compare_log": False,
            }
        )
    )
    return path


def run_111(cfg: Path, out: Path) -> subprocess.CompletedProcess:
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [str(V111 / "msprobe"), "-f", "pytorch", "compare", "-i", str(cfg), "-o", str(out)],
        capture_output=True,
        text=True,
        cwd=out,
        env=env,
        timeout=900,
    )


def run_ours(cfg: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    out.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [str(CLI), "-f", "pytorch", "compare", "-i", str(cfg), "-o", str(out), "--no-progress", *extra],
        capture_output=True,
        text=True,
        timeout=900,
    )


def read_xlsx(out: Path) -> dict:
    return read_many([str(out)])[str(out)]


def read_many(dirs: list[str]) -> dict:
    """The compare_result xlsx of each dir: {dir: {"file", "rows", "fills"}}."""
    p = subprocess.run([str(V111 / "python"), "-c", READ_MANY, *dirs], capture_output=True, text=True, check=True)
    return json.loads(p.stdout)


Job = tuple[Path, Path, tuple[str, ...]]  # (compare.json, output dir, extra options)


def run_111_many(jobs: list[Job], tmp: Path, framework: str) -> subprocess.CompletedProcess:
    """msprobe 1.1.1's `-f FRAMEWORK compare -i CFG -o OUT EXTRA...` for every (cfg, out, extra), in one process."""
    spec = []
    for cfg, out, extra in jobs:
        out.mkdir(parents=True, exist_ok=True)
        spec.append([str(out), "-f", framework, "compare", "-i", str(cfg), "-o", str(out), *extra])
    (tmp / "jobs111.json").write_text(json.dumps(spec))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MSPROBE_")}
    env.pop("PYTHONPATH", None)
    py = V111 / "python"
    if framework == "mindspore":
        py, env["PYTHONPATH"] = MS_PY, str(MS111)
    return subprocess.run(
        [str(py), "-c", RUN_MANY, str(tmp / "jobs111.json"), framework],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )


def _num(v):
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str) and v.endswith("%"):
        try:
            return float(v[:-1])
        except ValueError:
            return None
    return None


def same_cell(a, b) -> bool:
    """Equal labels, or numbers within 1e-6 relative (and 1e-12 absolute near 0)."""
    if a in (None, "") and b in (None, ""):
        return True
    x, y = _num(a), _num(b)
    if x is not None and y is not None:
        if isinstance(a, str) != isinstance(b, str):
            return False
        if math.isnan(x) or math.isnan(y):
            return math.isnan(x) and math.isnan(y)
        return math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-12)
    return a == b


def diff_tables(ours: dict, theirs: dict) -> list[str]:
    """Every cell that differs (empty when the two tables agree), and the row fills."""
    out = []
    ro, rt = ours["rows"], theirs["rows"]
    if len(ro) != len(rt):
        out.append(f"{len(ro)} rows vs msprobe's {len(rt)}")
    if ro and rt and ro[0] != rt[0]:
        out.append(f"header {ro[0]} vs {rt[0]}")
    for i, (a, b) in enumerate(zip(ro[1:], rt[1:]), start=1):
        for j, (x, y) in enumerate(zip(a, b)):
            if not same_cell(x, y):
                out.append(f"row {i} ({b[0]}) column {rt[0][j]}: ours {x!r} vs msprobe {y!r}")
        if len(a) != len(b):
            out.append(f"row {i}: {len(a)} cells vs {len(b)}")
    for i, (x, y) in enumerate(zip(ours["fills"], theirs["fills"])):
        if x != y:
            out.append(f"row {i} fill: ours {x} vs msprobe {y}")
    return out


def check_pair(tmp: Path, npu: Path, bench: Path, name: str, min_rows: int = 1) -> int:
    """Runs msprobe 1.1.1's compare and ours on the same pair and asserts every xlsx cell agrees
    (diff_tables); returns the rows compared."""
    cfg = write_input(tmp / f"{name}.json", npu, bench)
    theirs_dir, ours_dir = tmp / f"{name}-111", tmp / f"{name}-ours"
    p = run_111(cfg, theirs_dir)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    q = run_ours(cfg, ours_dir)
    assert q.returncode == 0, q.stdout[-2000:] + q.stderr[-2000:]
    theirs, ours = read_xlsx(theirs_dir), read_xlsx(ours_dir)
    assert len(theirs["rows"]) > min_rows, f"{name}: msprobe compared (almost) nothing"
    problems = diff_tables(ours, theirs)
    assert not problems, f"{name}: {len(problems)} differences:\n" + "\n".join(problems[:30])
    return len(theirs["rows"]) - 1


# ------------------------------------------------- verdicts of msprobe 1.1.1's compare on the zoos
TENSOR_DTYPE_PREFIXES = ("torch.", "Float", "BFloat", "Int", "UInt", "Bool", "Complex")


def row_passes(case: str, row: dict) -> bool:
    """1.1.1's passing verdict for the case's mode: md5 `pass`, statistics no `Warning`, tensor `Yes`."""
    if case.endswith("md5"):
        return row["Result"] == "pass"
    if case.endswith("statistics"):
        return row["Result"] in (None, "", "None")  # 1.1.1 writes "Warning" here, nothing otherwise
    return row["Accuracy Reached or Not"] == "Yes"


def non_verdict(case: str, row: dict) -> str | None:
    """Tensor mode's rows 1.1.1 does not judge (verdict "None"), with the same dtype on both sides:
    non-tensor entries ("No bench data matched.": no data file) and 0-d tensors ("scalar data",
    their statistics equal on both sides). Anything else: None."""
    if not case.endswith("tensor") or row["Accuracy Reached or Not"] != "None":
        return None
    if row["NPU Dtype"] != row["Bench Dtype"]:
        return None
    msg = row["Err_message"] or ""
    if msg.startswith("No bench data matched.") and not (row["NPU Dtype"] or "").startswith(TENSOR_DTYPE_PREFIXES):
        return "non-tensor entry"
    if msg.startswith("This is type of scalar data") and row["NPU Tensor Shape"] in ("[]", "()"):
        same = all(row[f"NPU {s}"] == row[f"Bench {s}"] for s in ("max", "min", "mean", "l2norm"))
        return "0-d tensor" if same else None
    return None


def tally_verdicts(case: str, table: dict, excuse) -> tuple[dict, list[dict]]:
    """Counts one compare_result table's rows by outcome: `pass`, a cause (1.1.1's own
    non-verdicts, or `excuse(row, seen_names)` for a by-design difference), or unexplained
    (returned). `seen_names`: the NPU names of the rows before this one."""
    head, *rows = table["rows"]
    tally: dict[str, int] = {"pass": 0}
    unexplained, seen = [], []
    for values in rows:
        row = {h: (None if v is None else str(v)) for h, v in zip(head, values)}
        cause = "pass" if row_passes(case, row) else non_verdict(case, row) or excuse(row, seen)
        seen.append(row["NPU Name"])
        if cause is None:
            unexplained.append(row)
            cause = "unexplained"
        tally[cause] = tally.get(cause, 0) + 1
    return tally, unexplained


def md5_control(cfg: Path, tmp: Path) -> Job:
    """A control for `tally_verdicts`: a copy of the NPU dump of compare.json `cfg` (an md5 case)
    with the first input's CRC changed, against the same bench; the rules must leave exactly that
    row unexplained."""
    c = json.loads(cfg.read_text())
    ctl = tmp / "control"
    shutil.copytree(Path(c["npu_path"]).parent, ctl)
    dump = json.loads((ctl / "dump.json").read_text())
    args = (v for rec in dump["data"].values() for v in rec.get("input_args", []))
    leaf = next(v for v in args if isinstance(v, dict) and "md5" in v)
    leaf["md5"] = f"{int(leaf['md5'], 16) ^ 1:08x}"
    (ctl / "dump.json").write_text(json.dumps(dump, indent=1))
    return write_input(tmp / "control.json", ctl, Path(c["bench_path"]).parent), ctl / "out", ()
