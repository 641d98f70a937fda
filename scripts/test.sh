#!/usr/bin/env bash
# The whole test suite on a fresh machine: environment, servers, lint, types, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/venv.sh
scripts/services.sh
.venv/bin/ruff check src tests bench
.venv/bin/ruff format --check src tests bench
.venv/bin/mypy
exec .venv/bin/pytest "$@"
