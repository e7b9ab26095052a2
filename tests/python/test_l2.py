"""L2 capture under LD_PRELOAD, checked against the simulator's ground-truth trace.

Every launch the simulator records (CANNSIM_TRACE: op, tensors, CRC-32 of each tensor's
elements before and after the kernel) must appear in the dump with equal CRCs: inputs as they
were before the kernel, outputs as they were after it. The tests fail on any mismatch and on any
launch missing from the dump.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from recorder_testutil import LIB, REPO

LIB64 = Path(os.environ.get("CANNSIM_LIB64", REPO / "target" / "cann" / "latest" / "lib64"))
PY = sys.executable


def run(
    args: list[str],
    tmp: Path,
    env: dict[str, str] | None = None,
    preload: bool = True,
    trace: bool = True,
    ld_path: bool = True,
) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("MSPROBE_", "CANNSIM_TRACE", "LD_LIBRARY_PATH"))}
    if ld_path:
        e["LD_LIBRARY_PATH"] = str(LIB64)
    e["CANNSIM_LIB64"] = str(LIB64)
    if preload:
        e["LD_PRELOAD"] = str(LIB)
        e.setdefault("MSPROBE_LEVEL", "L2")
        e.setdefault("MSPROBE_DUMP_PATH", str(tmp / "dump"))
    if trace:
        e["CANNSIM_TRACE"] = str(tmp / "trace.{pid}.jsonl")
        # Slow kernels make a missing stream synchronisation in the capture show up every time.
        e["CANNSIM_KERNEL_DELAY_US"] = "200"
    e.update(env or {})
    p = subprocess.run(args, env=e, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return p


def train(tmp: Path, *extra: str, env: dict[str, str] | None = None, **kw) -> subprocess.CompletedProcess:
    return run([PY, str(REPO / "examples" / "train.py"), *extra], tmp, env, **kw)


def traces(tmp: Path) -> list[list[dict]]:
    return [[json.loads(line) for line in f.read_text().splitlines()] for f in sorted(tmp.glob("trace.*.jsonl"))]


def record_of(op: str) -> tuple[str, str]:
    if op.startswith("aclnn"):
        return "Aclnn", op[len("aclnn") :]
    if op.startswith("aclop"):
        return "Aclop", op.split(":", 1)[1]
    if op.startswith("Hccl"):
        return "Hccl", op[len("Hccl") :]
    raise AssertionError(f"unexpected op {op}")


def tensor_leaves(v) -> list[dict]:
    if isinstance(v, list):
        return [x for item in v for x in tensor_leaves(item)]
    if isinstance(v, dict):
        if str(v.get("type", "")).endswith(".Tensor"):
            return [v]
        if "type" in v:
            return []
        return [x for item in v.values() for x in tensor_leaves(item)]
    return []


def crc_of(leaf: dict, rank_dir: Path) -> str:
    if "md5" in leaf:
        return leaf["md5"]
    f = rank_dir / "dump_tensor_data" / leaf["data_name"]
    data = np.load(f) if f.suffix == ".npy" else None
    assert data is not None, f
    return f"{zlib.crc32(np.ascontiguousarray(data).tobytes()):08x}"


def check_fidelity(trace: list[dict], rank_dir: Path) -> int:
    """Every traced launch is in the dump with equal CRCs; returns the number checked."""
    data = json.loads((rank_dir / "dump.json").read_text())["data"]
    seen: dict[tuple[str, str], int] = {}
    for t in trace:
        assert t["status"] == 0, t
        key = record_of(t["op"])
        n = seen.get(key, 0)
        seen[key] = n + 1
        name = f"{key[0]}.{key[1]}.{n}.forward"
        assert name in data, f"launch {t['seq']} ({t['op']}) is missing from the dump as {name}"
        rec = data[name]
        want_in = [x["crc_view_before"] for x in t["tensors"] if x["role"] in ("input", "inout")]
        want_out = [x["crc_view_after"] for x in t["tensors"] if x["role"] in ("output", "inout")]
        got_in = [crc_of(x, rank_dir) for x in tensor_leaves(rec.get("input_args", []))]
        got_out = [crc_of(x, rank_dir) for x in tensor_leaves(rec.get("output", []))]
        assert got_in == want_in, f"{name}: input CRCs {got_in} != ground truth {want_in}"
        assert got_out == want_out, f"{name}: output CRCs {got_out} != ground truth {want_out}"
    assert len(data) == len(trace), "the dump holds records the simulator never ran"
    return len(trace)


def losses(p: subprocess.CompletedProcess) -> list[str]:
    return [line for line in p.stdout.splitlines() if line.startswith("step ")]


def summary(p: subprocess.CompletedProcess) -> dict[str, str]:
    """The L2 run summary's lines as {label: value}."""
    block = p.stderr.split("L2 run summary:\n", 1)[1]
    lines = [line.strip() for line in block.splitlines() if line.startswith("  ")]
    return dict(line.split(": ", 1) for line in lines if ": " in line)


