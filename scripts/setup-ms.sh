#!/usr/bin/env bash
# MindSpore venv (target/venv-ms): MindSpore 2.10.0's binaries are built against NumPy 1.x, and with
# numpy 2 their first scalar operation raises SystemError ("Numpy init failed"), so MindSpore lives
# in its own venv with numpy<2 instead of the main .venv (torch 2.14 + numpy 2).
# Idempotent; re-installs only when scripts/requirements-ms.txt changes.
# With --msprobe it also installs msprobe 1.1.1 (the baseline of scripts/bench_mindspore.sh) into
# target/msprobe-1.1.1, a --target directory put on PYTHONPATH only by the benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${MSPROBE_MS_VENV:-target/venv-ms}
PY=${PYTHON:-python3}
mkdir -p target
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup-ms: creating $VENV"
  "$PY" -m venv "$VENV"
fi
stamp="$VENV/.requirements-$(sha256sum scripts/requirements-ms.txt | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "setup-ms: installing MindSpore 2.10.0 and numpy<2 into $VENV (about 1 minute, 2.8 GB)"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r scripts/requirements-ms.txt
  rm -f "$VENV"/.requirements-*
  touch "$stamp"
fi
if [ "${1:-}" = "--msprobe" ]; then
  MP=target/msprobe-1.1.1
  if [ ! -f "$MP/.done" ]; then
    echo "setup-ms: installing mindstudio-probe 1.1.1 into $MP (benchmark baseline)"
    np=$("$VENV/bin/python" -c 'import numpy; print(numpy.__version__)')
    "$VENV/bin/pip" install -q --disable-pip-version-check --target "$MP" "mindstudio-probe==1.1.1" "numpy==$np"
    touch "$MP/.done"
  fi
fi
