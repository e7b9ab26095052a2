"""Bad input of any kind never kills, hangs or silently blinds the host job (issue #17, items 6
and 7): config files that are not regular files, nested too deep or too large, step lists of
huge ranges, counts past 2^64, bad views, names that collide once sanitised, an unwritable dump
root. Each gives one clear line naming the key and value, the job runs on uncaptured.

Every child runs with a 4 GiB address-space limit (an expanded step list aborts instead of
swapping the machine) and a timeout (a blocking read fails the test instead of hanging it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from recorder_testutil import LIB, REPO

LIMIT = """
import resource
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
"""

BODY = (
    LIMIT
    + """
import sys
from msprobe import _native as n
args = open(sys.argv[1], "rb").read() if len(sys.argv) > 1 else None  # the argument object
rc = n.lib.msprobe_init(args)
print("init", rc)
print("start", n.lib.msprobe_start())
r = n.lib.msprobe_record_begin(b"Functional.relu.0.forward")
print("record", bool(r))
n.lib.msprobe_record_end(r)
print("job finished")
"""
)


def child(code: str, env: dict[str, str], args: list[str] | None = None, timeout: float = 60):
    """Runs `code` (with argv `args`) in a fresh process, MSPROBE_* taken from `env` only."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("MSPROBE_") and k != "LD_PRELOAD"}
    e.update({"PYTHONPATH": str(REPO / "python"), "MSPROBE_LIB": str(LIB)})
    e.update(env)
    return subprocess.run(
        [sys.executable, "-c", code, *(args or [])], env=e, capture_output=True, text=True, timeout=timeout
    )


def msprobe_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "[msprobe]" in line or "[ERROR]" in line or "[WARNING]" in line]


def complaints(text: str) -> list[str]:
    return [line for line in text.splitlines() if "[ERROR]" in line or "[WARNING]" in line]


@pytest.mark.parametrize("kind", ["fifo", "directory", "dev-zero", "huge"])
def test_config_file_that_is_not_a_regular_file_is_refused_without_blocking(tmp_path: Path, kind: str) -> None:
    path = {
        "fifo": tmp_path / "fifo.json",
        "directory": tmp_path,
        "dev-zero": Path("/dev/zero"),
        "huge": tmp_path / "huge.json",
    }[kind]
    if kind == "fifo":
        os.mkfifo(path)
    if kind == "huge":
        with open(path, "wb") as f:
            f.truncate(1 << 40)  # sparse: 1 TiB of zeros
    t0 = time.monotonic()
    p = child(BODY, {"MSPROBE_CONFIG": str(path), "MSPROBE_DUMP_PATH": str(tmp_path / "d")}, timeout=30)
    assert time.monotonic() - t0 < 20
    assert p.returncode == 0 and "job finished" in p.stdout, p.stderr
    assert "init -1" in p.stdout and "record False" in p.stdout
    (line,) = msprobe_lines(p.stderr)
    assert "MSPROBE_CONFIG" in line and f'"{path}"' in line and "Capture is off" in line, line
    want = {"fifo": "a FIFO", "directory": "a directory", "dev-zero": "a character device", "huge": "1099511627776"}
    assert want[kind] in line, line


def test_deeply_nested_or_huge_argument_object_is_one_error(tmp_path: Path) -> None:
    args = tmp_path / "args.json"
    args.write_text('{"step": ' + "[" * 200000 + "]" * 200000 + "}")
    p = child(BODY, {"MSPROBE_DUMP_PATH": str(tmp_path / "d")}, [str(args)])
    assert p.returncode == 0 and "init -1" in p.stdout and "job finished" in p.stdout, p.stderr[-2000:]
    (line,) = msprobe_lines(p.stderr)
    assert "args_json" in line and "nests deeper than 32 levels" in line and len(line) < 700, line


def test_many_large_step_ranges_are_kept_as_ranges(tmp_path: Path) -> None:
    # Expanded, 2000 ranges of a million steps are 16 GB: the old parser aborted the job.
    steps = ["0-1000000"] * 2000 + [0, "5-7", "0-1000000000000"]
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"step": steps, "rank": ["0-18446744073709551615"], "dump_path": str(tmp_path / "d")}))
    t0 = time.monotonic()
    p = child(BODY, {}, [str(args)])
    assert p.returncode == 0 and "job finished" in p.stdout, p.stderr[-2000:]
    assert "init 0" in p.stdout and "start 1" in p.stdout and "record True" in p.stdout, p.stdout
    assert time.monotonic() - t0 < 20
    assert not complaints(p.stderr)


