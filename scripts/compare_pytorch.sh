#!/usr/bin/env bash
# msprobe 1.1.1's compare CLI (statistics, md5, tensor modes) on two msprobe-rs PyTorch dumps.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-msprobe111.sh
.venv/bin/python scripts/compare_pytorch.py "$@"
