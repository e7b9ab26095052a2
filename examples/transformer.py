#!/usr/bin/env python3
"""Train a tiny transformer block on the simulated CANN (ctypes + aclnn only).

Embedding + learned positions -> LayerNorm -> single-head self-attention (BatchMatMul, Softmax) -> residual ->
LayerNorm -> MLP (Matmul, Gelu) -> residual -> output projection -> LogSoftmax + NLLLoss; hand-written backward with
the aclnn backward ops, AdamW through aclnnApplyAdamW. Task: predict the previous token of the sequence.

    python examples/transformer.py [--steps N] [--seed S] [--check]

--check verifies the loss against a numpy forward and a few gradients against numpy finite differences.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cannsim_ctypes as cs  # noqa: E402

B, S, V, D, F = 4, 8, 16, 16, 32
N = B * S
F32 = cs.ACL_FLOAT


def init_params(seed):
    rng = np.random.default_rng(seed)

    def r(*s, sc=0.3):
        return (rng.standard_normal(s) * sc).astype(np.float32)

    return {
        "emb": r(V, D, sc=1.0),
        "pos": r(S, D, sc=1.0),
        "g1": np.ones(D, np.float32),
        "b1": np.zeros(D, np.float32),
        "wq": r(D, D),
        "wk": r(D, D),
        "wv": r(D, D),
        "wo": r(D, D),
        "g2": np.ones(D, np.float32),
        "b2": np.zeros(D, np.float32),
        "w1": r(D, F),
        "w2": r(F, D),
        "wout": r(D, V),
    }


def batch(seed, step):
    rng = np.random.default_rng([seed, 7, step])
    tok = rng.integers(0, V, (B, S)).astype(np.int64)
    return tok, np.roll(tok, 1, axis=1)  # target: the previous token (position 0: the last one)


def np_forward(p, tok, tgt):
    """Independent numpy (float64) forward; returns the mean NLL loss."""
    p = {k: v.astype(np.float64) for k, v in p.items()}

    def ln(x, g, b):
        return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b

    x0 = p["emb"][tok] + p["pos"]
    h1 = ln(x0, p["g1"], p["b1"])
    q, k, v = h1 @ p["wq"], h1 @ p["wk"], h1 @ p["wv"]
    sc = q @ k.transpose(0, 2, 1) / np.sqrt(D)
    pr = np.exp(sc - sc.max(-1, keepdims=True))
    pr /= pr.sum(-1, keepdims=True)
    x1 = x0 + (pr @ v) @ p["wo"]
    h2 = ln(x1, p["g2"], p["b2"])
    u = h2 @ p["w1"]
    # aclnnGelu computes the tanh form (CANN ops-nn activation/gelu), not the exact erf form
    x2 = x1 + (0.5 * u * (1 + np.tanh(np.sqrt(2 / np.pi) * (u + 0.044715 * u**3)))) @ p["w2"]
    lg = (x2 @ p["wout"]).reshape(N, V)
    lp = lg - lg.max(-1, keepdims=True) - np.log(np.exp(lg - lg.max(-1, keepdims=True)).sum(-1, keepdims=True))
    return -lp[np.arange(N), tgt.reshape(N)].mean()


class Model:
    def __init__(self, acl, params, stream):
        self.acl, self.s = acl, stream

        def T(*shape, data=None, dtype=F32):
            return acl.tensor(data, shape if data is None else None, dtype)

        self.p = {k: T(data=v) for k, v in params.items()}
        self.g = {k: T(*v.shape) for k, v in params.items()}
        self.m = {k: T(data=np.zeros_like(v)) for k, v in params.items()}
        self.v = {k: T(data=np.zeros_like(v)) for k, v in params.items()}
        a = {}
        for name, shape in [
            ("x0", (B, S, D)),
            ("h1", (B, S, D)),
            ("q", (B, S, D)),
            ("k", (B, S, D)),
            ("vv", (B, S, D)),
            ("sc", (B, S, S)),
            ("pr", (B, S, S)),
            ("at", (B, S, D)),
            ("o", (B, S, D)),
            ("x1", (B, S, D)),
            ("h2", (B, S, D)),
            ("u", (B, S, F)),
            ("gu", (B, S, F)),
            ("mo", (B, S, D)),
            ("x2", (B, S, D)),
            ("lg", (N, V)),
            ("lp", (N, V)),
            ("loss", ()),
            ("tw", ()),
            ("one", ()),
            ("mu1", (B, S, 1)),
            ("rs1", (B, S, 1)),
            ("mu2", (B, S, 1)),
            ("rs2", (B, S, 1)),
            ("dlp", (N, V)),
            ("dlg", (N, V)),
            ("dx2", (B, S, D)),
            ("dgu", (B, S, F)),
            ("du", (B, S, F)),
            ("dh2", (B, S, D)),
            ("dx1", (B, S, D)),
            ("dat", (B, S, D)),
            ("dpr", (B, S, S)),
            ("dsc", (B, S, S)),
            ("dq", (B, S, D)),
            ("dk", (B, S, D)),
            ("dvv", (B, S, D)),
            ("dh1", (B, S, D)),
            ("tmp", (B, S, D)),
            ("dx0", (B, S, D)),
            ("lnx", (B, S, D)),
        ]:
            a[name] = T(*shape)
        a["one"].upload(np.ones((), np.float32))
        a["tok"], a["tgt"] = T(B, S, dtype=cs.ACL_INT64), T(N, dtype=cs.ACL_INT64)
        self.a = a
        self.hyper = {k: T(1) for k in ("b1p", "b2p", "lr", "wd", "beta1", "beta2", "eps")}

    def view(self, t, shape, strides=None):
        return cs.VP(self.acl.create_tensor(shape, t.dtype, t.ptr, strides=strides))

    def T2(self, t, rows, cols):  # 2-D transpose view of a contiguous [rows, cols] buffer
        return self.view(t, (cols, rows), (1, cols))

    def run(self, name, *args):
        self.acl.run(name, *args, stream=self.s)

    def step(self, tok, tgt):
        a, p, g, run = self.a, self.p, self.g, self.run
        a["tok"].upload(tok)
        a["tgt"].upload(tgt.reshape(N))

        def flat(t, c):
            return self.view(t, (N, c))

        def kT(t):
            return self.view(t, (B, D, S), (S * D, 1, D))  # [B,S,D] -> [B,D,S]

        def sT(t):
            return self.view(t, (B, S, S), (S * S, 1, S))  # batched transpose of [B,S,S]

        # ---- forward
        run("Embedding", p["emb"], a["tok"], a["x0"])
        run("InplaceAdd", a["x0"], p["pos"], 1.0)  # learned positions, broadcast over the batch
        run("LayerNorm", a["x0"], [D], p["g1"], p["b1"], 1e-5, a["h1"], a["mu1"], a["rs1"])
        for w, o in (("wq", "q"), ("wk", "k"), ("wv", "vv")):
            run("Matmul", a["h1"], p[w], a[o], 0)
        run("BatchMatMul", a["q"], kT(a["k"]), a["sc"], 0)
        run("InplaceMuls", a["sc"], 1 / np.sqrt(D))
        run("Softmax", a["sc"], -1, a["pr"])
        run("BatchMatMul", a["pr"], a["vv"], a["at"], 0)
        run("Matmul", a["at"], p["wo"], a["o"], 0)
        run("Add", a["x0"], a["o"], 1.0, a["x1"])
        run("LayerNorm", a["x1"], [D], p["g2"], p["b2"], 1e-5, a["h2"], a["mu2"], a["rs2"])
        run("Matmul", a["h2"], p["w1"], a["u"], 0)
        run("Gelu", a["u"], a["gu"])
        run("Matmul", a["gu"], p["w2"], a["mo"], 0)
        run("Add", a["x1"], a["mo"], 1.0, a["x2"])
        run("Mm", flat(a["x2"], D), p["wout"], a["lg"], 0)
        run("LogSoftmax", a["lg"], 1, a["lp"])
        run("NLLLoss", a["lp"], a["tgt"], None, 1, -100, a["loss"], a["tw"])
        # ---- backward
        run("NLLLossBackward", a["one"], a["lp"], a["tgt"], None, 1, -100, a["tw"], a["dlp"])
        run("LogSoftmaxBackward", a["dlp"], a["lp"], 1, a["dlg"])
        run("Mm", self.T2(a["x2"], N, D), a["dlg"], g["wout"], 0)
        run("Mm", a["dlg"], self.T2(p["wout"], D, V), flat(a["dx2"], D), 0)
        run("Mm", self.T2(a["gu"], N, F), flat(a["dx2"], D), g["w2"], 0)
        run("Mm", flat(a["dx2"], D), self.T2(p["w2"], F, D), flat(a["dgu"], F), 0)
        run("GeluBackward", a["dgu"], a["u"], a["du"])
        run("Mm", self.T2(a["h2"], N, D), flat(a["du"], F), g["w1"], 0)
        run("Mm", flat(a["du"], F), self.T2(p["w1"], D, F), flat(a["dh2"], D), 0)
        run(
            "LayerNormBackward",
            a["dh2"],
            a["x1"],
            [D],
            a["mu2"],
            a["rs2"],
            p["g2"],
            p["b2"],
            [True, True, True],
            a["lnx"],
            g["g2"],
            g["b2"],
        )
        run("Add", a["dx2"], a["lnx"], 1.0, a["dx1"])
        run("Mm", self.T2(a["at"], N, D), flat(a["dx1"], D), g["wo"], 0)
        run("Mm", flat(a["dx1"], D), self.T2(p["wo"], D, D), flat(a["dat"], D), 0)
        run("BatchMatMul", a["dat"], kT(a["vv"]), a["dpr"], 0)
        run("BatchMatMul", sT(a["pr"]), a["dat"], a["dvv"], 0)
        run("SoftmaxBackward", a["dpr"], a["pr"], -1, a["dsc"])
        run("InplaceMuls", a["dsc"], 1 / np.sqrt(D))
        run("BatchMatMul", a["dsc"], a["k"], a["dq"], 0)
        run("BatchMatMul", sT(a["dsc"]), a["q"], a["dk"], 0)
        for w, d in (("wq", "dq"), ("wk", "dk"), ("wv", "dvv")):
            run("Mm", self.T2(a["h1"], N, D), flat(a[d], D), g[w], 0)
        run("Mm", flat(a["dq"], D), self.T2(p["wq"], D, D), flat(a["dh1"], D), 0)
        for w, d in (("wk", "dk"), ("wv", "dvv")):
            run("Mm", flat(a[d], D), self.T2(p[w], D, D), flat(a["tmp"], D), 0)
            run("InplaceAdd", a["dh1"], a["tmp"], 1.0)
        run(
            "LayerNormBackward",
            a["dh1"],
            a["x0"],
            [D],
            a["mu1"],
            a["rs1"],
            p["g1"],
            p["b1"],
            [True, True, True],
            a["lnx"],
            g["g1"],
            g["b1"],
        )
        run("Add", a["dx1"], a["lnx"], 1.0, a["dx0"])
        run("EmbeddingDenseBackward", a["dx0"], a["tok"], V, 2**64 - 1, False, g["emb"])
        run("ReduceSum", a["dx0"], [0], False, F32, g["pos"])
        return float(a["loss"].numpy(self.s))

    def adamw(self, t, lr=3e-2, wd=0.01, b1=0.9, b2=0.999, eps=1e-8):
        h = self.hyper
        for k, v in (
            ("b1p", b1**t),
            ("b2p", b2**t),
            ("lr", lr),
            ("wd", wd),
            ("beta1", b1),
            ("beta2", b2),
            ("eps", eps),
        ):
            h[k].upload(np.array([v], np.float32))
        for k in self.p:
            self.run(
                "ApplyAdamW",
                self.p[k],
                self.m[k],
                self.v[k],
                h["b1p"],
                h["b2p"],
                h["lr"],
                h["wd"],
                h["beta1"],
                h["beta2"],
                h["eps"],
                self.g[k],
                None,
                False,
                False,
            )


def check(acl, seed):
    """Loss vs numpy forward; gradients vs numpy finite differences."""
    params = init_params(seed)
    m = Model(acl, params, acl.stream())
    tok, tgt = batch(seed, 0)
    loss = m.step(tok, tgt)
    ref = np_forward(params, tok, tgt)
    assert abs(loss - ref) < 1e-4 * max(1, abs(ref)), (loss, ref)
    rng = np.random.default_rng(1)
    h = 1e-5
    for k in ("emb", "pos", "g1", "wq", "wk", "wv", "wo", "b2", "w1", "w2", "wout"):
        grad = m.g[k].numpy(m.s)
        for _ in range(3):
            idx = tuple(rng.integers(0, s) for s in params[k].shape)
            pp = {kk: vv.astype(np.float64) for kk, vv in params.items()}
            pp[k][idx] += h
            up = np_forward(pp, tok, tgt)
            pp[k][idx] -= 2 * h
            down = np_forward(pp, tok, tgt)
            num = (up - down) / (2 * h)
            assert abs(grad[idx] - num) < 2e-3 * max(1.0, abs(num)) + 1e-4, (k, idx, grad[idx], num)
    print("transformer gradients OK")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    acl = cs.Acl()
    if args.check:
        check(acl, args.seed)
        return 0
    m = Model(acl, init_params(args.seed), acl.stream())
    for step in range(args.steps):
        loss = m.step(*batch(args.seed, step))
        m.adamw(step + 1)
        print(f"step {step} loss {loss:.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
