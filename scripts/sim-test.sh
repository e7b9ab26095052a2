#!/usr/bin/env bash
# CI entry point for the CANN simulator: install, run its test suite and the examples.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/setup-torchnpu.sh
PY=${PYTHON:-.venv/bin/python}
lib64=$(bash scripts/sim-install.sh | tail -n 1)
export CANNSIM_LIB64=$lib64
"$PY" -m pytest simulator/tests -q
"$PY" examples/train.py --steps 30
"$PY" examples/train.py --steps 30 --ranks 2
"$PY" examples/patterns.py
"$PY" examples/transformer.py --steps 60
