#!/usr/bin/env bash
# The aarch64 (Kunpeng) stage of scripts/test.sh: cross-builds libmsprobe.so, the CLI, msprobe._fastpath
# and the simulator for aarch64-unknown-linux-gnu into target/aarch64, then runs under qemu-aarch64
# (user mode): the Rust unit and golden tests (cargo's target runner) and tests/aarch64 (the dlsym
# trampoline from threads, L2 capture of C clients checked against the simulator's trace).
# Fails, never skips, when the toolchain cannot be installed (scripts/setup-aarch64.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-aarch64.sh
# shellcheck source=/dev/null
source <(bash scripts/setup-aarch64.sh --env)
triple=aarch64-unknown-linux-gnu
# The aarch64 build has a target dir of its own (cargo's only, for the x86-64 build that tests/aarch64
# compares with stays where CARGO_TARGET_DIR, or target/, has it).
arm=$PWD/target/aarch64
t0=$SECONDS
CARGO_TARGET_DIR=$arm cargo build -q --release --target $triple -p msprobe -p msprobe-cli -p cannsim -p msprobe-fastpath
lib64=$(CARGO_TARGET_DIR=$arm CANNSIM_TARGET=$triple CANNSIM_PREFIX=$arm/cann bash scripts/sim-install.sh | tail -n 1)
# clippy for the target: c_char is u8 on aarch64 (i8 on x86-64), so casts that the host needs can
# be lints here; the interposer's aarch64 trampoline is compiled only for this target.
CARGO_TARGET_DIR=$arm cargo clippy -q --release --target $triple --workspace --all-targets --exclude aclnn-gen -- -D warnings
echo "aarch64: cross build and clippy $((SECONDS - t0)) s"
t0=$SECONDS
# Every crate's unit, golden and integration tests under qemu-aarch64 (cargo's target runner), except:
# - aclnn-gen: the build-time generator runs on the build host, never on the target (its tests drive
#   bindgen, which needs a libclang for the target's architecture);
# - capi_demo_builds_against_the_header: links with the host's `cc` and runs the program; tests/aarch64
#   builds and runs it with the cross compiler instead;
# - appended_entries_survive_a_kill: re-executes its own test binary, which an emulated process cannot
#   (no binfmt_misc: the kernel refuses to exec an aarch64 file); the journal is the same code on both.
CARGO_TARGET_DIR=$arm cargo test -q --release --target $triple --workspace --exclude aclnn-gen -- \
  --skip capi_demo_builds_against_the_header --skip tests::appended_entries_survive_a_kill
echo "aarch64: Rust tests under qemu $((SECONDS - t0)) s"
t0=$SECONDS
CANNSIM_LIB64_AARCH64=$lib64 .venv/bin/python -m pytest -q tests/aarch64
echo "aarch64: C clients and L2 under qemu $((SECONDS - t0)) s"
