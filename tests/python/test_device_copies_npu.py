"""torch_npu device tensors copied to the host without blocking (issue #21,
python/msprobe/pytorch/devcopies.py): md5 and tensor tasks.

One script (elementwise ops, casts, a transposed view, cat/stack of many inputs, NaN/Inf, an empty
and a 0-d tensor) runs on the simulator's npu with the non-blocking copies (default), with the
blocking copy path (MSPROBE_ASYNC_COPY=0: ``.cpu()`` per tensor), with batches of 3 (fetched while
a record is still open) and with a 1 MiB cap, and on CPU torch. Checked: dump.json and every
tensor file byte-identical to the blocking path; CRCs equal to the CPU run's; the files complete
after stop(); and from the simulator's counters (CANNSIM_STATS): every device tensor crosses the
link once by an async copy and none by a synchronous one, the training thread waits about once
per batch instead of once per tensor, pinned memory is one allocation within the cap, and a
tensor larger than the cap takes the blocking path.
"""

import filecmp
import json
import subprocess
from pathlib import Path

import pytest

from recorder_testutil import CLI, LIB64, REPO, run_counted, sim_env
from test_device_stats_npu import leaves, waits

NPU_PY = REPO / "target" / "venv-npu" / "bin" / "python"

pytestmark = pytest.mark.skipif(
    not NPU_PY.exists() or not (LIB64 / "libascendcl.so").exists(),
    reason="target/venv-npu (scripts/setup-torchnpu.sh) or the simulator's CANN tree (scripts/build.sh) is absent",
)

SCRIPT = r"""
import json, os, shutil, sys
import torch
dev, out, task = sys.argv[1], sys.argv[2], sys.argv[3]
if dev == "npu":
    import torch_npu  # noqa: F401
sys.path.insert(0, os.environ["MSPROBE_PY"])
from msprobe.pytorch import PrecisionDebugger
if task == "md5":
    cfg = out + ".config.json"
    with open(cfg, "w") as f:
        json.dump({"task": "statistics", "level": "L1", "dump_path": out, "statistics": {"summary_mode": "md5"}}, f)
    dbg = PrecisionDebugger(config_path=cfg)
else:
    dbg = PrecisionDebugger(dump_path=out, task=task, level="L1")
g = torch.Generator().manual_seed(0)
x = torch.randn(64, 48, generator=g).to(dev)
y = torch.randn(170, 1024, generator=g).to(dev)   # 680 KiB: fits a 1 MiB cap alone
dbg.start()
a = x * 3 + 1
h = x.half() * 2
b = x.to(torch.bfloat16) + 1
i = (x * 100).to(torch.int32) + 7
s = x[0, 0] * 2                                    # 0-d
inf = x / torch.zeros_like(x)                      # +-inf, NaN
e = x[:0] * 1                                      # empty
t = x.t() * 2                                      # a transposed (dense, strided) input
c = torch.cat([a, x, t.t(), a, x], dim=0)          # 5 inputs in one record
z = y * 2 + y
w = torch.stack([y, y, y])                         # 2 MiB output: larger than a 1 MiB cap
dbg.stop()
shutil.copyfile(os.path.join(out, "step0", "rank", "dump.json"), out + ".after_stop.json")
dbg.step()
"""

RUNS = {
    "async": {},
    "blocking": {"MSPROBE_ASYNC_COPY": "0"},
    "batch3": {"MSPROBE_DEVICE_BATCH": "3"},
    "cap": {"MSPROBE_QUEUE_MB": "1"},
}


def run(tmp: Path, name: str, dev: str, task: str, extra: dict) -> tuple[Path, dict, str]:
    out = tmp / name
    stats = tmp / f"{name}.stats.json"
    src = tmp / "script.py"
    src.write_text(SCRIPT)
    env = sim_env(MSPROBE_PY=str(REPO / "python"), **extra)
    counters, log = run_counted([str(NPU_PY), str(src), dev, str(out), task], env, stats)
    return out, counters, log


@pytest.fixture(scope="module", params=["md5", "tensor"])
def runs(request, tmp_path_factory):
    task = request.param
    tmp = tmp_path_factory.mktemp(f"devcopies-{task}")
    # md5: the CRCs against CPU torch; tensor: the batches and the cap (the leaves are the same)
    names = ["async", "blocking"] if task == "md5" else list(RUNS)
    got = {name: run(tmp, name, "npu", task, RUNS[name]) for name in names}
    if task == "md5":
        got["cpu"] = run(tmp, "cpu", "cpu", task, {})
    got["task"] = task
    return got


def dump(out: Path, f: str = "step0/rank/dump.json") -> dict:
    return json.loads((out / f).read_text())["data"]


def nbytes(lf: dict) -> int:
    size = {"torch.float32": 4, "torch.int32": 4, "torch.float16": 2, "torch.bfloat16": 2}[lf["dtype"]]
    n = size
    for d in lf["shape"]:
        n *= d
    return n


