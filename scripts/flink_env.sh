#!/usr/bin/env bash
# Create .venv-flink (Python 3.11) with a pinned apache-flink, for scripts/bench_flink.py only.
# The project does not depend on Flink: this environment is separate from .venv.
# Idempotent: a second run only checks that the pinned version is in place.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
FLINK_VERSION=2.3.0  # runs locally with Java 17 (the JVM comes inside the wheel's jars; `java` must be on PATH)
if [ ! -x .venv-flink/bin/python ]; then
    "$PYTHON" -m venv .venv-flink
fi
stamp=.venv-flink/.apache-flink-$FLINK_VERSION
if [ ! -f "$stamp" ]; then
    .venv-flink/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
    .venv-flink/bin/python -m pip install --quiet --disable-pip-version-check "apache-flink==$FLINK_VERSION"
    rm -f .venv-flink/.apache-flink-*
    touch "$stamp"
fi
if ! command -v java >/dev/null 2>&1; then
    echo "flink_env: Java 17 is needed to run Flink (apt-get install openjdk-17-jre-headless)" >&2
fi
