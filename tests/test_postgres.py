"""The PostgreSQL sink (`--sink postgresql://...`, runtime/output/postgres_sink.py) against a real
PostgreSQL (Debian's, started by tests/brokers.py on a free port of 127.0.0.1)."""

from __future__ import annotations

import pytest

from sensorscript.compiler import compile_workflows
from sensorscript.parser import load
from sensorscript.registry import read_csv
from sensorscript.running import run_local
from sensorscript.workload import write_readings
from oracles.streams import evaluate
from tests.conftest import ROOT
from tests.differential import assert_same, expected_rows, write_replay

EXAMPLES = [ROOT / "workflows" / n for n in ("bridge.ss", "bridge_limits.ss", "deck_vibration.ss")]
SENSORS = ROOT / "workflows" / "sensors.csv"


def _schema(url: str) -> str:
    return url.rsplit("schema=", 1)[1]


def _rows(server, schema: str, table: str = "results") -> list[tuple]:
    with server.connect() as db:
        return sorted(db.execute(f'SELECT stream, ts, window_start, window_end, value FROM "{schema}".{table}'))


@pytest.mark.spark
def test_the_examples_into_postgresql_equal_the_reference_written_by_the_executors(spark, postgres, tmp_path):
    server, url = postgres
    write_readings(read_csv(SENSORS), tmp_path / "gen", seconds=900, files=1, bad_lines=5)
    lines = (tmp_path / "gen" / "readings-000.csv").read_text().splitlines()
    batches = [lines[: len(lines) // 3], lines[len(lines) // 3:]]
    out = tmp_path / "out"
    compile_workflows([str(f) for f in EXAMPLES], out, str(SENSORS), 2)
    summary = run_local(out, str(write_replay(tmp_path / "data", batches)), True, url, spark=spark,
                        echo=lambda *_: None, max_files_per_trigger=1)
    evaluation = evaluate(load([str(f) for f in EXAMPLES]).workflows, batches, 0,
                          None)
    schema = _schema(url)
    assert_same(_rows(server, schema), expected_rows(evaluation))
    assert summary.results == len(evaluation.rows) > 100
    with server.connect() as db:
        quarantine = sorted(db.execute(f'SELECT raw, reason FROM "{schema}".quarantine'))
        parts = db.execute(f'SELECT count(*), sum(rows) FROM "{schema}".sscript_parts').fetchone()
        batches_done = db.execute(f'SELECT count(*) FROM "{schema}".sscript_batches').fetchone()[0]
    assert quarantine == sorted(evaluation.quarantine)
    assert parts[1] == summary.results and parts[0] >= 2
    assert batches_done == summary.batches