def files(out: Path) -> list[str]:
    d = out / "step0" / "rank" / "dump_tensor_data"
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def d2h(c: dict) -> dict:
    return c["copies"]["device_to_host"]


@pytest.mark.parametrize("name", ["async", "batch3", "cap"])
def test_same_dump_and_files_as_blocking(runs, name):
    if name not in runs:
        pytest.skip(f"{name} runs with the tensor task only")
    got, want = runs[name][0], runs["blocking"][0]
    assert json.dumps(dump(got)) == json.dumps(dump(want))  # the same text, keys in the same order
    assert files(got) == files(want)
    if runs["task"] == "tensor":
        assert len(files(got)) == sum(1 for r in dump(got).values() for _ in leaves(r))
    d = got / "step0" / "rank" / "dump_tensor_data"
    for f in files(got):
        assert filecmp.cmp(d / f, want / "step0" / "rank" / "dump_tensor_data" / f, shallow=False), f


def test_crcs_equal_to_cpu_and_complete_after_stop(runs):
    out = runs["async"][0]
    assert json.loads(Path(str(out) + ".after_stop.json").read_text())["data"] == dump(out)
    if "cpu" not in runs:
        return
    got, cpu = dump(out), dump(runs["cpu"][0])
    assert list(got) == list(cpu)
    pairs = [(a, b) for k in got for a, b in zip(leaves(got[k]), leaves(cpu[k]), strict=True)]
    assert pairs and all(a["shape"] == b["shape"] and a["dtype"] == b["dtype"] for a, b in pairs)
    if runs["task"] == "md5":
        assert [a["md5"] for a, _ in pairs] == [b["md5"] for _, b in pairs]
    assert all(a["Max"] is not None for a, _ in pairs if 0 not in a["shape"])


def test_one_async_copy_per_tensor_and_a_wait_per_batch(runs):
    out, c, log = runs["async"]
    tensors = [lf for r in dump(out).values() for lf in leaves(r)]
    device = [lf for lf in tensors if 0 not in lf["shape"]]  # the empty one is copied blocking (0 B)
    x = d2h(c)
    assert x["sync"]["copies"] == 0, x
    assert x["async"]["copies"] == len(device), (x, len(device))
    assert x["async"]["bytes"] == sum(nbytes(lf) for lf in device)
    assert f"copied to the host without blocking: {len(device)}" in log
    blocking = runs["blocking"][1]
    assert d2h(blocking)["sync"]["copies"] == len(device) and d2h(blocking)["async"]["copies"] == 0
    # waits: the blocking path waits per tensor; the non-blocking one at stop() (and the script's
    # own few, also in the blocking run)
    assert waits(c) + len(device) - 2 <= waits(blocking), (c["threads"], blocking["threads"])
    if "batch3" not in runs:
        return
    # batches of 3: a wait per batch, still far fewer than per tensor
    b3 = waits(runs["batch3"][1])
    assert waits(c) < b3 < waits(blocking), (waits(c), b3, waits(blocking))


def test_pinned_memory_within_the_cap(runs):
    if "cap" not in runs:
        pytest.skip("runs with the tensor task only")
    out, c, _ = runs["cap"]
    cap = 1 << 20
    assert c["memory"]["pinned_allocs"] == 1 and c["memory"]["pinned_peak_bytes"] <= cap, c["memory"]
    big = [lf for r in dump(out).values() for lf in leaves(r) if nbytes(lf) > cap]
    assert len(big) == 1  # stack's output: the blocking path
    assert d2h(c)["sync"]["copies"] == len(big), d2h(c)
    # the default cap (1024 MB) took everything into one arena
    assert runs["async"][1]["memory"]["pinned_allocs"] == 1


KILLED = r"""
import os, signal, sys
import torch, torch_npu  # noqa: F401
sys.path.insert(0, os.environ["MSPROBE_PY"])
from msprobe.pytorch import PrecisionDebugger
dbg = PrecisionDebugger(dump_path=sys.argv[1], task="tensor", level="L1")
x = torch.randn(64, 48).npu()
dbg.start()
for _ in range(int(sys.argv[2])):
    x = x * 1.5 + 1
os.kill(os.getpid(), signal.SIGKILL)  # before any batch is collected
"""


def test_killed_before_the_copies_arrive_loses_no_record(tmp_path):
    src, out, n = tmp_path / "killed.py", tmp_path / "dump", 7
    src.write_text(KILLED)
    env = sim_env(MSPROBE_PY=str(REPO / "python"))
    p = subprocess.run([str(NPU_PY), str(src), str(out), str(n)], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == -9, p.stderr[-2000:]
    r = subprocess.run([str(CLI), "recover", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{2 * n} records recovered from their launch-time plan" in r.stdout + r.stderr, r.stdout + r.stderr
    data = dump(out)
    assert len(data) == 2 * n  # a mul and an add per iteration, each held for its copies
    lfs = [lf for rec in data.values() for lf in leaves(rec)]
    assert lfs and all(lf["Max"] is None and "data_name" not in lf for lf in lfs)
    assert files(out) == []  # no file named that was never written
