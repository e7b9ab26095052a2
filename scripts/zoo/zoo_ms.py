"""The MindSpore zoo driver of the differential harness (scripts/diff_msprobe.py --framework ms).

The same file runs under msprobe 1.1.1 (target/msprobe-1.1.1 on PYTHONPATH, with --shim: the two
import/kernel workarounds MindSpore 2.10 needs, kept here and never in the package) and under
msprobe-rs (PYTHONPATH=python): `from msprobe.mindspore import PrecisionDebugger` picks the side.
PyNative on CPU. Every zoo net is a child of one container Cell (the model given to the debugger) and
is trained 2 steps inside its own dump window: net k is dumped as step{k}. OUT/crc.json holds the
CRC-32 of every loss, gradient and updated parameter per net, so a captured run can be checked
against an uncaptured one (`--off`).

usage: python zoo_ms.py OUT LEVEL TASK SUMMARY_MODE [--models a,b] [--scope ..] [--list ..]
       [--data-mode ..] [--off] [--shim]
"""

from __future__ import annotations

import argparse
import json
import os
import zlib

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("level")
ap.add_argument("task")
ap.add_argument("summary_mode")
ap.add_argument("--models", default="")
ap.add_argument("--scope", default="")
ap.add_argument("--list", default="")
ap.add_argument("--data-mode", default="all")
ap.add_argument("--off", action="store_true")
ap.add_argument("--shim", action="store_true", help="msprobe 1.1.1 on MindSpore 2.10 (see module doc)")
A = ap.parse_args()

import mindspore as ms  # noqa: E402
from mindspore import Tensor, mint, nn, ops  # noqa: E402

ms.set_context(mode=ms.PYNATIVE_MODE)
ms.set_device("CPU")
if A.shim:
    import mindspore.common.api as _capi
    import mindspore.graph.api as _gapi

    # msprobe 1.1.1 imports a name MindSpore 2.7+ moved (mindspore.graph.api._JitExecutor)
    _capi._MindsporeFunctionExecutor = _gapi._JitExecutor
    # msprobe 1.1.1's statistics call mint.norm, whose kernel has no CPU registration in 2.10
    mint.norm = ops.norm


# ---------------------------------------------------------------- nets


class Mixed(nn.Cell):
    """mint / ops / Tensor methods / an owned Primitive mixed."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Dense(8, 16), nn.Dense(16, 4)
        self.relu = nn.ReLU()
        self.add = ops.Add()

    def construct(self, x):
        h = self.relu(self.fc1(x))
        h = self.add(h, ops.sigmoid(h))
        h = mint.nn.functional.silu(h)
        h = mint.mul(h, 0.5)
        h = h.clamp(-5.0, 5.0)
        return self.fc2(h).sum(axis=1)


class NoGrad(nn.Cell):
    """The first Cell is applied to the raw data (its inputs need no gradient)."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm((6,))
        self.fc = nn.Dense(6, 3)
        self.act = nn.Tanh()

    def construct(self, x):
        return self.act(self.fc(self.norm(x)))


class CatList(nn.Cell):
    """APIs taking a list of tensors late in the graph: mint.cat of slices, ops.stack."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Dense(6, 8)
        self.out = nn.Dense(8, 2)

    def construct(self, x):
        h = self.fc(x)
        a, b = h[:, :4], h[:, 4:]
        h = mint.cat([b, a * 2.0], dim=1)
        s = ops.stack([h, mint.abs(h)], axis=0).mean(axis=0)
        return self.out(s)


class Scaled(nn.Cell):
    """A Cell with a custom bprop (gradient scaled by 0.5)."""

    def __init__(self) -> None:
        super().__init__()
        self.mul = ops.Mul()

    def construct(self, x):
        return self.mul(x, x)

    def bprop(self, x, out, dout):
        return (dout * x,)


class Bprop(nn.Cell):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Dense(5, 4)
        self.sq = Scaled()
        self.out = nn.Dense(4, 2)

    def construct(self, x):
        return self.out(self.sq(self.fc(x)))


@ms.jit
def fused(h, w):
    return ops.tanh(ops.matmul(h, w)) + h


class Jit(nn.Cell):
    """A jit function inside PyNative."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Dense(4, 4)
        self.w = ms.Parameter(Tensor(np.eye(4, dtype=np.float32) * 0.5), name="w")
        self.out = nn.Dense(4, 3)

    def construct(self, x):
        return self.out(fused(self.fc(x), self.w))


