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


@pytest.mark.spark
def test_killed_three_times_between_the_executors_write_and_the_drivers_each_row_is_written_once(postgres, tmp_path):
    """`sscript run --sink postgresql://...` over the disordered replay of every example, each
    micro-batch a file. Three times the test holds the driver's ledger (a lock on sscript_batches)
    so that a batch's result rows are in PostgreSQL, committed by the executors, while the driver
    has not written the batch; then SIGKILLs the job and lets go. The next run does the batch again:
    its partitions find their ledger rows and write nothing. The results equal the reference's
    over the batches read, every row once; the password is nowhere in OUT or the output."""
    from tests.cep_harness import reference_rows, same_rows
    from tests.conftest import EXAMPLES
    from tests.differential import disordered_replay
    from tests.test_restart import DELAY_MS, Run, batches_read

    server, url = postgres
    schema = _schema(url)
    folder = tmp_path / "replay"
    batches = disordered_replay(folder, seed=11, files=8)
    out = tmp_path / "out"
    compiled = compile_workflows([str(f) for f in EXAMPLES], out, str(SENSORS), 2, watermark=f"fixed:{DELAY_MS}",
                                 late="log")
    runs, killed = [], []
    try:
        for _ in range(3):
            # The run makes the tables (anew, for a fresh OUT) and does again the batch killed last,
            # whose partitions find their ledger rows; then the driver is held.
            run = Run(out, folder / "data", extra=("--sink", url))
            runs.append(run)
            run.wait_for("batch 0:" if not killed else f"batch {killed[-1]}:")
            with server.connect(autocommit=False) as holder:
                with holder.transaction():
                    holder.execute(f'LOCK TABLE "{schema}".sscript_batches IN EXCLUSIVE MODE')
                    killed.append(_written_by_executors_only(server, schema, run, after=killed[-1] if killed else 0))
                    run.kill()
        last = Run(out, folder / "data", extra=("--sink", url))
        runs.append(last)
        said = last.drain(sum(map(len, batches)))
    finally:
        for run in runs:
            run.cleanup()
    assert "every window and pending match was emitted" in said
    assert len(set(killed)) == 3  # three batches cut short after their rows were in PostgreSQL
    scripts = {f.stem: f.read_text() for f in EXAMPLES}
    expected, _ = reference_rows(scripts, batches_read(out), DELAY_MS, compiled.plan)
    with server.connect() as db:
        found = [tuple(r) for r in db.execute(f'SELECT stream, ts, window_start, window_end, value, start_ts, end_ts, '
                                              f'events FROM "{schema}".results')]
        ledger = [b for (b,) in db.execute(f'SELECT batch_id FROM "{schema}".sscript_batches ORDER BY 1')]
    same_rows(found, expected)  # none missing, none twice
    assert ledger == list(range(len(ledger)))
    told = said + "".join(r.output() for r in runs)
    kept = "".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file() and p.suffix in (".json", ".log", ".txt"))
    assert server.password not in told + kept


def _written_by_executors_only(server, schema: str, run, after: int) -> int:
    """Wait for a batch after `after` whose result rows the executors committed while the driver,
    held, has not written it (its ledger row); that batch."""
    import time

    deadline = time.monotonic() + 300
    with server.connect() as db:
        while time.monotonic() < deadline:
            assert run.process.poll() is None, run.output()
            found = db.execute(f'SELECT min(p.batch_id) FROM "{schema}".sscript_parts p WHERE p.batch_id > %s AND NOT EXISTS '
                               f'(SELECT 1 FROM "{schema}".sscript_batches b WHERE b.batch_id = p.batch_id)', (after,)).fetchone()
            if found[0] is not None:
                return int(found[0])
            time.sleep(0.1)
    raise AssertionError(f"no batch written by the executors alone within 300 s:\n{run.output()}")
