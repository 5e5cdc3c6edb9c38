"""The PostgreSQL sink (`--sink postgresql://...`, runtime/output/postgres_sink.py) against a real
PostgreSQL (Debian's, started by tests/brokers.py on a free port of 127.0.0.1)."""

from __future__ import annotations

import os
import re
import time
from urllib.parse import parse_qsl, urlsplit

import pandas as pd
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
    # `sscript results` selects per stream in PostgreSQL: the lines of the rows read back whole.
    from click.testing import CliRunner

    from sensorscript.cli import main
    from sensorscript.runtime.control.correction import newest
    from sensorscript.runtime.output.sinks import read_results
    from sensorscript.runtime.output.status import describe_results

    rows = newest(read_results(url))
    shown = CliRunner().invoke(main, ["results", str(out), "--limit", "3"])
    assert shown.exit_code == 0, shown.output
    assert shown.output == describe_results(rows[rows["value"].notna()], 3) + "\n"
    one = CliRunner().invoke(main, ["results", str(out), "--stream", "bridge.out_MZ", "--all-versions", "--limit", "0"])
    assert one.output.splitlines()[0] == f"bridge.out_MZ: {int((rows['stream'] == 'bridge.out_MZ').sum()):,} rows"
    status = CliRunner().invoke(main, ["status", str(out)])
    assert status.exit_code == 0 and schema in status.output, status.output


@pytest.mark.spark
def test_killed_twice_between_the_executors_write_and_the_drivers_each_row_is_written_once(postgres, tmp_path):
    """`sscript run --sink postgresql://...` over the disordered replay of every example, each
    micro-batch a file. Twice the test holds the driver's ledger (a lock on sscript_batches)
    so that a batch's result rows are in PostgreSQL, committed by the executors, while the driver
    has not written the batch; then SIGKILLs the job and lets go. The next run does the batch again:
    its partitions find their ledger rows and write nothing, and its alarms (--alerts), which the
    kill kept from the outbox, are taken. The results equal the reference's over the batches read,
    every row once; a receiver, and the database's alarms table (--alerts postgresql://...), hold
    every incident in the state the reference's rows say; the password is nowhere in OUT or the
    output."""
    from tests.cep_harness import reference_rows, same_rows
    from tests.conftest import EXAMPLES
    from tests.differential import disordered_replay, reference_incidents
    from tests.receivers import Receiver
    from tests.test_restart import DELAY_MS, Run, batches_read
    from tests.test_spark_alerts import FLAGS, standing

    server, url = postgres
    schema = _schema(url)
    folder = tmp_path / "replay"
    batches = disordered_replay(folder, seed=11, files=8)
    out = tmp_path / "out"
    compiled = compile_workflows([str(f) for f in EXAMPLES], out, str(SENSORS), 2, watermark=f"fixed:{DELAY_MS}",
                                 late="log")
    runs, killed = [], []
    receiver = Receiver().start()
    extra = ("--sink", url, "--alerts", receiver.url, "--alerts", url)  # and the database's alarms table
    try:
        for _ in range(2):  # the second run, which redoes the batch killed first, is itself killed
            # The run makes the tables (anew, for a fresh OUT) and does again the batch killed last,
            # whose partitions find their ledger rows; then the driver is held.
            run = Run(out, folder / "data", extra=extra)
            runs.append(run)
            run.wait_for("batch 0:" if not killed else f"batch {killed[-1]}:")
            with server.connect(autocommit=False) as holder:
                with holder.transaction():
                    holder.execute(f'LOCK TABLE "{schema}".sscript_batches IN EXCLUSIVE MODE')
                    killed.append(_written_by_executors_only(server, schema, run, after=killed[-1] if killed else 0))
                    run.kill()
        last = Run(out, folder / "data", extra=extra)
        runs.append(last)
        said = last.drain(sum(map(len, batches)))
    finally:
        for run in runs:
            run.cleanup()
        receiver.stop()
    assert "every window and pending match was emitted" in said
    assert len(set(killed)) == 2  # two batches cut short after their rows were in PostgreSQL
    scripts = {f.stem: f.read_text() for f in EXAMPLES}
    expected, evaluation = reference_rows(scripts, batches_read(out), DELAY_MS, compiled.plan)
    with server.connect() as db:
        found = [tuple(r) for r in db.execute(f'SELECT stream, ts, window_start, window_end, value, start_ts, end_ts, '
                                              f'events FROM "{schema}".results')]
        ledger = [b for (b,) in db.execute(f'SELECT batch_id FROM "{schema}".sscript_batches ORDER BY 1')]
    same_rows(found, expected)  # none missing, none twice
    assert ledger == list(range(len(ledger)))
    incidents = reference_incidents(evaluation.rows, FLAGS)
    assert len(incidents) >= 10 and any(key[0] in FLAGS for key in incidents)
    assert {key: state for key, (state, _) in standing([a for _, a in receiver.received]).items()} == incidents
    with server.connect() as db:  # the same alarms, each once, in the alarms table Grafana reads
        table = [alarm for (alarm,) in db.execute(f'SELECT alarm FROM "{schema}".alarms')]
    assert {key: state for key, (state, _) in standing(table).items()} == incidents
    assert len({a["id"] for a in table}) == len(table) >= len(incidents)
    told = said + "".join(r.output() for r in runs)
    kept = "".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file() and p.suffix in (".json", ".log", ".txt"))
    assert server.password not in told + kept