@pytest.mark.parametrize("var", ["MSPROBE_STEP_END_COUNT", "MSPROBE_STEP_LAUNCHES"])
def test_counts_past_2_64_are_refused_not_wrapped(tmp_path: Path, var: str) -> None:
    p = child(BODY, {var: "18446744073709551617", "MSPROBE_DUMP_PATH": str(tmp_path / "d")})
    assert p.returncode == 0 and "init -1" in p.stdout and "job finished" in p.stdout, p.stderr
    (line,) = msprobe_lines(p.stderr)
    assert var in line and '"18446744073709551617"' not in line and "18446744073709551617" in line, line
    assert "from 1 to 18446744073709551615" in line


def test_negative_offset_is_named_as_an_offset(tmp_path: Path) -> None:
    code = """
import ctypes
from msprobe import _native as n
assert n.lib.msprobe_init(None) == 0 and n.lib.msprobe_start() == 1
buf = (ctypes.c_float * 4)(1, 2, 3, 4)
r = n.lib.msprobe_record_begin(b"Functional.relu.0.forward")
n.lib.msprobe_record_section(r, b"input_args")
t = n.tensor(0, [2], ctypes.addressof(buf), 16, offset=-1)
print("rc", n.lib.msprobe_record_add_tensor(r, None, ctypes.byref(t)))
print("error", n.last_error())
n.lib.msprobe_record_end(r)
"""
    p = child(code, {"MSPROBE_DUMP_PATH": str(tmp_path / "d")})
    assert p.returncode == 0, p.stderr
    assert "error negative storage offset (-1 elements)" in p.stdout, p.stdout


def test_unwritable_dump_root_is_logged_once(tmp_path: Path) -> None:
    root = tmp_path / "d"
    root.mkdir()
    for i in range(5):
        (root / f"step{i}").write_text("not a directory")  # blocks the step directory, even for root
    root.chmod(0o555)
    code = """
from msprobe import _native as n
assert n.lib.msprobe_init(None) == 0
for step in range(5):
    n.lib.msprobe_start()
    r = n.lib.msprobe_record_begin(b"Functional.relu.0.forward")
    n.lib.msprobe_record_section(r, b"input_args")
    n.lib.msprobe_record_add_int(r, None, None, step)
    n.lib.msprobe_record_end(r)
    n.lib.msprobe_stop()
    n.lib.msprobe_step()
n.lib.msprobe_finish()
print("job finished")
"""
    try:
        p = child(code, {"MSPROBE_DUMP_PATH": str(root)})
    finally:
        root.chmod(0o755)
    assert p.returncode == 0 and "job finished" in p.stdout, p.stderr
    errors = [line for line in p.stderr.splitlines() if "[ERROR]" in line]
    assert len(errors) == 1 and "cannot create the dump directory" in errors[0], p.stderr
    assert "records dropped: 0" not in p.stderr, p.stderr


def test_names_that_collide_once_sanitised_get_their_own_files(tmp_path: Path) -> None:
    code = """
import ctypes
from msprobe import _native as n
assert n.lib.msprobe_init(None) == 0 and n.lib.msprobe_start() == 1
for i, name in enumerate(["Functional.a/b.0.forward", "Functional.a_b.0.forward", "Functional.a%2Fb.0.forward"]):
    buf = (ctypes.c_float * 3)(i, i + 0.5, -i)
    r = n.lib.msprobe_record_begin(name.encode())
    n.lib.msprobe_record_section(r, b"input_args")
    t = n.tensor(0, [3], ctypes.addressof(buf), 12)
    assert n.lib.msprobe_record_add_tensor(r, None, ctypes.byref(t)) == 0, n.last_error()
    n.lib.msprobe_record_end(r)
n.lib.msprobe_stop_wait()
print("job finished")
"""
    env = {"MSPROBE_DUMP_PATH": str(tmp_path / "d"), "MSPROBE_TASK": "tensor", "MSPROBE_FILE_FORMAT": "npy"}
    p = child(code, env)
    assert p.returncode == 0 and "job finished" in p.stdout, p.stderr
    assert not complaints(p.stderr), p.stderr
    rank = tmp_path / "d/step0/rank"
    data = json.loads((rank / "dump.json").read_text())["data"]
    keys = ["Functional.a/b.0.forward", "Functional.a_b.0.forward", "Functional.a%2Fb.0.forward"]
    assert list(data) == keys
    names = [data[k]["input_args"][0]["data_name"] for k in keys]
    assert len(set(names)) == 3, names
    for i, name in enumerate(names):
        got = np.load(rank / "dump_tensor_data" / name)
        assert got.tolist() == [i, i + 0.5, -i], (keys[i], name)
    assert sorted(f.name for f in (rank / "dump_tensor_data").iterdir()) == sorted(names)


