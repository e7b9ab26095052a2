"""Kill tests (issue #17): a recording process is ended by SIGKILL, SIGSEGV, SIGABRT, SIGTERM or
SIGINT at seeded random points of an L1 run (the PyTorch layer on CPU) and of an L2 run
(examples/train.py on the simulator, LD_PRELOAD), statistics and tensor task, with and without
step boundaries. The child reports each record's name once its hooked call returned (a line
appended to a side file, one write(2) each).

What must hold, for every case:
- SIGKILL, SIGSEGV, SIGABRT: after `msprobe recover DUMP` (exit 0, the journal then gone) every
  reported record is in its step's dump.json, and recover names exactly the tensor files that
  are missing;
- SIGTERM, SIGINT: without recover, the process died of the signal, the run summary was
  printed, no journal is left, every record reported before the signal was sent is in
  dump.json, and every tensor file its records name exists;
- every JSON file under the dump parses.

`KILL_POINTS` sets the points per signal (20); `KILL_MATRIX_REPORT=FILE` writes the table and
the failures as JSON and does not fail (to measure a build that fails, e.g. an older one:
CARGO_TARGET_DIR picks the binaries)."""

from __future__ import annotations

import json
import os
import queue
import random
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from recorder_testutil import CLI, LIB, REPO

HERE = Path(__file__).resolve().parent
LIB64 = Path(os.environ.get("CANNSIM_LIB64", REPO / "target" / "cann" / "latest" / "lib64"))
SIGNALS = {
    "KILL": signal.SIGKILL,
    "SEGV": signal.SIGSEGV,
    "ABRT": signal.SIGABRT,
    "TERM": signal.SIGTERM,
    "INT": signal.SIGINT,
}
POINTS = int(os.environ.get("KILL_POINTS", "20"))
# The kill comes this long (uniform, seeded) after the child's first record.
MAX_DELAY = {"L1": 0.8, "L2": 0.8}
WORKERS = 2


@dataclass
class Case:
    level: str
    sig: str
    point: int
    delay: float
    task: str
    steps: bool  # step boundaries (L1 always has them; L2: MSPROBE_STEP_LAUNCHES)
    dev: bool = False  # L2 statistics on the device (MSPROBE_L2_DEVICE_STATS=1, issue #21)


@dataclass
class Result:
    case: Case
    rc: int | None = None
    required: int = 0
    lost: list[str] = field(default_factory=list)
    invalid_json: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def cases(level: str, dev: bool = False, md5: bool = False) -> list[Case]:
    rng = random.Random(f"msprobe-kill-{level}{'-dev' if dev else ''}{'-md5' if md5 else ''}")
    out = []
    for sig in SIGNALS:
        for i in range(POINTS):
            task = "tensor" if i % 2 else ("md5" if md5 else "statistics")
            steps = level == "L1" or i % 4 >= 2
            out.append(Case(level, sig, i, rng.uniform(0.0, MAX_DELAY[level]), task, steps, dev))
    return out


def child_env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("MSPROBE_", "CANNSIM_TRACE"))}
    e.update({"PYTHONPATH": str(REPO / "python"), "MSPROBE_LIB": str(LIB)})
    return e


