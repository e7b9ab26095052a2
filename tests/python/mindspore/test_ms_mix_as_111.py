"""MindSpore mix-level record names and construct.json as msprobe 1.1.1 writes them, on MindSpore
2.10 CPU: an API call before the first Cell of a step has the parent "" (1.1.1's initial
`api_parent_node`, reset by step()); API, Primitive and Cell calls between stop() and the next
start() advance the call counters, as 1.1.1's wrappers count every call; data_mode ["backward"]
leaves no forward record in dump.json but keeps its stack.json entry. Truth: msprobe 1.1.1
(target/msprobe-1.1.1) on the same script in the same interpreter, with its zoo driver's shim."""

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
out, data_mode = sys.argv[1], sys.argv[2]
cfg = {"task": "statistics", "dump_path": out, "rank": [], "step": [], "level": "mix",
       "statistics": {"scope": [], "list": [], "data_mode": [data_mode], "summary_mode": "statistics"}}
json.dump(cfg, open(out + ".json", "w"))
from msprobe.mindspore import PrecisionDebugger

class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.d = nn.Dense(3, 2)
    def construct(self, x):
        x = x * 2.0
        return self.d(x).abs()

ms.set_seed(0)
net = Net()
x = Tensor(np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32))
dbg = PrecisionDebugger(config_path=out + ".json")
grad = ms.value_and_grad(lambda v: mint.sum(net(v)), grad_position=0)
for step in range(2):
    dbg.start(model=net)
    y = mint.add(x, 1)     # before the first Cell of the step
    grad(y)
    dbg.stop()
    net(x)                 # outside the window: counted, not recorded
    mint.add(x, 1)
    dbg.start(model=net)
    net(x)
    mint.add(x, 1)
    dbg.stop()
    dbg.step()
"""


def files(out: Path, step: int) -> dict:
    d = out / f"step{step}" / "rank"
    got = {f: json.loads((d / f).read_text()) for f in ("dump.json", "stack.json", "construct.json")}
    return {
        "dump.json": list(got["dump.json"]["data"]),
        "stack.json": list(got["stack.json"]),
        "construct.json": got["construct.json"],
    }


@pytest.mark.skipif(not (MS111 / "msprobe").exists(), reason="msprobe 1.1.1 (scripts/setup-ms.sh --msprobe) is absent")
@pytest.mark.parametrize("data_mode", ["all", "backward"])
def test_ms_mix_names_and_parents_equal_111s(tmp_path: Path, data_mode: str) -> None:
    outs = run_both(tmp_path, SCRIPT, data_mode)
    got = {n: [files(o, s) for s in (0, 1)] for n, o in outs.items()}
    want = got["1.1.1"]
    # the cases are real: a "" parent, a counter advanced outside the window
    assert "" in want[0]["construct.json"].values(), want[0]["construct.json"]
    assert any(n.startswith("Mint.add.2.") for n in want[0]["stack.json"]), want[0]["stack.json"]
    for s in (0, 1):
        assert got["ours"][s] == want[s], (s, got["ours"][s], want[s])