SYNCS, NOT_SYNCED, COPIES = (
    "stream syncs failed",
    "tensors not copied, stream not synchronised (recorded as null)",
    "device copies failed (recorded as null)",
)
CLEAN = {SYNCS: "0 before launches, 0 after launches", NOT_SYNCED: "0", COPIES: "0"}


def failures(p: subprocess.CompletedProcess) -> dict[str, str]:
    s = summary(p)
    return {k: s[k] for k in CLEAN}


def build(tmp: Path, source: str, *flags: str, shared: bool = False) -> Path:
    out = tmp / Path(source).stem
    out = out.with_name(f"lib{out.name}.so") if shared else out
    cmd = ["cc", "-O1", "-o", str(out), str(REPO / "tests/programs" / source), *flags]
    subprocess.run(cmd + (["-shared", "-fPIC", "-lpthread"] if shared else ["-ldl"]), check=True)
    return out


def readme_l2_command() -> str:
    """The command of the README's "L2: kernel-level capture" section, as written."""
    section = (REPO / "README.md").read_text().split("## L2: kernel-level capture", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    lines = [line for line in block.splitlines() if line.strip()]
    assert len(lines) == 1, block
    return lines[0]


def test_readme_l2_command_as_written(tmp_path: Path) -> None:
    """The README's L2 command run verbatim by a shell, from a directory laid out like the
    repository (target/release, target/cann, examples/), with no LD_LIBRARY_PATH: train.py opens
    the simulator by its full path. Every launch of every step is captured with the CRCs of the
    ground-truth trace. Only what observing needs is added to the environment: the simulator's
    trace (and slow kernels, so a missing stream synchronisation shows every time) and CRCs
    (md5) instead of statistics."""
    cmd = readme_l2_command()
    assert "LD_PRELOAD=$PWD/target/release/libmsprobe.so" in cmd and "MSPROBE_LEVEL=L2" in cmd, cmd
    (tmp_path / "target").mkdir()
    (tmp_path / "target/release").symlink_to(LIB.parent)
    (tmp_path / "target/cann").symlink_to(LIB64.parent.parent)
    (tmp_path / "examples").symlink_to(REPO / "examples")
    drop = ("MSPROBE_", "CANNSIM_", "ASCEND_", "LD_PRELOAD", "LD_LIBRARY_PATH")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # `python`
    env["PWD"] = str(tmp_path)
    env.update(
        CANNSIM_TRACE=str(tmp_path / "trace.{pid}.jsonl"), CANNSIM_KERNEL_DELAY_US="200", MSPROBE_SUMMARY_MODE="md5"
    )
    p = subprocess.run(["bash", "-c", cmd], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    steps = losses(p)
    (trace,) = traces(tmp_path)
    assert len(steps) == 20 and len(trace) == 19 * len(steps)
    assert check_fidelity(trace, tmp_path / "dump/step0/rank") == len(trace)
    assert failures(p) == CLEAN, p.stderr
    assert "[WARNING]" not in p.stderr


def test_cann_opened_by_path_under_another_file_name(tmp_path: Path) -> None:
    """A client that dlopens a copy of the CANN library by absolute path under a name that is none
    of CANN's, with no LD_LIBRARY_PATH, and never looks up aclrtSynchronizeStream, aclrtMemcpy or the
    aclop descriptor getters: the capture finds the real ones in the loaded library, and every
    kernel of the dependent chain (aclnn and aclop) is recorded as the trace saw it."""
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    lib = vendor / "libvendor-npu.so"
    shutil.copy(LIB64 / "libcannsim.so", lib)
    exe = build(tmp_path, "renamed_cann.c")
    p = run([str(exe), str(lib)], tmp_path, {"MSPROBE_SUMMARY_MODE": "md5"}, ld_path=False)
    assert p.stdout.startswith("sum ")
    (trace,) = traces(tmp_path)
    assert [t["op"] for t in trace] == ["aclnnMm", "aclnnRelu", "aclnnAdd", "aclopExecuteV2:Mul"]
    assert check_fidelity(trace, tmp_path / "dump/step0/rank") == 4
    assert failures(p) == CLEAN, p.stderr


def crc(values: list[float]) -> str:
    return f"{zlib.crc32(np.asarray(values, np.float32).tobytes()):08x}"


@pytest.mark.parametrize(
    ("mode", "flags", "env", "expected"),
    [
        ("working", [], {}, CLEAN),
        (
            "no sync function",
            ["-DNO_SYNC"],
            {},
            {**CLEAN, SYNCS: "2 before launches, 2 after launches", NOT_SYNCED: "4"},
        ),
        (
            "sync error",
            [],
            {"STUB_SYNC_RC": "507000"},
            {**CLEAN, SYNCS: "2 before launches, 2 after launches", NOT_SYNCED: "4"},
        ),
        ("copy error", [], {"STUB_D2H_RC": "507000"}, {**CLEAN, COPIES: "4"}),
    ],
)
def test_unavailable_runtime_calls_are_counted_never_recorded_as_values(
    tmp_path: Path, mode: str, flags: list[str], env: dict[str, str], expected: dict[str, str]
) -> None:
    """A stand-in CANN (tests/programs/stub_cann.c, opened by path) whose Relu kernel runs
    asynchronously: with aclrtSynchronizeStream missing or failing, or device-to-host copies
    failing, the run summary counts every failed sync and copy, one warning names the first, and
    each affected tensor is recorded as null; a tensor that is recorded holds its true value
    (a copy made without the sync would read the output before the kernel wrote it)."""
    lib = build(tmp_path, "stub_cann.c", *flags, shared=True)
    exe = build(tmp_path, "stub_client.c")
    p = run([str(exe), str(lib)], tmp_path, {"MSPROBE_SUMMARY_MODE": "md5", **env}, trace=False, ld_path=False)
    assert p.stdout == "done\n"
    x = [float(i - 4) for i in range(8)]
    y = [max(v, 0.0) for v in x]
    truth = {"Aclnn.Relu.0.forward": (crc(x), crc(y)), "Aclnn.Relu.1.forward": (crc(y), crc(y))}
    data = json.loads((tmp_path / "dump/step0/rank/dump.json").read_text())["data"]
    assert list(data) == list(truth)
    leaves = []
    for name, (want_in, want_out) in truth.items():
        (got_in,), (got_out,) = data[name]["input_args"], data[name]["output"]
        leaves += [(got_in, want_in), (got_out, want_out)]
    nulls = sum(got is None for got, _ in leaves)
    assert all(got is None or got["md5"] == want for got, want in leaves), leaves
    assert nulls == (0 if expected == CLEAN else 4), leaves
    assert failures(p) == expected, p.stderr
    warnings = [line for line in p.stderr.splitlines() if "[WARNING]" in line]
    assert len(warnings) == (0 if expected == CLEAN else 1), warnings


def test_fidelity_one_rank_md5_and_capture_changes_nothing(tmp_path: Path) -> None:
    base = train(tmp_path / "base", "--steps", "3", preload=False, trace=False)
    p = train(tmp_path, "--steps", "3", env={"MSPROBE_SUMMARY_MODE": "md5"})
    assert losses(p) == losses(base) and len(losses(p)) == 3
    (trace,) = traces(tmp_path)
    assert check_fidelity(trace, tmp_path / "dump/step0/rank") > 40
    assert "ops passed through uncaptured: none" in p.stderr


def test_fidelity_two_ranks_tensor_files(tmp_path: Path) -> None:
    base = train(tmp_path / "base", "--steps", "2", "--ranks", "2", preload=False, trace=False)
    p = train(
        tmp_path, "--steps", "2", "--ranks", "2", env={"MSPROBE_TASK": "tensor", "MSPROBE_FRAMEWORK": "mindspore"}
    )
    assert losses(p) == losses(base)
    rank_dirs = sorted((tmp_path / "dump/step0").iterdir())
    assert [d.name for d in rank_dirs] == ["rank0", "rank1"]
    ts = traces(tmp_path)
    assert len(ts) == 2
    # Each rank's trace matches exactly one rank directory.
    matched = set()
    for trace in ts:
        ok = []
        for d in rank_dirs:
            try:
                check_fidelity(trace, d)
                ok.append(d.name)
            except AssertionError:
                pass
        assert len(ok) == 1, ok
        matched.add(ok[0])
    assert matched == {"rank0", "rank1"}
    data = json.loads((rank_dirs[0] / "dump.json").read_text())["data"]
    assert any(k.startswith("Hccl.AllReduce.") for k in data)


def test_fidelity_calling_patterns(tmp_path: Path) -> None:
    """Task-queue thread launches, repeatable executors re-bound, aclop, several streams."""
    run([PY, str(REPO / "examples" / "patterns.py")], tmp_path, {"MSPROBE_SUMMARY_MODE": "md5"})
    (trace,) = traces(tmp_path)
    ops = {t["op"] for t in trace}
    assert any(o.startswith("aclop") for o in ops)
    check_fidelity(trace, tmp_path / "dump/step0/rank")


def test_fidelity_transformer_block(tmp_path: Path) -> None:
    """LayerNorm (and its backward), Softmax, Gelu, Embedding, BatchMatMul, ApplyAdamW-style ops."""
    run([PY, str(REPO / "examples" / "transformer.py"), "--steps", "2"], tmp_path, {"MSPROBE_SUMMARY_MODE": "md5"})
    (trace,) = traces(tmp_path)
    assert any(t["op"] == "aclnnLayerNormBackward" for t in trace)
    check_fidelity(trace, tmp_path / "dump/step0/rank")


def test_directly_linked_client(tmp_path: Path) -> None:
    exe = tmp_path / "direct_aclop"
    subprocess.run(
        [
            "cc",
            "-O1",
            "-o",
            str(exe),
            str(REPO / "tests/programs/direct_aclop.c"),
            f"-L{LIB64}",
            "-lacl_op_compiler",
            "-lascendcl",
            f"-Wl,-rpath,{LIB64}",
        ],
        check=True,
    )
    p = run([str(exe)], tmp_path, {"MSPROBE_SUMMARY_MODE": "md5"})
    assert "rc 0" in p.stdout
    (trace,) = traces(tmp_path)
    check_fidelity(trace, tmp_path / "dump/step0/rank")
    rec = json.loads((tmp_path / "dump/step0/rank/dump.json").read_text())["data"]["Aclop.Add.0.forward"]
    assert {"demo_attr": {"type": "int", "value": 7}} in rec["input_args"]


def test_list_and_scope_filters(tmp_path: Path) -> None:
    full = train(tmp_path / "full", "--steps", "1", trace=False)
    names = list(json.loads((tmp_path / "full/dump/step0/rank/dump.json").read_text())["data"])
    train(tmp_path / "list", "--steps", "1", trace=False, env={"MSPROBE_LIST": "Aclnn.Mm."})
    got = list(json.loads((tmp_path / "list/dump/step0/rank/dump.json").read_text())["data"])
    assert got == [n for n in names if n.startswith("Aclnn.Mm.")] and got
    # A list item with a call index (substring match on the whole name, as msprobe does).
    train(tmp_path / "list0", "--steps", "1", trace=False, env={"MSPROBE_LIST": "Mm.0."})
    got = list(json.loads((tmp_path / "list0/dump/step0/rank/dump.json").read_text())["data"])
    assert got == [n for n in names if "Mm.0." in n] and got
    lo, hi = names[3], names[9]
    train(tmp_path / "scope", "--steps", "1", trace=False, env={"MSPROBE_SCOPE": f"{lo},{hi}"})
    got = list(json.loads((tmp_path / "scope/dump/step0/rank/dump.json").read_text())["data"])
    assert got == names[3:10]
    train(tmp_path / "dm", "--steps", "1", trace=False, env={"MSPROBE_DATA_MODE": "input"})
    rec = json.loads((tmp_path / "dm/dump/step0/rank/dump.json").read_text())["data"][names[0]]
    assert "input_args" in rec and "output" not in rec
    assert full.returncode == 0


def test_step_boundaries(tmp_path: Path) -> None:
    one = train(tmp_path / "one", "--steps", "1", trace=False)
    per_step = len(json.loads((tmp_path / "one/dump/step0/rank/dump.json").read_text())["data"])
    # A launch count per step.
    train(tmp_path / "n", "--steps", "3", trace=False, env={"MSPROBE_STEP_LAUNCHES": str(per_step)})
    dumps = [json.loads((tmp_path / f"n/dump/step{i}/rank/dump.json").read_text())["data"] for i in range(3)]
    assert all(len(d) == per_step for d in dumps)
    assert list(dumps[1]) == list(dumps[0]), "counters restart at every step"
    # The op that ends a step (its last launch in the step), and the step filter.
    names = list(dumps[0])
    last_op = names[-1].rsplit(".", 2)[0]  # e.g. Aclnn.InplaceAdd.3
    op_name = last_op.rsplit(".", 1)[0]
    count = sum(1 for n in names if n.startswith(op_name + "."))
    train(
        tmp_path / "op",
        "--steps",
        "3",
        trace=False,
        env={"MSPROBE_STEP_END_OP": op_name, "MSPROBE_STEP_END_COUNT": str(count), "MSPROBE_STEP": "1,2"},
    )
    assert not (tmp_path / "op/dump/step0").exists()
    for i in (1, 2):
        assert list(json.loads((tmp_path / f"op/dump/step{i}/rank/dump.json").read_text())["data"]) == names
    assert one.returncode == 0


def test_fail_open_when_dump_dir_cannot_be_created(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    base = train(tmp_path / "base", "--steps", "2", preload=False, trace=False)
    p = train(tmp_path, "--steps", "2", trace=False, env={"MSPROBE_DUMP_PATH": str(blocker / "dump")})
    assert losses(p) == losses(base)
    errors = [line for line in p.stderr.splitlines() if "[ERROR]" in line]
    assert len(errors) == 1 and "cannot create the dump directory" in errors[0], p.stderr


def test_bad_config_fails_open(tmp_path: Path) -> None:
    base = train(tmp_path / "base", "--steps", "2", preload=False, trace=False)
    p = train(tmp_path, "--steps", "2", trace=False, env={"MSPROBE_TASK": "bogus"})
    assert losses(p) == losses(base)
    errors = [line for line in p.stderr.splitlines() if "[ERROR]" in line]
    assert len(errors) == 1 and "MSPROBE_TASK" in errors[0] and '"bogus"' in errors[0]
    assert not (tmp_path / "dump").exists()


@pytest.mark.parametrize(
    "case, want",
    [
        ("MSPROBE_LEVEL=L1", ["[WARNING]", "is L1 (from environment variable MSPROBE_LEVEL)", "only at level L2"]),
        ("MSPROBE_LEVEL=x", ["[ERROR]", "MSPROBE_LEVEL", 'value "x"', '"L2"']),
        ("MSPROBE_LEVEL=l2", ["[ERROR]", "MSPROBE_LEVEL", 'value "l2"', 'case matters: "L2"']),
        ("level L1 in the config file", ["[WARNING]", "level is L1 (from config file", "only at level L2"]),
        ("no level in the config file", ["[WARNING]", "level is L1 (the default", "only at level L2"]),
    ],
)
def test_preloaded_but_not_l2_says_so_once_and_stays_inert(tmp_path: Path, case: str, want: list[str]) -> None:
    base = train(tmp_path / "base", "--steps", "2", preload=False, trace=False)
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"task": "statistics", "dump_path": str(tmp_path / "dump")}))
    if case.startswith("MSPROBE_LEVEL="):
        env = {"MSPROBE_LEVEL": case.split("=", 1)[1]}
    else:
        if "L1" in case:
            cfg.write_text(json.dumps({"task": "statistics", "level": "L1", "dump_path": str(tmp_path / "dump")}))
        env = {"MSPROBE_CONFIG": str(cfg), "MSPROBE_LEVEL": ""}
    p = train(tmp_path, "--steps", "2", trace=False, env=env)
    assert losses(p) == losses(base)
    assert not (tmp_path / "dump").exists()
    (line,) = [line for line in p.stderr.splitlines() if "[msprobe]" in line]
    assert all(w in line for w in want) and "Capture is off" in line, line


