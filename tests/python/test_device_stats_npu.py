"""torch_npu statistics on the device (issue #21, python/msprobe/pytorch/devstats.py).

The same script runs on the simulator's npu with device statistics (default), on npu with the copy
path (MSPROBE_DEVICE_STATS=0: the recorder's host statistics over the exact bytes) and on CPU torch.
The script uses elementwise ops only, so the tensors are bit-identical on npu and CPU. Checked:
same records, keys and key order; Max/Min exact, Mean/Norm within the README tolerance of both
references; f16/bf16/int/f64/0-d/NaN/Inf/empty; the files complete after stop() (batch
fetched at stop); async_dump holds records until step(), at most MSPROBE_DEVICE_PENDING_MAX;
and from the simulator's counters (CANNSIM_STATS) that the device path copies at most 64 B per
tensor to the host, with one wait per batch, where the copy path copies every tensor whole.
"""

import json
import math
import subprocess
from pathlib import Path

import pytest

from recorder_testutil import LIB64, REPO, run_counted, sim_env

NPU_PY = REPO / "target" / "venv-npu" / "bin" / "python"

pytestmark = pytest.mark.skipif(
    not NPU_PY.exists() or not (LIB64 / "libascendcl.so").exists(),
    reason="target/venv-npu (scripts/setup-torchnpu.sh) or the simulator's CANN tree (scripts/build.sh) is absent",
)

SCRIPT = r"""
import json, os, shutil, sys
import torch
dev = sys.argv[1]
if dev == "npu":
    import torch_npu  # noqa: F401
sys.path.insert(0, os.environ["MSPROBE_PY"])
from msprobe.pytorch import PrecisionDebugger
out = sys.argv[2]
g = torch.Generator().manual_seed(0)
base = torch.randn(64, 48, generator=g)
dbg = PrecisionDebugger(dump_path=out, task="statistics", level="L1")
x = base.to(dev)
dbg.start()
a = x * 3 + 1                                   # f32
h = x.half() * 2                                # f16 (Cast, Mul)
b = x.to(torch.bfloat16) + 1                    # bf16
i = (x * 100).to(torch.int32) + 7               # int32: reduced as float32
d = x.double() * 0.5                            # f64: reduced as float32
s = x[0, 0] * 2                                 # 0-d f32
inf = x / torch.zeros_like(x)                   # +-inf
nn = inf - inf                                  # all NaN
e = x[:0] * 1                                   # empty: copy path
sq = torch.sqrt(x)                              # finite and NaN
fi = a / torch.relu(x)                          # finite and +-inf
odd = sq / torch.zeros_like(x)                  # only +inf and NaN: the ambiguous case
m = x > 0                                       # bool, mixed: any / all of the float32 cast
t = x == x                                      # bool, all True
f = x > 100                                     # bool, all False
z = s > 0                                       # bool, 0-d
dbg.stop()
shutil.copyfile(os.path.join(out, "step0", "rank", "dump.json"), os.path.join(out, "after_stop.json"))
dbg.step()
"""


def env(extra: dict) -> dict:
    return sim_env(MSPROBE_PY=str(REPO / "python"), **extra)


def run(tmp: Path, name: str, dev: str, extra: dict, script: str = SCRIPT) -> tuple[Path, dict, str]:
    out = tmp / name
    stats = tmp / f"{name}.stats.json"
    src = tmp / "script.py"
    src.write_text(script)
    counters, log = run_counted([str(NPU_PY), str(src), dev, str(out)], env(extra), stats)
    return out, counters, log  # the Python layer logs to stdout, as msprobe


def leaves(v):
    if isinstance(v, dict):
        if "Max" in v:
            yield v
            return
        for x in v.values():
            yield from leaves(x)
    elif isinstance(v, list):
        for x in v:
            yield from leaves(x)


def close(a, b, scale) -> bool:
    if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= 1e-6 * abs(b) + 1e-6 * scale


def compare(got: dict, want: dict) -> list:
    """README tolerance: Max/Min exact, Mean/Norm 1e-6 relative (+1e-6 x max|x| for means);
    *_except_inf_nan exact."""
    bad = []
    assert list(got) == list(want)
    for name in want:
        lg, lw = list(leaves(got[name])), list(leaves(want[name]))
        assert len(lg) == len(lw), name
        for g, w in zip(lg, lw):
            assert list(g) == list(w), (name, list(g), list(w))
            finite = [abs(v) for v in (w["Max"], w["Min"]) if isinstance(v, float) and math.isfinite(v)]
            scale = max(finite, default=0.0)
            for k in ("Max", "Min"):
                if not close(g[k], w[k], 0):
                    bad.append((name, k, g[k], w[k]))
            for k in ("Mean", "Norm"):
                if not close(g[k], w[k], scale):
                    bad.append((name, k, g[k], w[k]))
            for k in ("Max_except_inf_nan", "Min_except_inf_nan"):
                if k in w and not close(g[k], w[k], 0):
                    bad.append((name, k, g[k], w[k]))
            for k in ("dtype", "shape", "requires_grad", "type"):
                # torch_npu on the simulator computes `.double()` as float32 (the CPU run has float64)
                if k == "dtype" and (g[k], w[k]) == ("torch.float32", "torch.float64"):
                    continue
                if g.get(k) != w.get(k):
                    bad.append((name, k, g.get(k), w.get(k)))
    return bad


