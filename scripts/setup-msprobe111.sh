#!/usr/bin/env bash
# Creates target/venv-msprobe111: msprobe (mindstudio-probe) 1.1.1 for the side-by-side benchmark
# and its compare CLI. 1.1.1 needs numpy<2 and pandas<2.1, its CLI needs service_identity.
# torch 2.14.0 is the very build of .venv, shared through a .pth file (both sides run the same
# torch binary; set MSPROBE111_OWN_TORCH=1 to pip-install torch==2.14.0 into the venv instead).
set -euo pipefail
cd "$(dirname "$0")/.."
V=target/venv-msprobe111
if [ -f "$V/.ready" ]; then exit 0; fi
python3 -m venv "$V"
"$V/bin/pip" install -q --disable-pip-version-check mindstudio-probe==1.1.1 'numpy<2' 'pandas<2.1' service_identity
if [ "${MSPROBE111_OWN_TORCH:-0}" = 1 ]; then
  "$V/bin/pip" install -q --disable-pip-version-check torch==2.14.0
else
  site=$("$V/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  .venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$site/zz-torch-from-dotvenv.pth"
fi
"$V/bin/python" -c 'import numpy, torch, msprobe.pytorch; print("msprobe 1.1.1 venv: torch", torch.__version__, "numpy", numpy.__version__)'
touch "$V/.ready"
