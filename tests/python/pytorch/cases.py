"""The msprobe 1.1.1 sample cases and how our copies of their drivers reproduce them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DRIVERS = HERE / "drivers"
REPO = HERE.parents[2]
LIB = REPO / "target" / "release" / "libmsprobe.so"

# case (sample dir under msprobe-1.1.1-pytorch/) -> (driver, argv with OUT for the dump path, numbers compared)
CASES: dict[str, tuple[str, list[str], bool]] = {}
for lv in ("L0", "L1", "mix"):
    CASES[f"mlp_{lv}_statistics"] = (
        "run_case.py",
        ["--level", lv, "--task", "statistics", "--summary", "statistics", "--out", "OUT", "--steps", "1"],
        True,
    )
    CASES[f"mlp_{lv}_md5"] = (
        "run_case.py",
        ["--level", lv, "--task", "statistics", "--summary", "md5", "--out", "OUT", "--steps", "1"],
        True,
    )
    CASES[f"mlp_{lv}_tensor"] = (
        "run_case.py",
        ["--level", lv, "--task", "tensor", "--out", "OUT", "--steps", "1"],
        True,
    )
CASES.update(
    {
        "edge_L1_md5": ("edge.py", ["statistics", "md5", "OUT", "L1"], True),
        "edge_L1_tensor": ("edge.py", ["tensor", "statistics", "OUT", "L1"], True),
        "edge_L0_md5": ("edge.py", ["statistics", "md5", "OUT", "L0"], False),  # weights unseeded
        "edge_mix_tensor": ("edge.py", ["tensor", "statistics", "OUT", "mix"], False),
        "float64_inf_md5": ("f64.py", ["OUT"], True),
        "kwargs_tensor": ("kw.py", ["OUT"], False),  # unseeded
        "misc_args": ("edge2.py", ["OUT"], False),  # unseeded
    }
)
_CFG = {
    "base": ("L1", "{}", []),
    "dm_fwd": ("L1", '{"task": {"data_mode": ["forward"]}}', []),
    "dm_in": ("L1", '{"task": {"data_mode": ["input"]}}', []),
    "dm_bwd_out": ("L1", '{"task": {"data_mode": ["backward", "output"]}}', []),
    "list_full": ("L1", '{"task": {"list": ["Functional.linear.1.forward", "Tensor.pow.0.backward"]}}', []),
    "list_linear": ("L1", '{"task": {"list": ["linear"]}}', []),
    "scope_api": ("L1", '{"task": {"scope": ["Functional.relu.0.forward", "Tensor.pow.0.forward"]}}', []),
    "scope_mod": ("L0", '{"task": {"scope": ["Module.act.ReLU.forward.0", "Module.fc2.Linear.forward.0"]}}', []),
    "mix_scope": ("mix", '{"task": {"scope": ["Module.act.ReLU.forward.0", "Functional.linear.1.forward"]}}', []),
    "mix_list": ("mix", '{"task": {"list": ["fc2"]}}', []),
    "steps": ("L1", '{"step": [1, "3-4"], "nsteps": 5}', []),
    "fbend": ("L1", "{}", ["fbend"]),
    "mdump": ("L1", "{}", ["module_dump"]),
}
for name, (lv, extra, special) in _CFG.items():
    CASES[f"config_variants/{name}"] = ("cfgtest.py", [lv, extra, "OUT"] + special, True)


def out_dir(root: Path, case: str) -> Path:
    return root / "out" / case.replace("/", "__")


def run_all(root: Path, cases: list[str], env: dict | None = None) -> dict:
    """Runs the drivers of `cases` (forked from one torch-importing process); dumps go to
    out_dir(root, case), logs to root/logs/. `env` adds environment variables."""
    (root / "logs").mkdir(parents=True, exist_ok=True)
    jobs = []
    for case in cases:
        script, argv, _ = CASES[case]
        cwd = root / "cwd" / case.replace("/", "__")
        cwd.mkdir(parents=True, exist_ok=True)
        out = str(out_dir(root, case))
        jobs.append(
            {
                "script": str(DRIVERS / script),
                "argv": [out if a == "OUT" else a for a in argv],
                "cwd": str(cwd),
                "log": str(root / "logs" / (case.replace("/", "__") + ".log")),
            }
        )
    (root / "jobs.json").write_text(json.dumps(jobs))
    env = {"PYTHONPATH": str(REPO / "python"), "MSPROBE_LIB": str(LIB), "PATH": "/usr/bin:/bin", **(env or {})}
    p = subprocess.run(
        [sys.executable, str(HERE / "forkrun.py"), str(root / "jobs.json")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])
