"""The aarch64 (Kunpeng) build under qemu-aarch64 user-mode emulation, against independent truth.

- dlsym through libmsprobe's aarch64 trampoline, with RTLD_NEXT and RTLD_DEFAULT from eight threads
  and from a constructor that runs before libmsprobe's (the resolver path): every result is the one
  ELF lookup rules give, the same as without libmsprobe (tests/programs/dlsym_threads.c).
- L2 capture of tests/programs/all_entries.c (two ranks; aclnn, aclop, HCCL) linked by name, looked up
  with dlsym, and both alternating, on the aarch64 simulator: every launch of the simulator's
  ground-truth trace is in the dump once, with the trace's CRCs (tests/python/test_l2_links.py's check);
  the aarch64 `msprobe summary` counts the records of those dumps.
- The simulator's C-level behaviour on aarch64: a linked C client computes what numpy computes, and the
  trace is the same with and without capture.
- examples/capi_demo.c on the aarch64 library writes the same dump, byte for byte, as on x86-64.
- The cross-built msprobe._fastpath is a loadable abi3 extension (no aarch64 Python here to import it).
"""

from __future__ import annotations

import os
import re
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest
from aarch64_util import CC, LIB, LIB64, RELEASE, REPO, cc, run

from recorder_testutil import LIB as HOST_LIB
from test_l2 import traces
from test_l2_links import check_trace, dump_data

PROGRAMS = REPO / "tests" / "programs"


def test_artefacts_are_aarch64() -> None:
    for f in (
        LIB,
        RELEASE / "msprobe",
        RELEASE / "lib_fastpath.so",
        LIB64 / "libcannsim.so",
        LIB64 / "libcannsimge.so",
    ):
        out = subprocess.run(["file", "-L", str(f)], capture_output=True, text=True, check=True).stdout
        assert "ARM aarch64" in out, out


def test_fastpath_is_an_abi3_extension() -> None:
    """PyO3 cross-built with abi3-py310 (no aarch64 interpreter needed): exports PyInit__fastpath and
    does not link libpython (the importing interpreter provides the symbols)."""
    so = RELEASE / "lib_fastpath.so"
    dyn = subprocess.run(["aarch64-linux-gnu-readelf", "-dW", str(so)], capture_output=True, text=True, check=True)
    assert "libpython" not in dyn.stdout, dyn.stdout
    syms = subprocess.run(["aarch64-linux-gnu-nm", "-D", str(so)], capture_output=True, text=True, check=True).stdout
    assert re.search(r" T PyInit__fastpath$", syms, re.M), syms
    assert re.search(r" U PyModule_Create2|U PyModuleDef_Init", syms), "no Python C API import: not an extension"