class Optim(nn.Cell):
    """Two layers trained with Adam (the optimizer's own ops run inside the window)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(7, 6)
        self.fc = nn.Dense(6, 7)

    def construct(self, x):
        return self.fc(ops.relu(self.emb(x)))


class TwoGrad(nn.Cell):
    """APIs with two differentiated tensors in, or two tensors out, of different shapes: msprobe
    1.1.1 lists their gradients in position order (MindSpore delivers them last first)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Dense(6, 6)
        self.out = nn.Dense(4, 2)

    def construct(self, x):
        h = self.fc(x)
        a, b = mint.split(h, [2, 4], dim=1)
        p = mint.matmul(a, mint.matmul(a.T, b))
        v, _ = mint.max(b, dim=1)
        return self.out(mint.mul(p, v.unsqueeze(1)))


def mse(out, y):
    return mint.mean((out - y) ** 2)


def xent(out, y):
    return ops.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))


def rnd(*shape):
    return lambda r: Tensor(r.standard_normal(shape).astype(np.float32))


ZOO = {
    # name: (Cell, optimizer, data(rng) -> (x, y), loss)
    "mixed": (Mixed, lambda p: nn.SGD(p, learning_rate=0.1), (rnd(4, 8), rnd(4)), mse),
    "nograd": (NoGrad, lambda p: nn.Momentum(p, 0.1, 0.9), (rnd(5, 6), rnd(5, 3)), mse),
    "catlist": (CatList, lambda p: nn.SGD(p, learning_rate=0.1), (rnd(3, 6), rnd(3, 2)), mse),
    "bprop": (Bprop, lambda p: nn.SGD(p, learning_rate=0.1), (rnd(4, 5), rnd(4, 2)), mse),
    "jit": (Jit, lambda p: nn.SGD(p, learning_rate=0.1), (rnd(3, 4), rnd(3, 3)), mse),
    "twograd": (TwoGrad, lambda p: nn.SGD(p, learning_rate=0.1), (rnd(5, 6), rnd(5, 2)), mse),
    "optim": (
        Optim,
        lambda p: nn.Adam(p, learning_rate=0.01),
        (
            lambda r: Tensor(r.integers(0, 7, (2, 4)).astype(np.int32)),
            lambda r: Tensor(r.integers(0, 7, (2, 4)).astype(np.int32)),
        ),
        xent,
    ),
}


def crc(t) -> int:
    return zlib.crc32(np.ascontiguousarray(t.asnumpy()).tobytes())


class Zoo(nn.Cell):
    def __init__(self, names: list[str]) -> None:
        super().__init__()
        for i, n in enumerate(names):
            ms.set_seed(100 + i)
            np.random.seed(100 + i)
            setattr(self, n, ZOO[n][0]())


def main() -> None:
    names = A.models.split(",") if A.models else list(ZOO)
    os.makedirs(A.out, exist_ok=True)
    sect = {
        "scope": [s for s in A.scope.split(",") if s],
        "list": [s for s in A.list.split(",") if s],
        "data_mode": A.data_mode.split(","),
    }
    if A.task == "tensor":
        sect["file_format"] = "npy"
    else:
        sect["summary_mode"] = A.summary_mode
    cfg = {"task": A.task, "dump_path": os.path.join(A.out, "dump"), "rank": [], "step": [], "level": A.level}
    cfg[A.task] = sect
    cp = os.path.join(A.out, "config.json")
    with open(cp, "w") as f:
        json.dump(cfg, f, indent=1)

    model = Zoo(names)
    dbg = None
    if not A.off:
        from msprobe.mindspore import PrecisionDebugger

        dbg = PrecisionDebugger(config_path=cp)
    result: dict = {}
    for i, n in enumerate(names):
        net = getattr(model, n)
        net.set_train(True)
        opt = ZOO[n][1](net.trainable_params())
        loss_fn = ZOO[n][3]

        def forward(x, y, net=net, loss_fn=loss_fn):
            return loss_fn(net(x), y)

        grad_fn = ms.value_and_grad(forward, None, opt.parameters)
        r = np.random.default_rng(1000 + i)
        losses, grads = [], {}
        if dbg is not None:
            dbg.start(model=model)
        try:
            for _ in range(2):
                x, y = ZOO[n][2][0](r), ZOO[n][2][1](r)
                loss, g = grad_fn(x, y)
                opt(g)
                losses.append(crc(loss))
                grads = {p.name: crc(v) for p, v in zip(opt.parameters, g)}
            result[n] = {"loss": losses, "grads": grads, "params": {p.name: crc(p) for p in net.trainable_params()}}
        except Exception as e:  # one net failing must not hide the others
            result[n] = {"error": f"{type(e).__name__}: {e}"}
        if dbg is not None:
            dbg.stop()
            dbg.step()
    with open(os.path.join(A.out, "crc.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
