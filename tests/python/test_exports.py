"""The dynamic symbols the release artefacts export (`nm -D --defined-only`).

libmsprobe.so is loaded into (or preloaded under) someone else's process, so what it exports is
its contract: the C ABI of include/msprobe.h, the dlsym trampoline of the L2 interposer, and the
CANN entry points clients may link directly (README "L2"): every capture-relevant name torch_npu
links (the reference list of its link-time CANN symbols), the aclop execute variants, the HCCL
collectives and every aclnn phase-1/phase-2 pair of the bundled header; never a runtime function
such as aclrtMalloc, which would replace the application's own, nor a name a client may test for
NULL (HCCL declares its communicator functions weak). The CLI binary exports nothing of that.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RELEASE = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "release"
HEADER = REPO / "include" / "msprobe.h"

TORCH_NPU_LINKED = Path("/work/shared/reference/data/torch_npu-2.14-link-symbols.txt")
# torch_npu's link-time CANN names that decide what is captured: aclop launches and attributes,
# and the descriptor calls that say where an input lives.
CAPTURE_RELEVANT = re.compile(r"^(aclop\w+|aclCreateTensorDesc|aclDestroyTensorDesc|aclSetTensorPlaceMent)$")
# README "L2": exported for clients that link them directly.
ACLOP_EXPORTED = {
    "aclopExecute",
    "aclopExecuteV2",
    "aclopCompileAndExecute",
    "aclopCompileAndExecuteV2",
    "aclopCast",
    "aclopCreateAttr",
    "aclopDestroyAttr",
    "aclSetTensorConst",
    "aclSetTensorPlaceMent",
} | {
    f"aclopSetAttr{t}"
    for t in ("Bool", "Int", "Float", "String", "DataType")
    + ("ListBool", "ListInt", "ListFloat", "ListString", "ListDataType", "ListListInt")
}
HCCL_EXPORTED = {
    f"Hccl{n}"
    for n in ("AllReduce", "Reduce", "Broadcast", "AllGather", "ReduceScatter", "Send", "Recv")
    + ("AlltoAll", "AlltoAllV", "Barrier")
}
NNOPBASE_EXPORTED = {"aclCreateTensor", "aclCreateScalar", "aclCreateTensorList", "aclDestroyAclOpExecutor"}
# Runtime functions the tool calls for itself (the real ones): exporting them would interpose them;
# HCCL's communicator functions are weak in its header (a client may test them for NULL).
NEVER_EXPORTED = {
    "aclrtMalloc",
    "aclrtGetSocName",
    "aclrtMemcpy",
    "aclrtSynchronizeStream",
    "HcclGetRankSize",
    "HcclCommInitRootInfo",
    "HcclCommInitClusterInfo",
}
BUNDLED = REPO / "crates/libmsprobe/include/cann/aclnn_ops.h"


def aclnn_pairs() -> set[str]:
    """Both phases of every op of the bundled aclnn header."""
    ops = re.findall(r"\baclnn(\w+)GetWorkspaceSize\s*\(", BUNDLED.read_text())
    assert len(ops) > 40, ops
    return {f"aclnn{op}" for op in ops} | {f"aclnn{op}GetWorkspaceSize" for op in ops}


def linked_expected() -> set[str]:
    names = ACLOP_EXPORTED | HCCL_EXPORTED | NNOPBASE_EXPORTED | aclnn_pairs()
    if TORCH_NPU_LINKED.is_file():
        names |= {n for n in TORCH_NPU_LINKED.read_text().split() if CAPTURE_RELEVANT.match(n)}
    return names


# Prefixes of CANN's and the recorder's names: none may be exported by the CLI.
CLI_FORBIDDEN_PREFIXES = ("acl", "Hccl", "hccl", "msprobe_")


def exported(path: Path) -> set[str]:
    """Names of the dynamic symbols `path` defines (version suffixes dropped)."""
    assert path.is_file(), f"{path} is not built (cargo build --release --workspace)"
    nm = shutil.which("nm")
    assert nm, "nm (binutils) is needed for this check"
    out = subprocess.run([nm, "-D", "--defined-only", str(path)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}


def header_functions(text: str) -> set[str]:
    """Functions declared in a C header: `msprobe_name(` outside comments and preprocessor lines."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    return set(re.findall(r"\b(msprobe_\w+)\s*\(", code))


def cli_problems(syms: set[str]) -> list[str]:
    bad = sorted(s for s in syms if s == "dlsym" or s.startswith(CLI_FORBIDDEN_PREFIXES))
    return [f"the CLI exports {s}" for s in bad]


def library_problems(syms: set[str], declared: set[str], linked: set[str] = ACLOP_EXPORTED) -> list[str]:
    errs = [] if "dlsym" in syms else ["dlsym (the L2 trampoline) is not exported"]
    errs += [f"{f}, declared in include/msprobe.h, is not exported" for f in sorted(declared - syms)]
    errs += [f"{f} (README: exported for direct linking) is not exported" for f in sorted(linked - syms)]
    errs += [f"{f} is exported (it must never be)" for f in sorted(NEVER_EXPORTED & syms)]
    return errs


def test_header_parser_finds_the_abi() -> None:
    declared = header_functions(HEADER.read_text())
    assert {"msprobe_init", "msprobe_record_begin", "msprobe_record_add_tensor", "msprobe_record_abort"} <= declared
    assert len(declared) >= 30, sorted(declared)
    # commented-out and macro names are not declarations
    assert header_functions("/* msprobe_gone(void); */\n#define msprobe_m(x) x\nint msprobe_f(void);") == {"msprobe_f"}


def test_cli_exports_nothing_of_the_library() -> None:
    problems = cli_problems(exported(RELEASE / "msprobe"))
    assert not problems, "\n".join(problems)


def test_library_exports_its_abi_and_no_runtime_function() -> None:
    problems = library_problems(
        exported(RELEASE / "libmsprobe.so"), header_functions(HEADER.read_text()), linked_expected()
    )
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "syms, expect",
    [
        ({"main_helper"}, []),
        ({"dlsym"}, ["the CLI exports dlsym"]),
        (
            {"aclnnAddGetWorkspaceSize", "HcclAllReduce", "msprobe_init"},
            [
                "the CLI exports HcclAllReduce",
                "the CLI exports aclnnAddGetWorkspaceSize",
                "the CLI exports msprobe_init",
            ],
        ),
    ],
)
def test_cli_checker(syms: set[str], expect: list[str]) -> None:
    assert cli_problems(syms) == expect


