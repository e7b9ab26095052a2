#!/usr/bin/env python3
"""Train a small MLP on the simulated CANN through ctypes only (dlopen + dlsym, like real frameworks).

    python examples/train.py [--steps N] [--ranks N] [--seed S] [--dtype float32|float16|bfloat16]

Every op goes through aclnnXxxGetWorkspaceSize + aclnnXxx on one stream; with --ranks N > 1 the script
spawns N worker processes (RANK_ID=r) that train data-parallel, averaging gradients with HcclAllReduce.
Rank 0 prints `step <i> loss <value>` (the global mean loss) for every step.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cannsim_ctypes as cs  # noqa: E402

IN, HID, OUT, BATCH = 32, 64, 10, 64


def make_data(seed, steps):
    """Synthetic teacher-labelled data; step i's batch depends only on (seed, i)."""
    rng = np.random.default_rng(seed)
    teacher = rng.standard_normal((IN, OUT)).astype(np.float32)
    w1 = (rng.standard_normal((IN, HID)) * np.sqrt(2.0 / IN)).astype(np.float32)
    w2 = (rng.standard_normal((HID, OUT)) * np.sqrt(1.0 / HID)).astype(np.float32)
    xs = np.stack(
        [np.random.default_rng([seed, i]).standard_normal((BATCH, IN)).astype(np.float32) for i in range(steps)]
    )
    ys = np.argmax(xs @ teacher, axis=-1).astype(np.int64)
    return xs, ys, w1, w2


def train(args, rank, nranks, root_info=None):
    acl = cs.Acl(device=rank % 8)
    dt = cs.DTYPE_NAMES[args.dtype]
    stream = acl.stream()
    comm = acl.hccl_init(nranks, root_info, rank) if nranks > 1 else None
    xs, ys, w1_0, w2_0 = make_data(args.seed, args.steps)
    lb = BATCH // nranks  # local batch

    def T(data=None, shape=None, dtype=dt):
        return acl.tensor(data, shape, dtype)

    W1, b1, W2, b2 = T(w1_0), T(np.zeros(HID, np.float32)), T(w2_0), T(np.zeros(OUT, np.float32))
    params = [W1, b1, W2, b2]
    X, Y = T(shape=(lb, IN)), T(shape=(lb,), dtype=cs.ACL_INT64)
    H, A, Z, LP = T(shape=(lb, HID)), T(shape=(lb, HID)), T(shape=(lb, OUT)), T(shape=(lb, OUT))
    loss, tw, gl = T(shape=()), T(shape=()), T(np.ones((), np.float32))
    dLP, dZ, dA, dH = T(shape=(lb, OUT)), T(shape=(lb, OUT)), T(shape=(lb, HID)), T(shape=(lb, HID))
    grads = [T(shape=p.shape) for p in params]
    dW1, db1, dW2, db2 = grads
    # transposed views (strided aclTensors over the same device memory)
    XT = acl.create_tensor((IN, lb), dt, X.ptr, strides=(1, IN))
    AT = acl.create_tensor((HID, lb), dt, A.ptr, strides=(1, HID))
    W2T = acl.create_tensor((OUT, HID), dt, W2.ptr, strides=(1, OUT))
    hd = cs.ACL2HCCL[dt]
    for step in range(args.steps):
        X.upload(xs[step, rank * lb : (rank + 1) * lb])
        Y.upload(ys[step, rank * lb : (rank + 1) * lb])

        def run(name, *a):
            return acl.run(name, *a, stream=stream)

        # forward
        run("Mm", X, W1, H, 0)
        run("InplaceAdd", H, b1, 1.0)
        run("Relu", H, A)
        run("Matmul", A, W2, Z, 0)
        run("Add", Z, b2, 1.0, Z)
        run("LogSoftmax", Z, 1, LP)
        run("NLLLoss", LP, Y, None, 1, -100, loss, tw)
        # backward
        run("NLLLossBackward", gl, LP, Y, None, 1, -100, tw, dLP)
        run("LogSoftmaxBackward", dLP, LP, 1, dZ)
        run("Mm", AT, dZ, dW2, 0)
        run("ReduceSum", dZ, [0], False, dt, db2)
        run("Mm", dZ, W2T, dA, 0)
        run("ThresholdBackward", dA, H, 0.0, dH)
        run("Mm", XT, dH, dW1, 0)
        run("ReduceSum", dH, [0], False, dt, db1)
        if comm is not None:
            for g in grads + [loss]:
                acl.allreduce(g.ptr, g.ptr, g.numel, hd, cs.HCCL_SUM, comm, stream)
            for g in grads + [loss]:
                run("InplaceMuls", g, 1.0 / nranks)
        # SGD
        for p, g in zip(params, grads):
            run("InplaceAdd", p, g, -args.lr)
        value = float(loss.numpy(stream))  # synchronizes the stream first
        if rank == 0:
            print(f"step {step} loss {value:.6f}", flush=True)
    acl.sync(stream)
    if comm is not None:
        acl.hccl_call("HcclCommDestroy", [cs.VP], comm)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--dtype", default="float32", choices=sorted(cs.DTYPE_NAMES))
    ap.add_argument("--rank", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--root-info-file", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if BATCH % args.ranks:
        ap.error(f"--ranks must divide the batch size {BATCH}")
    if args.rank is not None:  # worker
        with open(args.root_info_file, "rb") as f:
            root = f.read()
        return train(args, args.rank, args.ranks, root)
    if args.ranks == 1:
        return train(args, 0, 1)
    acl = cs.Acl(init=False)
    with tempfile.NamedTemporaryFile(prefix="cannsim-root-", delete=False) as f:
        f.write(acl.hccl_root_info())
        path = f.name
    try:
        procs = []
        for r in range(args.ranks):
            env = dict(os.environ, RANK_ID=str(r))
            cmd = [
                sys.executable,
                os.path.abspath(__file__),
                "--rank",
                str(r),
                "--root-info-file",
                path,
                "--ranks",
                str(args.ranks),
                "--steps",
                str(args.steps),
                "--seed",
                str(args.seed),
                "--lr",
                str(args.lr),
                "--dtype",
                args.dtype,
            ]
            procs.append(subprocess.Popen(cmd, env=env))
        codes = [p.wait() for p in procs]
    finally:
        os.unlink(path)
    if any(codes):
        print(f"worker exit codes: {codes}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