ACLOP_NONZERO = r"""
import ctypes as C, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import cannsim_ctypes as cs
VP = C.c_void_p
acl = cs.Acl()
s = acl.stream()
f = acl.fn
desc = f(acl.rt, "aclCreateTensorDesc", VP, [C.c_int, C.c_int, VP, C.c_int])
buf = f(acl.rt, "aclCreateDataBuffer", VP, [VP, C.c_size_t])
sig = [C.c_char_p, C.c_int, VP, VP, C.c_int, VP, VP, VP, C.c_int, C.c_int, C.c_char_p, VP]
x = np.array([[0, 1.5, 0, -2], [3, 0, 0, 0], [0, 0, 7, 0]], np.float32)
for entry in ("aclopCompileAndExecuteV2", "aclopCompileAndExecute"):
    X = acl.tensor(x)
    Y = acl.tensor(np.full((2, 12), -1, np.int64), dtype=cs.ACL_INT64)
    io = [(desc(t.dtype, 2, (C.c_int64 * 2)(*t.shape), cs.ACL_FORMAT_ND), buf(t.ptr, t.nbytes)) for t in (X, Y)]
    attr = f(acl.rt, "aclopCreateAttr", VP, [])()
    f(acl.rt, "aclopSetAttrBool", C.c_int, [VP, C.c_char_p, C.c_uint8])(attr, b"transpose", 1)
    one = lambda v: (VP * 1)(v)  # noqa: E731
    rc = f(acl.opc, entry, C.c_int, sig)(
        b"NonZero", 1, one(io[0][0]), one(io[0][1]), 1, one(io[1][0]), one(io[1][1]), attr, 0, 0, None, s
    )
    assert rc == 0, acl.errmsg()
    acl.sync(s)
print("done")
"""


