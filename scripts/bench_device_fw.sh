#!/usr/bin/env bash
# Device cost of the framework layer's statistics (issue #21): torch_npu GPT example at L1 statistics,
# the size hybrid (default) vs device reductions of every tensor vs copies, exact counters from the simulator
# and the estimated 910B-class step time of scripts/bench_device.py's model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
lib64=$(bash scripts/sim-install.sh | tail -n 1)
exec .venv/bin/python scripts/bench_device_fw.py "$lib64"
