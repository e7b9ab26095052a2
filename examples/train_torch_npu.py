"""An ordinary torch_npu training script: a small GPT, CNN, mixture of experts, diffusion U-Net or llama, on `npu`
(or `cpu` for comparison).

Nothing in it knows about the CANN simulator: it is what a user writes for an Ascend host
(`import torch_npu`, `torch.npu.set_device`, `.npu()`, default optimizers). Under `torchrun` it trains
data-parallel with `torch.distributed` (backend `hccl` on npu, `gloo` on cpu).

    python examples/train_torch_npu.py --model gpt --steps 3            # GPT, AdamW (foreach default)
    python examples/train_torch_npu.py --model cnn --steps 3            # CNN, SGD with momentum
    python examples/train_torch_npu.py --model moe --steps 3            # top-2 MoE, Adam (per tensor)
    python examples/train_torch_npu.py --model unet --steps 3           # diffusion U-Net denoiser, AdamW
    python examples/train_torch_npu.py --model llama --steps 3          # llama: npu_rms_norm, npu_swiglu, RoPE
    torchrun --nproc-per-node 2 examples/train_torch_npu.py --model gpt # 2-rank DDP
    python examples/train_torch_npu.py --device cpu ...                 # the same on CPU torch
    python examples/train_torch_npu.py --msprobe config.json ...        # with msprobe.pytorch's usual lines

Prints one JSON line per step on rank 0: {"step": i, "loss": float}. `--dropout` sets the GPT's dropout
probability (default 0.1); the tests compare npu and cpu losses with `--dropout 0` (the dropout kernels
still run, with a keep-everything mask, so the comparison is deterministic). `--msprobe CONFIG` adds the
lines a user adds for msprobe.pytorch (PrecisionDebugger(config_path), start(model) before each step,
stop() and step() after it).
"""

import argparse
import json
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    import torch_npu  # noqa: F401  (registers the npu device)
except ImportError:  # a CPU-only run does not need it
    torch_npu = None


