#!/usr/bin/env bash
# Python lint gate: ruff's lint rules and formatting (ruff.toml) over every Python file of the
# repository, with the ruff pinned in scripts/requirements.txt (installed by scripts/setup.sh).
# Fix with `.venv/bin/ruff check --fix .` and `.venv/bin/ruff format .`.
set -euo pipefail
cd "$(dirname "$0")/.."
RUFF=${MSPROBE_VENV:-.venv}/bin/ruff
if [ ! -x "$RUFF" ]; then
  echo "lint-python: $RUFF not found; run scripts/setup.sh" >&2
  exit 1
fi
"$RUFF" check .
"$RUFF" format --check .
