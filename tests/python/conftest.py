"""Checks that the release build the suites run against exists."""

import pytest

from recorder_testutil import CLI, LIB


def pytest_configure(config: pytest.Config) -> None:
    if not LIB.exists() or not CLI.exists():
        raise pytest.UsageError(f"{LIB} missing: run `cargo build --release -p msprobe` (scripts/test.sh does)")
