#!/usr/bin/env bash
# Set everything up, then compile the bundled workflows and run the job on local Spark
# over seeded example readings (30 minutes of 12 bridge sensors, with a few bad lines).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
OUT=out/demo
DATA=out/demo-data
if [ ! -d "$DATA" ]; then
    .venv/bin/python scripts/generate_data.py "$DATA" --sensors workflows/sensors.csv --seconds 1800 --bad-lines 5
fi
.venv/bin/sscript compile workflows/*.ss -o "$OUT" --sensors workflows/sensors.csv
.venv/bin/sscript run "$OUT" --input "$DATA" --once
.venv/bin/python scripts/show_results.py "$OUT/results.db"
# What SensorScript saved: lines of code and network traffic, against the naive way (about a minute).
.venv/bin/sscript report workflows/*.ss --sensors workflows/sensors.csv -o out/report
echo "plan: $OUT/plan.txt   job: $OUT/job.py   results: $OUT/results.db (tables results, quarantine, late, metrics)"
echo "where the job stands: .venv/bin/sscript status $OUT"
echo "report: out/report/report.html (and report.md)"
echo "the dashboard (results, alarms, health, plan in the browser): .venv/bin/sscript dashboard $OUT  # then open http://127.0.0.1:8050/"
