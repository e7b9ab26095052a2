"""``seed_all`` (msprobe 1.1.1's MindSpore semantics) and dropout removal."""

from __future__ import annotations

import os
import random

import mindspore as ms
from mindspore import nn, ops


def _check(seed, mode, rm_dropout) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= 2**32 - 1:
        raise ValueError(f"seed_all: seed must be an integer in [0, 2**32-1], got {seed!r}")
    if not isinstance(mode, bool):
        raise ValueError(f"seed_all: mode must be a bool, got {mode!r}")
    if not isinstance(rm_dropout, bool):
        raise ValueError(f"seed_all: rm_dropout must be a bool, got {rm_dropout!r}")


def seed_all(seed: int = 1234, mode: bool = False, rm_dropout: bool = True) -> None:
    """PYTHONHASHSEED, ``mindspore.set_seed`` and ``random.seed``; deterministic kernels when `mode`
    (``set_context(deterministic="ON")``, ``HCCL_DETERMINISTIC``); with `rm_dropout`, dropout built after
    this call keeps everything (p = 0), as msprobe's ``remove_dropout``."""
    _check(seed, mode, rm_dropout)
    os.environ["PYTHONHASHSEED"] = str(seed)
    ms.set_seed(seed)
    random.seed(seed)
    try:
        ms.set_context(deterministic="ON" if mode else "OFF")
    except Exception:
        pass
    os.environ["HCCL_DETERMINISTIC"] = str(mode)
    if rm_dropout:
        remove_dropout()


def remove_dropout() -> None:
    class Dropout(ops.Dropout):
        def __init__(self, keep_prob=0.5, Seed0=0, Seed1=1):
            super().__init__(1.0, Seed0, Seed1)

    class Dropout2D(ops.Dropout2D):
        def __init__(self, keep_prob=0.5):
            super().__init__(1.0)

    class Dropout3D(ops.Dropout3D):
        def __init__(self, keep_prob=0.5):
            super().__init__(1.0)

    class DropoutNoop(nn.Dropout):
        def __init__(self, keep_prob=0.5, p=None, dtype=ms.float32):
            super().__init__(p=0.0, dtype=dtype)

        def construct(self, x):
            return x

    def dropout(input, p=0.5, training=True, seed=None):  # noqa: A002 (MindSpore's name)
        return input

    def mint_dropout(input, p=0.5, training=True, inplace=False):  # noqa: A002
        return input

    ops.Dropout = Dropout
    ops.operations.Dropout = Dropout
    ops.Dropout2D = Dropout2D
    ops.operations.Dropout2D = Dropout2D
    ops.Dropout3D = Dropout3D
    ops.operations.Dropout3D = Dropout3D
    nn.Dropout = DropoutNoop
    ops.dropout = dropout
    try:
        from mindspore.mint.nn import functional as F

        F.dropout = mint_dropout
    except Exception:
        pass