class Block(nn.Module):
    def __init__(self, d, heads, dropout):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)
        self.drop = nn.Dropout(dropout)

    def attention(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(x).split(d, dim=2)
        q = q.view(b, t, h, d // h).transpose(1, 2)
        k = k.view(b, t, h, d // h).transpose(1, 2)
        v = v.view(b, t, h, d // h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // h))
        mask = torch.tril(torch.ones(t, t, device=x.device, dtype=torch.bool))
        att = att.masked_fill(~mask, float("-inf"))
        att = self.drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, d)
        return self.drop(self.proj(y))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        # GPT-2's tanh GELU: torch_npu sends F.gelu of either mode to aclnnGelu, which CANN computes in the
        # tanh form, so with it the npu run and CPU torch compute the same function.
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh")))


class GPT(nn.Module):
    def __init__(self, vocab=64, block=16, d=32, heads=4, layers=2, dropout=0.1):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(block, d)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(d, heads, dropout) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx, targets):
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.drop(self.tok(idx) + self.pos(pos))
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


class CNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.fc = nn.Linear(16 * 4 * 4, classes)

    def forward(self, x, targets):
        return F.cross_entropy(self.fc(torch.flatten(self.features(x), 1)), targets)


class Expert(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.w1, self.w2, self.w3 = nn.Linear(d, 2 * d), nn.Linear(d, 2 * d), nn.Linear(2 * d, d)

    def forward(self, x):
        return self.w3(F.silu(self.w1(x)) * self.w2(x))  # SwiGLU


class MoE(nn.Module):
    """A token model with what the GPT lacks: an RMS norm through `var`, a causal running mean
    (`cumsum`), top-2 routing (`topk`) over SwiGLU experts, and a loss from `logsumexp` and `gather`
    (whose backward scatters), plus an `mse_loss` term on a flipped copy."""

    def __init__(self, vocab=64, d=32, experts=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.gate = nn.Linear(d, experts)
        self.experts = nn.ModuleList([Expert(d) for _ in range(experts)])
        self.head = nn.Linear(d, vocab)

    def forward(self, idx, targets):
        x = self.emb(idx)
        x = x / (x.var(-1, keepdim=True, unbiased=False) + 1e-5).sqrt()
        x = x + x.cumsum(1) / torch.arange(1, x.shape[1] + 1, device=x.device)[None, :, None]
        w, top = self.gate(x).softmax(-1).topk(2, -1)
        y = torch.zeros_like(x)
        for k in range(2):
            for j, expert in enumerate(self.experts):
                y = y + (top[..., k] == j).unsqueeze(-1).float() * w[..., k : k + 1] * expert(x)
        logits = self.head(y + x)
        picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        return (logits.logsumexp(-1) - picked).mean() + 0.01 * F.mse_loss(logits.flip(1), logits.detach())


class UNet(nn.Module):
    """A diffusion denoiser: a noise schedule made on the device (`linspace`, `cumprod`), a small U-Net
    (GroupNorm, SiLU, average pooling down, a transposed convolution and nearest / bilinear upsampling up,
    reflection padding, a 1-D convolution over the channel means, a PReLU) and an MSE + smooth-L1 loss on
    the predicted noise."""

    def __init__(self, ch=8, steps=50):
        super().__init__()
        self.steps = steps
        self.inp = nn.Conv2d(3, ch, 3, padding=1)
        self.n1 = nn.GroupNorm(4, ch)
        self.down = nn.Conv2d(ch, 2 * ch, 3, padding=1)
        self.n2 = nn.GroupNorm(4, 2 * ch)
        self.up = nn.ConvTranspose2d(2 * ch, ch, 2, stride=2)
        self.gate = nn.Conv1d(1, 1, 3, padding=1)
        self.act = nn.PReLU(ch)
        self.out = nn.Conv2d(3 * ch, 3, 3)

    def forward(self, x0, noise):
        b = x0.shape[0]
        alphas = torch.cumprod(1 - torch.linspace(1e-4, 0.02, self.steps, device=x0.device), 0)
        a = alphas[(torch.arange(b, device=x0.device) * 13) % self.steps].view(b, 1, 1, 1)
        x = a.sqrt() * x0 + (1 - a).sqrt() * noise
        h1 = F.silu(self.n1(self.inp(x)))
        h2 = F.silu(self.n2(self.down(F.avg_pool2d(h1, 2))))
        u = self.up(h2)
        g = torch.sigmoid(self.gate(F.adaptive_avg_pool2d(u, 1).view(b, 1, -1))).view(b, -1, 1, 1)
        skip = F.interpolate(F.interpolate(h1, scale_factor=0.5, mode="bilinear"), scale_factor=2, mode="nearest")
        h = torch.cat([self.act(u * g), h1, skip], 1)
        pred = self.out(F.pad(h, (1, 1, 1, 1), mode="reflect"))
        return F.mse_loss(pred, noise) + 0.1 * F.smooth_l1_loss(pred, noise)


def rms_norm(x, weight, eps=1e-6):
    """torch_npu's fused RMSNorm on npu (aclnnRmsNorm), its documented formula on CPU."""
    if x.device.type == "npu":
        return torch_npu.npu_rms_norm(x, weight, epsilon=eps)[0]
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def swiglu(x):
    """torch_npu's fused SwiGLU on npu (aclnnSwiGlu): silu of the first half times the second."""
    if x.device.type == "npu":
        return torch_npu.npu_swiglu(x, dim=-1)
    a, b = x.chunk(2, -1)
    return F.silu(a) * b


class LlamaBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = nn.Parameter(torch.ones(d)), nn.Parameter(torch.ones(d))
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.up = nn.Linear(d, 4 * d, bias=False)  # gate and up projections in one
        self.down = nn.Linear(2 * d, d, bias=False)

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        q, k, v = self.qkv(rms_norm(x, self.n1)).view(b, t, 3, self.heads, d // self.heads).transpose(1, 3).unbind(2)

        def rope(u):  # rotary position embedding, rotate-half form
            u1, u2 = u.chunk(2, -1)
            return u * cos + torch.cat((-u2, u1), -1) * sin

        y = F.scaled_dot_product_attention(rope(q), rope(k), v, is_causal=True)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, d))
        return x + self.down(swiglu(self.up(rms_norm(x, self.n2))))


class Llama(nn.Module):
    """A llama-style decoder written for Ascend: torch_npu's fused RMSNorm and SwiGLU, rotary embeddings,
    causal scaled-dot-product attention, no biases, a final RMSNorm and an untied head."""

    def __init__(self, vocab=64, d=32, heads=4, layers=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([LlamaBlock(d, heads) for _ in range(layers)])
        self.norm = nn.Parameter(torch.ones(d))
        self.head = nn.Linear(d, vocab, bias=False)
        hd = d // heads
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, hd, 2).float() / hd), persistent=False)

    def forward(self, idx, targets):
        t = idx.shape[1]
        ang = torch.outer(torch.arange(t, device=idx.device).float(), self.inv_freq)
        ang = torch.cat((ang, ang), -1)
        cos, sin = ang.cos(), ang.sin()
        x = self.emb(idx)
        for blk in self.blocks:
            x = blk(x, cos, sin)
        logits = self.head(rms_norm(x, self.norm))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def batches(model, steps, batch, rank, world, seq=16, vocab=64):
    """Deterministic synthetic data; each rank takes its slice of the global batch."""
    g = torch.Generator().manual_seed(1234)
    for _ in range(steps):
        if model in ("gpt", "moe", "llama"):
            x = torch.randint(0, vocab, (batch * world, seq), generator=g)
            y = torch.roll(x, -1, dims=1)
        elif model == "unet":  # images and the noise to predict
            x = torch.randn(batch * world, 3, 16, 16, generator=g)
            y = torch.randn(batch * world, 3, 16, 16, generator=g)
        else:
            x = torch.randn(batch * world, 3, 16, 16, generator=g)
            y = torch.randint(0, 10, (batch * world,), generator=g)
        yield x[rank * batch : (rank + 1) * batch], y[rank * batch : (rank + 1) * batch]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["gpt", "cnn", "moe", "unet", "llama"], default="gpt")
    ap.add_argument("--device", choices=["npu", "cpu"], default="npu")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--msprobe", metavar="CONFIG", default=None, help="dump with msprobe.pytorch (config.json)")
    # GPT size (defaults: the small test model); e.g. --d-model 768 --seq 512 for a realistic layer.
    ap.add_argument("--d-model", type=int, default=32)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=64)
    a = ap.parse_args()

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if a.device == "npu":
        torch.npu.set_device(local)
        dev = torch.device(f"npu:{local}")
    else:
        dev = torch.device("cpu")
    if world > 1:
        import torch.distributed as dist

        dist.init_process_group(backend="hccl" if a.device == "npu" else "gloo")

    torch.manual_seed(0)
    if a.model == "gpt":
        model = GPT(vocab=a.vocab, block=a.seq, d=a.d_model, layers=a.layers, dropout=a.dropout)
        opt_ctor = lambda p: torch.optim.AdamW(p, lr=a.lr or 1e-3)  # noqa: E731
    elif a.model == "moe":
        model = MoE(vocab=a.vocab, d=a.d_model)
        opt_ctor = lambda p: torch.optim.Adam(p, lr=a.lr or 1e-2, foreach=False)  # noqa: E731  (per-tensor lerp_)
    elif a.model == "llama":
        model = Llama(vocab=a.vocab, d=a.d_model, layers=a.layers)
        opt_ctor = lambda p: torch.optim.AdamW(p, lr=a.lr or 3e-3, weight_decay=0.1)  # noqa: E731
    elif a.model == "unet":
        model = UNet()
        opt_ctor = lambda p: torch.optim.AdamW(p, lr=a.lr or 1e-2)  # noqa: E731
    else:
        model = CNN()
        opt_ctor = lambda p: torch.optim.SGD(p, lr=a.lr or 0.01, momentum=0.9)  # noqa: E731
    model = model.to(dev)
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(model, device_ids=[local] if a.device == "npu" else None)
    opt = opt_ctor(model.parameters())
    debugger = None
    if a.msprobe:
        from msprobe.pytorch import PrecisionDebugger

        debugger = PrecisionDebugger(config_path=a.msprobe)
    model.train()
    for step, (x, y) in enumerate(batches(a.model, a.steps, a.batch, rank, world, a.seq, a.vocab)):
        x, y = x.to(dev), y.to(dev)
        if debugger:
            debugger.start(model)
        opt.zero_grad()
        loss = model(x, y)
        loss.backward()
        opt.step()
        if debugger:
            debugger.stop()
            debugger.step()
        if world > 1:
            import torch.distributed as dist

            dist.all_reduce(loss := loss.detach().clone())
            loss = loss / world
        if rank == 0:
            print(json.dumps({"step": step, "loss": loss.item()}), flush=True)
    if world > 1:
        import torch.distributed as dist

        # every rank done with its collectives before the group goes: a rank tearing gloo down while
        # another still runs its last all_reduce can abort ("terminate called without an active exception")
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
