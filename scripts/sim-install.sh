#!/usr/bin/env bash
# Build the CANN simulator (crate `cannsim`) and install it as a CANN-like tree:
#   ${CANNSIM_PREFIX:-<repo>/target/cann}/latest/lib64/{libcannsim.so, libascendcl.so -> libcannsim.so, ...}
# Idempotent and fast when up to date. Prints the lib64 path as the last line of stdout.
# Respects CARGO_TARGET_DIR. CANNSIM_LIB=/path/libcannsim.so installs a prebuilt library (no build).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
prefix=${CANNSIM_PREFIX:-$repo/target/cann}
case "$prefix" in
  /*) ;;
  *) prefix=$(pwd)/$prefix ;;
esac
if [[ "$prefix" == *_* ]]; then
  echo "sim-install: the install prefix '$prefix' contains '_' (MindSpore cuts the CANN root at the first '_')." >&2
  echo "sim-install: set CANNSIM_PREFIX to an underscore-free absolute path, e.g. CANNSIM_PREFIX=/tmp/cannsim" >&2
  exit 2
fi
if [ -n "${CANNSIM_LIB:-}" ]; then
  lib=$CANNSIM_LIB
else
  target=${CARGO_TARGET_DIR:-$repo/target}
  (cd "$repo" && cargo build -q -p cannsim --release >&2)
  lib=$target/release/libcannsim.so
fi
[ -f "$lib" ] || { echo "sim-install: $lib not found" >&2; exit 1; }
lib64=$prefix/latest/lib64
mkdir -p "$lib64"
if ! cmp -s "$lib" "$lib64/libcannsim.so"; then
  # copy + rename: running processes keep their mapping of the old file
  cp "$lib" "$lib64/.libcannsim.so.tmp.$$"
  mv -f "$lib64/.libcannsim.so.tmp.$$" "$lib64/libcannsim.so"
fi
names=(
  libascendcl.so libacl_op_compiler.so libacl_rt.so libacl_op_executor.so libacl_mdl.so
  libnnopbase.so libopapi.so libopapi_math.so libopapi_nn.so libopapi_transformer.so
  libaclnn_ops_infer.so libaclnn_ops_train.so libaclnn_math.so libaclnn_sparse.so libaclnn_fft.so libaclnn_rand.so
  libhccl.so libhcomm.so
  libdummy_tls.so libmsprofiler.so libge_runner.so libgraph.so libruntime.so libplatform.so libc_sec.so
  libascend_hal.so libprofapi.so libregister.so libmmpa.so libascendalog.so
  libacl_tdt_queue.so libacl_tdt_channel.so libatb.so
)
for n in "${names[@]}"; do
  if [ "$(readlink "$lib64/$n" 2>/dev/null)" != libcannsim.so ]; then
    ln -sfn libcannsim.so "$lib64/$n"
  fi
done
echo "$lib64"
