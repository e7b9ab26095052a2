"""First use, as a new user does it: a clean clone of this repository, the README's "Install" commands run
as written (the native build and the wheel, then `pip install` of the wheel into a fresh venv), a training
script with the README's PyTorch calls, then `msprobe summary` (the wheel's console script) on its dump.

The clone is of the committed HEAD, at a fixed path under target/ with its own CARGO_TARGET_DIR (seeded
once from target/release, so only the workspace's own crates build for it: ~2 min after each new commit,
well under a minute otherwise; file times are set to HEAD's commit time so cargo sees unchanged sources
as unchanged). The fresh venv sees torch and numpy from the test venv through a .pth file appended after
its own site-packages; msprobe itself can only come from the wheel.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from recorder_testutil import REPO

WORK = REPO / "target" / "clean-clone"

USER_SCRIPT = """
import sys
import torch
import msprobe
from msprobe.pytorch import PrecisionDebugger

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = torch.nn.CrossEntropyLoss()
loader = [(torch.randn(4, 8), torch.randint(0, 2, (4,))) for _ in range(2)]
debugger = PrecisionDebugger(dump_path="./dump", task="statistics", level="L1")  # or config_path="config.json"
for x, y in loader:
    debugger.start()
    loss = loss_fn(model(x), y); loss.backward(); optimizer.step()
    debugger.stop()
    debugger.step()
print(msprobe.__file__)
"""


def sh_block(readme: str, heading: str) -> str:
    section = readme.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```sh\n(.*?)```", section, re.S).group(1)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is needed for the clone")
def test_clean_clone_readme_install_user_script_summary():
    src, target, venv = WORK / "src", WORK / "target", WORK / "venv"
    shutil.rmtree(src, ignore_errors=True)
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run(["git", "clone", "-q", str(REPO), str(src)], check=True, timeout=120)
    head_time = int(
        subprocess.run(
            ["git", "-C", str(src), "log", "-1", "--format=%ct"], capture_output=True, text=True, check=True
        ).stdout
    )
    for p in src.rglob("*"):
        if ".git" not in p.parts and not p.is_symlink():
            os.utime(p, (head_time, head_time))
    if not (target / "release").exists():  # registry crates built once already: reuse them
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-a", str(REPO / "target" / "release"), str(target)], check=True, timeout=600)
    readme = (src / "README.md").read_text()

    # a fresh venv, its pip first on PATH, as the user's training environment
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    site = next((venv / "lib").glob("python3*/site-packages"))
    test_site = next(p for p in map(Path, sys.path) if p.name == "site-packages" and (p / "torch").exists())
    (site / "zz_test_venv.pth").write_text(f"{test_site}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MSPROBE_", "PYTHON", "CANNSIM_"))}
    env.pop("VIRTUAL_ENV", None)
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}",
        CARGO_TARGET_DIR=str(target),
        MSPROBE_VENV=str(REPO / ".venv"),  # the test venv: setup.sh finds it done
        CANNSIM_PREFIX=str(WORK / "cann"),
    )
    setup = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", sh_block(readme, "Install")],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert setup.returncode == 0, setup.stderr[-4000:]
    # the build left nothing in the source tree
    status = subprocess.run(
        ["git", "status", "--porcelain", "--ignored", "python"], cwd=src, capture_output=True, text=True, check=True
    ).stdout
    assert status == "", status
    wheels = list((src / "target" / "wheels").glob("msprobe_rs-*.whl"))
    assert len(wheels) == 1 and wheels[0].name.endswith("-cp310-abi3-linux_x86_64.whl"), wheels

    # the user's script: the README's PyTorch calls, run outside the repository
    block = readme.split("\n## PyTorch", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    for line in (
        "from msprobe.pytorch import PrecisionDebugger",
        "debugger.start()",
        "debugger.stop()",
        "debugger.step()",
        'PrecisionDebugger(dump_path="./dump", task="statistics", level="L1")',
    ):
        assert line in block and line in USER_SCRIPT, line
    user = WORK / "user"
    shutil.rmtree(user, ignore_errors=True)
    user.mkdir()
    (user / "train.py").write_text(USER_SCRIPT)
    run = subprocess.run(
        [str(venv / "bin" / "python"), "train.py"], cwd=user, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert run.stdout.strip().splitlines()[-1].startswith(str(site)), run.stdout  # msprobe from the wheel

    # the wheel's console script is the Rust CLI
    exe = shutil.which("msprobe", path=env["PATH"])
    assert exe == str(venv / "bin" / "msprobe")
    summary = subprocess.run([exe, "summary", "./dump"], cwd=user, env=env, capture_output=True, text=True, timeout=60)
    assert summary.returncode == 0, summary.stderr
    want = {
        f"dump/step{i}/rank": len(json.loads((user / "dump" / f"step{i}" / "rank" / "dump.json").read_text())["data"])
        for i in range(2)
    }
    got = {
        line.split(": ")[0].removeprefix("./"): int(line.split(": ")[1].split(" records")[0])
        for line in summary.stdout.splitlines()
    }
    assert got == want and all(n > 0 for n in want.values()), (got, want)
