#!/usr/bin/env bash
# Set everything up, then run the whole test suite (real Spark, local[2]).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python -m pytest "$@"
