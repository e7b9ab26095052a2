"""(msprobe-rs copy, adapted: --summary md5|statistics, --launch_blocking; runs with msprobe-rs or msprobe 1.1.1 on PYTHONPATH.)
Run one msprobe dump case on MindSpore 2.10 CPU (PyNative by default, GRAPH_MODE with --mode graph).

Produced every case under msprobe-1.1.1-mindspore/ and msprobe-26.2.0-mindspore/ (the 26.2.0 runs used an identical
copy of this script named ms_msprobe26_case.py, which is the name their stack.json shows).

usage: python ms_msprobe_case.py <case_name> <task: statistics|tensor|none> <level: L0|L1|mix|L2> --out <base dir>
                                 [--shim] [--shim_norm] [--steps N] [--mode pynative|graph] [--cfg_dir cfgs]
  The dump goes to <base dir>/<case_name>; the config is written to <cfg_dir>/<case_name>.json.
  --shim       msprobe 1.1.1 only: restore the name mindspore.common.api._MindsporeFunctionExecutor, which
               MindSpore 2.10 no longer has (msprobe 1.1.1 fails at import without it).
  --shim_norm  both msprobe versions: msprobe's statistics call mint.norm, whose kernel (LinalgVectorNorm) is not
               registered on CPU in MindSpore 2.10; replace it by ops.norm.
"""
import sys, os, json, time, argparse
ap = argparse.ArgumentParser()
ap.add_argument("case"); ap.add_argument("task"); ap.add_argument("level")
ap.add_argument("--shim", action="store_true"); ap.add_argument("--shim_norm", action="store_true"); ap.add_argument("--steps", type=int, default=3)
ap.add_argument("--out", required=True)
ap.add_argument("--mode", default="pynative")
ap.add_argument("--cfg_dir", default="cfgs")
ap.add_argument("--summary", default="statistics")
ap.add_argument("--launch_blocking", action="store_true")  # no-dump baseline of msprobe-rs (which turns it on)
a = ap.parse_args()
import numpy as np
import mindspore as ms
from mindspore import nn, ops, Tensor, mint
ms.set_context(mode=ms.PYNATIVE_MODE if a.mode == "pynative" else ms.GRAPH_MODE)
ms.set_device("CPU")
if a.launch_blocking:
    ms.runtime.launch_blocking()
if a.shim:
    import mindspore.common.api as _capi, mindspore.graph.api as _gapi
    _capi._MindsporeFunctionExecutor = _gapi._JitExecutor   # removed name in MS>=2.7 (moved to mindspore.graph.api._JitExecutor)
if a.shim_norm:
    mint.norm = ops.norm   # msprobe stats use mint.norm -> LinalgVectorNorm kernel, which has no CPU kernel in MS 2.10
ms.set_seed(0); np.random.seed(0)

class Block(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(8, 16)
        self.relu = nn.ReLU()
        self.add = ops.Add()          # a Primitive owned by the Cell (Cell._primitives)
        self.fc2 = nn.Dense(16, 4)
    def construct(self, x):
        h = self.relu(self.fc1(x))
        h = self.add(h, ops.sigmoid(h))     # Primitive + ops functional
        h = mint.nn.functional.silu(h)      # mint.nn.functional (gelu has no CPU kernel)
        h = mint.mul(h, 0.5)                # mint op
        h = h.clamp(-5.0, 5.0)              # Tensor method
        return self.fc2(h)

net = Block()
loss_fn = nn.MSELoss()
opt = nn.SGD(net.trainable_params(), learning_rate=0.1)
def forward(x, y): return loss_fn(net(x), y)
grad_fn = ms.value_and_grad(forward, None, opt.parameters)
def train_step(x, y):
    loss, grads = grad_fn(x, y)
    opt(grads)
    return loss
if a.mode == "graph":
    train_step = ms.jit(train_step)
x = Tensor(np.random.randn(4, 8).astype(np.float32)); y = Tensor(np.random.randn(4, 4).astype(np.float32))

dbg = None
if a.task != "none":
    cfg = {"task": a.task, "dump_path": os.path.join(a.out, a.case), "rank": [], "step": [], "level": a.level,
           "enable_dataloader": False,
           "tensor": {"scope": [], "list": [], "data_mode": ["all"], "file_format": "npy"},
           "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": a.summary}}
    os.makedirs(a.cfg_dir, exist_ok=True)
    cp = os.path.join(a.cfg_dir, f"{a.case}.json"); json.dump(cfg, open(cp, "w"), indent=1)
    t0 = time.time()
    from msprobe.mindspore import PrecisionDebugger
    dbg = PrecisionDebugger(config_path=cp)
    print(f"[case] import+init msprobe {time.time()-t0:.3f}s")
times = []
for i in range(a.steps):
    t = time.time()
    if dbg: dbg.start(model=net)
    loss = train_step(x, y)
    if dbg: dbg.stop(); dbg.step()
    times.append(time.time() - t)
    print(f"[case] step {i} loss {float(loss.asnumpy()):.5f} time {times[-1]:.4f}s")
print(f"[case] RESULT {a.case} ok mean_step_after_first={np.mean(times[1:]):.4f}s first={times[0]:.4f}s")
