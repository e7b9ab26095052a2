#!/usr/bin/env bash
# Idempotent machine setup: Python venv with the packages tests need. Fast when already done.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${MSPROBE_VENV:-.venv}
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  "$PY" -m venv "$VENV"
fi
stamp="$VENV/.msprobe-setup-v1"
if [ ! -f "$stamp" ]; then
  echo "setup: installing Python packages into $VENV (one time)"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r scripts/requirements.txt
  touch "$stamp"
fi
