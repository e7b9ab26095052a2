"""Runs one MindSpore CPU script under msprobe 1.1.1 (target/msprobe-1.1.1, with the zoo driver's
MindSpore 2.10 shim, enabled by SHIM=1 in the script's environment) and under ours: the truth of the
`*_as_111` tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from recorder_testutil import LIB, REPO

MS111 = REPO / "target" / "msprobe-1.1.1"

# The script's head: MindSpore PyNative on CPU, and the shim when run under 1.1.1.
PRELUDE = r"""
import json, os, sys
import numpy as np
import mindspore as ms
from mindspore import Tensor, mint, nn, ops
ms.set_context(mode=ms.PYNATIVE_MODE)
ms.set_device("CPU")
if os.environ.get("SHIM") == "1":  # msprobe 1.1.1 on MindSpore 2.10 (scripts/zoo/zoo_ms.py --shim)
    import mindspore.common.api as _capi, mindspore.graph.api as _gapi
    _capi._MindsporeFunctionExecutor = _gapi._JitExecutor
    mint.norm = ops.norm
"""


def run_both(tmp: Path, script: str, *args: str) -> dict[str, Path]:
    """The dump directory of each side ("1.1.1", "ours"); the script gets its dump path first."""
    src = tmp / "s.py"
    src.write_text(PRELUDE + script)
    base = {k: v for k, v in os.environ.items() if not k.startswith("MSPROBE_") and k != "PYTHONPATH"}
    base.update(GLOG_v="3", MSPROBE_LOG_LEVEL="2")
    sides = {
        "1.1.1": dict(base, PYTHONPATH=str(MS111), SHIM="1"),
        "ours": dict(base, PYTHONPATH=str(REPO / "python"), MSPROBE_LIB=str(LIB)),
    }
    outs = {}
    for name, env in sides.items():
        out = tmp / name.replace(".", "")
        p = subprocess.run(
            [sys.executable, str(src), str(out), *args], env=env, cwd=tmp, capture_output=True, text=True
        )
        assert p.returncode == 0, (name, p.stderr[-3000:])
        outs[name] = out
    return outs