def test_library_checker() -> None:
    good = {"dlsym", "msprobe_init"} | ACLOP_EXPORTED
    assert library_problems(good, {"msprobe_init"}) == []
    errs = library_problems((good - {"dlsym", "aclopSetAttrBool"}) | {"aclrtMemcpy"}, {"msprobe_init", "msprobe_new"})
    assert errs == [
        "dlsym (the L2 trampoline) is not exported",
        "msprobe_new, declared in include/msprobe.h, is not exported",
        "aclopSetAttrBool (README: exported for direct linking) is not exported",
        "aclrtMemcpy is exported (it must never be)",
    ]


def test_every_aclnn_function_of_the_simulator_has_a_wrapper() -> None:
    """The simulator's libopapi.so stands for CANN's: each aclnn function it exports is one a client
    can launch, so the bundled header declares it and L2 captures it (aclnnAminmax, aclnnNanToNum,
    aclnnNorm and aclnnAminmaxAll, which L2's device statistics use, had no wrapper: clients'
    launches of them ran uncaptured)."""
    lib = REPO / "target" / "cann" / "latest" / "lib64" / "libopapi.so"
    if not lib.is_file():
        pytest.skip("the simulator's CANN tree is not installed (scripts/build.sh)")
    sim = {s for s in exported(lib) if s.startswith("aclnn") and s.endswith("GetWorkspaceSize")}
    missing = sorted(s for s in sim if s not in aclnn_pairs())
    assert not missing, f"declare these in {BUNDLED.relative_to(REPO)}: {missing}"
