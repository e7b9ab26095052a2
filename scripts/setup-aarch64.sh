#!/usr/bin/env bash
# Idempotent setup of the aarch64 (Kunpeng) cross toolchain and the qemu user-mode runner, and the
# environment the aarch64 build and tests use. Fast when already done.
#
#   bash scripts/setup-aarch64.sh          installs (apt, rustup) what is missing, checks that it works
#   source <(bash scripts/setup-aarch64.sh --env)   prints the exports (linker, runner, CC/CXX, bindgen)
#
# It fails loudly (exit 1, naming what is missing) when it cannot install the toolchain: the aarch64 stage
# of scripts/test.sh must never be skipped silently.
set -euo pipefail
cd "$(dirname "$0")/.."
SYSROOT=/usr/aarch64-linux-gnu
env_only=0
[ "${1:-}" = --env ] && env_only=1

print_env() {
  cat <<ENV
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L $SYSROOT"
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
export CXX_aarch64_unknown_linux_gnu=aarch64-linux-gnu-g++
export AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar
export BINDGEN_EXTRA_CLANG_ARGS_aarch64_unknown_linux_gnu="--target=aarch64-linux-gnu --sysroot=$SYSROOT -I$SYSROOT/include"
export QEMU_LD_PREFIX=$SYSROOT
ENV
}
if [ $env_only = 1 ]; then
  print_env
  exit 0
fi

fail() { echo "setup-aarch64: $*" >&2; exit 1; }

pkgs=(gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)
missing=()
for pkg in "${pkgs[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup-aarch64: installing ${missing[*]}" >&2
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  { $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; } \
    || fail "could not install ${missing[*]} with apt (needed for the aarch64 stage; not skipping)"
fi
if ! rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu; then
  echo "setup-aarch64: rustup target add aarch64-unknown-linux-gnu" >&2
  rustup target add aarch64-unknown-linux-gnu >&2 || fail "rustup target add aarch64-unknown-linux-gnu failed"
fi
for tool in aarch64-linux-gnu-gcc aarch64-linux-gnu-g++ qemu-aarch64; do
  command -v "$tool" >/dev/null || fail "$tool not on PATH after installing ${pkgs[*]}"
done
# Smoke test, once per toolchain: a C program cross-built and run under qemu (catches a broken binfmt/sysroot).
stamp=target/aarch64/.toolchain-ok
if [ ! -f "$stamp" ]; then
  mkdir -p target/aarch64
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  printf '#include <stdio.h>\nint main(void){puts("aarch64 ok");return 0;}\n' > "$tmp/t.c"
  aarch64-linux-gnu-gcc -o "$tmp/t" "$tmp/t.c" || fail "aarch64-linux-gnu-gcc cannot build a C program"
  out=$(qemu-aarch64 -L "$SYSROOT" "$tmp/t") || fail "qemu-aarch64 cannot run an aarch64 program"
  [ "$out" = "aarch64 ok" ] || fail "unexpected output from the qemu smoke test: $out"
  touch "$stamp"
fi
