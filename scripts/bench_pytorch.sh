#!/usr/bin/env bash
# msprobe-rs beside msprobe 1.1.1 (same driver, config, machine; runs interleaved): per-record
# overhead for L1 statistics, L1 md5, L1 tensor and L0 statistics on the MLP of run_case.py.
# Creates target/venv-msprobe111 on first use. Extra arguments go to scripts/bench_pytorch.py.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
bash scripts/setup-msprobe111.sh
.venv/bin/python scripts/bench_pytorch.py "$@"
