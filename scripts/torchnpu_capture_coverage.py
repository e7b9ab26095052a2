"""How much of the simulator's ground-truth trace an L2 capture holds (issue #19 measurement).

    python scripts/torchnpu_capture_coverage.py TRACE.jsonl DUMP_RANK_DIR

For every traced launch (in order, per op), looks for the record `<Kind>.<Op>.<n>.forward` in the dump
(MSPROBE_SUMMARY_MODE=md5) and compares the input/output CRCs with the trace's `crc_view_*`. Prints a
JSON summary: launches, captured, CRC mismatches, and the missed launches by op.
"""

import collections
import json
import sys
from pathlib import Path


def md5_of(tensor: dict, when: str) -> str:
    """What msprobe's `md5` holds for a trace tensor: the CRC of its elements, of their float32 conversion
    for bfloat16 (msprobe 1.1.1 hashes bf16 as float32)."""
    return tensor.get(f"crc_f32_view_{when}") or tensor[f"crc_view_{when}"]


def record_of(op):
    if op.startswith("aclnn"):
        return "Aclnn", op[len("aclnn") :]
    if op.startswith("aclop"):
        return "Aclop", op.split(":", 1)[1]
    return "Hccl", op[len("Hccl") :]


def leaves(v):
    if isinstance(v, list):
        return [x for i in v for x in leaves(i)]
    if isinstance(v, dict):
        if str(v.get("type", "")).endswith(".Tensor"):
            return [v]
        return [] if "type" in v else [x for i in v.values() for x in leaves(i)]
    return []


def main():
    trace = [json.loads(line) for line in Path(sys.argv[1]).read_text().splitlines()]
    data = json.loads((Path(sys.argv[2]) / "dump.json").read_text())["data"]
    seen, missed, bad = collections.Counter(), collections.Counter(), collections.Counter()
    captured = 0
    for t in trace:
        key = record_of(t["op"])
        name = f"{key[0]}.{key[1]}.{seen[key]}.forward"
        seen[key] += 1
        rec = data.get(name)
        if rec is None:
            missed[t["op"]] += 1
            continue
        captured += 1
        want = [md5_of(x, "before") for x in t["tensors"] if x["role"] in ("input", "inout")]
        want += [md5_of(x, "after") for x in t["tensors"] if x["role"] in ("output", "inout")]
        got = [x.get("md5") for x in leaves(rec.get("input_args", []))]
        got += [x.get("md5") for x in leaves(rec.get("output", []))]
        if got != want:
            bad[t["op"]] += 1
    out = {
        "launches": len(trace),
        "captured": captured,
        "crc_mismatches": sum(bad.values()),
        "records_in_dump": len(data),
        "missed_by_op": dict(missed.most_common()),
        "mismatch_by_op": dict(bad.most_common()),
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