# ---- the PyTorch layer: config parsing in Python must neither raise nor block ----

PT = (
    LIMIT
    + """
import sys
from msprobe.pytorch import PrecisionDebugger
kw = {"config_path": sys.argv[1]} if len(sys.argv) > 1 else {}
d = PrecisionDebugger(**kw)
print("off", d.off)
d.start(); d.stop(); d.step()
print("job finished")
"""
)


def test_pytorch_layer_deep_fifo_and_huge_config_fail_open(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    deep = tmp_path / "deep.json"
    deep.write_text('{"level": ' + "[" * 100000 + "]" * 100000 + "}")
    mid = tmp_path / "mid.json"  # within Python's recursion limit, past the recorder's
    mid.write_text('{"level": ' + "[" * 500 + "]" * 500 + ', "task": ' + "[" * 500 + "]" * 500 + "}")
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    env = {"MSPROBE_DUMP_PATH": str(tmp_path / "d")}
    runs = [
        ([str(deep)], {}, "nests deeper"),
        ([], {"MSPROBE_CONFIG": str(deep)}, "nests deeper"),
        ([str(mid)], {}, "nests deeper"),
        ([], {"MSPROBE_CONFIG": str(fifo)}, "a FIFO"),
    ]
    for args, extra, why in runs:
        p = child(PT, {**env, **extra}, args, timeout=120)
        assert p.returncode == 0 and "job finished" in p.stdout and "off True" in p.stdout, p.stderr[-3000:]
        assert "Traceback" not in p.stderr
        (line,) = msprobe_lines(p.stderr + p.stdout)
        assert why in line and "config_path" in line, line
    assert not (tmp_path / "d").exists()


SUPPORT = (
    LIMIT
    + """
import torch
from msprobe.pytorch import PrecisionDebugger
d = PrecisionDebugger(task="statistics", level="L1")
d.start()
torch.relu(torch.ones(2))
d.stop()
print("job finished")
"""
)


@pytest.mark.parametrize("kind", ["missing", "directory", "fifo", "malformed"])
def test_unusable_api_support_list_is_one_error_and_the_job_runs(tmp_path: Path, kind: str) -> None:
    """MSPROBE_SUPPORT_WRAP_OPS naming what is not a support list: one error naming the variable and
    its value, no API wrapped, the job finishes (it raised FileNotFoundError / IsADirectoryError,
    blocked on a FIFO, or read malformed YAML as an empty list without a word)."""
    pytest.importorskip("torch")
    path = {"missing": tmp_path / "none.yaml", "directory": tmp_path, "fifo": tmp_path / "f.yaml"}.get(
        kind, tmp_path / "bad.yaml"
    )
    if kind == "fifo":
        os.mkfifo(path)
    if kind == "malformed":
        path.write_text("torch: [relu\n  functional relu\n")
    env = {"MSPROBE_DUMP_PATH": str(tmp_path / "d"), "MSPROBE_SUPPORT_WRAP_OPS": str(path)}
    p = child(SUPPORT, env, timeout=120)
    assert p.returncode == 0 and "job finished" in p.stdout, p.stderr[-3000:]
    assert "Traceback" not in p.stderr
    (line,) = [x for x in complaints(p.stderr + p.stdout) if "SUPPORT_WRAP_OPS" in x]
    assert f"MSPROBE_SUPPORT_WRAP_OPS={str(path)!r} is unusable" in line, line
    data = json.loads(next((tmp_path / "d").rglob("dump.json")).read_text())["data"]
    assert data == {}, data  # no API wrapped: torch.relu not recorded


@pytest.mark.parametrize(
    "var,value",
    [
        ("MSPROBE_STOP_FLUSH", "maybe"),
        ("MSPROBE_ASYNC_COPY", "x"),
        ("MSPROBE_INPUTS_PRE_CALL", "yes"),
        ("MSPROBE_LOG_LEVEL", "verbose"),
        ("MSPROBE_FASTPATH", "/nonexistent/fastpath.so"),
    ],
)
def test_switch_with_a_value_it_does_not_take_is_named(tmp_path: Path, var: str, value: str) -> None:
    """An on/off or level variable given something else: one warning naming it and its value (they
    were taken as some default without a word); the job runs and records."""
    pytest.importorskip("torch")
    p = child(SUPPORT, {"MSPROBE_DUMP_PATH": str(tmp_path / "d"), var: value}, timeout=120)
    assert p.returncode == 0 and "job finished" in p.stdout, p.stderr[-3000:]
    named = [x for x in (p.stderr + p.stdout).splitlines() if var in x and (repr(value) in x or f'"{value}"' in x)]
    assert len(named) == 1, p.stderr[-3000:]
    data = json.loads(next((tmp_path / "d").rglob("dump.json")).read_text())["data"]
    assert list(data) == ["Torch.relu.0.forward"], data


def test_pytorch_layer_deeply_nested_step_argument_is_an_api_error_not_a_recursion_error() -> None:
    pytest.importorskip("torch")
    code = """
from msprobe.pytorch import PrecisionDebugger
from msprobe.core.errors import MsprobeException
x = []
for _ in range(100000):
    x = [x]
try:
    PrecisionDebugger(step=[x])
except MsprobeException as e:
    print("refused", len(str(e)) < 300)
"""
    p = child(code, {})
    assert p.returncode == 0 and "refused True" in p.stdout, p.stderr[-2000:]


# ---- end to end: 50 generated configurations through libmsprobe ----

FUZZ_JOB = (
    LIMIT
    + """
import ctypes, sys
from msprobe import _native as n
args = open(sys.argv[1], "rb").read() if len(sys.argv) > 1 else None
rc = n.lib.msprobe_init(args)
buf = (ctypes.c_float * 6)(1, -2, 3.5, float("nan"), 0, 7)
names = ["Functional.relu.0.forward", "Functional.a/b.0.forward", "Functional.a_b.0.forward", "Module..",
         "Torch.\u00e9\\n.0.forward"]
total = 0.0
for step in range(2):
    n.lib.msprobe_start()
    for name in names:
        r = n.lib.msprobe_record_begin(name.encode())
        n.lib.msprobe_record_section(r, b"input_args")
        t = n.tensor(0, [2, 3], ctypes.addressof(buf), 24)
        n.lib.msprobe_record_add_tensor(r, None, ctypes.byref(t))
        n.lib.msprobe_record_add_int(r, None, None, step)
        n.lib.msprobe_record_section(r, b"output")
        n.lib.msprobe_record_add_str(r, None, None, "x\\ny\\u00e9".encode(), None)
        n.lib.msprobe_record_end(r)
        total += step
    n.lib.msprobe_stop_wait()
    n.lib.msprobe_step()
print("init", rc, "total", total, "job finished")
"""
)


def _fuzz_value(rnd, depth: int = 3):
    kind = rnd.randrange(9 if depth else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rnd.random() < 0.5
    if kind == 2:
        return rnd.choice([0, 1, -1, 7, 2**64, 2**64 + 1, -(2**70), 10**30, 1048577])
    if kind == 3:
        return rnd.choice([1.5, -0.0, 1e300])
    if kind in (4, 5):
        return rnd.choice(["", "L2", "l2", "tensor", "md5", "0-1000000000000", "5-3", "a/b", "\u00e9\n\x00", "x" * 999])
    if kind in (6, 7):
        return [_fuzz_value(rnd, depth - 1) for _ in range(rnd.randrange(4))]
    return {rnd.choice(["a", "task", "scope", ""]): _fuzz_value(rnd, depth - 1) for _ in range(rnd.randrange(3))}


def _fuzz_config(rnd, dump_paths: list) -> dict:
    valid = {
        "task": ["statistics", "tensor"],
        "level": ["L0", "L1", "mix", "L2"],
        "dump_path": dump_paths,
        "step": [[], [0], [0, "1-3"], ["0-1000000000000"], [1]],
        "rank": [[], [0], ["0-5"]],
        "framework": ["pytorch", "mindspore"],
        "queue_mb": [1, 64],
        "on_queue_full": ["block", "drop"],
        "enable_dataloader": [False],
    }
    section = {
        "scope": [[], ["Functional.relu.0.forward", "Functional.a_b.0.forward"]],
        "list": [[], ["relu"], ["a/b"]],
        "data_mode": [["all"], ["input"], ["forward", "output"]],
        "summary_mode": ["statistics", "md5"],
        "file_format": ["npy", "pt", "bin"],
    }
    cfg: dict = {}
    for key, values in valid.items():
        if rnd.random() < 0.6:
            cfg[key] = rnd.choice(values) if rnd.random() < 0.8 else _fuzz_value(rnd)
    for task in ("statistics", "tensor"):
        if rnd.random() < 0.5:
            keys = [k for k in section if rnd.random() < 0.5]
            cfg[task] = {k: rnd.choice(section[k]) if rnd.random() < 0.85 else _fuzz_value(rnd) for k in keys}
    if rnd.random() < 0.1:
        cfg[rnd.choice(["bogus", "\u00e9", "step "])] = _fuzz_value(rnd)
    return cfg


def _tree(root: Path) -> dict:
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath) / name
            st = p.lstat()
            out[str(p)] = (st.st_mode, st.st_size if not p.is_dir() else 0, st.st_mtime_ns if not p.is_dir() else 0)
    return out


def test_fifty_generated_configs_end_to_end(tmp_path: Path) -> None:
    import random

    rnd = random.Random(20261203)
    sbx = tmp_path / "sbx"
    cwd = sbx / "cwd"
    cwd.mkdir(parents=True)
    (sbx / "file").write_text("a file, not a directory")
    (sbx / "real").mkdir()
    os.symlink(sbx / "real", sbx / "link")
    # Candidate dump paths, all inside the sandbox (relative ones resolve against cwd).
    dump_paths = ["dump", "./d2", "../d3", str(sbx / "d 4"), str(sbx / "d\u00e9"), str(sbx / "file" / "d")]
    dump_paths += [str(sbx / "link"), ""]
    outcomes = {"captured": 0, "refused": 0}
    for case in range(50):
        layers = []
        env = {"MSPROBE_DUMP_PATH": "", "MSPROBE_LOG_LEVEL": rnd.choice(["1", "2", "debug", "bogus"])}
        argv = []
        if rnd.random() < 0.7:
            cfg_file = sbx / f"config{case}.json"
            cfg = _fuzz_config(rnd, dump_paths)
            text = json.dumps(cfg)
            if rnd.random() < 0.1:
                text = text[: rnd.randrange(len(text) + 1)]
            cfg_file.write_text(text)
            env["MSPROBE_CONFIG"] = str(cfg_file)
            layers.append(cfg)
        for var, choices in {
            "MSPROBE_TASK": ["tensor", "statistics", "Tensor", ""],
            "MSPROBE_LEVEL": ["L1", "L2", "x"],
            "MSPROBE_DUMP_PATH": dump_paths,
            "MSPROBE_STEP": ["0", "1,3-4", "0-1000000000000", '[0, "2-3"]', "5-3", "[[[[[", "18446744073709551616"],
            "MSPROBE_FILE_FORMAT": ["npy", "pt", "gif"],
            "MSPROBE_SUMMARY_MODE": ["md5", "sha"],
            "MSPROBE_LIST": ["relu", "a/b"],
            "MSPROBE_QUEUE_MB": ["1", "0", "99999999999999999999"],
            "MSPROBE_STEP_END_COUNT": ["3", "18446744073709551617"],
        }.items():
            if rnd.random() < 0.15:
                env[var] = rnd.choice(choices)
        if rnd.random() < 0.4:
            args = _fuzz_config(rnd, dump_paths)
            layers.append(args)
            (sbx / f"args{case}.json").write_text(json.dumps(args))
            argv = [str(sbx / f"args{case}.json")]
        before = _tree(sbx)
        e = {k: v for k, v in os.environ.items() if not k.startswith("MSPROBE_") and k != "LD_PRELOAD"}
        e.update({"PYTHONPATH": str(REPO / "python"), "MSPROBE_LIB": str(LIB), **env})
        p = subprocess.run(
            [sys.executable, "-c", FUZZ_JOB, *argv], cwd=cwd, env=e, capture_output=True, text=True, timeout=60
        )
        what = f"case {case}: env {env}, layers {str(layers)[:2000]}\n{p.stderr[-3000:]}"
        # The host job's own result is unchanged, whatever the configuration.
        assert p.returncode == 0 and "total 5.0 job finished" in p.stdout, what
        outcomes["captured" if "init 0" in p.stdout else "refused"] += 1
        # Nothing is created or changed outside the dump paths this case named (or the default).
        named = {v for layer in layers for v in [layer.get("dump_path")] if isinstance(v, str)}
        named |= {env["MSPROBE_DUMP_PATH"], "./dump_path"}
        allowed = [os.path.normpath(cwd / d) for d in named if d]
        after = _tree(sbx)
        for path, meta in after.items():
            if before.get(path) != meta:
                assert any(path == a or path.startswith(a + os.sep) for a in allowed), f"{path} touched; {what}"
        assert not list((sbx / "real").iterdir()), "written through a symlinked dump path"
        # Every JSON file written parses.
        for a in allowed:
            for f in Path(a).rglob("*.json") if Path(a).is_dir() else []:
                json.loads(f.read_text())
    print("50 configs:", outcomes)
    assert outcomes["captured"] >= 5 and outcomes["refused"] >= 5, outcomes