@pytest.mark.parametrize("async_copy", ["1", "0"])
def test_aclop_output_shape_set_by_the_kernel(tmp_path: Path, async_copy: str) -> None:
    """aclop NonZero decides its output's shape in its kernel (torch_npu's fallback for `x[mask]`).
    Through aclopCompileAndExecuteV2 the call returns with the output desc holding the real shape
    ([2, 4] here, of a [2, 12] buffer): L2 re-reads it and records the output exactly (its CRC equals
    the trace's, which the simulator writes at that shape). Through aclopCompileAndExecute (const
    descs) the output stays at the launch-time shape: recorded so, counted in the run summary."""
    src = tmp_path / "nz.py"
    src.write_text(ACLOP_NONZERO)
    env = {"MSPROBE_SUMMARY_MODE": "md5", "MSPROBE_L2_ASYNC_COPY": async_copy}
    p = run([PY, str(src), str(REPO / "examples")], tmp_path, env)
    assert p.stdout.strip().endswith("done"), p.stdout
    (trace,) = traces(tmp_path)
    assert [t["op"] for t in trace] == ["aclopCompileAndExecuteV2:NonZero", "aclopCompileAndExecute:NonZero"]
    rank = tmp_path / "dump" / "step0" / "rank"
    assert check_fidelity(trace, rank) == 2
    data = json.loads((rank / "dump.json").read_text())["data"]
    shapes = [data[f"Aclop.NonZero.{i}.forward"]["output"][0]["shape"] for i in range(2)]
    assert shapes == [[2, 4], [2, 12]], shapes
    line = "launches whose kernel decides the output shape (outputs recorded at the launch-time, largest shape)"
    assert f"{line}: 1" in p.stderr and "aclop NonZero decides its output shape" in p.stderr, p.stderr[-3000:]


