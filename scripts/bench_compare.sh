#!/usr/bin/env bash
# `msprobe compare` (Rust) beside msprobe 1.1.1's compare, in one run, on the same two dumps of a
# GPT-style model (L1, ~1000 records): tensor mode (~230 MB of .pt files per side) and statistics
# mode, each tool started fresh per run (files in the page cache for both). Reports wall time,
# peak RSS and the ratio. Extra arguments go to scripts/bench_compare.py.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --release -p msprobe-cli -p msprobe
bash scripts/setup-msprobe111.sh
.venv/bin/python scripts/bench_compare.py "$@"
