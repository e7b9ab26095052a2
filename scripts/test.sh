#!/usr/bin/env bash
# Every test: Rust unit, golden and integration tests, the aarch64 build under emulation, then the Python suites (recorder files,
# fail-open, kill/recover, simulator). Builds what they need first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
# Gates: formatting, and clippy with every unsafe block documented (workspace lints in Cargo.toml).
cargo fmt --all --check
bash scripts/lint-python.sh
cargo clippy -q --release --workspace --all-targets -- -D warnings
cargo test -q --release --workspace
# aarch64 (Kunpeng hosts): cross build and the tests under qemu-aarch64 user mode (scripts/test-aarch64.sh;
# installs the cross toolchain once, fails rather than skipping without it)
bash scripts/test-aarch64.sh
# torch_npu 2.14 venv for simulator/tests/test_torch_npu.py (idempotent; see scripts/setup-torchnpu.sh)
bash scripts/setup-torchnpu.sh
# msprobe 1.1.1 (the reference of the zoo, compare and npu-vs-CPU tests; idempotent)
bash scripts/setup-msprobe111.sh
.venv/bin/python -m pytest -q tests/python tests/python/pytorch simulator/tests --ignore=tests/python/mindspore --ignore=tests/python/test_ms_ascend.py --ignore=tests/python/test_ms_classic.py --ignore=tests/python/test_ms_l2_api.py
# MindSpore layer: its own venv (MindSpore 2.10 needs numpy<2), see scripts/setup-ms.sh
bash scripts/setup-ms.sh --msprobe  # + msprobe 1.1.1 for test_compare_ms.py (idempotent)
target/venv-ms/bin/python -m pytest -q tests/python/mindspore tests/python/test_ms_ascend.py tests/python/test_ms_classic.py tests/python/test_ms_l2_api.py
