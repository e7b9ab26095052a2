"""`msprobe compare` (crates/cli) against msprobe 1.1.1's own compare, row by row: every cell of
the compare_result xlsx (names, dtypes, shapes, statistics, metrics within 1e-6 relative, verdicts,
error messages and the red/yellow rows), on msprobe's sample dumps (as they are, perturbed copies,
and partly matching pairs) and on dumps of a small model made by our package and by msprobe 1.1.1,
in tensor, statistics and md5 modes. Then the first divergence on a perturbed model."""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import compare_util as cu
from recorder_testutil import CLI, REPO

SAMPLES = REPO / "tests" / "data" / "samples" / "msprobe-1.1.1-pytorch"


@pytest.fixture(scope="module", autouse=True)
def msprobe111():
    cu.setup_111()


def _check(tmp: Path, npu: Path, bench: Path, name: str) -> None:
    cu.check_pair(tmp, npu, bench, name)


SELF_CASES = [
    "mlp_L0_statistics", "mlp_L0_md5", "mlp_L0_tensor", "mlp_L1_statistics", "mlp_L1_md5", "mlp_L1_tensor",
    "mlp_mix_statistics", "mlp_mix_md5", "mlp_mix_tensor", "edge_L1_md5", "edge_L1_tensor", "edge_mix_tensor",
    "edge_L0_md5", "float64_inf_md5", "kwargs_tensor", "misc_args",
]  # fmt: skip


@pytest.mark.parametrize("case", SELF_CASES)
def test_samples_against_themselves(tmp_path, case):
    d = SAMPLES / case / "step0" / "rank"
    _check(tmp_path, d, d, case)


@pytest.mark.parametrize("task", ["tensor", "statistics", "md5"])
def test_samples_partly_matching(tmp_path, task):
    """L1 against mix of the same model: API records match, module records have no bench."""
    _check(tmp_path, SAMPLES / f"mlp_mix_{task}/step0/rank", SAMPLES / f"mlp_L1_{task}/step0/rank", f"mix-L1-{task}")
    _check(tmp_path, SAMPLES / f"mlp_L1_{task}/step0/rank", SAMPLES / f"mlp_mix_{task}/step0/rank", f"L1-mix-{task}")


PERTURB_TENSORS = r"""
import sys, glob, os, torch
npu, bench = sys.argv[1], sys.argv[2]
g = torch.Generator().manual_seed(3)
for i, f in enumerate(sorted(glob.glob(npu + "/dump_tensor_data/*.pt"))):
    b = f.replace(npu, bench)
    t = torch.load(f, weights_only=True)
    if not t.is_floating_point() or t.numel() < 2:
        continue
    k = i % 9
    if k == 0:
        t = t + 1e-3 * torch.randn(t.shape, generator=g)
    elif k == 1:
        bt = torch.load(b, weights_only=True).clone(); bt.view(-1)[::3] = 0; torch.save(bt, b)
    elif k == 2:
        t = t.clone(); t.view(-1)[0] = float("nan")
        bt = torch.load(b, weights_only=True).clone(); bt.view(-1)[0] = float("nan"); torch.save(bt, b)
    elif k == 3:
        t = t.clone(); t.view(-1)[-1] = float("inf")
    elif k == 4:
        t = t.half()
    elif k == 5:
        t = t * 2 + 1
    elif k == 6:
        os.remove(f); continue
    elif k == 7:
        t = torch.zeros_like(t)
    elif k == 8:
        t = t.reshape(-1)
    torch.save(t, f)
"""

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
        for x in v.values(): walk(x)
    elif isinstance(v, list):
        for x in v: walk(x)
walk(d["data"])
json.dump(d, open(p, "w"), indent=1)
"""


def _copy(case: str, dst: Path) -> Path:
    shutil.copytree(SAMPLES / case / "step0" / "rank", dst)
    return dst


@pytest.mark.parametrize("case", ["mlp_mix_tensor", "edge_L1_tensor", "kwargs_tensor", "mlp_L0_tensor"])
def test_samples_perturbed_tensors(tmp_path, case):
    """Noise, zeros in the bench, matching and mismatching nan/inf, float16, missing files, reshaped
    and all-zero tensors: msprobe's metrics, verdicts and messages."""
    npu, bench = _copy(case, tmp_path / "npu"), _copy(case, tmp_path / "bench")
    py = REPO / ".venv" / "bin" / "python"
    subprocess.run([str(py), "-c", PERTURB_TENSORS, str(npu), str(bench)], check=True)
    _check(tmp_path, npu, bench, case)


