#!/usr/bin/env bash
# Create .venv (Python 3.11+) and install SensorScript with its development tools.
# Idempotent: a second run only checks that everything is in place.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
stamp=.venv/.sensorscript-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[dev]"
    touch "$stamp"
fi
if ! command -v java >/dev/null 2>&1; then
    echo "sensorscript: Java 17 is needed to run Spark jobs (apt-get install openjdk-17-jre-headless)" >&2
fi
