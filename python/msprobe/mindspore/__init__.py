"""msprobe.mindspore: msprobe's MindSpore API (PyNative) on the Rust recorder.

from msprobe.mindspore import PrecisionDebugger, seed_all
from msprobe.mindspore.common.utils import MsprobeStep
"""

from msprobe.core.errors import MsprobeException

from .debugger import PrecisionDebugger
from .seed import seed_all

__all__ = ["PrecisionDebugger", "seed_all", "MsprobeException"]
