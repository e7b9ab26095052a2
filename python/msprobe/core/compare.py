"""msprobe 1.1.1's Python compare API (`msprobe.pytorch.compare`, `compare_distributed`), run by the
Rust CLI: one implementation of compare, whichever way it is called.

The CLI is found, in order: ``$MSPROBE_CLI``; the ``msprobe`` script the wheel installs next to this
Python; ``target/release/msprobe`` of the checkout the package runs from.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from .errors import MsprobeException

_REPO = Path(__file__).resolve().parents[3]


def _cli() -> str:
    cands = []
    if os.environ.get("MSPROBE_CLI"):
        cands.append(Path(os.environ["MSPROBE_CLI"]))
    cands.append(Path(sysconfig.get_path("scripts")) / "msprobe")
    cands.append(Path(os.environ.get("CARGO_TARGET_DIR", _REPO / "target")) / "release" / "msprobe")
    for c in cands:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    raise MsprobeException(
        "the msprobe compare CLI was not found (looked in: "
        + ", ".join(map(str, cands))
        + "); install the msprobe-rs wheel or build it with `bash scripts/build.sh`, or set MSPROBE_CLI"
    )


def _run(args: list[str], output_path: str, stack_mode: bool, fuzzy_match: bool, framework: str) -> None:
    cmd = [_cli(), "-f", framework, "compare", *args, "-o", str(output_path), "--no-progress"]
    if stack_mode:
        cmd.append("-s")
    if fuzzy_match:
        cmd.append("-f")
    p = subprocess.run(cmd, stdout=sys.stdout, stderr=sys.stderr)
    if p.returncode != 0:
        raise MsprobeException(f"compare failed (exit {p.returncode}): {' '.join(cmd)}")


def _flags(stack_mode, auto_analyze, fuzzy_match) -> None:
    for key, v in (("stack_mode", stack_mode), ("auto_analyze", auto_analyze), ("fuzzy_match", fuzzy_match)):
        if not isinstance(v, bool):
            raise MsprobeException(f"{key} must be a bool, got {v!r}")


def compare(input_param: dict, output_path: str, stack_mode=False, auto_analyze=True, fuzzy_match=False, **kwargs):
    """As msprobe 1.1.1's ``compare``: ``input_param`` holds ``npu_json_path``, ``bench_json_path``,
    ``stack_json_path`` and ``is_print_compare_log``; one compare_result file set in ``output_path``.
    ``auto_analyze`` is accepted (there is no advisor file); ``data_mapping`` is refused."""
    _flags(stack_mode, auto_analyze, fuzzy_match)
    if kwargs.get("data_mapping"):
        raise MsprobeException("data_mapping is not supported (see README, compare)")
    for key in ("npu_json_path", "bench_json_path"):
        if not str(input_param.get(key, "")).endswith("dump.json"):
            raise MsprobeException(f"{key} must name a dump.json, got {input_param.get(key)!r}")
    spec = {
        "npu_path": input_param["npu_json_path"],
        "bench_path": input_param["bench_json_path"],
        "is_print_compare_log": bool(input_param.get("is_print_compare_log", True)),
    }
    if input_param.get("stack_json_path"):
        spec["stack_path"] = input_param["stack_json_path"]
    with tempfile.TemporaryDirectory() as td:
        cfg = Path(td) / "compare.json"
        cfg.write_text(json.dumps(spec))
        _run(["-i", str(cfg)], output_path, stack_mode, fuzzy_match, "pytorch")


def compare_distributed(npu_dump_dir: str, bench_dump_dir: str, output_path: str, **kwargs):
    """As msprobe 1.1.1's ``compare_distributed``: the rank directories of two step directories
    matched in order, one compare_result file set per pair (``_rank0-rank0`` suffixes)."""
    if kwargs.get("suffix"):
        raise MsprobeException("Argument 'suffix' is not supported for compare_distributed.")
    stack_mode = kwargs.get("stack_mode", False)
    fuzzy_match = kwargs.get("fuzzy_match", False)
    _flags(stack_mode, kwargs.get("auto_analyze", True), fuzzy_match)
    args = [str(npu_dump_dir), str(bench_dump_dir)]
    if not kwargs.get("is_print_compare_log", True):
        args.append("-q")
    _run(args, output_path, stack_mode, fuzzy_match, "pytorch")
