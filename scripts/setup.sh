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
# The dashboard's browser tests drive Debian's chromium; install it where we may (root with apt-get),
# else they skip and say why.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq chromium >/dev/null 2>&1 \
        || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1; } || true
fi
