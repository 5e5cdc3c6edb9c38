#!/usr/bin/env bash
# Set everything up, then run the whole test suite (real Spark, local[2]) on two workers: the tests of
# the suite's one SparkSession on one, the others a file at a time beside them, the longest first
# (tests/conftest.py).
# `--quick` first: the quick tier alone, every test that needs no JVM and no server (docs/TESTING.md).
# Other arguments go to pytest (`-n 0` runs everything in one process). At the end pytest prints the
# costliest test files (tests/costs.py).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ "${1:-}" = --quick ]; then
    shift
    export SSCRIPT_QUICK=1  # a fifth of each random test's examples (tests/conftest.py)
    exec .venv/bin/python -m pytest -n 2 --dist loadgroup --no-loadscope-reorder -m "not server" "$@"
fi
# The suite's JVMs live seconds: compiled by C1 alone and with the serial collector they cost about
# 40 % less CPU (a Spark smoke run: 45 -> 27 CPU seconds), which on 2 cores is the suite's time; and
# Spark's driver classes mapped from a class-data-sharing archive (scripts/jvm_archive.py, made once
# per pyspark and Java) save about a quarter of what is left of a short job's CPU. Without the archive
# (it could not be made) the JVMs start as before. Unset or empty: the JVMs as a job's run.
# The archive is made beside the suite's first tests (about 40 s; its log in .venv/jvm/archive.log):
# a JVM started before it is there runs without it, as does one whose class path differs.
archive=.venv/jvm/spark.jsa
mkdir -p .venv/jvm
.venv/bin/python scripts/jvm_archive.py --archive "$archive" >.venv/jvm/archive.log 2>&1 &
# A job's JVMs touch their whole heap as they start (-XX:+AlwaysPreTouch, for a flat memory over
# months): a test's JVM, which lives seconds, does not (0.4-0.9 s of system time a JVM, 1 GiB each).
export SSCRIPT_JVM_OPTIONS=${SSCRIPT_JVM_OPTIONS--XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:-AlwaysPreTouch -XX:SharedArchiveFile=$PWD/$archive}
exec .venv/bin/python -m pytest -n 2 --dist loadgroup --no-loadscope-reorder "$@"
