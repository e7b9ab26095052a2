"""The dynamic symbols the release artefacts export (`nm -D --defined-only`).

libmsprobe.so is loaded into (or preloaded under) someone else's process, so what it exports is
its contract: the C ABI of include/msprobe.h, the dlsym trampoline of the L2 interposer, and the
few aclop entry points clients link directly (README "L2"); never a runtime function such as
aclrtMalloc, which would replace the application's own. The CLI binary exports nothing of that.
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

# README "L2": exported for clients that link them directly (torch_npu).
ACLOP_EXPORTED = {
    "aclopCompileAndExecute",
    "aclopCreateAttr",
    "aclopDestroyAttr",
    "aclopSetAttrInt",
    "aclopSetAttrBool",
}
# Runtime functions the tool calls for itself (the real ones): exporting them would interpose them.
NEVER_EXPORTED = {"aclrtMalloc", "aclrtGetSocName", "aclrtMemcpy"}
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


def library_problems(syms: set[str], declared: set[str]) -> list[str]:
    errs = [] if "dlsym" in syms else ["dlsym (the L2 trampoline) is not exported"]
    errs += [f"{f}, declared in include/msprobe.h, is not exported" for f in sorted(declared - syms)]
    errs += [f"{f} (README: exported for direct linking) is not exported" for f in sorted(ACLOP_EXPORTED - syms)]
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
    problems = library_problems(exported(RELEASE / "libmsprobe.so"), header_functions(HEADER.read_text()))
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
