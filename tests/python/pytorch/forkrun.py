"""Runs driver scripts in forked children of one process that has already imported torch, so
each case gets a fresh recorder (one per process) without paying torch's import again.

usage: python forkrun.py JOBS.json   (a list of {"script", "argv", "cwd", "log", "env"}; 2 at a time)
"""

from __future__ import annotations

import json
import os
import runpy
import sys

import torch  # noqa: F401  (the point: imported once, before the forks)
import torch.nn.functional  # noqa: F401

torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)  # imports torch._dynamo (4 s) once


def child(job: dict) -> None:
    fd = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.chdir(job["cwd"])
    os.environ.update(job.get("env", {}))
    sys.argv = [job["script"]] + job["argv"]
    code = 0
    try:
        runpy.run_path(job["script"], run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    native = sys.modules.get("msprobe._native")
    if native is not None:
        native.lib.msprobe_finish()  # what the recorder's exit hook does
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skips interpreter teardown (~2 s with torch loaded)


def main() -> int:
    jobs = json.load(open(sys.argv[1]))
    parallel = int(os.environ.get("FORKRUN_JOBS", "2"))
    running: dict[int, dict] = {}
    failed = []
    queue = list(jobs)
    while queue or running:
        while queue and len(running) < parallel:
            job = queue.pop(0)
            pid = os.fork()
            if pid == 0:
                child(job)
            running[pid] = job
        pid, status = os.wait()
        job = running.pop(pid)
        if os.waitstatus_to_exitcode(status) != 0:
            failed.append(job["log"])
    print(json.dumps({"failed": failed}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