def d2h(c: dict) -> tuple[int, int]:
    x = c["copies"]["device_to_host"]
    return x["sync"]["bytes"] + x["async"]["bytes"], x["sync"]["copies"] + x["async"]["copies"]


def waits(c: dict) -> int:
    return sum(t["stream_syncs"] + t["device_syncs"] + t["event_syncs"] for t in c["threads"])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("devstats")
    return {
        "device": run(tmp, "device", "npu", {"MSPROBE_DEVICE_STATS": "1", "MSPROBE_DEVICE_BATCH": "8"}),
        # the blocking copy path (.cpu() per tensor), not the non-blocking copies (devcopies.py)
        "copy": run(tmp, "copy", "npu", {"MSPROBE_DEVICE_STATS": "0", "MSPROBE_ASYNC_COPY": "0"}),
        "cpu": run(tmp, "cpu", "cpu", {}),
        "tmp": tmp,
    }


def data(out: Path, f: str = "step0/rank/dump.json") -> dict:
    return json.loads((out / f).read_text())["data"]


def no_finite_with_nan(lf) -> bool:
    """A leaf of only NaN and +-inf with a NaN (by the host's exact values): the one case whose
    *_except_inf_nan the device values cannot give (written as NaN, counted)."""
    mx = lf.get("Max_except_inf_nan")
    return isinstance(lf["Max"], float) and math.isnan(lf["Max"]) and mx is not None and not math.isfinite(mx)


def check_equal_but_ambiguous(dev: dict, ref: dict) -> None:
    """`compare` finds nothing but the *_except_inf_nan of the ambiguous leaves (by `ref`'s exact
    values), which the device path writes as NaN where 1.1.1's rule gives an infinity."""
    bad = compare(dev, ref)
    want = {
        (n, k)
        for n, r in ref.items()
        for lf in leaves(r)
        if no_finite_with_nan(lf) and not math.isnan(lf["Max_except_inf_nan"])
        for k in ("Max_except_inf_nan", "Min_except_inf_nan")
    }
    assert {(n, k) for n, k, *_ in bad} == want, bad[:5]
    assert all(math.isnan(g) for *_, g, _ in bad), bad


def test_values_equal_copy_path_and_cpu(runs):
    dev, cp, cpu = data(runs["device"][0]), data(runs["copy"][0]), data(runs["cpu"][0])
    assert len(dev) >= 10
    for ref in (cp, cpu):
        check_equal_but_ambiguous(dev, ref)


def test_inf_leaf_counted_and_dtypes(runs):
    dev = data(runs["device"][0])
    leaves_by = {n: list(leaves(r)) for n, r in dev.items()}
    dtypes = {lf["dtype"] for ls in leaves_by.values() for lf in ls}
    assert {"torch.float16", "torch.bfloat16", "torch.int32"} <= dtypes  # `.double()` is float32 on this torch_npu
    out = [lf for lf in leaves(dev["Tensor.__truediv__.0.forward"]["output"])][0]
    assert out["Max"] == math.inf and out["Min"] == -math.inf
    # only ±inf: *_except_inf_nan are the infinities (1.1.1: the extremes of the non-NaN elements)
    assert out["Max_except_inf_nan"] == math.inf and out["Min_except_inf_nan"] == -math.inf
    nan = [lf for lf in leaves(dev["Tensor.__sub__.0.forward"]["output"])][0]
    assert all(math.isnan(nan[k]) for k in ("Max", "Min", "Mean", "Norm", "Max_except_inf_nan", "Min_except_inf_nan"))
    # every NaN/Inf leaf has its except keys; those without a finite element but with a NaN counted
    ambiguous = sum(1 for r in data(runs["cpu"][0]).values() for lf in leaves(r) if no_finite_with_nan(lf))
    assert ambiguous >= 2  # the all-NaN tensor and `odd`
    assert "NaN/Inf without *_except_inf_nan: 0" in runs["device"][2]
    assert f"only NaN/±inf, *_except_inf_nan written as NaN: {ambiguous}" in runs["device"][2]
    # bool: any / all as booleans, no Mean/Norm (as the host path), every kind present
    bools = [lf for ls in leaves_by.values() for lf in ls if lf["dtype"] == "torch.bool"]
    assert {(lf["Max"], lf["Min"]) for lf in bools} == {(True, False), (True, True), (False, False)}, bools
    assert all(lf["Mean"] is None and lf["Norm"] is None for lf in bools) and [] in [lf["shape"] for lf in bools]
    # 0-d: the value itself for all four (1.1.1's item()), also as Norm
    s = [lf for lf in leaves(dev["Tensor.__mul__.4.forward"]["output"])][0]
    assert s["shape"] == [] and s["Max"] == s["Min"] == s["Mean"] == s["Norm"] < 0