@pytest.mark.parametrize("case", ["mlp_mix_statistics", "mlp_mix_md5", "float64_inf_md5", "misc_args"])
def test_samples_perturbed_statistics(tmp_path, case):
    npu, bench = _copy(case, tmp_path / "npu"), _copy(case, tmp_path / "bench")
    subprocess.run([str(cu.V111 / "python"), "-c", PERTURB_STATS, str(npu / "dump.json")], check=True)
    _check(tmp_path, npu, bench, case)


MODEL_MODES = [("tensor", "statistics", "L1"), ("tensor", "statistics", "mix"), ("statistics", "statistics", "L1"),
               ("statistics", "statistics", "mix"), ("statistics", "md5", "L1")]  # fmt: skip


@pytest.mark.parametrize("task,summary,level", MODEL_MODES)
def test_model_dumps(tmp_path, task, summary, level):
    """Our dump of the perturbed MLP against our unperturbed one and against msprobe 1.1.1's."""
    npu = cu.make_dump(tmp_path / "npu", task, summary, level, perturb=True, ours=True)
    ours_bench = cu.make_dump(tmp_path / "bench", task, summary, level, perturb=False, ours=True)
    theirs_bench = cu.make_dump(tmp_path / "bench111", task, summary, level, perturb=False, ours=False)
    _check(tmp_path, npu, ours_bench, "ours-ours")
    _check(tmp_path, npu, theirs_bench, "ours-111")
    _check(tmp_path, theirs_bench, ours_bench, "111-ours")


def _first_divergence(out: Path) -> str:
    return next(out.glob("first_divergence*.txt")).read_text()


