"""The PyTorch zoo driver of the differential harness (scripts/diff_msprobe.py).

The very same file runs under msprobe 1.1.1 (target/venv-msprobe111) and under msprobe-rs
(.venv with PYTHONPATH=python): `import msprobe.pytorch` picks the side. Every zoo model is a
child of one container module (the model given to the debugger) and is trained 2 steps inside its
own dump window: model k is dumped as step{k}. Besides the dump it writes OUT/crc.json, the CRC-32
of every loss and every parameter gradient per model, so a captured run can be checked against an
uncaptured one (`--off`: the same driver without any debugger).

usage: python zoo_pt.py OUT LEVEL TASK SUMMARY_MODE [--models a,b] [--scope ..] [--list ..]
       [--data-mode ..] [--off]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import zlib

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as ckpt

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------- models


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class SelfAttn(nn.Module):
    """Self-attention applied to the raw batch (inputs need no grad): attn(x, x, x)."""

    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        a, _ = self.attn(x, x, x)
        return self.head(self.norm(a + x)).mean(1)


class EncDec(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tr = nn.Transformer(
            d_model=8,
            nhead=2,
            num_encoder_layers=1,
            num_decoder_layers=1,
            dim_feedforward=16,
            dropout=0.0,
            batch_first=True,
        )
        self.out = nn.Linear(8, 5)

    def forward(self, src, tgt):
        return self.out(self.tr(src, tgt))


class CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.relu = nn.ReLU(inplace=True)
        self.drop = nn.Dropout(0.25)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(4 * 3 * 3, 3)

    def forward(self, x):
        x = self.pool(self.drop(self.relu(self.bn(self.conv(x)))))
        return self.fc(x.flatten(1))


class RNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(4, 6, batch_first=True)
        self.gru = nn.GRU(6, 5, batch_first=True)
        self.fc = nn.Linear(5, 2)

    def forward(self, x):
        h, _ = self.lstm(x)
        h, _ = self.gru(h)
        return self.fc(h[:, -1])


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        att = (q @ k.transpose(1, 2)) / (d**0.5)
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        x = x + self.proj(att @ v)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int = 11, d: int = 8, t: int = 6) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(t, d)
        self.block = Block(d)
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1])
        return self.head(self.ln(self.block(self.tok(idx) + self.pos(pos))))


class ScaledTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, s):
        y = torch.tanh(x) * s
        ctx.save_for_backward(y)
        ctx.s = s
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (ctx.s - y * y / ctx.s), None


class CustomFn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(6, 6), nn.Linear(6, 2)

    def forward(self, x):
        return self.fc2(ScaledTanh.apply(self.fc1(x), 2.0))


Pair = collections.namedtuple("Pair", ["a", "b"])


class TupleOut(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        return y.relu(), y.sigmoid()


class DictOut(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        return {"pos": y.relu(), "neg": (-y).relu()}


class NamedOut(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        return Pair(y.tanh(), y * 2)


class Outputs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.t, self.d, self.n = TupleOut(), DictOut(), NamedOut()

    def forward(self, x):
        a, b = self.t(x)
        d = self.d(a)
        p = self.n(d["pos"] - d["neg"] + b)
        return p[0] + p[1]  # 1.1.1's mix/L0 hooks turn a namedtuple output into a plain tuple


class NoGrad(nn.Module):
    """A teacher updated as an EMA under no_grad, and a no_grad normalisation of the input."""

    def __init__(self) -> None:
        super().__init__()
        self.student, self.teacher = nn.Linear(5, 3), nn.Linear(5, 3)

    def forward(self, x):
        with torch.no_grad():
            x = (x - x.mean(0)) / (x.std(0) + 1e-5)
            target = self.teacher(x)
            for ps, pt in zip(self.student.parameters(), self.teacher.parameters()):
                pt.mul_(0.9).add_(ps.detach(), alpha=0.1)
        return F.mse_loss(self.student(x), target)


class Ckpt(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Sequential(nn.Linear(6, 8), nn.Tanh())
        self.b = nn.Linear(8, 2)

    def forward(self, x):
        return self.b(ckpt.checkpoint(self.a, x, use_reentrant=False))


class Shared(nn.Module):
    """Tied embedding/output weights, and one module called twice per step."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(7, 6)
        self.mix = nn.Linear(6, 6)
        self.out = nn.Linear(6, 7, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, idx):
        h = self.emb(idx)
        h = self.mix(torch.tanh(self.mix(h)))
        return self.out(h)


