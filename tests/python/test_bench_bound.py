"""The cost model's lower bound for any device design (`scripts/bench_device.py::stage_points`) against
brute force: on random small launch traces, the fewest points (between launches) at which the tool must
read pending tensors so that each tensor is read after the launch that makes it (inputs: before their own
launch) and before the first launch that writes over its bytes. The greedy count plus the final point
must equal the exhaustive minimum, or the README's "≥ 1.55×" would not be a bound.
"""

from __future__ import annotations

import itertools
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from bench_device import stage_points  # noqa: E402

SLOTS = 4
SIZE = 16


def tensor(role: str, slot: int) -> dict:
    return {"role": role, "span_addr": hex(0x1000 + SIZE * slot), "bytes": SIZE}


def random_trace(rng: random.Random) -> list[dict]:
    launches = []
    for _ in range(rng.randint(1, 8)):
        ts = [tensor("input", rng.randrange(SLOTS)) for _ in range(rng.randint(0, 2))]
        ts.append(tensor(rng.choice(["output", "output", "inout"]), rng.randrange(SLOTS)))
        launches.append({"tensors": ts})
    # a last output nothing overwrites: the final point is always needed
    launches.append({"tensors": [{"role": "output", "span_addr": hex(0x9000), "bytes": SIZE}]})
    return launches


def minimum(launches: list[dict]) -> int:
    """Exhaustive: point j lies just before launch j (j = len = after the last one)."""
    n = len(launches)

    def writes(j: int, addr: str) -> bool:
        return any(t["span_addr"] == addr and t["role"] in ("output", "inout") for t in launches[j]["tensors"])

    def first_write(start: int, addr: str) -> int:
        return next((j for j in range(start, n) if writes(j, addr)), n)

    intervals = []
    for k, x in enumerate(launches):
        for t in x["tensors"]:
            if t["role"] in ("input", "inout"):  # read before launch k, overwritten at the earliest by k itself
                intervals.append((k, first_write(k, t["span_addr"])))
            if t["role"] in ("output", "inout"):  # made by launch k
                intervals.append((k + 1, first_write(k + 1, t["span_addr"])))
    for size in range(n + 2):
        for pts in itertools.combinations(range(n + 1), size):
            if all(any(a <= p <= b for p in pts) for a, b in intervals):
                return size
    raise AssertionError("unreachable")


def test_greedy_stage_points_are_the_minimum(tmp_path: Path) -> None:
    rng = random.Random(21)
    path = tmp_path / "trace.jsonl"
    forced = 0
    for _ in range(300):
        launches = random_trace(rng)
        path.write_text("".join(json.dumps(x) + "\n" for x in launches))
        got = stage_points(path)
        assert got + 1 == minimum(launches), launches
        forced += got
    assert forced > 100  # the traces do force stage points
