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
# The dashboard's browser tests drive Debian's chromium; the MQTT tests (--input mqtt://, --alerts
# mqtt://) and the demo's broker are Debian's mosquitto, the PostgreSQL tests (--sink postgresql://)
# Debian's PostgreSQL, started by them on a free port of 127.0.0.1 (never as a service). Install them
# where we may (as root, or with sudo that needs no password). Elsewhere those tests skip and say
# why; in CI (CI=true) they must run, so a package that cannot be had stops the set-up here, in one
# sentence.
wanted=()
command -v chromium >/dev/null 2>&1 || wanted+=(chromium)
{ command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ]; } || wanted+=(mosquitto)
command -v mvn >/dev/null 2>&1 || wanted+=(maven)  # fetches the Kafka jars below
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || wanted+=(postgresql)
{ command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; } || wanted+=(nginx)  # the dashboard's proxy test
if [ ${#wanted[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
    as_root=""
    if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        as_root="sudo -n"
    fi
    if [ "$(id -u)" = 0 ] || [ -n "$as_root" ]; then
        export DEBIAN_FRONTEND=noninteractive
        # Debian's packages would start a broker (port 1883), a PostgreSQL cluster (5432) and nginx (80)
        # as services: the tests start their own, on ports of their own. A policy-rc.d that says no
        # (Debian's way, as image builds do) keeps them from starting while they are installed.
        policy=""
        if [ ! -e /usr/sbin/policy-rc.d ]; then
            policy=/usr/sbin/policy-rc.d
            printf '#!/bin/sh\nexit 101\n' | $as_root tee "$policy" >/dev/null && $as_root chmod 755 "$policy"
        fi
        $as_root apt-get install -y -qq "${wanted[@]}" >/dev/null 2>&1 \
            || { $as_root apt-get update -qq >/dev/null 2>&1 \
                 && $as_root apt-get install -y -qq "${wanted[@]}" >/dev/null 2>&1; } \
            || echo "sensorscript: could not install ${wanted[*]} with apt-get" >&2
        if [ -n "$policy" ]; then
            $as_root rm -f "$policy"
        fi
    fi
fi
if [ "${CI:-}" = true ]; then
    if ! command -v chromium >/dev/null 2>&1; then
        echo "sensorscript: CI=true needs Debian's chromium for the dashboard's browser tests" \
             "(apt-get install chromium as root); none is installed and it could not be installed here" >&2
        exit 1
    fi
    if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
        echo "sensorscript: CI=true needs Debian's PostgreSQL for the PostgreSQL sink's tests" \
             "(apt-get install postgresql as root); none is installed and it could not be installed here" >&2
        exit 1
    fi
    if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
        echo "sensorscript: CI=true needs Debian's nginx for the dashboard's reverse-proxy test" \
             "(apt-get install nginx as root); none is installed and it could not be installed here" >&2
        exit 1
    fi
    if ! command -v mosquitto >/dev/null 2>&1 && [ ! -x /usr/sbin/mosquitto ]; then
        echo "sensorscript: CI=true needs Debian's mosquitto for the MQTT tests" \
             "(apt-get install mosquitto as root); none is installed and it could not be installed here" >&2
        exit 1
    fi
fi
# Spark's Kafka connector (the job hands it to Spark) and the Kafka broker the tests and the demo
# start, from Maven Central into .venv/jars/ (scripts/fetch_jars.py; a second run checks only).
if ! .venv/bin/python scripts/fetch_jars.py >/dev/null; then
    echo "sensorscript: the Kafka jars could not be fetched (scripts/fetch_jars.py says why above);" \
         "--input kafka:// and the Kafka tests need them" >&2
    if [ "${CI:-}" = true ]; then
        exit 1
    fi
fi