@pytest.mark.parametrize("select", [{"MSPROBE_DATA_MODE": "input"}, {"MSPROBE_LIST": "Abs"}])
def test_aclop_output_shape_counted_only_when_recorded(tmp_path: Path, select: dict[str, str]) -> None:
    """The same two launches with their outputs not selected (data_mode input) or the op filtered
    out (list): nothing is recorded at a launch-time shape, so the run summary counts 0 and does not
    warn. Both launches still ran (the trace has them)."""
    src = tmp_path / "nz.py"
    src.write_text(ACLOP_NONZERO)
    p = run([PY, str(src), str(REPO / "examples")], tmp_path, {"MSPROBE_SUMMARY_MODE": "md5", **select})
    assert p.stdout.strip().endswith("done"), p.stdout
    (trace,) = traces(tmp_path)
    assert [t["op"] for t in trace] == ["aclopCompileAndExecuteV2:NonZero", "aclopCompileAndExecute:NonZero"]
    line = "launches whose kernel decides the output shape (outputs recorded at the launch-time, largest shape)"
    assert f"{line}: 0" in p.stderr and "decides its output shape in its kernel" not in p.stderr, p.stderr[-3000:]
    dump = tmp_path / "dump" / "step0" / "rank" / "dump.json"
    data = json.loads(dump.read_text())["data"] if dump.exists() else {}
    assert all("output" not in r for r in data.values()), data


