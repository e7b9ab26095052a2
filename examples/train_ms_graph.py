#!/usr/bin/env python3
"""A small MindSpore training job with no msprobe code: MLP (mint.nn.Linear, ReLU), softmax cross-entropy, AdamW.

    python examples/train_ms_graph.py [--mode graph|pynative] [--device Ascend|CPU] [--steps N] [--seed S]
    msrun --worker_num=2 --local_worker_num=2 examples/train_ms_graph.py --dp   # data parallel over HCCL

--mode graph (default) runs the train step under ms.jit in GRAPH_MODE with jit_level O0 (kernel by kernel);
--mode pynative runs it op by op. Every op used has an aclnn kernel on Ascend (and a CPU kernel, so the same
script runs with --device CPU for reference). The cross-entropy is written with mint.softmax / log / mul /
sum / mean because mint.nn.functional.cross_entropy has no CPU kernel in MindSpore 2.10.
With --dp (under msrun) every rank trains on its own batch and the gradients are averaged with AllReduce
(nn.DistributedGradReducer). Prints `step <i> loss <value>` per step (with --dp: `rank <r> step <i> ...`;
the loss to 9 significant digits), then `done`.
"""

import argparse

import numpy as np

import mindspore as ms
from mindspore import Tensor, mint, nn

IN, HID, OUT, BATCH = 16, 32, 4, 8


class MLP(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = mint.nn.Linear(IN, HID)
        self.relu = mint.nn.ReLU()
        self.fc2 = mint.nn.Linear(HID, OUT)

    def construct(self, x):
        return self.fc2(self.relu(self.fc1(x)))


def softmax_cross_entropy(logits, onehot):
    logp = mint.log(mint.nn.functional.softmax(logits, dim=-1))
    return mint.mean(mint.sum(mint.mul(logp, onehot), dim=-1)) * -1.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["graph", "pynative"], default="graph")
    ap.add_argument("--device", default="Ascend")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dp", action="store_true", help="data parallel (run under msrun)")
    a = ap.parse_args()
    if a.mode == "graph":
        ms.set_context(mode=ms.GRAPH_MODE, jit_config={"jit_level": "O0"})
    else:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_device(a.device)
    rank, prefix = 0, ""
    if a.dp:
        from mindspore.communication import get_group_size, get_rank, init

        init()
        rank, prefix = get_rank(), f"rank {get_rank()} "
        ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)

    rng = np.random.default_rng(a.seed)
    net = MLP()
    for p in net.trainable_params():  # deterministic init, identical on every device
        p.set_data(Tensor((rng.standard_normal(p.shape) * 0.3).astype(np.float32)))
    opt = mint.optim.SGD(net.trainable_params(), lr=0.05)

    def forward(x, y):
        return softmax_cross_entropy(net(x), y)

    grad_fn = ms.value_and_grad(forward, None, opt.parameters)
    reducer = nn.DistributedGradReducer(opt.parameters, mean=True, degree=get_group_size()) if a.dp else None

    def train_step(x, y):
        loss, grads = grad_fn(x, y)
        if reducer is not None:
            grads = reducer(grads)
        opt(grads)
        return loss

    if a.mode == "graph":
        train_step = ms.jit(train_step)
    teacher = rng.standard_normal((IN, OUT)).astype(np.float32)
    data_rng = np.random.default_rng([a.seed, rank])
    for i in range(a.steps):
        x = data_rng.standard_normal((BATCH, IN)).astype(np.float32)
        y = np.eye(OUT, dtype=np.float32)[np.argmax(x @ teacher, axis=1)]
        loss = train_step(Tensor(x), Tensor(y))
        print(f"{prefix}step {i} loss {float(loss.asnumpy()):.9g}", flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main()
