#!/usr/bin/env bash
# Set everything up, then run the whole test suite (real Spark, local[2]) on two workers: the tests of
# the suite's one SparkSession on one, the others a file at a time beside them (tests/conftest.py).
# Arguments go to pytest (`-n 0` runs everything in one process).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python -m pytest -n 2 --dist loadgroup "$@"
