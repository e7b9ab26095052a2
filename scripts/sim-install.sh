#!/usr/bin/env bash
# Build the CANN simulator (crate `cannsim`) and install it as a CANN-like tree:
#   ${CANNSIM_PREFIX:-<repo>/target/cann}/latest/lib64/{libcannsim.so, libascendcl.so -> libcannsim.so, ...}
# Idempotent and fast when up to date. Prints the lib64 path as the last line of stdout.
# Respects CARGO_TARGET_DIR. CANNSIM_LIB=/path/libcannsim.so installs a prebuilt library (no build).
# CANNSIM_TARGET=aarch64-unknown-linux-gnu cross-builds the tree for aarch64 (the toolchain of
# scripts/setup-aarch64.sh; the C++ half with aarch64-linux-gnu-g++); unset: the host.
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
  if [ -n "${CANNSIM_TARGET:-}" ]; then
    (cd "$repo" && cargo build -q -p cannsim --release --target "$CANNSIM_TARGET" >&2)
    lib=$target/$CANNSIM_TARGET/release/libcannsim.so
  else
    (cd "$repo" && cargo build -q -p cannsim --release >&2)
    lib=$target/release/libcannsim.so
  fi
fi
case "${CANNSIM_TARGET:-}" in
  "") cxx_cc=g++; arch=$(uname -m); stub_body='  xorl %%eax, %%eax\n  ret' ;;
  aarch64-*) cxx_cc=aarch64-linux-gnu-g++; arch=aarch64; stub_body='  mov w0, #0\n  ret' ;;
  *) echo "sim-install: unsupported CANNSIM_TARGET '$CANNSIM_TARGET'" >&2; exit 2 ;;
esac
[ -f "$lib" ] || { echo "sim-install: $lib not found" >&2; exit 1; }
lib64=$prefix/latest/lib64
mkdir -p "$lib64"
if ! cmp -s "$lib" "$lib64/libcannsim.so"; then
  # copy + rename: running processes keep their mapping of the old file
  cp "$lib" "$lib64/.libcannsim.so.tmp.$$"
  mv -f "$lib64/.libcannsim.so.tmp.$$" "$lib64/libcannsim.so"
fi
# The C++ half (GE / platform / tiling names, securec, slog; old libstdc++ ABI), built with the system g++:
# libcannsimge.so, DT_NEEDED on libcannsim.so, so every name below also finds every C symbol.
cxx=$repo/simulator/cxx
gebuild=${CARGO_TARGET_DIR:-$repo/target}/cannsimge${CANNSIM_TARGET:+-$CANNSIM_TARGET}
mkdir -p "$gebuild"
if [ ! -f "$gebuild/libcannsimge.so" ] || [ "$cxx/cannsimge.cc" -nt "$gebuild/libcannsimge.so" ] || [ "$cxx/op_proto.cc" -nt "$gebuild/libcannsimge.so" ] \
   || [ "$cxx/stub_symbols.txt" -nt "$gebuild/libcannsimge.so" ]; then
  awk -v body="$stub_body" '{ printf ".globl %s\n.type %s,@function\n%s:\n" body "\n.size %s,.-%s\n", $1,$1,$1,$1,$1 }' \
    "$cxx/stub_symbols.txt" > "$gebuild/stubs.S"
  echo '.section .note.GNU-stack,"",@progbits' >> "$gebuild/stubs.S"
  "$cxx_cc" -shared -fPIC -O2 -D_GLIBCXX_USE_CXX11_ABI=0 -o "$gebuild/.libcannsimge.so.tmp" "$cxx/cannsimge.cc" "$cxx/op_proto.cc" "$gebuild/stubs.S" \
    -L"$lib64" -l:libcannsim.so -Wl,-rpath,'$ORIGIN' -Wl,-z,now >&2
  mv -f "$gebuild/.libcannsimge.so.tmp" "$gebuild/libcannsimge.so"
