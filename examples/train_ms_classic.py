#!/usr/bin/env python3
"""A classic-API MindSpore training job with no msprobe code: a LeNet / ResNet-block style CNN.

    python examples/train_ms_classic.py [--mode graph|pynative] [--device Ascend|CPU] [--steps N]
                                        [--opt momentum|adam] [--api cell|model] [--dropout P] [--net cnn|attn]

nn.Conv2d, nn.BatchNorm2d, nn.ReLU, nn.MaxPool2d, a residual block, nn.Flatten, nn.Dense, nn.Dropout,
nn.SoftmaxCrossEntropyWithLogits (sparse, mean), nn.Momentum or nn.Adam, trained with nn.TrainOneStepCell
(--api cell) or mindspore.train.Model.train (--api model, dataset_sink_mode=False). --mode graph runs in
GRAPH_MODE with jit_level O0 (kernel by kernel), --mode pynative op by op. These classic ops take MindSpore
2.10's aclop (GE-IR) path on Ascend for many of them (see simulator/README.md). Prints `step <i> loss <value>`
per step (9 significant digits), then `done`.
"""

import argparse

import numpy as np

import mindspore as ms
from mindspore import Tensor, nn, ops

N, C, H, W, CLASSES = 8, 3, 12, 12, 10


class ResBlock(nn.Cell):
    def __init__(self, ch):
        super().__init__()
        self.conv1 = nn.Conv2d(ch, ch, 3, pad_mode="same", has_bias=False)
        self.bn1 = nn.BatchNorm2d(ch)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(ch, ch, 3, pad_mode="same", has_bias=False)
        self.bn2 = nn.BatchNorm2d(ch)

    def construct(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + x)


class Net(nn.Cell):
    def __init__(self, dropout):
        super().__init__()
        self.conv = nn.Conv2d(C, 8, 3, pad_mode="pad", padding=1, has_bias=True)
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.block = ResBlock(8)
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.flatten = nn.Flatten()
        self.fc1 = nn.Dense(8 * (H // 2) * (W // 2), 32)
        self.drop = nn.Dropout(p=dropout)
        self.fc2 = nn.Dense(32, CLASSES)

    def construct(self, x):
        x = self.pool(self.block(self.relu(self.bn(self.conv(x)))))
        return self.fc2(self.drop(self.relu(self.fc1(self.flatten(x)))))


class AttnNet(nn.Cell):
    """--net attn: nn.LayerNorm, nn.Dense, nn.GELU, nn.Tanh, nn.Sigmoid, ops.BatchMatMul, ops.Softmax, ops.Transpose,
    ops.Tile, nn.AvgPool2d, nn.LogSoftmax and ops.ReduceMean over [N, 8, 16] sequences, with a Dense head."""

    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm((16,))
        self.fc = nn.Dense(16, 16)
        # the exact form (decomposed with Erf) and the default tanh form (one Gelu kernel, CANN's tanh form)
        self.gelu, self.gelu_tanh = nn.GELU(approximate=False), nn.GELU()
        self.tanh, self.sig = nn.Tanh(), nn.Sigmoid()
        self.bmm = ops.BatchMatMul(transpose_b=True)
        self.softmax = ops.Softmax(-1)
        self.logsoftmax = nn.LogSoftmax(-1)
        self.transpose, self.tile = ops.Transpose(), ops.Tile()
        self.mean = ops.ReduceMean(keep_dims=False)
        self.pool = nn.AvgPool2d(2, 2)
        self.head = nn.Dense(16 + 64, CLASSES)

    def construct(self, x):
        h = self.ln(x)
        h = self.gelu(self.fc(h)) + self.gelu_tanh(h) + self.tanh(h) + self.sig(h)
        h = ops.matmul(self.softmax(self.bmm(h, h)), h)
        t = self.tile(self.transpose(h, (0, 2, 1)), (1, 1, 2))  # [N, 16, 16]
        p = self.pool(ops.expand_dims(t, 1))  # [N, 1, 8, 8]
        feat = ops.concat((self.mean(self.logsoftmax(t), 2), ops.reshape(p, (-1, 64))), 1)
        return self.head(feat)


def init_params(net, seed):
    """Deterministic weights (the same on every device), independent of MindSpore's initialisers."""
    rng = np.random.default_rng(seed)
    for p in net.trainable_params():
        if "gamma" in p.name:
            v = np.ones(p.shape, np.float32)
        elif "beta" in p.name or "bias" in p.name:
            v = np.zeros(p.shape, np.float32)
        else:
            fan_in = int(np.prod(p.shape[1:]))
            v = rng.standard_normal(p.shape).astype(np.float32) / np.sqrt(fan_in)
        p.set_data(Tensor(v))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["graph", "pynative"], default="graph")
    ap.add_argument("--device", default="Ascend")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--opt", choices=["momentum", "adam"], default="momentum")
    ap.add_argument("--api", choices=["cell", "model"], default="cell")
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--net", choices=["cnn", "attn"], default="cnn")
    a = ap.parse_args()
    if a.mode == "graph":
        ms.set_context(mode=ms.GRAPH_MODE, jit_config={"jit_level": "O0"})
    else:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_device(a.device)
    ms.set_seed(a.seed)

    net = Net(a.dropout) if a.net == "cnn" else AttnNet()
    init_params(net, a.seed)
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    if a.opt == "momentum":
        opt = nn.Momentum(net.trainable_params(), learning_rate=0.05, momentum=0.9)
    else:
        opt = nn.Adam(net.trainable_params(), learning_rate=0.01)

    rng = np.random.default_rng(a.seed + 1)
    shape = (a.steps, N, C, H, W) if a.net == "cnn" else (a.steps, N, 8, 16)
    xs = rng.standard_normal(shape).astype(np.float32)
    ys = rng.integers(0, CLASSES, (a.steps, N)).astype(np.int32)

    if a.api == "cell":
        step = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), opt)
        step.set_train()
        for i in range(a.steps):
            loss = step(Tensor(xs[i]), Tensor(ys[i]))
            print(f"step {i} loss {float(loss.asnumpy()):.9g}", flush=True)
    else:
        from mindspore.dataset import GeneratorDataset
        from mindspore.train import Callback, Model

        class PrintLoss(Callback):
            def on_train_step_end(self, run_context):
                cb = run_context.original_args()
                loss = cb.net_outputs
                loss = loss[0] if isinstance(loss, (tuple, list)) else loss
                print(f"step {cb.cur_step_num - 1} loss {float(loss.asnumpy()):.9g}", flush=True)

        ds = GeneratorDataset(lambda: ((xs[i], ys[i]) for i in range(a.steps)), ["x", "y"], shuffle=False)
        Model(net, loss_fn, opt).train(1, ds, callbacks=[PrintLoss()], dataset_sink_mode=False)
    print("done", flush=True)


if __name__ == "__main__":
    main()
