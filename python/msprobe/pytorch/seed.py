"""seed_all and dropout removal (the seed's table; msprobe-format.md §2.6, §3, §7.3)."""

from __future__ import annotations

import importlib.util
import os
import random
from typing import Any

import torch
import torch.nn.functional as F

from msprobe.core.errors import MsprobeException, logger


def seed_all(seed: int = 1234, mode: bool = False) -> None:
    """Fixes every random source and (mode=True) enables deterministic algorithms."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= 2**32 - 1:
        logger.error(f"seed must be an integer in [0, 4294967295], got {seed!r}")
        raise MsprobeException(f"seed must be an integer in [0, 4294967295], got {seed!r}")
    if not isinstance(mode, bool):
        logger.error(f"mode must be a bool, got {mode!r}")
        raise MsprobeException(f"mode must be a bool, got {mode!r}")
    os.environ["PYTHONHASHSEED"] = str(seed)
    os.environ["HCCL_DETERMINISTIC"] = str(mode)
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:
        pass
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(mode)
    cuda = torch.version.cuda
    if cuda and tuple(int(x) for x in cuda.split(".")[:2]) >= (10, 2):
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    if torch.cuda.is_available():
        torch.cuda.manual_seed(seed)
        torch.cuda.manual_seed_all(seed)
    torch.backends.cudnn.deterministic = True
    # The seed's table (and msprobe 1.1.1) sets `cudnn.enable`, an attribute torch never reads:
    # cuDNN stays on. Kept literally so bench runs behave as with msprobe.
    torch.backends.cudnn.enable = False  # type: ignore[attr-defined]
    torch.backends.cudnn.benchmark = False
    if importlib.util.find_spec("torch_npu") is not None:
        import torch_npu  # type: ignore

        torch_npu.npu.manual_seed(seed)
        torch_npu.npu.manual_seed_all(seed)
    logger.info(f"Enable deterministic computation sucess! current seed is {seed}.")


def _no_dropout(orig: Any) -> Any:
    def dropout(input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> torch.Tensor:
        return orig(input, 0.0, training, inplace)

    dropout.__name__ = orig.__name__
    dropout.__doc__ = orig.__doc__
    dropout.__msprobe_no_dropout__ = True  # type: ignore[attr-defined]
    return dropout


def remove_dropout() -> None:
    """F.dropout/dropout2d/dropout3d (and so nn.Dropout/2d/3d) run with p = 0."""
    for name in ("dropout", "dropout2d", "dropout3d"):
        f = getattr(F, name)
        if not getattr(f, "__msprobe_no_dropout__", False):
            setattr(F, name, _no_dropout(f))
