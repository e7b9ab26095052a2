"""Start-up hook of the test's subprocesses (test_mindspore.py puts this directory on PYTHONPATH):
at exit, writes what the MindSpore layer recorded through to the file named by
$TEST_ENCODER_REPORT: "native" (msprobe._fastpath's Encoder), "python" (the pure-Python
encoders) or "none" (msprobe.mindspore was never imported). Nothing else is touched."""

import atexit
import os
import sys


def _report() -> None:
    rec = sys.modules.get("msprobe.mindspore._record")
    if rec is None:
        kind = "none"
    else:
        kind = "native" if type(rec.fast).__module__ == "msprobe._fastpath" else "python"
    with open(os.environ["TEST_ENCODER_REPORT"], "w") as f:
        f.write(kind)


if os.environ.get("TEST_ENCODER_REPORT"):
    atexit.register(_report)  # registered first, so it runs last (after msprobe's own exit hook)
