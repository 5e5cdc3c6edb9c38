"""Sinks and the archive when a micro-batch is done again after a kill: nothing written twice."""

from __future__ import annotations

import csv
import re
import sqlite3

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sensorscript.runtime.ingest import archive
from sensorscript.runtime.control.correction import newest
from sensorscript.runtime.output.sinks import (LATEST_VIEW, MATCH_COLUMNS, QUARANTINE_COLUMNS, RESULT_COLUMNS, BatchRows,
                                               CsvSink, SQLiteSink, read_results)


def _rows(values: list[float]) -> BatchRows:
    results = pd.DataFrame({"stream": "w.A", "ts": range(len(values)), "window_start": None, "window_end": None,
                            "value": values, "version": 1})
    return BatchRows(results, pd.DataFrame(columns=list(QUARANTINE_COLUMNS)))


def test_csv_sink_cuts_rows_a_killed_run_appended_without_journalling(tmp_path):
    path = tmp_path / "results.csv"
    CsvSink(path).write(0, _rows([1.0, 2.0]))
    with path.open("a") as f:  # batch 1 appended, then the run was killed before its journal line
        f.write("w.A,0,,,9.0,1\nw.A,1,,,9.0,1\n")
    again = CsvSink(path)  # the next run does batch 1 again, and batch 0 is skipped
    again.write(0, _rows([1.0, 2.0]))
    again.write(1, _rows([3.0]))
    with path.open() as f:
        values = [row["value"] for row in csv.DictReader(f)]
    assert values == ["1.0", "2.0", "3.0"]


def test_an_archived_batch_done_again_replaces_its_files_and_a_cut_attempt_is_forgotten(tmp_path):
    rng = np.random.default_rng(3)
    code = rng.integers(0, 5, 500).astype(np.int32)
    ts = rng.integers(0, 3 * archive.HOUR_MS, 500).astype(np.int64)
    value = rng.normal(size=500)
    archive.write(str(tmp_path), 0, 7, code, ts, value)
    shuffled = rng.permutation(500)  # the shuffle may hand the partition its readings in another order
    archive.write(str(tmp_path), 0, 7, code[shuffled], ts[shuffled], value[shuffled])
    files = sorted(tmp_path.glob("hour=*/*.parquet"))
    assert len(files) == len({p.parent for p in files}) == 3
    assert len(pd.read_parquet(tmp_path)) == 500
    # An attempt at batch 8 cut short under one plan; done again under another (an update), the
    # partition receives only the first hour's readings: nothing of the cut attempt may remain.
    archive.write(str(tmp_path), 0, 8, code, ts, value)
    assert archive.forget(tmp_path, 8) == 3
    first = ts < archive.HOUR_MS
    archive.write(str(tmp_path), 0, 8, code[first], ts[first], value[first])
    assert len(pd.read_parquet(tmp_path)) == 500 + first.sum()


def test_a_run_starting_afresh_removes_only_what_the_sink_wrote(tmp_path):
    from sensorscript.runtime.control.checkpoint import reset_sink

    path = tmp_path / "results.csv"
    rows = _rows([1.0])
    rows.quarantine = pd.DataFrame({"raw": ["x"], "reason": ["malformed"]})
    CsvSink(path).write(0, rows)
    (tmp_path / "quarantine" / "notes.txt").write_text("the user's own file")
    (tmp_path / "late").mkdir()
    reset_sink(f"csv:{path}")
    assert not path.exists() and not list(tmp_path.glob("quarantine/batch-*"))
    assert (tmp_path / "quarantine" / "notes.txt").exists() and (tmp_path / "late").exists() is False


# The view `latest` of earlier releases (a correlated MAX per key over the index on (stream, ts)):
# what the view means, and what a store written by them holds.
LATEST_BEFORE = """CREATE VIEW latest AS SELECT r.* FROM results r WHERE r.value IS NOT NULL AND r.version = (
    SELECT MAX(n.version) FROM results n WHERE n.stream = r.stream AND n.ts = r.ts
    AND n.window_start IS r.window_start AND n.window_end IS r.window_end
    AND n.start_ts IS r.start_ts AND n.end_ts IS r.end_ts)"""
_maybe = st.one_of(st.none(), st.integers(0, 2))
stored_rows = st.lists(st.tuples(st.sampled_from(["a.x", "b.y"]), st.integers(0, 3), _maybe, _maybe, _maybe, _maybe,
                                 st.integers(1, 3), st.one_of(st.none(), st.floats(-5, 5))), max_size=60)


def _latest(db: sqlite3.Connection, view: str = "latest") -> list[tuple]:
    return sorted(db.execute(f"SELECT {', '.join(RESULT_COLUMNS + MATCH_COLUMNS)} FROM {view}"), key=repr)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=stored_rows)