def _written_by_executors_only(server, schema: str, run, after: int) -> int:
    """Wait for a batch after `after` whose result rows the executors committed while the driver,
    held, has not written it (its ledger row); that batch."""
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


def _batch(stream: str, stamps: list[int], version: int = 1):
    import pandas as pd

    from sensorscript.runtime.output.sinks import BatchRows

    results = pd.DataFrame({"stream": stream, "ts": stamps, "window_start": [t - 1000 for t in stamps],
                            "window_end": stamps, "value": [t / 7 for t in stamps], "version": version,
                            "plan_version": 1})
    return BatchRows(results, pd.DataFrame({"raw": ["x,y"], "reason": ["bad ts"]}))


DAY = 86_400_000


def test_retention_drops_the_days_behind_the_horizon_and_nothing_newer(postgres, tmp_path):
    from sensorscript.runtime.output import expiry
    from sensorscript.runtime.output.sinks import open_sink, read_results

    server, url = postgres
    schema = _schema(url)
    sink = open_sink(url)
    stamps = [10 * DAY + 5, 10 * DAY + DAY - 1, 11 * DAY, 11 * DAY + 7, 12 * DAY + 3]
    sink.write(0, _batch("w.A", stamps))
    sink.write(0, _batch("w.A", [1]))  # a batch in the ledger: skipped
    assert sink.wrote(0) and not sink.wrote(1)
    assert sorted(read_results(url)["ts"]) == stamps
    with server.connect() as db:
        parts = sorted(r[0] for r in db.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'", (schema,)))
    assert parts == ["results_d19700111", "results_d19700112", "results_d19700113"]
    removed = expiry.expire_results(tmp_path, url, 11 * DAY + 3_600_000, ["w.A"])  # within the second day
    assert removed == 2  # the first day's rows; the second day's stay whole
    assert sorted(read_results(url)["ts"]) == stamps[2:]
    assert expiry.expired_before(tmp_path) == 11 * DAY + 3_600_000
    assert sorted(read_results(url, ["w.A"], 11 * DAY + 1, 12 * DAY)["ts"]) == [11 * DAY + 7]


def test_a_password_goes_to_another_host_only_over_verified_tls_unless_the_address_says_so():
    """libpq's default sslmode, prefer, takes a server it does not verify, and a man in the middle may
    ask for the password in clear: to another host the sink asks for verify-full unless the address
    names a mode; to this machine (loopback, a socket folder) libpq's default stays."""
    from sensorscript.runtime.output.postgres_sink import Address

    def mode(url: str):
        address = Address.parse(url)
        return dict(parse_qsl(urlsplit(address.conninfo).query)).get("sslmode"), address.verified_by_default

    assert mode("postgresql://ops@db.example:5432/plant?schema=bridge") == ("verify-full", True)
    assert mode("postgresql://ops@10.20.0.7/plant?sslrootcert=/etc/ca.pem") == ("verify-full", True)
    assert mode("postgresql://ops@db.example/plant?sslmode=prefer") == ("prefer", False)  # the user's say
    assert mode("postgresql://ops@db.example/plant?sslmode=disable") == ("disable", False)
    for here in ("127.0.0.1", "localhost", "[::1]"):
        assert mode(f"postgresql://ops@{here}:5433/plant") == (None, False)
    assert mode("postgresql://ops@127.0.0.1/plant?host=db.example") == ("verify-full", True)
    assert mode("postgresql://ops@localhost/plant?host=/run/postgresql") == (None, False)


def test_times_past_the_year_9999_a_line_with_nul_and_an_infinite_alarm_are_stored(postgres):
    """What failed a batch for good before (issue #62): a window's end after 9999-12-31 and a time
    before the year 1 (their day partitions were named by datetime, which stops there), a quarantined
    line that held a NUL (PostgreSQL's text refuses one: the parser keeps it as U+FFFD), an alarm of
    an infinite value into the jsonb alarms table (Python's json wrote `Infinity`)."""
    from sensorscript.runtime.ingest.records import parse_line
    from sensorscript.runtime.output.alarms import MATCH
    from sensorscript.runtime.output.alerts.notifier import Request
    from sensorscript.runtime.output.alerts.payload import alarm_object, numbered
    from sensorscript.runtime.output.alerts.postgres_table import AlarmsTable
    from sensorscript.runtime.output.alerts.settings import Target
    from sensorscript.runtime.output.sinks import BatchRows, open_sink, read_results

    server, url = postgres
    schema = _schema(url)
    after_9999, before_1 = 253_402_300_800_000 + 5, -62_135_596_800_000 - DAY + 5
    rejected = parse_line("8MD1-AZ\x00,10\x0000,1")
    batch = _batch("w.A", [after_9999, before_1, 5])
    open_sink(url).write(0, BatchRows(batch.results, pd.DataFrame({"raw": [rejected.raw], "reason": [rejected.reason]})))
    assert sorted(read_results(url)["ts"]) == [before_1, 5, after_9999]
    with server.connect() as db:
        parts = sorted(r[0] for r in db.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'", (schema,)))
        kept = db.execute(f'SELECT raw, reason FROM "{schema}".quarantine').fetchall()
    assert parts == ["results_d19700101", "results_dm0000001231", "results_dp0100000101"]
    assert kept == [("8MD1-AZ\ufffd,10\ufffd00,1", "ts is not an integer (epoch milliseconds)")]

    alarm = numbered(alarm_object({"stream": "w.M", "ts": after_9999, "value": float("inf"), "version": 1,
                                   "start_ts": 0, "end_ts": after_9999, "events": None}, MATCH), 1, "firing")
    table = AlarmsTable(Target.parse(url))
    try:
        table.send(Request([1], [alarm]))
    finally:
        table.close()
    with server.connect() as db:
        stored = db.execute(f'SELECT value, alarm ->> \'value\', alarm ->> \'ts\' FROM "{schema}".alarms').fetchall()
    assert stored == [(float("inf"), "+Inf", "+010000-01-01T00:00:00.005Z")]


def test_tables_of_anothers_in_the_schema_are_never_taken_nor_dropped(postgres):
    """A run afresh dropped the nine table names in the schema with CASCADE, whoever made them, and a
    sink took tables it found as its own (issue #62). Now a sink writes into and drops only tables it
    made (their comment says so): another's table of one of its names is refused in one sentence and
    left as it was, and a run afresh does not take a view of someone's on the results with it."""
    from sensorscript.runtime.output.postgres_sink import PostgresSink

    server, url = postgres
    schema = _schema(url)
    with server.connect() as db:
        db.execute(f'CREATE SCHEMA "{schema}"')
        db.execute(f'CREATE TABLE "{schema}".alarms (note text)')
        db.execute(f"INSERT INTO \"{schema}\".alarms VALUES ('the control room''s own')")
    with pytest.raises(ValueError, match=f"the schema {schema} holds alarms, which this sink did not make"):
        PostgresSink(url)
    with server.connect() as db:
        assert db.execute(f'SELECT note FROM "{schema}".alarms').fetchall() == [("the control room's own",)]
        db.execute(f'DROP TABLE "{schema}".alarms')
    sink = PostgresSink(url)  # made by the sink, each table marked
    with server.connect() as db:
        db.execute(f'CREATE VIEW "{schema}".hourly AS SELECT stream, ts / 3600000 AS hour FROM "{schema}".results')
    with pytest.raises(ValueError, match=r"other objects depend on them \(view .*hourly depends on table .*results"):
        sink.reset()
    with server.connect() as db:
        assert db.execute("SELECT to_regclass(%s) IS NOT NULL", (f'"{schema}".hourly',)).fetchone() == (True,)
        db.execute(f'DROP VIEW "{schema}".hourly')
    sink.reset()  # its own tables, dropped and made anew
    PostgresSink(url)


@pytest.mark.server  # starts its own server (the quick tier leaves it out)
def test_tls_verify_full_against_the_servers_own_ca_and_a_password_from_pgpass(tmp_path, monkeypatch):
    """A server that serves TLS only, with a certificate for 127.0.0.1 its own CA signed: the sink
    verifies it (sslmode=verify-full) and logs in with the password ~/.pgpass holds; a CA that did
    not sign it, and no password at all, are refused at once, in one sentence."""
    from tests.brokers import Broker, PostgresServer, need_postgres
    from sensorscript.runtime.output.sinks import open_sink, read_results

    need_postgres()
    server = PostgresServer(tls=True, durable=False).start()
    try:
        monkeypatch.delenv("PGPASSWORD", raising=False)
        monkeypatch.setenv("HOME", str(tmp_path))
        pgpass = tmp_path / ".pgpass"
        pgpass.write_text(f"127.0.0.1:{server.port}:sensors:sensors:{server.password}\n")
        pgpass.chmod(0o600)
        sink = open_sink(server.url)
        sink.write(3, _batch("w.B", [5, 6]))
        assert sorted(read_results(server.url)["ts"]) == [5, 6]
        with server.connect() as db:
            assert db.execute("SELECT bool_and(ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a ON a.pid = s.pid "
                              "WHERE a.usename = 'sensors'").fetchone()[0]
        other_ca = Broker.certificates(tmp_path / "other")[0]
        wrong = server.url.replace(str(server.ca), str(other_ca))
        with pytest.raises(ConnectionError, match=r"^PostgreSQL at postgresql://sensors@127\.0\.0\.1:\d+/sensors\?"
                                                  r".* could not be reached: .*certificate verify failed"):
            open_sink(wrong)
        pgpass.unlink()
        with pytest.raises(ConnectionError, match="no password supplied"):
            open_sink(server.url)
    finally:
        server.remove()


@pytest.mark.spark
def test_the_database_restarted_while_the_job_runs_the_batch_waits_and_if_it_stays_away_one_sentence(tmp_path):
    """The job writes to a PostgreSQL that is killed after batch 2 and started again 4 s later: the
    batch being written waits and is written once the database is back; the results equal the
    reference's, each row once. A second job, told to wait 2 s (`retry_for=2s`), stops when the
    database stays away, with one sentence that says so."""
    from tests.brokers import PostgresServer, need_postgres
    from tests.cep_harness import reference_rows, same_rows
    from tests.conftest import EXAMPLES
    from tests.differential import disordered_replay
    from tests.test_restart import DELAY_MS, Run, batches_read

    need_postgres()
    folder = tmp_path / "replay"
    batches = disordered_replay(folder, seed=3, files=6)
    server = PostgresServer(durable=False).start()
    runs = []
    try:
        os.environ["PGPASSWORD"] = server.password
        out = tmp_path / "out"
        compiled = compile_workflows([str(f) for f in EXAMPLES], out, str(SENSORS), 2,
                                     watermark=f"fixed:{DELAY_MS}", late="log")
        run = Run(out, folder / "data", extra=("--sink", server.url))
        runs.append(run)
        run.wait_for("batch 2:")
        server.stop(kill=True)
        time.sleep(4)
        server.start()
        said = run.drain(sum(map(len, batches)))
        assert "every window and pending match was emitted" in said and "Traceback" not in said
        scripts = {f.stem: f.read_text() for f in EXAMPLES}
        expected, evaluation = reference_rows(scripts, batches_read(out), DELAY_MS, compiled.plan)
        with server.connect() as db:
            found = [tuple(r) for r in db.execute("SELECT stream, ts, window_start, window_end, value, start_ts, "
                                                  "end_ts, events FROM results")]
        same_rows(found, expected)

        second = tmp_path / "second"
        compile_workflows([str(f) for f in EXAMPLES], second, str(SENSORS), 2, watermark=f"fixed:{DELAY_MS}")
        stays = Run(second, folder / "data", extra=("--sink", f"{server.url}?schema=second&retry_for=2s"))
        runs.append(stays)
        stays.wait_for("batch 0:")
        server.stop(kill=True)
        assert stays.finish() == 1
        told = stays.output()
        errors = [line for line in told.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "Traceback" not in told, told
        assert re.search(r"micro-batch \d+ could not be written: .*PostgreSQL at postgresql://sensors@127\.0\.0\.1:"
                         r"\d+/sensors\?schema=second&retry_for=2s (stayed away|could not be reached)", errors[0]), told
    finally:
        for run in runs:
            run.cleanup()
        os.environ.pop("PGPASSWORD", None)
        server.remove()


GRAFANA = ROOT / "docs" / "grafana" / "sensorscript-postgresql.json"


def test_every_grafana_panel_query_runs_on_the_sink_and_finds_its_rows(postgres):
    """docs/grafana/sensorscript-postgresql.json: each panel's SQL and the workflow variable's, with
    Grafana's macros expanded (scripts/bench_grafana.py's `grafana_sql`, as Grafana's PostgreSQL data
    source expands them), run against a real sink and return the rows they are for."""
    import json

    from bench_grafana import grafana_sql

    import pandas as pd

    from sensorscript.runtime.output.sinks import BatchRows, open_sink

    server, url = postgres
    schema = _schema(url)
    sink = open_sink(url)
    sink.name_streams({"w.on": "flag", "w.m": "match"}, ["w.on", "w.m", "w.avg", "x.avg"])
    results = pd.DataFrame({
        "stream": ["w.on"] * 5 + ["w.m", "w.avg", "x.avg", "w.on"],
        "ts": [1000, 2000, 3000, 4000, 5000, 4500, 4000, 4000, 6000],
        "value": [0, 1, 1, 0, 1, 1, 2.5, 7.0, 1],
        "version": [1] * 9, "plan_version": [1] * 9,
        "start_ts": [None] * 5 + [4400, None, None, None], "end_ts": [None] * 5 + [4500, None, None, None],
        "events": [None] * 5 + ['[{"var": "A"}]', None, None, None]})
    late = pd.DataFrame({"sensor_id": ["S1", "S2", "S1"], "ts": [2500, 61_000, 100], "value": [1.0, 2.0, 3.0],
                         "watermark": [3000, 62_000, 900], "streams": ["w.on"] * 3, "batch_id": 0, "too_late": 0})
    quarantine = pd.DataFrame({"raw": ["a,b", "c"], "reason": ["bad ts", "too few fields"]})
    sink.write(0, BatchRows(results, quarantine, late))
    sink.write(-1, BatchRows(pd.DataFrame({"stream": ["w.on"], "ts": [6000], "value": [None], "version": [2],
                                           "plan_version": [1]}), pd.DataFrame()))  # a retraction of 6000
    grafana = json.loads(GRAFANA.read_text())
    variable = grafana["templating"]["list"][0]
    now = int(time.time())
    panels = {panel["title"]: panel["targets"][0]["rawSql"] for panel in grafana["panels"]}
    with server.connect(options=f"-c search_path={schema}") as db:  # the Grafana role's search_path
        def run(title, start_s=0, end_s=now + 60, workflows=("w",)):
            return [tuple(r) for r in db.execute(grafana_sql(panels[title], start_s, end_s, list(workflows)))]

        assert [r[0] for r in db.execute(variable["query"])] == ["w", "x"]
        assert [(r[1], r[2]) for r in run("Results", 0)] == [("w.on", 0.0), ("w.on", 1.0), ("w.on", 1.0),
                                                              ("w.avg", 2.5), ("w.on", 0.0), ("w.m", 1.0), ("w.on", 1.0)]
        # (at 4 s, w.avg before w.on: by time, then stream)
        assert [r[1] for r in run("Results", 0, 60, ("x",))] == ["x.avg"]
        assert run("Newest alarms", 0) == []  # none delivered yet
        # The batch's alarms, as the alerts find and number them, delivered to the alarms table.
        from sensorscript.runtime.output.alarms import alarms
        from sensorscript.runtime.output.alerts.detection import batch_alarms
        from sensorscript.runtime.output.alerts.notifier import Request
        from sensorscript.runtime.output.alerts.payload import numbered
        from sensorscript.runtime.output.alerts.postgres_table import AlarmsTable
        from sensorscript.runtime.output.alerts.settings import Target

        found, _ = batch_alarms(results.assign(window_start=None, window_end=None), {"w.on": "flag", "w.m": "match"}, {})
        revisions: dict[str, int] = {}
        delivered = []
        for alarm in found:
            revisions[alarm["incident"]] = revisions.get(alarm["incident"], 0) + 1
            delivered.append(numbered(alarm, revisions[alarm["incident"]], alarm["state"]))
        table = AlarmsTable(Target.parse(url))
        try:
            table.send(Request(list(range(len(delivered))), delivered))
            table.send(Request(list(range(len(delivered))), delivered))  # again: kept once
        finally:
            table.close()
        assert db.execute("SELECT count(*) FROM alarms").fetchone()[0] == len(delivered) == 4
        # Each incident in its latest state, newest first: the flag on from 5 s, the match at 4.5 s; from
        # 0, also the flag's run from 2 s, resolved at 4 s.
        assert [(r[1], r[2], r[3], int(r[0].timestamp() * 1000)) for r in run("Newest alarms", 3)] == [
            ("w.on", "flag", "firing", 5000), ("w.m", "match", "firing", 4500)]
        assert [(r[1], r[3]) for r in run("Newest alarms", 0)][-1] == ("w.on", "resolved")  # from 2000
        assert run("Newest alarms", 0, workflows=("x",)) == []
        # What the panel lists began where runtime/output/alarms.py's rule says alarms are.
        rule = alarms(results[results["value"].notna()], {"w.on": "flag", "w.m": "match"})
        assert [(r[1], int(r[0].timestamp() * 1000)) for r in run("Newest alarms", 0)] == \
            [(a.stream, a.ts) for a in rule] == [("w.on", 5000), ("w.m", 4500), ("w.on", 2000)]
        assert sorted(r[1] for r in run("Newest quarantined lines", now - 600)) == ["bad ts", "too few fields"]
        assert run("Newest quarantined lines", now + 600, now + 700) == []
        assert [(int(r[0].timestamp()), r[1]) for r in run("Late readings per minute", 0)] == [(0, 2), (60, 1)]
        assert run("Late readings", 1)[0][0] == 2
        assert sum(r[1] for r in run("Quarantined lines per minute", now - 600)) == 2
        assert run("Quarantined lines", now - 600)[0][0] == 2
    assert {p["datasource"]["type"] for p in grafana["panels"]} == {"grafana-postgresql-datasource"}


def test_the_dashboards_look_at_postgresql_finds_what_its_look_at_sqlite_finds(postgres, tmp_path):
    """The same batches (and a correction) written to a SQLite and a PostgreSQL sink: the dashboard's
    looks at both (dashboard/sqlite_look.py, postgres_look.py) find the same rows, quarantine counts and
    metrics, first whole, then past the last look."""
    from collections import Counter

    import pandas as pd

    from sensorscript.dashboard.postgres_look import Postgres
    from sensorscript.dashboard.sink_look import COLUMNS
    from sensorscript.dashboard.sqlite_look import SQLite
    from sensorscript.runtime.output.sinks import BatchRows, open_sink

    server, url = postgres
    sinks = [open_sink(f"sqlite:{tmp_path / 'results.db'}"), open_sink(url)]
    looks = [SQLite(tmp_path / "results.db"), Postgres(url)]

    def batch(number: int) -> BatchRows:
        stamps = [number * 1000 + k for k in range(3)]
        results = pd.DataFrame({"stream": ["w.a", "w.b", "w.a"], "ts": stamps, "window_start": [s - 10 for s in stamps],
                                "window_end": stamps, "value": [float(number), 1.5, None], "version": 1,
                                "plan_version": 1})
        metrics = pd.DataFrame({"batch_id": number, "partition": [0, None], "time": 1.0e9 + number,
                                "name": ["readings", "results"], "value": [10.0 * number, 3.0]})
        return BatchRows(results, pd.DataFrame({"raw": [f"x{number}"], "reason": ["bad ts" if number % 2 else "blank"]}),
                         None, metrics)

    def seen(after: int):
        found = []
        for look in looks:
            with look:
                last = look.last_rowid()
                rows = look.rows(["w.a", "w.b"], after, last, ("_rowid",) + COLUMNS)
                counts, _ = look.quarantine(0, Counter())
                metrics, _ = look.metrics(0)
            rows = sorted(tuple(None if pd.isna(v) else v for v in r) for r in rows[list(COLUMNS)].itertuples(index=False))
            found.append((rows, counts, sorted(map(tuple, metrics.astype(object).where(metrics.notna(), None).values.tolist()))))
        assert found[0] == found[1]
        return found[0]

    for number in range(3):
        for sink in sinks:
            sink.write(number, batch(number))
    rows, counts, metrics = seen(0)
    assert len(rows) == 9 and counts == Counter({"blank": 2, "bad ts": 1}) and len(metrics) == 3  # "readings" shown
    with looks[1]:
        past = looks[1].last_rowid()
    correction = pd.DataFrame({"stream": ["w.b"], "ts": [2001], "window_start": [1991], "window_end": [2001],
                               "value": [9.0], "version": [2], "plan_version": [1]})
    for sink in sinks:
        sink.write(-1, BatchRows(correction, pd.DataFrame()))
        sink.write(3, batch(3))
    with looks[1]:
        rows = looks[1].rows(["w.b"], past, looks[1].last_rowid(), ("_rowid",) + COLUMNS)
    assert sorted(zip(rows["ts"], rows["version"])) == [(2001, 2), (3001, 1)]  # past the last look only
    assert len(seen(0)[0]) == 13


@pytest.mark.spark
def test_corrections_of_the_examples_in_postgresql_are_exact(spark, postgres, tmp_path):
    """Late policy `correct` with the PostgreSQL sink: corrections read the rows back from PostgreSQL
    and write their new versions there (from the driver); the view `latest` equals the reference over
    all the data, match columns included."""
    from tests.cep_harness import reference_rows, same_rows
    from tests.conftest import EXAMPLES
    from tests.differential import disordered_replay

    server, url = postgres
    lines = [line for batch in disordered_replay(tmp_path, seed=7) for line in batch]
    out = tmp_path / "out"
    compile_workflows([str(f) for f in EXAMPLES], out, str(SENSORS), 2, watermark="fixed:100", late="correct:2s")
    summary = run_local(out, str(tmp_path / "data"), True, url, spark=spark, echo=lambda *_: None,
                        max_files_per_trigger=1)
    assert summary.late > 100 and summary.corrected > 0
    expected, _ = reference_rows({f.stem: f.read_text() for f in EXAMPLES}, [lines])
    with server.connect() as db:
        rows = [tuple(r) for r in db.execute(f'SELECT stream, ts, window_start, window_end, value, start_ts, end_ts, '
                                             f'events FROM "{_schema(url)}".latest')]
        versions = db.execute(f'SELECT max(version), count(DISTINCT batch_id) FILTER (WHERE batch_id < 0) '
                              f'FROM "{_schema(url)}".results').fetchone()
    same_rows(rows, expected)
    assert versions[0] >= 2 and versions[1] >= 1  # corrections wrote new versions, under their own ids