UNIQUE_STRIDED = r"""
import ctypes as C, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import cannsim_ctypes as cs
acl = cs.Acl()
s = acl.stream()
x = acl.tensor(np.array([2.0, 1.0, 2.0], np.float32), dtype=cs.ACL_FLOAT)
base = acl.tensor(np.full(6, -7, np.int64), dtype=cs.ACL_INT64)
inv = acl.create_tensor((3,), cs.ACL_INT64, base.ptr, strides=(2,), storage=(6,))  # every other element
v, cnt = acl.tensor(shape=(3,), dtype=cs.ACL_FLOAT), acl.tensor(shape=(3,), dtype=cs.ACL_INT64)
acl.run("Unique2", x, True, True, True, v, C.c_void_p(inv), cnt, stream=s)
acl.sync(s)
print("done")
"""


def test_unique_outputs_reread_keep_a_strided_inverse(tmp_path: Path) -> None:
    """aclnnUnique2's kernel sets valueOut's and countsOut's view shape ([2] of [3] here) and leaves
    inverseOut's alone: L2 re-reads all three after the launch, records the first two at the real shape
    and the inverse, given with stride 2, through its own strides (its CRC equals the trace's)."""
    src = tmp_path / "uq.py"
    src.write_text(UNIQUE_STRIDED)
    p = run([PY, str(src), str(REPO / "examples")], tmp_path, {"MSPROBE_SUMMARY_MODE": "md5"})
    assert p.stdout.strip().endswith("done"), p.stdout
    (trace,) = traces(tmp_path)
    assert [t["op"] for t in trace] == ["aclnnUnique2"]
    rank = tmp_path / "dump" / "step0" / "rank"
    assert check_fidelity(trace, rank) == 1
    out = json.loads((rank / "dump.json").read_text())["data"]["Aclnn.Unique2.0.forward"]["output"]
    assert [o["shape"] for o in out] == [[2], [3], [2]], out
