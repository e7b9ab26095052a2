#!/usr/bin/env bash
# Device cost model of L2 capture (issue #21): exact counters from the simulator for the uncaptured run
# and each capture design, and an estimated 910B-class step time over low/mid/high constants.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
lib64=$(bash scripts/sim-install.sh | tail -n 1)
exec .venv/bin/python scripts/bench_device.py "$lib64"