def test_capi_demo_dump_is_byte_identical_to_x86_64(tmp_path: Path) -> None:
    """examples/capi_demo.c against include/msprobe.h and the aarch64 libmsprobe.so (the C ABI's struct
    layouts as the aarch64 compiler sees them, the recorder's statistics and JSON on aarch64): every
    file of its dump is byte for byte the one the x86-64 build writes for the same program.
    (crates/libmsprobe/tests/header.rs builds it with the host's cc, so the cargo run skips it.)"""
    inc, src = f"-I{REPO / 'include'}", REPO / "examples/capi_demo.c"
    exe = cc(
        tmp_path / "capi_demo",
        "-std=c99",
        "-Werror",
        src,
        inc,
        f"-L{RELEASE}",
        "-lmsprobe",
        "-lm",
        f"-Wl,-rpath,{RELEASE}",
    )
    run([exe, tmp_path / "arm"], tmp_path, {"MSPROBE_LOG_LEVEL": "error"}, preload=False, trace=False)
    host = tmp_path / "capi_demo_x86_64"
    link = [f"-L{HOST_LIB.parent}", "-lmsprobe", "-lm", f"-Wl,-rpath,{HOST_LIB.parent}"]
    subprocess.run(["cc", "-std=c99", "-Werror", "-o", str(host), str(src), inc, *link], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MSPROBE_", "LD_PRELOAD"))}
    subprocess.run([host, tmp_path / "x86"], env={**env, "MSPROBE_LOG_LEVEL": "error"}, check=True, capture_output=True)
    files = sorted(p.relative_to(tmp_path / "x86") for p in (tmp_path / "x86").rglob("*") if p.is_file())
    assert [f.as_posix() for f in files if f.name == "dump.json"] == [f"step{i}/rank/dump.json" for i in range(3)]
    assert files == sorted(p.relative_to(tmp_path / "arm") for p in (tmp_path / "arm").rglob("*") if p.is_file())
    for f in files:
        assert (tmp_path / "arm" / f).read_bytes() == (tmp_path / "x86" / f).read_bytes(), f"{f} differs"


@pytest.fixture(scope="module")
def dlsym_threads(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("dlsym")
    src = PROGRAMS / "next_lib.c"
    cc(d / "libnextb.so", "-shared", "-fPIC", "-DLEVEL=3", "-DNAME=b", src)
    cc(d / "libnexta.so", "-shared", "-fPIC", "-DLEVEL=2", "-DNAME=a", src, f"-L{d}", "-lnextb")
    rpath = f"-Wl,-rpath,{d}"
    return cc(d / "dlsym_threads", PROGRAMS / "dlsym_threads.c", "-rdynamic", f"-L{d}", "-lnexta", "-lnextb", rpath)


def test_dlsym_trampoline_rtld_next_and_default_from_threads(tmp_path: Path, dlsym_threads: Path) -> None:
    threads, iterations = "8", "300"
    base = run([dlsym_threads, threads, iterations], tmp_path, preload=False, trace=False)
    hooked = run([dlsym_threads, threads, iterations], tmp_path, {"LD_DEBUG": "libs"}, trace=False)
    # libnexta's constructor (its early lookups) runs before libmsprobe's: the resolver path.
    inits = [ln.rsplit("/", 1)[-1] for ln in hooked.stderr.splitlines() if "calling init:" in ln]
    assert inits.index("libnexta.so") < inits.index("libmsprobe.so"), inits
    b, h = base.stdout.splitlines(), hooked.stdout.splitlines()
    # Without the preload the program calls glibc's dlsym; with it, libmsprobe's trampoline.
    assert b[0] == "dlsym in libc.so.6" and h[0] == "dlsym in libmsprobe.so", (b, h)
    # Before libmsprobe's constructor (resolver path) and after it, from eight threads: ELF's answers.
    assert b[1:] == h[1:] == ["early next 3 default 1", f"lookups {8 * 300 * 7} errors 0"], (b, h)


@pytest.fixture(scope="module")
def all_entries(tmp_path_factory: pytest.TempPathFactory) -> Path:
    exe = tmp_path_factory.mktemp("bin") / "all_entries"
    libs = ["-lascendcl", "-lnnopbase", "-lopapi", "-lacl_op_compiler", "-lhccl"]
    return cc(exe, PROGRAMS / "all_entries.c", f"-L{LIB64}", *libs, "-ldl", f"-Wl,-rpath,{LIB64}")


@pytest.mark.parametrize("mode", ["linked", "dlsym", "both"])
def test_l2_every_launch_captured_with_trace_crcs(tmp_path: Path, all_entries: Path, mode: str) -> None:
    p = run([all_entries, mode, tmp_path / "root"], tmp_path, {"MSPROBE_SUMMARY_MODE": "md5", "RANK_ID": "0"})
    assert p.stdout == "ok\nok\n", p.stderr  # both ranks
    ts = traces(tmp_path)
    assert len(ts) == 2 and len({t[0]["pid"] for t in ts}) == 2
    rank0 = max(ts, key=len)  # rank 0 runs aclnn and aclop too
    rank1 = next(t for t in ts if t is not rank0)
    d0, d1 = dump_data(tmp_path / "dump/step0/rank0"), dump_data(tmp_path / "dump/step0/rank1")
    check_trace(rank0, d0)
    check_trace(rank1, d1)
    ops0 = {t["op"] for t in rank0}
    for want in ("aclnnAdd", "aclnnCat", "aclopExecuteV2:Add", "aclopCast:Cast", "HcclAllReduce", "HcclSend"):
        assert want in ops0, (want, sorted(ops0))
    assert d0["Aclop.NoSuchOp.0.forward"]["status"] == 100024
    # The aarch64 CLI reads the aarch64 dump: its record counts are the dump.json files'.
    cli = run([RELEASE / "msprobe", "summary", tmp_path / "dump"], tmp_path, preload=False, trace=False)
    counts = dict(re.findall(r"^(\S+): (\d+) records", cli.stdout, re.M))
    assert counts == {
        str(tmp_path / "dump/step0/rank0"): str(len(d0)),
        str(tmp_path / "dump/step0/rank1"): str(len(d1)),
    }


def test_simulator_c_client_matches_numpy_and_capture_changes_nothing(tmp_path: Path) -> None:
    exe = cc(tmp_path / "direct_aclop", PROGRAMS / "direct_aclop.c", f"-L{LIB64}", "-lascendcl", f"-Wl,-rpath,{LIB64}")
    (tmp_path / "base").mkdir()
    (tmp_path / "hooked").mkdir()
    base = run([exe], tmp_path / "base", preload=False)
    hooked = run([exe], tmp_path / "hooked", {"MSPROBE_SUMMARY_MODE": "md5"})
    a = np.arange(8, dtype=np.float32)
    y = a + np.float32(0.5) * a
    assert base.stdout == hooked.stdout == f"rc 0 y[7] {y[7]:.2f}\n", (base.stdout, hooked.stdout)
    (tb,), (th,) = traces(tmp_path / "base"), traces(tmp_path / "hooked")

    def launches(trace: list[dict]) -> list[tuple]:
        return [
            (t["op"], [(x["role"], x["crc_view_before"], x["crc_view_after"]) for x in t["tensors"]]) for t in trace
        ]

    assert launches(tb) == launches(th) and len(tb) == 1, (tb, th)
    assert tb[0]["tensors"][-1]["crc_view_after"] == f"{zlib.crc32(y.tobytes()):08x}"
    check_trace(th, dump_data(tmp_path / "hooked/dump/step0/rank"))


def test_cc_is_the_cross_compiler() -> None:
    out = subprocess.run([CC, "-dumpmachine"], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "aarch64-linux-gnu", out
