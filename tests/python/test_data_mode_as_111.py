"""data_mode that drops every section of a record: msprobe 1.1.1's DataCollector writes the record's
stack.json entry, then skips its empty data, so dump.json has no entry for it while stack.json and
construct.json keep theirs. Truth: msprobe 1.1.1 (target/venv-msprobe111) on the same script; ours
with the native and the pure-Python encoder must give the same keys in all three files."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from compare_util import V111
from recorder_testutil import LIB, REPO

SCRIPT = r"""
import json, sys, torch
from msprobe.pytorch import PrecisionDebugger
out, level, dm = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
json.dump({"task": "statistics", "dump_path": out, "rank": [], "step": [], "level": level,
           "statistics": {"scope": [], "list": [], "data_mode": dm, "summary_mode": "statistics"}},
          open(out + ".json", "w"))
torch.manual_seed(0)
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
    def forward(self, x):
        return torch.relu(self.fc(x)).sum()
net = Net()
dbg = PrecisionDebugger(config_path=out + ".json")
dbg.start(net)
net(torch.randn(2, 4)).backward()
dbg.stop()
"""


def keys(out: Path) -> dict:
    d = next(out.glob("step0/rank*"))
    got = {f: json.loads((d / f).read_text()) for f in ("dump.json", "stack.json", "construct.json")}
    got["dump.json"] = got["dump.json"]["data"]
    return {f: list(v) for f, v in got.items()}


@pytest.mark.skipif(not (V111 / "python").exists(), reason="msprobe 1.1.1 (scripts/setup-msprobe111.sh) is absent")
@pytest.mark.parametrize("level", ["L1", "L0", "mix"])
def test_emptied_records_keep_their_stack_as_111(tmp_path: Path, level: str) -> None:
    script = tmp_path / "s.py"
    script.write_text(SCRIPT)
    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "MSPROBE_LOG_LEVEL": "2"}
    ours_env = dict(base, PYTHONPATH=str(REPO / "python"), MSPROBE_LIB=str(LIB))
    runs = {
        "1.1.1": (V111 / "python", base),
        "native": (REPO / ".venv" / "bin" / "python", ours_env),
        "pure Python": (REPO / ".venv" / "bin" / "python", dict(ours_env, MSPROBE_FASTPATH="0")),
    }
    got = {}
    for name, (py, env) in runs.items():
        out = tmp_path / name.replace(" ", "_").replace(".", "")
        p = subprocess.run([str(py), str(script), str(out), level, "backward"], env=env, capture_output=True, text=True)
        assert p.returncode == 0, (name, p.stderr[-3000:])
        got[name] = keys(out)
    want = got.pop("1.1.1")
    # the case is real: forward records dropped from dump.json, their stacks kept
    forward = [k for k in want["stack.json"] if k not in want["dump.json"]]
    assert forward and all(".forward" in k for k in forward), want
    for name, k in got.items():
        assert k == want, (name, k, want)
