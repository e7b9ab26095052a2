#!/usr/bin/env bash
# Regenerates include/msprobe.h from crates/libmsprobe/src/ffi.rs with cbindgen (the version
# pinned in crates/libmsprobe/Cargo.toml, options in crates/libmsprobe/cbindgen.toml): the
# header test of crates/libmsprobe writes its fresh generation instead of comparing. Run it after
# changing the C ABI or its doc comments; `cargo test` fails while the header is stale.
set -euo pipefail
cd "$(dirname "$0")/.."
MSPROBE_BLESS_HEADER=1 cargo test -q --release -p msprobe --test header committed_header_is_generated_from_ffi_rs
git diff --stat -- include/msprobe.h
