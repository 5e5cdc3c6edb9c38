#!/usr/bin/env bash
# Set everything up, then check the bundled workflows and show what the compiler understood.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/sscript check --show workflows/*.ss
