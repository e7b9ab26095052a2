#!/usr/bin/env bash
# The idle cost of a wrapped call on aarch64 under qemu-aarch64, beside the direct call (a ratio).
# Cross-builds libmsprobe.so first (scripts/setup-aarch64.sh installs the toolchain).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-aarch64.sh
# shellcheck source=/dev/null
source <(bash scripts/setup-aarch64.sh --env)
CARGO_TARGET_DIR=$PWD/target/aarch64 cargo build -q --release --target aarch64-unknown-linux-gnu -p msprobe
exec .venv/bin/python scripts/bench_aarch64.py "$@"
