"""msprobe.pytorch: msprobe 1.1.1's PyTorch API, recording through the Rust recorder.

    from msprobe.pytorch import PrecisionDebugger, seed_all, module_dump, module_dump_end
    from msprobe.pytorch import compare, compare_distributed   # run by the Rust CLI

Importing this package neutralises dropout (F.dropout/2d/3d and nn.Dropout/2d/3d run with
p = 0), as the seed documentation says.
"""

from ..core.compare import compare, compare_distributed
from .debugger import PrecisionDebugger, module_dump, module_dump_end
from .seed import remove_dropout, seed_all

remove_dropout()

__all__ = ["PrecisionDebugger", "seed_all", "module_dump", "module_dump_end", "compare", "compare_distributed"]