fi
if ! cmp -s "$gebuild/libcannsimge.so" "$lib64/libcannsimge.so"; then
  cp "$gebuild/libcannsimge.so" "$lib64/.libcannsimge.so.tmp.$$"
  mv -f "$lib64/.libcannsimge.so.tmp.$$" "$lib64/libcannsimge.so"
fi
for n in libge_runner.so libgraph.so libregister.so libplatform.so libc_sec.so libascendalog.so libmmpa.so; do
  if [ "$(readlink "$lib64/$n" 2>/dev/null)" != libcannsimge.so ]; then
    ln -sfn libcannsimge.so "$lib64/$n"
  fi
done
names=(
  libascendcl.so libacl_op_compiler.so libacl_rt.so libacl_op_executor.so libacl_mdl.so
  libnnopbase.so libopapi.so libopapi_math.so libopapi_nn.so libopapi_transformer.so
  libaclnn_ops_infer.so libaclnn_ops_train.so libaclnn_math.so libaclnn_sparse.so libaclnn_fft.so libaclnn_rand.so
  libhccl.so libhcomm.so
  libdummy_tls.so libmsprofiler.so libruntime.so
  libascend_hal.so libprofapi.so
  libacl_tdt_queue.so libacl_tdt_channel.so libatb.so
)
for n in "${names[@]}"; do
  if [ "$(readlink "$lib64/$n" 2>/dev/null)" != libcannsim.so ]; then
    ln -sfn libcannsim.so "$lib64/$n"
  fi
done
# CANN's Python packages (real CANN: <root>/python/site-packages, put on PYTHONPATH by set_env.sh). MindSpore's
# communication.init() imports `hccl.sys_version` to check the HCCL package version.
pysite=$prefix/latest/python/site-packages
mkdir -p "$pysite/hccl"
[ -f "$pysite/hccl/__init__.py" ] || echo '"""HCCL Python package of the CANN simulator (version information only)."""' > "$pysite/hccl/__init__.py"
[ -f "$pysite/hccl/sys_version.py" ] || echo '__sys_version__ = "8.3.RC1"' > "$pysite/hccl/sys_version.py"
# The CANN toolkit layout and version files that clients check (torch_npu's _cann_package_check needs
# $ASCEND_HOME_PATH/runtime, $ASCEND_HOME_PATH/compiler and $ASCEND_OPP_PATH; its get_cann_version reads the
# `version=` line of the first ascend_*_install.info under $ASCEND_HOME_PATH), and set_env.sh as in a
# real toolkit (one level above latest/).
cann_version=8.3.RC1
root=$prefix/latest
mkdir -p "$root/runtime" "$root/compiler" "$root/opp/vendors" "$root/$arch-linux"
for part in runtime compiler opp; do
  printf 'Version=%s\nversion_dir=%s\n' "$cann_version" "$cann_version" > "$root/$part/.version.info.tmp"
  mv -f "$root/$part/.version.info.tmp" "$root/$part/version.info"
done
printf 'package_name=Ascend-cann-toolkit\nversion=%s\ninnerversion=V100R001C23SPC001B001\narch=%s\nos=linux\npath=%s\n' \
  "$cann_version" "$arch" "$root" > "$root/$arch-linux/.install.tmp"
mv -f "$root/$arch-linux/.install.tmp" "$root/$arch-linux/ascend_toolkit_install.info"
cat > "$prefix/.set_env.sh.tmp" <<SETENV
# Environment of the CANN simulator toolkit (like <ascend-toolkit>/set_env.sh): source it.
export ASCEND_TOOLKIT_HOME=$root
export ASCEND_HOME_PATH=$root
export ASCEND_OPP_PATH=$root/opp
export LD_LIBRARY_PATH=$lib64\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export PYTHONPATH=$pysite\${PYTHONPATH:+:\$PYTHONPATH}
SETENV
mv -f "$prefix/.set_env.sh.tmp" "$prefix/set_env.sh"
echo "$lib64"