class InPlace(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(6, 6), nn.Linear(6, 3)

    def forward(self, x):
        h = self.fc1(x)
        h.mul_(1.5).add_(0.25)
        h.masked_fill_(h > 1.5, 1.5)
        h = h.clamp_(-2.0, 2.0).relu_()
        return self.fc2(h)


class Aten(nn.Module):
    """Calls through torch.ops.aten (packets and an overload), which 1.1.1 wraps as `Aten.*`."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(5, 6), nn.Linear(6, 2)

    def forward(self, x):
        h = torch.ops.aten.gelu(self.fc1(x))
        h = torch.ops.aten.add.Tensor(h, torch.ops.aten.mul(h, 0.5))
        return self.fc2(h)


# ---------------------------------------------------------------- training recipes


def xent(out, y):
    return F.cross_entropy(out, y)


def zoo() -> dict:
    """name -> (make model, make optimizer, make batch, loss)."""
    return {
        "mlp": (
            MLP,
            lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
            lambda g: (torch.randn(4, 8, generator=g), torch.randint(0, 4, (4,), generator=g)),
            lambda m, x, y: xent(m(x), y),
        ),
        "selfattn": (
            SelfAttn,
            lambda p: torch.optim.Adam(p, lr=0.01),
            lambda g: (torch.randn(2, 5, 8, generator=g), torch.randint(0, 3, (2,), generator=g)),
            lambda m, x, y: xent(m(x), y),
        ),
        "encdec": (
            EncDec,
            lambda p: torch.optim.AdamW(p, lr=0.01),
            lambda g: (
                (torch.randn(2, 4, 8, generator=g), torch.randn(2, 3, 8, generator=g)),
                torch.randn(2, 3, 5, generator=g),
            ),
            lambda m, x, y: F.mse_loss(m(*x), y),
        ),
        "cnn": (
            CNN,
            lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
            lambda g: (torch.randn(4, 2, 6, 6, generator=g), torch.randint(0, 3, (4,), generator=g)),
            lambda m, x, y: xent(m(x), y),
        ),
        "rnn": (
            RNN,
            lambda p: torch.optim.SGD(p, lr=0.1),
            lambda g: (torch.randn(3, 5, 4, generator=g), torch.randint(0, 2, (3,), generator=g)),
            lambda m, x, y: xent(m(x), y),
        ),
        "gpt_adamw": (
            GPT,
            lambda p: torch.optim.AdamW(p, lr=0.01),
            lambda g: (torch.randint(0, 11, (2, 6), generator=g), torch.randint(0, 11, (2, 6), generator=g)),
            lambda m, x, y: xent(m(x).flatten(0, 1), y.flatten()),
        ),
        "gpt_sgd": (
            GPT,
            lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
            lambda g: (torch.randint(0, 11, (2, 6), generator=g), torch.randint(0, 11, (2, 6), generator=g)),
            lambda m, x, y: xent(m(x).flatten(0, 1), y.flatten()),
        ),
        "customfn": (
            CustomFn,
            lambda p: torch.optim.SGD(p, lr=0.1),
            lambda g: (torch.randn(4, 6, generator=g), torch.randint(0, 2, (4,), generator=g)),
            lambda m, x, y: xent(m(x), y),
        ),
        "outputs": (
            Outputs,
            lambda p: torch.optim.SGD(p, lr=0.1),
            lambda g: (torch.randn(3, 4, generator=g), torch.randn(3, 4, generator=g)),
            lambda m, x, y: F.mse_loss(m(x), y),
        ),
        "nograd": (
            NoGrad,
            lambda p: torch.optim.SGD(p, lr=0.1),
            lambda g: (torch.randn(6, 5, generator=g), None),
            lambda m, x, y: m(x),
        ),
        "shared": (
            Shared,
            lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.5),
            lambda g: (torch.randint(0, 7, (2, 4), generator=g), torch.randint(0, 7, (2, 4), generator=g)),
            lambda m, x, y: xent(m(x).flatten(0, 1), y.flatten()),
        ),
        "inplace": (
            InPlace,
            lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
            lambda g: (torch.randn(4, 6, generator=g), torch.randint(0, 3, (4,), generator=g)),
            lambda m, x, y: xent(m(x), y),
        ),
        "aten": (
            Aten,
            lambda p: torch.optim.SGD(p, lr=0.1),
            lambda g: (torch.randn(4, 5, generator=g), torch.randint(0, 2, (4,), generator=g)),
            lambda m, x, y: xent(m(x), y),
        ),
        # last: under msprobe 1.1.1 at L1/mix an API call that raises inside checkpoint's
        # recomputation leaves its per-thread "inside a hooked API" flag set, and nothing after
        # it is recorded any more
        "ckpt": (
            Ckpt,
            lambda p: torch.optim.Adam(p, lr=0.01),
            lambda g: (torch.randn(4, 6, generator=g).requires_grad_(), torch.randint(0, 2, (4,), generator=g)),
            lambda m, x, y: xent(m(x), y),
        ),
    }


def crc(t: torch.Tensor) -> int:
    return zlib.crc32(t.detach().contiguous().numpy().tobytes())


class Zoo(nn.Module):
    def __init__(self, names: list[str]) -> None:
        super().__init__()
        recipes = zoo()
        for i, n in enumerate(names):
            torch.manual_seed(100 + i)
            self.add_module(n, recipes[n][0]())


def main() -> None:
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
    a = ap.parse_args()
    names = a.models.split(",") if a.models else list(zoo())
    os.makedirs(a.out, exist_ok=True)
    sect = {
        "scope": [s for s in a.scope.split(",") if s],
        "list": [s for s in a.list.split(",") if s],
        "data_mode": a.data_mode.split(","),
    }
    if a.task == "tensor":
        sect["file_format"] = "npy"  # msprobe's own default config; 1.1.1 writes .pt all the same
    else:
        sect["summary_mode"] = a.summary_mode
    cfg = {"task": a.task, "dump_path": os.path.join(a.out, "dump"), "rank": [], "step": [], "level": a.level}
    cfg[a.task] = sect
    cp = os.path.join(a.out, "config.json")
    with open(cp, "w") as f:
        json.dump(cfg, f, indent=1)

    model = Zoo(names)
    dbg = None
    if not a.off:
        from msprobe.pytorch import PrecisionDebugger

        dbg = PrecisionDebugger(config_path=cp, model=model)
    else:  # what importing msprobe.pytorch does on both sides: dropout runs with p = 0
        for mod in model.modules():
            if isinstance(mod, nn.modules.dropout._DropoutNd):
                mod.p = 0.0
    recipes = zoo()
    result: dict = {}
    for i, n in enumerate(names):
        m = getattr(model, n)
        m.train()
        opt = recipes[n][1](m.parameters())
        g = gen(1000 + i)
        losses, grads = [], {}
        if dbg is not None:
            dbg.start(model)
        try:
            for _ in range(2):
                x, y = recipes[n][2](g)
                loss = recipes[n][3](m, x, y)
                loss.backward()
                losses.append(crc(loss))
                grads = {k: crc(p.grad) for k, p in m.named_parameters() if p.grad is not None}
                opt.step()
                opt.zero_grad()
            result[n] = {"loss": losses, "grads": grads, "params": {k: crc(p) for k, p in m.named_parameters()}}
        except Exception as e:  # one model failing must not hide the others
            result[n] = {"error": f"{type(e).__name__}: {e}"}
        if dbg is not None:
            dbg.stop()
            dbg.step()
    with open(os.path.join(a.out, "crc.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
