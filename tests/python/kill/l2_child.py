"""examples/train.py under LD_PRELOAD=libmsprobe.so (L2), reporting each kernel launch once its
hooked call returned: `{step} Aclnn.{op}.{n}.forward` appended to the side file (argv[1]), one
write(2) per line. The record names follow the interposer's: per-op counters from 0, reset at
each step boundary when MSPROBE_STEP_LAUNCHES is set.

    python l2_child.py SIDE_FILE [train.py arguments...]
"""

import os
import runpy
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "..", "examples")
sys.path.insert(0, EXAMPLES)

import cannsim_ctypes as cs  # noqa: E402

side = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
every = int(os.environ.get("MSPROBE_STEP_LAUNCHES", "0"))
launches = 0
counts: dict[str, int] = {}
real_launch = cs.Acl.launch


def launch(self, name, *args, **kwargs):
    global launches
    st = real_launch(self, name, *args, **kwargs)
    step = launches // every if every else 0
    if every and launches % every == 0:
        counts.clear()
    n = counts.get(name, 0)
    counts[name] = n + 1
    launches += 1
    os.write(side, f"{step} Aclnn.{name}.{n}.forward\n".encode())
    return st


cs.Acl.launch = launch
sys.argv = [os.path.join(EXAMPLES, "train.py")] + sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