@pytest.mark.parametrize(
    "level,task,summary,expect",
    [
        ("L1", "tensor", "statistics", "Functional.linear.1.forward"),
        ("mix", "tensor", "statistics", "Functional.linear.1.forward"),
        ("L0", "tensor", "statistics", "Module.fc2.Linear.forward.0"),
        ("L1", "statistics", "statistics", "Functional.linear.1.forward"),
        ("mix", "statistics", "md5", "Functional.linear.1.forward"),
    ],
)
def test_first_divergence(tmp_path, level, task, summary, expect):
    """fc2's weights perturbed on the NPU side: the first forward divergence is fc2's first op."""
    npu = cu.make_dump(tmp_path / "npu", task, summary, level, perturb=True, ours=True)
    bench = cu.make_dump(tmp_path / "bench", task, summary, level, perturb=False, ours=True)
    out = tmp_path / "out"
    p = subprocess.run(
        [str(CLI), "compare", str(npu), str(bench), "-o", str(out), "--no-progress"], capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr
    text = _first_divergence(out)
    first = text.splitlines()[0]
    assert first == f"first divergence (forward): {expect}", text
    assert f"first divergence (forward): {expect}" in p.stdout
    if level == "mix":
        assert "module path: Module.fc2.Linear.forward.0" in text, text
    # the bench against itself: no divergence at all
    out2 = tmp_path / "same"
    subprocess.run(
        [str(CLI), "compare", str(bench), str(bench), "-o", str(out2), "--no-progress"], check=True, capture_output=True
    )
    assert _first_divergence(out2).startswith("no divergence"), _first_divergence(out2)


def test_whole_dump_and_errors(tmp_path):
    """A whole dump (step dirs) and a step dir (rank dirs) are paired; a missing tensor file gives
    its row's message and never stops the rest."""
    root = SAMPLES.parent / "msprobe-1.1.1-pytorch" / "config_variants" / "steps"
    out = tmp_path / "out"
    env = dict(os.environ, MSPROBE_COMPARE_TIMESTAMP="t")
    p = subprocess.run(
        [str(CLI), "compare", str(root), str(root), "-o", str(out), "--no-progress"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert p.returncode == 0, p.stderr
    names = sorted(f.name for f in out.glob("compare_result*.xlsx"))
    steps = sorted(d.name for d in root.iterdir() if d.name.startswith("step"))
    assert names == sorted(f"compare_result_{s}_rank-rank_t.xlsx" for s in steps), names
    npu = _copy("mlp_L1_tensor", tmp_path / "npu")
    gone = sorted((npu / "dump_tensor_data").glob("*.pt"))[0]
    gone.unlink()
    out3 = tmp_path / "out3"
    p = subprocess.run(
        [str(CLI), "compare", str(npu), str(SAMPLES / "mlp_L1_tensor/step0/rank"), "-o", str(out3), "--no-progress"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert p.returncode == 0, p.stderr
    text = (out3 / "compare_result_t.csv").read_text()
    assert f"Dump file: {gone.name} not found." in text
    with (out3 / "compare_result_t.csv").open(newline="") as f:
        assert len(list(csv.reader(f))) == 67


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def test_html_report_in_headless_chromium(tmp_path):
    """The HTML report renders its table and draws its plots (headless Chromium runs its script)."""
    browser = _chromium()
    assert browser, "Chromium is not installed: scripts/setup.sh installs it (apt-get install chromium)"
    npu = cu.make_dump(tmp_path / "npu", "tensor", "statistics", "mix", perturb=True, ours=True)
    bench = cu.make_dump(tmp_path / "bench", "tensor", "statistics", "mix", perturb=False, ours=True)
    out = tmp_path / "out"
    subprocess.run([str(CLI), "compare", str(npu), str(bench), "-o", str(out), "--no-progress"], check=True)
    page = next(out.glob("compare_result*.html"))
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files"]
    p = subprocess.run(
        [browser, *flags, "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    dom = p.stdout
    assert 'data-ready="1"' in dom, p.stderr[-2000:]
    with next(out.glob("compare_result*.csv")).open(newline="") as f:
        n_csv = len(list(csv.reader(f))) - 1
    assert f"{n_csv} of {n_csv} rows" in dom
    assert len(re.findall(r'<tr class="(?:red|yellow|)"><td>\d+</td>', dom)) == n_csv
    assert "first divergence (forward): Functional.linear.1.forward" in dom
    drawn = [int(x) for x in re.findall(r'data-points="(\d+)"', dom)]
    assert len(drawn) == 4 and all(d > 0 for d in drawn), drawn
    shot = tmp_path / "report.png"
    subprocess.run(
        [browser, *flags, "--window-size=1400,1000", f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        timeout=120,
    )
    assert shot.exists() and shot.stat().st_size > 10_000


API_RUN = """
import sys, json
from msprobe.pytorch import compare, compare_distributed
kind, npu, bench, out = sys.argv[1:5]
if kind == "compare":
    compare({"npu_json_path": npu + "/dump.json", "bench_json_path": bench + "/dump.json",
             "stack_json_path": npu + "/stack.json", "is_print_compare_log": False}, out, stack_mode=True)
else:
    compare_distributed(npu, bench, out, stack_mode=True, is_print_compare_log=False)
"""


@pytest.mark.parametrize("kind", ["compare", "compare_distributed"])
def test_python_api_as_111(tmp_path, kind):
    """msprobe.pytorch.compare / compare_distributed (1.1.1's Python API) give 1.1.1's tables."""
    step_npu, step_bench = SAMPLES / "mlp_mix_tensor" / "step0", SAMPLES / "mlp_L1_tensor" / "step0"
    npu, bench = (step_npu, step_bench) if kind == "compare_distributed" else (step_npu / "rank", step_bench / "rank")
    outs = {}
    for side, py, env in (
        ("111", cu.V111 / "python", {}),
        ("ours", REPO / ".venv" / "bin" / "python", {"PYTHONPATH": str(REPO / "python")}),
    ):
        outs[side] = tmp_path / side
        outs[side].mkdir()
        e = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | env
        p = subprocess.run([str(py), "-c", API_RUN, kind, str(npu), str(bench), str(outs[side])],
                           capture_output=True, text=True, env=e, cwd=outs[side], timeout=600)  # fmt: skip
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    names = {s: sorted(f.name.split("_2")[0] for f in outs[s].glob("compare_result*.xlsx")) for s in outs}
    assert names["ours"] == names["111"] and names["111"], names
    theirs, ours = cu.read_xlsx(outs["111"]), cu.read_xlsx(outs["ours"])
    assert len(theirs["rows"]) > 1
    problems = cu.diff_tables(ours, theirs)
    assert not problems, "\n".join(problems[:30])
