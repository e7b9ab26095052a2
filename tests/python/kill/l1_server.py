"""A fork server for the L1 kill tests: imports PyTorch and msprobe.pytorch once, then for each
job (a JSON line on stdin) forks a child that records an L1 run with the PyTorch layer, prints
`pid PID`, waits for it and prints `exit PID STATUS` (os.waitpid's status).

The child reports each API call once it returned (`{step} {record name}` appended to the side
file, one write(2) per line). A child ends as the interpreter would: a KeyboardInterrupt runs
the exit hooks (what `Py_AtExit` runs in a real interpreter: the recorder's finish) and then
ends the process by SIGINT, as CPython does.
"""

import json
import os
import resource
import signal
import sys

import torch
import torch.nn.functional as F

from msprobe import _native as native
from msprobe.pytorch import PrecisionDebugger

torch.set_num_threads(1)


def run(job: dict) -> None:
    side = os.open(job["side"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    dbg = PrecisionDebugger(task=job["task"], level="L1", dump_path=job["dump"])
    x = torch.randn(4, 8)
    w = torch.randn(8, 8)
    calls = [
        ("Torch.add", lambda: torch.add(x, 1)),
        ("Functional.relu", lambda: F.relu(x)),
        ("Torch.matmul", lambda: torch.matmul(x, w)),
        ("Tensor.mul", lambda: x.mul(2)),
    ]
    for step in range(job.get("steps", 1_000_000)):
        dbg.start()
        counts: dict[str, int] = {}
        for _ in range(job.get("per_step", 5)):
            for api, call in calls:
                call()
                n = counts.get(api, 0)
                counts[api] = n + 1
                os.write(side, f"{step} {api}.{n}.forward\n".encode())
        dbg.stop()
        dbg.step()


def child(job: dict) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    code = 0
    interrupted = False
    try:
        run(job)
    except KeyboardInterrupt:
        interrupted = True
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    native.lib.msprobe_finish()  # the interpreter's exit hook (Py_AtExit in a real process)
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server itself is not a target
    for line in sys.stdin:
        job = json.loads(line)
        log = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        pid = os.fork()
        if pid == 0:
            os.dup2(log, 1)
            os.dup2(log, 2)
            child(job)
        os.close(log)
        print(f"pid {pid}", flush=True)
        _, status = os.waitpid(pid, 0)
        print(f"exit {pid} {status}", flush=True)


if __name__ == "__main__":
    main()
