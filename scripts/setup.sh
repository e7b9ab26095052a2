#!/usr/bin/env bash
# Idempotent machine setup: Python venv with the packages tests need. Fast when already done.
set -euo pipefail
cd "$(dirname "$0")/.."
# Debian packages: libclang for bindgen (build.rs); Chromium for the test that opens
# `msprobe compare`'s HTML report headless (tests/python/test_compare.py).
missing=()
for pkg in libclang-dev chromium; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
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
