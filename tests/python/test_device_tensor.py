"""The C ABI's device-tensor path: a tensor in (simulated) Ascend memory, copied by the recorder
with aclrtMemcpy, gives the same statistics and CRC as the host data it was made from."""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path

import numpy as np

from recorder_testutil import REPO, run_child

LIB64 = Path(os.environ.get("CANNSIM_LIB64", REPO / "target" / "cann" / "latest" / "lib64"))


def test_device_tensor_matches_host_data(tmp_path: Path) -> None:
    code = f"""
import sys, ctypes, numpy as np
sys.path.insert(0, {str(REPO / "examples")!r})
import cannsim_ctypes as cs
from msprobe import _native as n
acl = cs.Acl({str(LIB64)!r})
a = np.random.default_rng(0).standard_normal((6, 5)).astype(np.float32)
dev = acl.malloc(a.nbytes)
acl.h2d(dev, a)
assert n.lib.msprobe_init(b'{{"summary_mode": "md5", "dump_path": "{tmp_path / "d"}"}}') == 0
assert n.lib.msprobe_start() == 1
r = n.lib.msprobe_record_begin(b"Aclnn.Demo.0.forward")
n.lib.msprobe_record_section(r, b"input_args")
whole = n.tensor(0, [6, 5], dev, 0)
assert n.lib.msprobe_record_add_device_tensor(r, None, ctypes.byref(whole)) == 0, n.last_error()
# the transpose of rows 1..4: shape [5, 3], strides [1, 5], offset 5
view = n.tensor(0, [5, 3], dev, 0, strides=[1, 5], offset=5)
assert n.lib.msprobe_record_add_device_tensor(r, None, ctypes.byref(view)) == 0, n.last_error()
n.lib.msprobe_record_end(r)
n.lib.msprobe_stop(); n.lib.msprobe_flush()
np.save({str(tmp_path / "a.npy")!r}, a)
"""
    p = run_child(code, {"LD_LIBRARY_PATH": str(LIB64)})
    assert p.returncode == 0, p.stderr
    a = np.load(tmp_path / "a.npy")
    leaves = json.loads((tmp_path / "d/step0/rank/dump.json").read_text())["data"]["Aclnn.Demo.0.forward"]["input_args"]
    assert len(leaves) == 2
    for leaf, want in zip(leaves, [a, a[1:4].T]):
        want = np.ascontiguousarray(want)
        assert leaf["shape"] == list(want.shape)
        assert leaf["md5"] == f"{zlib.crc32(want.tobytes()):08x}"
        assert leaf["Max"] == float(want.max()) and leaf["Min"] == float(want.min())
        assert abs(leaf["Mean"] - float(want.astype(np.float64).mean())) < 1e-6
