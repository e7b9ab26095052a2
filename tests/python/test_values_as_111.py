"""Non-tensor values written as msprobe 1.1.1 writes them (its recursive_apply_transform and
`json.dump`): subclasses of int/str (IntEnum, str Enums) under their own type name, dict keys
True/None/1.5 as JSON writes keys, numpy bools as `bool_` (1.1.1 runs on numpy 1), and a dataclass
that is also a dict (transformers' ModelOutput) by its fields. Truth: msprobe 1.1.1
(target/venv-msprobe111) on the same script; ours with the native and the pure-Python encoder must
write the same dump.json."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from compare_util import V111
from recorder_testutil import LIB, REPO

SCRIPT = r"""
import dataclasses, enum, sys, typing
import numpy as np, torch
from msprobe.pytorch import PrecisionDebugger

class Red(enum.IntEnum):
    R = 1

class Mode(str, enum.Enum):
    FAST = "fast"

@dataclasses.dataclass
class Out(dict):  # like transformers' ModelOutput
    hidden: typing.Any = None
    extra: typing.Any = None
    def __post_init__(self):
        if self.hidden is not None:
            self["hidden"] = self.hidden

class M(torch.nn.Module):
    def forward(self, x, *a, **k):
        return x * 2

class Top(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.m = M()
    def forward(self, x):
        return self.m(x, Red.R, Mode.FAST, {True: 1, None: 2, 1.5: 3, "s": 4}, np.bool_(True),
                      kind=Red.R, out=Out(hidden=x))

dbg = PrecisionDebugger(dump_path=sys.argv[1], task="statistics", level="L0")
m = Top()
dbg.start(m)
m(torch.ones(2))
dbg.stop()
"""


def data(out: Path) -> dict:
    return json.loads(next(out.glob("step0/rank*/dump.json")).read_text())["data"]


@pytest.mark.skipif(not (V111 / "python").exists(), reason="msprobe 1.1.1 (scripts/setup-msprobe111.sh) is absent")
def test_values_written_as_111(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text(SCRIPT)
    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "MSPROBE_LOG_LEVEL": "2"}
    ours_env = dict(base, PYTHONPATH=str(REPO / "python"), MSPROBE_LIB=str(LIB))
    py = REPO / ".venv" / "bin" / "python"
    runs = {"1.1.1": (V111 / "python", base), "native": (py, ours_env)}
    runs["pure Python"] = (py, dict(ours_env, MSPROBE_FASTPATH="0"))
    got = {}
    for name, (exe, env) in runs.items():
        out = tmp_path / name.replace(" ", "_").replace(".", "")
        p = subprocess.run([str(exe), str(script), str(out)], env=env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, (name, p.stderr[-3000:])
        got[name] = data(out)
    want = got.pop("1.1.1")
    args = want["Module.m.M.forward.0"]["input_args"]
    assert args[1] == {"type": "Red", "value": 1} and "true" in args[3], args  # the case is real
    for name, d in got.items():
        assert json.dumps(d) == json.dumps(want), (name, d, want)
