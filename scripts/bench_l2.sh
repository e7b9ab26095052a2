#!/usr/bin/env bash
# L2 benchmarks, each beside its baseline in the same run: the per-call cost of a trivial aclnn op
# through the wrapper (capture off, op filtered out) beside the direct call, and the step time of
# examples/train.py under L2 statistics / tensor capture beside the uncaptured run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
lib64=$(bash scripts/sim-install.sh | tail -n 1)
exec .venv/bin/python scripts/bench_l2.py "$lib64"