def test_files_complete_after_stop(runs):
    out = runs["device"][0]
    after = json.loads((out / "after_stop.json").read_text())["data"]
    assert after == data(out)
    assert all(lf["Max"] is not None for r in after.values() for lf in leaves(r) if lf["shape"] != [0, 48])


def test_counters_no_whole_tensor_copy(runs):
    tensors = sum(1 for r in data(runs["device"][0]).values() for _ in leaves(r))
    bdev, _ = d2h(runs["device"][1])
    bcopy, ncopy = d2h(runs["copy"][1])
    # empty tensors go by the copy path (0 bytes); everything else by 16 B
    assert 0 < bdev <= 64 * tensors, (bdev, tensors)
    assert bcopy > 10 * 64 * 48, bcopy  # the copy path moves whole tensors
    # one wait per batch of 8, versus one per tensor
    assert waits(runs["device"][1]) < waits(runs["copy"][1]), (runs["device"][1]["threads"], runs["copy"][1]["threads"])


def test_async_dump_fetches_at_step_end(runs):
    tmp = runs["tmp"]
    # async_dump: nothing fetched at stop(): the pending records are not in the files yet
    cfg = tmp / "async.json"
    cfg.write_text(json.dumps({"task": "statistics", "level": "L1", "async_dump": True}))
    env = {"MSPROBE_CONFIG": str(cfg), "MSPROBE_DEVICE_STATS": "1", "MSPROBE_DEVICE_BATCH": "8"}
    a, c_async, _ = run(tmp, "async", "npu", env)
    after_stop = json.loads((a / "after_stop.json").read_text())["data"]
    final = data(a)
    assert compare(final, data(runs["device"][0])) == []
    assert len(after_stop) < len(final)
    # batches of 8 fetched as they fill (device run) versus one fetch at step end (async_dump)
    assert waits(runs["device"][1]) > waits(c_async), (runs["device"][1]["threads"], c_async["threads"])

    # async_dump never holds more than MSPROBE_DEVICE_PENDING_MAX results: fetched early, warned and
    # counted, the same final records; without the cap nothing was fetched before step()
    capped = {**env, "MSPROBE_DEVICE_PENDING_MAX": "4"}
    b, c_capped, err = run(tmp, "async_capped", "npu", capped)
    assert compare(data(b), data(runs["device"][0])) == []
    after_capped = json.loads((b / "after_stop.json").read_text())["data"]
    assert len(after_stop) < len(after_capped) <= len(final), (len(after_stop), len(after_capped))
    assert waits(c_capped) > waits(c_async), (c_capped["threads"], c_async["threads"])
    assert "MSPROBE_DEVICE_PENDING_MAX" in err and "fetched before step()" in err, err[-2000:]


def exact_stats(out: Path) -> dict:
    """Max/Min/Mean/Norm in float64 of every .pt file of a tensor-mode dump (torch in a child,
    as the test process need not have it)."""
    code = (
        "import json, sys, pathlib, torch\n"
        "res = {}\n"
        "for f in pathlib.Path(sys.argv[1]).rglob('*.pt'):\n"
        "    x = torch.load(f).double()\n"
        "    if x.numel():\n"
        "        v = (x.max(), x.min(), x.mean(), x.norm())\n"
        "        res[f.name] = dict(zip(('Max', 'Min', 'Mean', 'Norm'), (a.item() for a in v)))\n"
        "print(json.dumps(res))\n"
    )
    p = subprocess.run(
        [str(NPU_PY), "-c", code, str(out)],
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout)


_ITEMSIZE = {
    "torch.float32": 4,
    "torch.float16": 2,
    "torch.bfloat16": 2,
    "torch.int32": 4,
    "torch.float64": 8,
    "torch.bool": 1,
}


