#!/usr/bin/env bash
# Builds everything the demo and the tests run (release): libmsprobe.so, the msprobe CLI and the
# CANN simulator installed as a CANN tree. Incremental and quiet when up to date.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo build -q --release --workspace
bash scripts/sim-install.sh >/dev/null