def as_a_fresh_process() -> None:
    """In the child before exec: SIGINT as an interactive shell leaves it (a test runner may
    ignore it), no core files."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def lines(side: Path) -> list[tuple[int, str]]:
    """The complete lines of the side file: (step, record name)."""
    try:
        text = side.read_bytes().decode()
    except FileNotFoundError:
        return []
    out = []
    for line in text.split("\n")[:-1]:
        step, name = line.split(" ", 1)
        out.append((int(step), name))
    return out


def wait_first_line(side: Path, alive, timeout: float = 60) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline and alive():
        if lines(side):
            return True
        time.sleep(0.005)
    return False


def data_names(v) -> list[str]:
    if isinstance(v, list):
        return [x for item in v for x in data_names(item)]
    if isinstance(v, dict):
        return [x for k, item in v.items() for x in ([item] if k == "data_name" else data_names(item))]
    return []


def null_stats(v) -> bool:
    """Whether a record holds a tensor leaf of at least one element whose Max is null."""
    if isinstance(v, list):
        return any(null_stats(x) for x in v)
    if isinstance(v, dict):
        if v.get("type") == "torch.Tensor" and "Max" in v:
            n = 1
            for d in v.get("shape", []):
                n *= d
            return v["Max"] is None and n > 0
        return any(null_stats(x) for x in v.values())
    return False


def md5_ok(v) -> bool:
    """Whether every tensor leaf holds an 8-hex-digit md5 (CRC-32)."""
    if isinstance(v, list):
        return all(md5_ok(x) for x in v)
    if isinstance(v, dict):
        if v.get("type") == "torch.Tensor":
            return bool(re.fullmatch(r"[0-9a-f]{8}", str(v.get("md5", ""))))
        return all(md5_ok(x) for x in v.values())
    return True


def check(res: Result, dump: Path, before: list, after: list, stderr: str) -> None:
    case = res.case
    sig = SIGNALS[case.sig]
    if res.rc != -sig:
        res.problems.append(
            f"exit status {res.rc}, not death by SIG{case.sig}" + (" (finished first)" if res.rc == 0 else "")
        )
    graceful = case.sig in ("TERM", "INT")
    missing_reported = 0
    if graceful:
        required = before
        if "run summary" not in stderr:
            res.problems.append("no run summary")
    else:
        required = after
        out = subprocess.run([str(CLI), "recover", str(dump)], capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            res.problems.append(f"recover exit {out.returncode}: {out.stdout.strip()} {out.stderr.strip()}"[:300])
        m = re.search(r"(\d+) tensor files missing", out.stdout)
        missing_reported = int(m.group(1)) if m else 0
        m = re.search(r"(\d+) records recovered from their launch-time plan", out.stdout)
        planned_reported = int(m.group(1)) if m else 0
    if list(dump.glob(".msprobe-journal-*")):
        res.problems.append("a journal is left" + ("" if graceful else " after recover"))
    for p in sorted(dump.rglob("*.json")):
        try:
            json.loads(p.read_text())
        except (ValueError, UnicodeDecodeError):
            res.invalid_json.append(str(p.relative_to(dump)))
    res.required = len(required)
    data: dict[int, dict] = {}
    for step in sorted({s for s, _ in required}):
        try:
            data[step] = json.loads((dump / f"step{step}" / "rank" / "dump.json").read_text())["data"]
        except (OSError, ValueError, KeyError):
            data[step] = {}
    res.lost = [f"step{s} {n}" for s, n in required if n not in data[s]]
    if case.level == "L2" and not graceful and case.task == "statistics":
        # A record whose statistics never completed (device reductions, or the default async
        # copies) is written from its plan with them null and counted by recover; no other record
        # may hold a null statistic of a non-empty tensor. Every step directory counts, as for recover:
        # a step that began just before the kill may hold a planned record whose line never reached
        # the side file (no required record there).
        every = []
        for f in sorted(dump.glob("step*/rank/dump.json")):
            try:
                every.append(json.loads(f.read_text())["data"])
            except (OSError, ValueError, KeyError):
                pass
        nulls = sum(1 for recs in every for rec in recs.values() if null_stats(rec))
        if nulls != planned_reported:
            res.problems.append(f"{nulls} records with null statistics, recover counted {planned_reported}")
    if case.task == "md5":
        # every tensor leaf written holds its CRC (a record completed by the copies' event); one
        # whose copies never completed is written from its plan, its tensor leaves null
        bad = [n for recs in data.values() for n, rec in recs.items() if not md5_ok(rec)]
        if bad:
            res.problems.append(f"{len(bad)} records with a tensor leaf without an md5, e.g. {bad[0]}")
    if case.task == "tensor":
        without = 0
        for step, records in data.items():
            tdir = dump / f"step{step}" / "rank" / "dump_tensor_data"
            for rec in records.values():
                without += sum(1 for f in data_names(rec) if not (tdir / f).is_file())
        if graceful and without:
            res.problems.append(f"{without} tensor files missing after the signal was handled")
        if not graceful and without > missing_reported:
            res.problems.append(f"{without} tensor files missing, recover reported {missing_reported}")


# ---- L2: examples/train.py under LD_PRELOAD ------------------------------------------------


def run_l2(case: Case, tmp: Path) -> Result:
    dump, side = tmp / "dump", tmp / "side.txt"
    env = child_env()
    env.update(
        {
            "LD_LIBRARY_PATH": str(LIB64),
            "CANNSIM_LIB64": str(LIB64),
            "LD_PRELOAD": str(LIB),
            "MSPROBE_LEVEL": "L2",
            "MSPROBE_DUMP_PATH": str(dump),
            "MSPROBE_TASK": "statistics" if case.task == "md5" else case.task,
        }
    )
    if case.task == "md5":
        env["MSPROBE_SUMMARY_MODE"] = "md5"
    if case.dev:
        env["MSPROBE_L2_DEVICE_STATS"] = "1"
        # every tensor reduced on the device (train.py's KiB tensors are all below the hybrid's threshold)
        env["MSPROBE_L2_DEVICE_STATS_MIN_BYTES"] = "0"
    if case.steps:
        env["MSPROBE_STEP_LAUNCHES"] = "190"  # ten training steps of examples/train.py
    err = open(tmp / "stderr.txt", "w+")
    p = subprocess.Popen(
        [sys.executable, str(HERE / "kill" / "l2_child.py"), str(side), "--steps", "3000"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=err,
        preexec_fn=as_a_fresh_process,
    )
    res = Result(case)
    try:
        if not wait_first_line(side, lambda: p.poll() is None):
            res.problems.append("no record reported")
        time.sleep(case.delay)
        before = lines(side)
        p.send_signal(SIGNALS[case.sig])
        res.rc = p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    err.seek(0)
    check(res, dump, before, lines(side), err.read())
    return res


# ---- L1: the PyTorch layer, children forked from a server that imported torch once ----------


class Server:
    def __init__(self) -> None:
        self.p = subprocess.Popen(
            [sys.executable, str(HERE / "kill" / "l1_server.py")],
            env=child_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=as_a_fresh_process,
        )

        # The server's lines, read by a thread: a wait for one can then time out.
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [self.lines.put(x) for x in self.p.stdout], daemon=True).start()

    def start(self, job: dict) -> int:
        self.p.stdin.write(json.dumps(job) + "\n")
        self.p.stdin.flush()
        return int(self.lines.get(timeout=120).split()[1])

    def wait(self, pid: int, timeout: float = 60) -> tuple[int, bool]:
        """The child's exit (as Popen.returncode) and whether it ended by itself within `timeout`
        seconds of the signal; a child still running then is SIGKILLed (a hang is a finding, never
        a test that waits forever)."""
        try:
            line, ended = self.lines.get(timeout=timeout), True
        except queue.Empty:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            line, ended = self.lines.get(timeout=60), False
        word, got, status = line.split()
        assert word == "exit" and int(got) == pid
        rc = -os.WTERMSIG(int(status)) if os.WIFSIGNALED(int(status)) else os.WEXITSTATUS(int(status))
        return rc, ended

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait(timeout=60)


def run_l1(case: Case, tmp: Path, server: Server) -> Result:
    dump, side, log = tmp / "dump", tmp / "side.txt", tmp / "child.log"
    pid = server.start({"dump": str(dump), "side": str(side), "log": str(log), "task": case.task, "per_step": 40})
    res = Result(case)

    def alive() -> bool:
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False

    if not wait_first_line(side, alive):
        res.problems.append("no record reported")
    time.sleep(case.delay)
    before = lines(side)
    try:
        os.kill(pid, SIGNALS[case.sig])
    except ProcessLookupError:
        pass
    res.rc, ended = server.wait(pid)
    if not ended:
        res.problems.append(f"still running 60 s after SIG{case.sig} (killed)")
    check(res, dump, before, lines(side), log.read_text(errors="replace"))
    return res


# ---- the matrix --------------------------------------------------------------------------------


def table(results: list[Result]) -> str:
    rows = ["level sig   cases  died-of-it  records-required  lost  invalid-json  other-problems"]
    for level in ("L1", "L2"):
        for sig in SIGNALS:
            rs = [r for r in results if r.case.level == level and r.case.sig == sig]
            if not rs:
                continue
            died = sum(1 for r in rs if r.rc == -SIGNALS[sig])
            rows.append(
                f"{level:5} {sig:5} {len(rs):5}  {died:10}  {sum(r.required for r in rs):16}  "
                f"{sum(len(r.lost) for r in rs):4}  {sum(len(r.invalid_json) for r in rs):12}  "
                f"{sum(1 for r in rs if r.problems):14}"
            )
    return "\n".join(rows)


def run_matrix(level: str, tmp: Path, dev: bool = False, md5: bool = False) -> list[Result]:
    todo = cases(level, dev, md5)
    results: list[Result] = []
    lock = threading.Lock()

    def worker(k: int) -> None:
        server = Server() if level == "L1" else None
        try:
            while True:
                with lock:
                    if not todo:
                        return
                    case = todo.pop(0)
                d = tmp / f"{case.sig}-{case.point}"
                d.mkdir()
                r = run_l1(case, d, server) if server else run_l2(case, d)
                with lock:
                    results.append(r)
        finally:
            if server:
                server.close()

    with ThreadPoolExecutor(WORKERS) as ex:
        list(ex.map(worker, range(WORKERS)))
    return sorted(results, key=lambda r: (list(SIGNALS).index(r.case.sig), r.case.point))


def report_or_assert(level: str, results: list[Result]) -> None:
    text = table(results)
    print(f"\nkill matrix {level}:\n{text}")
    failures = [
        {
            "case": f"{r.case.level} SIG{r.case.sig} point {r.case.point} (delay {r.case.delay:.3f} s, {r.case.task}"
            f"{', steps' if r.case.steps else ''})",
            "lost": r.lost[:5],
            "lost_count": len(r.lost),
            "invalid_json": r.invalid_json[:5],
            "problems": r.problems,
        }
        for r in results
        if r.lost or r.invalid_json or r.problems
    ]
    report = os.environ.get("KILL_MATRIX_REPORT")
    if report:
        path = Path(f"{report}.{level}.json")
        path.write_text(json.dumps({"table": text, "failures": failures}, indent=1))
        return
    assert not failures, f"{len(failures)} of {len(results)} cases failed:\n{text}\n" + json.dumps(
        failures[:10], indent=1
    )


@pytest.mark.skipif(not (LIB64 / "libascendcl.so").exists(), reason="the simulator is not installed")
def test_kill_matrix_l2(tmp_path: Path) -> None:
    report_or_assert("L2", run_matrix("L2", tmp_path))


@pytest.mark.skipif(not (LIB64 / "libascendcl.so").exists(), reason="the simulator is not installed")
def test_kill_matrix_l2_device_stats(tmp_path: Path) -> None:
    """The device paths of issue #21 (statistics reduced on the device; tensor bytes copied
    asynchronously): each record is journaled in planned form at the launch, so a kill while its
    results are in flight loses nothing (written null, counted)."""
    report_or_assert("L2-device", run_matrix("L2", tmp_path, dev=True))


@pytest.mark.skipif(not (LIB64 / "libascendcl.so").exists(), reason="the simulator is not installed")
def test_kill_matrix_l2_async_md5(tmp_path: Path) -> None:
    """md5 and tensor tasks on the default async-copy path (MSPROBE_L2_ASYNC_COPY unset): every
    record is journaled in planned form at the launch, so a kill while its copies are in flight
    loses no record (recover writes it from its plan)."""
    report_or_assert("L2-async-md5", run_matrix("L2", tmp_path, md5=True))


def test_kill_matrix_l1(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    report_or_assert("L1", run_matrix("L1", tmp_path))