def test_hybrid_by_size_is_the_default(runs):
    """Default (MSPROBE_DEVICE_STATS unset): tensors larger than MSPROBE_DEVICE_STATS_MIN_BYTES are
    reduced on the device, the others copied without blocking. Truth: each leaf's bytes from its
    dtype and shape in dump.json, the values of the blocking copy path, the simulator's counters."""
    tmp = runs["tmp"]
    min_bytes = 8192  # the 64x48 float32/int32 tensors (12288 B) reduced, f16/bf16 (6144 B) and 0-d copied
    out, c, log = run(tmp, "hybrid", "npu", {"MSPROBE_DEVICE_STATS_MIN_BYTES": str(min_bytes)})
    got = data(out)
    check_equal_but_ambiguous(got, data(runs["copy"][0]))
    sizes = [
        math.prod(lf["shape"]) * _ITEMSIZE[lf["dtype"]]
        for r in got.values()
        for lf in leaves(r)
        if lf["dtype"] in _ITEMSIZE
    ]
    assert len(sizes) == sum(1 for r in got.values() for _ in leaves(r))
    large = [n for n in sizes if n > min_bytes]
    small = [n for n in sizes if n <= min_bytes]
    assert len(large) >= 8 and len(small) >= 4, (large, small)
    # every small tensor crossed whole, each large one as its 6 float32 results (24 B), all async
    x = c["copies"]["device_to_host"]
    assert x["sync"]["bytes"] == 0, x
    assert x["async"]["bytes"] == sum(small) + 24 * len(large), (x, sum(small), len(large))
    assert f"device statistics: {len(large)} tensors" in log, log[-1500:]

    # Against the exact values (f64 over the tensor-mode files of the same script, copy path): the
    # reduced leaves' Max/Min exact, Mean/Norm within the README tolerance
    tensor_script = SCRIPT.replace('task="statistics"', 'task="tensor"')
    tout, _, _ = run(tmp, "hybrid_truth", "npu", {"MSPROBE_DEVICE_STATS": "0"}, script=tensor_script)
    exact = exact_stats(tout)
    truth = data(tout)
    checked = 0
    for name, rec in got.items():
        for g, w in zip(leaves(rec), leaves(truth[name])):
            if math.prod(g["shape"]) * _ITEMSIZE[g["dtype"]] <= min_bytes or g["dtype"] == "torch.int32":
                continue
            e = exact[w["data_name"]]
            if not all(map(math.isfinite, e.values())):
                continue  # NaN/Inf: compared with the copy path above
            scale = max(abs(e["Max"]), abs(e["Min"]))
            assert (g["Max"], g["Min"]) == (e["Max"], e["Min"]), (name, g, e)
            assert abs(g["Mean"] - e["Mean"]) <= 1e-6 * (abs(e["Mean"]) + scale), (name, g, e)
            assert abs(g["Norm"] - e["Norm"]) <= 1e-6 * e["Norm"], (name, g, e)
            checked += 1
    assert checked >= 8, checked
    # empty tensors take .cpu() (nothing to copy)
    assert f"copied to the host without blocking: {sum(1 for n in small if n)}" in log, log[-1500:]


SIDE = r"""
import json, os, sys
import torch, torch_npu
sys.path.insert(0, os.environ["MSPROBE_PY"])
from msprobe.pytorch import PrecisionDebugger
x = torch.randn(64, 48, generator=torch.Generator().manual_seed(0)).npu()
dbg = PrecisionDebugger(dump_path=sys.argv[1], task="statistics", level="L1")
side = torch.npu.Stream()
side.wait_stream(torch.npu.current_stream())
dbg.start()
if sys.argv[2] == "reduce-on-side":
    with torch.npu.stream(side):
        a = x * 3 + 1
    dbg.stop()   # fetched on the default stream while the side stream still runs its delayed kernels
else:  # reduced on the default stream, fetched on the side stream
    a = x * 3 + 1
    with torch.npu.stream(side):
        dbg.stop()
torch.npu.current_stream().wait_stream(side)
dbg.step()
"""


def test_results_of_a_side_stream_are_waited_for(tmp_path):
    """Tensors reduced on a side stream and fetched on the default one, and the reverse: the fetch
    waits, on the device, for the stream the results were reduced on (an event re-recorded after
    the reductions on a side stream; the default stream as a whole). With every simulated kernel
    delayed, an unordered fetch reads the results before they are written. Truth: the blocking
    copy path."""
    src = tmp_path / "side.py"
    src.write_text(SIDE)
    for case in ("reduce-on-side", "fetch-on-side"):
        got = {}
        for name, extra in [("device", {"MSPROBE_DEVICE_STATS": "1"}), ("copy", {"MSPROBE_DEVICE_STATS": "0"})]:
            out = tmp_path / case / name
            extra = {**extra, "MSPROBE_ASYNC_COPY": "0", "CANNSIM_KERNEL_DELAY_US": "20000"}
            run_counted([str(NPU_PY), str(src), str(out), case], env(extra), tmp_path / f"{case}.{name}.json")
            got[name] = data(out)
        assert len(got["device"]) == 2, case
        assert compare(got["device"], got["copy"]) == [], case
