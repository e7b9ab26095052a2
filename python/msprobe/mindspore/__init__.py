"""msprobe.mindspore: msprobe's MindSpore API (PyNative) on the Rust recorder.

    from msprobe.mindspore import PrecisionDebugger, seed_all
    from msprobe.mindspore.common.utils import MsprobeStep
"""
from .debugger import MsprobeException, PrecisionDebugger  # noqa: F401
from .seed import seed_all  # noqa: F401

__all__ = ["PrecisionDebugger", "seed_all", "MsprobeException"]