def test_the_view_latest_is_the_newest_version_of_each_key_without_retractions(tmp_path, rows):
    """On rows with several versions of a key, window bounds and match bounds empty or not (so keys
    told apart by NULLs), retractions among the newest: the view gives what the definition of earlier
    releases gives, and what corrections take for the newest (correction.newest)."""
    path = tmp_path / "results.db"
    path.unlink(missing_ok=True)
    SQLiteSink(path)
    db = sqlite3.connect(path)
    try:
        db.executemany("INSERT INTO results (stream, ts, window_start, window_end, start_ts, end_ts, version, value) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
        db.commit()
        db.execute(LATEST_BEFORE.replace("VIEW latest", "TEMP VIEW latest_before"))
        found = _latest(db)
        assert found == _latest(db, "latest_before")
        stored = read_results(f"sqlite:{path}")
    finally:
        db.close()
    expected = newest(stored)
    expected = expected[expected["value"].notna()].astype(object).where(expected.notna(), None)
    assert found == sorted(map(tuple, expected.itertuples(index=False)), key=repr)


def test_a_store_of_an_earlier_release_gets_the_index_and_view_of_this_one(tmp_path):
    """A store written before results_by_key: opened by the sink, it has the index (from which the
    view and the reads by stream take their rows without looking them up in the table) and the view
    of this release, and keeps its rows."""
    path = tmp_path / "results.db"
    db = sqlite3.connect(path)
    db.executescript(f"""
        CREATE TABLE results (stream TEXT NOT NULL, ts INTEGER NOT NULL, window_start INTEGER, window_end INTEGER,
            value REAL, version INTEGER NOT NULL);
        CREATE INDEX results_by_stream ON results (stream, ts);
        {LATEST_BEFORE.replace("start_ts IS r.start_ts AND n.end_ts IS r.end_ts", "window_end IS r.window_end")};
        INSERT INTO results VALUES ('a.x', 1, 0, 10, 1.5, 1), ('a.x', 1, 0, 10, NULL, 2), ('a.x', 2, 0, 10, 2.5, 1);
    """)
    db.close()
    SQLiteSink(path)
    db = sqlite3.connect(path)
    try:
        indexes = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert "results_by_key" in indexes and "results_by_stream" not in indexes
        (view,) = db.execute("SELECT sql FROM sqlite_master WHERE name = 'latest'").fetchone()
        assert view == LATEST_VIEW
        plan = " ".join(row[-1] for row in db.execute("EXPLAIN QUERY PLAN SELECT * FROM latest WHERE stream = 'a.x'"))
        # the stream's rows, and each one's newer versions, from the index alone
        assert plan.count("COVERING INDEX results_by_key") == 2, plan
        columns = ", ".join(RESULT_COLUMNS + MATCH_COLUMNS)
        plan = " ".join(row[-1] for row in db.execute(f"EXPLAIN QUERY PLAN SELECT rowid, {columns} FROM results "
                                                      f"WHERE stream IN ('a.x') AND ts >= 0 AND ts < 5"))
        assert "COVERING INDEX results_by_key (stream=? AND ts>? AND ts<?)" in plan, plan  # read_results, the dashboard
        assert [row[:2] for row in db.execute("SELECT stream, ts FROM latest")] == [("a.x", 2)]
    finally:
        db.close()


@pytest.mark.spark
def test_parquet_files_written_by_the_executors_per_partition_and_committed_by_the_journal(spark, tmp_path):
    """The Parquet sink's result rows are written by the executors, a file per partition of the last
    stage and batch, and read back only once the driver's journal holds the batch: the examples equal
    the reference, and a file of a batch the journal lacks (an attempt a kill cut short) is not read."""
    from oracles.streams import evaluate
    from sensorscript.compiler import compile_workflows
    from sensorscript.parser import load
    from sensorscript.registry import read_csv
    from sensorscript.running import run_local
    from sensorscript.runtime.output.sinks import file_batch, read_results
    from sensorscript.workload import write_readings
    from tests.conftest import ROOT
    from tests.differential import assert_same, expected_rows, write_replay

    examples = [ROOT / "workflows" / n for n in ("bridge.ss", "deck_vibration.ss", "pier_alarms.ss")]
    sensors = ROOT / "workflows" / "sensors.csv"
    write_readings(read_csv(sensors), tmp_path / "gen", seconds=600, files=1, bad_lines=3)
    lines = (tmp_path / "gen" / "readings-000.csv").read_text().splitlines()
    batches = [lines[: len(lines) // 2], lines[len(lines) // 2:]]
    out, folder = tmp_path / "out", tmp_path / "parquet"
    compile_workflows([str(f) for f in examples], out, str(sensors), 2)
    run_local(out, str(write_replay(tmp_path / "data", batches)), True, f"parquet:{folder}", spark=spark,
              echo=lambda *_: None, max_files_per_trigger=1)
    names = sorted(f.name for f in folder.glob("*.parquet"))
    # a file per partition (0, 1) of the last stage (these examples cut an edge: stage 2) and batch
    assert names and all(re.fullmatch(r"batch-00000\d\.s2p000[01]\.parquet", n) for n in names), names
    assert len({file_batch(folder / n) for n in names}) >= 2
    evaluation = evaluate(load([str(f) for f in examples]).workflows, batches)
    found = read_results(f"parquet:{folder}")
    rows = [tuple(None if pd.isna(v) else v for v in r) for r in
            found[["stream", "ts", "window_start", "window_end", "value"]].itertuples(index=False)]
    assert_same(sorted(rows, key=lambda r: (r[0], r[1], r[2] or 0)), expected_rows(evaluation))
    (folder / "batch-000099.s1p0000.parquet").write_bytes((folder / names[0]).read_bytes())  # never journalled
    assert len(read_results(f"parquet:{folder}")) == len(found)


@pytest.mark.spark
def test_results_over_the_drivers_share_are_taken_in_chunks_and_their_alarms_kept(spark, tmp_path, monkeypatch):
    """A sink the driver writes (SQLite) takes the result rows of a partition over the driver's share
    in chunks (executor_writes.DriverCollect). With a share of 4 rows every example's partitions are
    over it: the rows equal the reference, each once, and the alarms reach a receiver as the
    reference's rows say (a large partition's alarm rows come to the driver beside its chunks)."""
    from oracles.streams import evaluate
    from sensorscript.compiler import compile_workflows
    from sensorscript.parser import load
    from sensorscript.registry import read_csv
    from sensorscript.running import run_local
    from sensorscript.runtime.output import executor_writes
    from sensorscript.workload import write_readings
    from tests.conftest import EXAMPLES, ROOT
    from tests.differential import assert_same, expected_rows, reference_incidents, write_replay
    from tests.receivers import Receiver
    from tests.test_spark_alerts import FLAGS, standing

    monkeypatch.setattr(executor_writes, "CHUNK_ROWS", 4)
    chunks = []
    taken = executor_writes.DriverCollect.chunks
    monkeypatch.setattr(executor_writes.DriverCollect, "chunks",
                        lambda self: (chunks.append(len(c)) or c for c in taken(self)))
    sensors = ROOT / "workflows" / "sensors.csv"
    write_readings(read_csv(sensors), tmp_path / "gen", seconds=900, files=1, bad_lines=3)
    lines = (tmp_path / "gen" / "readings-000.csv").read_text().splitlines()
    batches = [lines[: len(lines) // 3], lines[len(lines) // 3: 2 * len(lines) // 3], lines[2 * len(lines) // 3:]]
    out, db = tmp_path / "out", tmp_path / "results.db"
    compile_workflows([str(f) for f in EXAMPLES], out, str(sensors), 2)
    receiver = Receiver().start()
    try:
        run_local(out, str(write_replay(tmp_path / "data", batches)), True, f"sqlite:{db}", spark=spark,
                  echo=lambda *_: None, max_files_per_trigger=1, alerts=(receiver.url,), alerts_timeout="60s")
    finally:
        receiver.stop()
    evaluation = evaluate(load([str(f) for f in EXAMPLES]).workflows, batches)
    found = read_results(f"sqlite:{db}")
    rows = [tuple(None if pd.isna(v) else v for v in r) for r in
            found[["stream", "ts", "window_start", "window_end", "value"]].itertuples(index=False)]
    assert_same(sorted(rows, key=lambda r: (r[0], r[1], r[2] or 0)), expected_rows(evaluation))
    assert len(chunks) > 10 and sum(chunks) > len(found) / 2  # most rows came in chunks
    incidents = reference_incidents(evaluation.rows, FLAGS)
    assert len(incidents) >= 10 and any(key[0] in FLAGS for key in incidents)
    assert {key: state for key, (state, _) in standing([a for _, a in receiver.received]).items()} == incidents


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.dictionaries(st.tuples(st.sampled_from(["a.x", "b.y", "c.z"]), st.integers(0, 20), st.integers(1, 3)),
                            st.one_of(st.none(), st.floats(-5, 5)), max_size=40),
       limit=st.sampled_from([0, 1, 3]), all_versions=st.booleans())
def test_sscript_results_of_sqlite_selected_a_stream_at_a_time_says_what_the_rows_read_whole_say(tmp_path, rows, limit,
                                                                                                all_versions):
    """`sscript results` reads a SQLite sink a stream at a time (sinks.sqlite_result_groups, never
    all its rows at once): its lines are those of every row read and taken newest by pandas."""
    from sensorscript.runtime.output.sinks import sqlite_result_groups
    from sensorscript.runtime.output.status import result_groups, result_lines

    path = tmp_path / "results.db"
    path.unlink(missing_ok=True)
    SQLiteSink(path)
    db = sqlite3.connect(path)
    with db:
        db.executemany("INSERT INTO results (stream, ts, version, value) VALUES (?, ?, ?, ?)",
                       [(s, t, v, value) for (s, t, v), value in rows.items()])
    db.close()
    stored = read_results(f"sqlite:{path}")
    if not all_versions:
        stored = newest(stored)
        stored = stored[stored["value"].notna()]
    assert (list(result_lines(sqlite_result_groups(path, None, all_versions, limit)))
            == list(result_lines(result_groups(stored, limit))))
    chosen = list(result_lines(sqlite_result_groups(path, ["b.y", "none.such"], all_versions, limit)))
    assert chosen == list(result_lines(result_groups(stored[stored["stream"] == "b.y"], limit)))


def test_a_parquet_sinks_rows_are_read_back_filtered_file_by_file(tmp_path):
    """What a correction reads back from a Parquet sink (its streams, lo <= ts < hi) is every row so
    chosen from the committed files, whether a file has the match columns or not (a job that had no
    pattern before an update); a file no batch committed is not read."""
    from sensorscript.runtime.output.sinks import open_sink, read_results

    spec = f"parquet:{tmp_path / 'parquet'}"
    rng = np.random.default_rng(3)
    written = []
    for batch in range(4):
        stamps = rng.integers(0, 10_000, 50)
        frame = pd.DataFrame({"stream": rng.choice(["w.a", "w.b", "v.c"], 50), "ts": stamps,
                              "window_start": stamps - 100, "window_end": stamps, "value": rng.normal(size=50),
                              "version": 1, "plan_version": 1})
        if batch % 2:  # a pattern's rows: bounds and events
            frame = frame.assign(start_ts=stamps - 5, end_ts=stamps, events='[{"var": "a"}]',
                                 window_start=None, window_end=None)
        open_sink(spec, matches=bool(batch % 2)).write(batch, BatchRows(frame, pd.DataFrame()))
        written.append(frame)
    (tmp_path / "parquet" / "batch-000099.parquet").write_bytes((tmp_path / "parquet" / "batch-000000.parquet").read_bytes())
    every = pd.concat(written, ignore_index=True)

    def key(frame):
        return sorted(zip(frame["stream"], frame["ts"].astype(int), frame["value"].astype(float).round(12)))

    assert key(read_results(spec)) == key(every)
    for streams, lo, hi in [(["w.a"], None, None), (["w.a", "v.c"], 2_000, 7_000), (None, 5_000, None),
                            (["nothing"], None, None), (["w.b"], -(2**63), 2**63 - 1)]:
        chosen = every[(every["stream"].isin(streams) if streams else True) & (every["ts"] >= (lo or 0))
                       & (every["ts"] < (hi or 10**18))]
        found = read_results(spec, streams, lo, hi)
        assert key(found) == key(chosen)
        assert list(found.columns) == list(RESULT_COLUMNS + MATCH_COLUMNS)
        assert found["events"].notna().sum() == chosen["events"].notna().sum()


def test_a_correction_reads_from_a_parquet_sink_what_it_asked_for_not_the_whole_store(tmp_path):
    """Reading one stream of forty back from a Parquet sink of 400,000 rows holds that stream's rows,
    not the store's (the driver of a compressed month grew by gigabytes when each correction read
    every file whole): the memory traced while reading is a small part of a whole read's."""
    import tracemalloc

    from sensorscript.runtime.output.sinks import open_sink, read_results

    spec = f"parquet:{tmp_path / 'parquet'}"
    streams = [f"w.s{i}" for i in range(40)]
    for batch in range(4):
        stamps = np.arange(batch * 100_000, (batch + 1) * 100_000)
        frame = pd.DataFrame({"stream": np.array(streams)[stamps % 40], "ts": stamps, "window_start": stamps - 100,
                              "window_end": stamps, "value": stamps / 3.0, "version": 1, "plan_version": 1})
        open_sink(spec).write(batch, BatchRows(frame, pd.DataFrame()))

    def traced(*asked):
        tracemalloc.start()
        try:
            found = read_results(spec, *asked)
            return len(found), tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    (every, whole), (one, chosen) = traced(), traced(["w.s7"], 50_000, 350_000)
    assert every == 400_000 and one == 7_500
    assert chosen < whole / 20, (chosen, whole)
