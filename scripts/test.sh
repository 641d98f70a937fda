#!/usr/bin/env bash
# The whole test suite on a fresh machine: environment, servers, lint, types, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/venv.sh
scripts/services.sh
scripts/browser.sh  # Debian's chromium, for tests/system/test_dashboard.py
# Installed just now: its browser test fails without it instead of skipping.
export TIDINGS_REQUIRE_BROWSER=1
.venv/bin/ruff check src tests bench
.venv/bin/ruff format --check src tests bench
.venv/bin/mypy
# pytest keeps its assertion-rewritten test modules as bytecode only when bytecode may be
# written: with PYTHONDONTWRITEBYTECODE set (as on some machines) each worker rewrites and
# compiles all of them again, about 6 s of CPU per worker and run.
export PYTHONDONTWRITEBYTECODE=
# Two workers (TIDINGS_TEST_WORKERS): tests mostly wait on servers, processes and clocks;
# each test has its own database, ports and keys, so they do not meet.
exec .venv/bin/pytest -n "${TIDINGS_TEST_WORKERS:-2}" --dist worksteal "$@"
