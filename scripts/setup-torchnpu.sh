#!/usr/bin/env bash
# torch_npu venv (target/venv-npu) for running unmodified torch_npu 2.14 scripts on the CANN simulator.
#
# torch-npu 2.14.0 requires exactly torch 2.14.0. The main .venv (scripts/setup.sh) already holds it, so
# target/venv-npu reuses the main venv's site-packages through a .pth file and adds only torch-npu
# (installed --no-deps: its other requirements, numpy and pyyaml, are listed here); .venv is unchanged.
#
# The x86_64 torch 2.14.0 that PyPI serves is the CUDA build, whose allocator-config keys collide with
# torch_npu's ("Duplicated key 'pinned_reserve_segment_size_mb'" at import). A real Ascend host installs
# the CPU build (`torch==2.14.0+cpu` from the PyTorch CPU index), which has no CUDA keys. That index is
# not reachable from here, so this venv loads a small test-harness shim
# (scripts/torchnpu-shim/cuda_allocconf_shim.cc, see its header) from a .pth file before torch is
# imported. The shim lives only in this venv; msprobe never loads it.
#
# Idempotent and fast when done; re-installs when scripts/requirements-torchnpu.txt or the shim changes.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
bash scripts/setup.sh >/dev/null
VENV=${MSPROBE_NPU_VENV:-target/venv-npu}
PY=${PYTHON:-python3}
mkdir -p target
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup-torchnpu: creating $VENV"
  "$PY" -m venv "$VENV"
fi
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
main_site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$main_site" > "$site/zz-main-venv.pth"
shim_src=scripts/torchnpu-shim/cuda_allocconf_shim.cc
stamp="$VENV/.requirements-$(cat scripts/requirements-torchnpu.txt "$shim_src" | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "setup-torchnpu: installing torch-npu 2.14.0 into $VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps -r scripts/requirements-torchnpu.txt
  g++ -shared -fPIC -O2 -o "$VENV/lib/libcuda_allocconf_shim.so" "$shim_src" -ldl
  # Loaded at interpreter start (before torch); harmless with a CPU build of torch (no libc10_cuda.so).
  cat > "$site/aa-cuda-allocconf-shim.pth" <<'PTH'
import ctypes, os, sys; p = os.path.join(sys.prefix, 'lib', 'libcuda_allocconf_shim.so'); os.path.exists(p) and ctypes.CDLL(p, mode=os.RTLD_GLOBAL | os.RTLD_NOW)
PTH
  rm -f "$VENV"/.requirements-*
  touch "$stamp"
fi
