#!/usr/bin/env bash
# Idempotent machine setup: Python venv with the packages tests need. Fast when already done.
set -euo pipefail
cd "$(dirname "$0")/.."
# bindgen (build.rs) needs libclang.
if ! dpkg -s libclang-dev >/dev/null 2>&1; then
  echo "setup: installing libclang-dev (for bindgen)"
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libclang-dev >/dev/null
  else
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libclang-dev >/dev/null
  fi
fi
VENV=${MSPROBE_VENV:-.venv}
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  "$PY" -m venv "$VENV"
fi
# Re-install only when scripts/requirements.txt changes.
stamp="$VENV/.requirements-$(sha256sum scripts/requirements.txt | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "setup: installing Python packages into $VENV (once per requirements change)"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r scripts/requirements.txt
  rm -f "$VENV"/.requirements-*
  touch "$stamp"
fi
