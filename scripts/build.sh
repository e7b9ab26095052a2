#!/usr/bin/env bash
# Builds everything the demo and the tests run (release): libmsprobe.so, the msprobe CLI and the
# CANN simulator installed as a CANN tree. Incremental and quiet when up to date.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo build -q --release --workspace
bash scripts/sim-install.sh >/dev/null
# The platform wheel users install (python/setup.py packages the native build above): rebuilt only
# when the native parts or the Python package changed since the last one.
wheels=target/wheels  # in the checkout, whatever CARGO_TARGET_DIR says (the README installs from here)
whl=$(ls "$wheels"/msprobe_rs-*.whl 2>/dev/null | head -1 || true)
rel=${CARGO_TARGET_DIR:-target}/release
if [ -z "$whl" ] || [ -n "$(find "$rel/libmsprobe.so" "$rel/lib_fastpath.so" "$rel/msprobe" python -newer "$whl" \
    -not -path '*/__pycache__*' -not -path 'python/native/*' 2>/dev/null | head -1)" ]; then
  rm -f "$wheels"/msprobe_rs-*.whl
  "${MSPROBE_VENV:-.venv}/bin/pip" wheel -q --disable-pip-version-check --no-build-isolation --no-deps ./python -w "$wheels"
fi
