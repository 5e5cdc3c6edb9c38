"""Query times on SQLite results stores of 1 M, 10 M and 50 M rows (issue #27, item 4).

    .venv/bin/python scripts/bench_stores.py [--rows 1000000,10000000,50000000] [--streams 2000]
                                             [--runs 5] [--dir DIR] [--keep] [--compare]

For each size, a store shaped like a long-running job's: STREAMS streams written batch after batch
(one row per stream per 10 s step, in time order): window streams (a mean, a max...), one stream in 40
a combine flag (0 or 1), one in 40 a pattern whose matches come every 10th step (start_ts, end_ts,
events); then 1 % of the rows get a second version (a correction of late data), one in 100 of these a
retraction (value empty). The tables, index and view are the product's (SQLiteSink): the rows are
loaded by SQL (INSERT ... SELECT over a recursive CTE), then the sink opens the store, as it opens one
written by an earlier release, and builds its index (timed). Then, each the median of RUNS:
  sscript results --stream S   what it runs (running.show_results, on a compiled OUT holding the store)
  latest, a stream             SELECT * FROM latest WHERE stream = ?
  latest, a stream, an hour    ... AND ts >= ? AND ts < ?
  latest, all streams, a minute  SELECT * FROM latest WHERE ts >= ? AND ts < ?
  newest row per stream        each stream's newest row of latest (streams found by skipping through the index)
  MAX(ts) GROUP BY stream      the plain form of the same question, on results
  dashboard, first look        the alarms worked out from every row of the alarm streams (reading.JobOutput)
  dashboard, a workflow        the rows of one workflow's 4 streams, as its page first shows them
  dashboard, a new batch       the look after one batch of new rows (alarms and the workflow's rows)
  batch written                SQLiteSink.write of a batch: a row per stream, 20 metrics rows
With --compare, the same first on the schema of the release before issue #27 (the index on (stream,
ts) and `latest` as a correlated MAX), then the sink opens the store and the same again (after).
Prints one table per size with the file's size; deletes the stores unless --keep.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from sensorscript import running
from sensorscript.dashboard import reading
from sensorscript.runtime.output.sinks import METRIC_COLUMNS, QUARANTINE_COLUMNS, BatchRows, SQLiteSink

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_767_225_600_000  # 2026-01-01, ms
STEP_MS = 10_000
PATTERN_EVERY = 10  # a pattern stream matches every this many steps
# The schema of the release before issue #27 (tests/test_sinks.py's LATEST_BEFORE): for --compare.
BEFORE = """
CREATE INDEX results_by_stream ON results (stream, ts);
CREATE VIEW latest AS SELECT r.* FROM results r WHERE r.value IS NOT NULL AND r.version = (
    SELECT MAX(n.version) FROM results n WHERE n.stream = r.stream AND n.ts = r.ts
    AND n.window_start IS r.window_start AND n.window_end IS r.window_end
    AND n.start_ts IS r.start_ts AND n.end_ts IS r.end_ts);
"""
NEWEST_PER_STREAM = """
WITH RECURSIVE streams(stream) AS (
    SELECT MIN(stream) FROM results
    UNION ALL SELECT (SELECT MIN(stream) FROM results WHERE stream > streams.stream) FROM streams
    WHERE streams.stream IS NOT NULL)
SELECT l.* FROM streams JOIN latest l ON l.stream = streams.stream
    AND l.ts = (SELECT ts FROM latest WHERE stream = streams.stream ORDER BY ts DESC LIMIT 1)
"""


def stream_names(count: int) -> pd.DataFrame:
    """Stream number, name and kind: 'flag' (combine), 'match' (pattern) or 'window'."""
    kinds = ["flag" if s % 40 == 0 else "match" if s % 40 == 20 else "window" for s in range(count)]
    names = [f"wf{s // 4:04d}." + {"flag": "ALERT", "match": "JUMP"}.get(k, ("mean", "max", "min", "p90")[s % 4])
             for s, k in enumerate(kinds)]
    return pd.DataFrame({"s": range(count), "name": names, "kind": kinds})


def build(path: Path, rows: int, streams: pd.DataFrame) -> tuple[SQLiteSink, int, float]:
    """The rows, loaded under the product's tables without their index and view; (the sink, rows, seconds)."""
    started = time.time()
    sink = SQLiteSink(path)
    db = sqlite3.connect(path)
    for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type IN ('index', 'view') AND tbl_name IN "
                              "('results', 'latest') AND sql IS NOT NULL").fetchall():
        kind = db.execute("SELECT type FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0]
        db.execute(f"DROP {kind.upper()} {name}")
    db.execute("PRAGMA synchronous = OFF")
    db.execute("CREATE TEMP TABLE streams (s INTEGER PRIMARY KEY, name TEXT, kind TEXT)")
    db.executemany("INSERT INTO streams VALUES (?, ?, ?)", streams.itertuples(index=False))
    per_step = int((streams["kind"] != "match").sum() + (streams["kind"] == "match").sum() / PATTERN_EVERY)
    steps = max(1, round(rows / 1.01 / per_step))
    db.execute(f"""
        INSERT INTO results (stream, ts, window_start, window_end, value, version, start_ts, end_ts, events, plan_version)
        WITH RECURSIVE step(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM step WHERE k + 1 < {steps})
        SELECT name, {T0} + k * {STEP_MS} + CASE kind WHEN 'window' THEN 0 ELSE s * 3 END,
               CASE kind WHEN 'window' THEN {T0} + k * {STEP_MS} END,
               CASE kind WHEN 'window' THEN {T0} + (k + 1) * {STEP_MS} END,
               CASE kind WHEN 'flag' THEN ((k + s) % 50 = 0) WHEN 'match' THEN 4.5 ELSE (k * 7 + s) % 1000 / 10.0 END,
               1,
               CASE kind WHEN 'match' THEN {T0} + k * {STEP_MS} + s * 3 - 3000 END,
               CASE kind WHEN 'match' THEN {T0} + k * {STEP_MS} + s * 3 END,
               CASE kind WHEN 'match' THEN '[{{"var": "q", "ts": ' || ({T0} + k * {STEP_MS} + s * 3) ||
                   ', "value": 4.5, "sensor": "8TL3-N"}}]' END,
               1
        FROM step CROSS JOIN streams WHERE kind != 'match' OR k % {PATTERN_EVERY} = 0""")
    # Corrections of late data: a second version of 1 % of the rows, one in 100 of them a retraction.
    db.execute("""
        INSERT INTO results (stream, ts, window_start, window_end, value, version, start_ts, end_ts, events, plan_version)
        SELECT stream, ts, window_start, window_end, CASE WHEN rowid % 10000 = 0 THEN NULL ELSE value + 1 END, 2,
               start_ts, end_ts, CASE WHEN rowid % 10000 = 0 THEN NULL ELSE events END, plan_version
        FROM results WHERE rowid % 100 = 0""")
    db.commit()
    (count,) = db.execute("SELECT COUNT(*) FROM results").fetchone()
    db.close()
    return sink, count, time.time() - started


def timed(run, runs: int) -> float:
    """Median ms of `runs` calls."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        run()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def query(path: Path, sql: str, *parameters):
    def run():
        db = sqlite3.connect(path)
        try:
            return db.execute(sql, parameters).fetchall()
        finally:
            db.close()
    return run


def measure(out: Path, sink: SQLiteSink, streams: pd.DataFrame, runs: int, next_batch: list[int]) -> dict[str, float]:
    path = out / "results.db"
    db = sqlite3.connect(path)
    (last_ts,) = db.execute("SELECT MAX(ts) FROM results").fetchone()
    db.close()
    window = streams[streams["kind"] == "window"]["name"].iloc[len(streams) // 8]
    hour = (last_ts - 3_660_000, last_ts - 60_000)  # the last hour but a minute (1 M rows are 84 minutes)
    newest = query(path, NEWEST_PER_STREAM)()
    assert {row[0] for row in newest} == set(streams["name"]), "the newest row per stream: not one for each"
    times = {
        "sscript results --stream S": timed(lambda: list(running.show_results(out, [window], False, 50)), runs),
        "latest, a stream": timed(query(path, "SELECT * FROM latest WHERE stream = ?", window), runs),
        "latest, a stream, an hour": timed(query(path, "SELECT * FROM latest WHERE stream = ? AND ts >= ? AND ts < ?",
                                                 window, *hour), runs),
        "latest, all streams, a minute": timed(query(path, "SELECT * FROM latest WHERE ts >= ? AND ts < ?",
                                                    hour[0], hour[0] + 60_000), runs),
        "newest row per stream": timed(query(path, NEWEST_PER_STREAM), runs),
        "MAX(ts) GROUP BY stream": timed(query(path, "SELECT stream, MAX(ts) FROM results GROUP BY stream"), runs),
    }
    # The dashboard: the alarm streams (flags and patterns) as a compiled plan would name them.
    kinds = {row.name: {"flag": "combine", "match": "pattern"}.get(row.kind, "window") for row in streams.itertuples()}
    plan = dataclasses.replace(reading.JobOutput(out).plan(), kinds=kinds,
                               alarm_kinds={row.name: row.kind for row in streams.itertuples() if row.kind != "window"})
    workflow = [s for s in kinds if s.startswith(window.split(".")[0] + ".")]
    first, shown, again, written = [], [], [], []
    for _ in range(runs):
        output = reading.JobOutput(out)
        output.plan = lambda: plan
        started = time.perf_counter()
        output.alarms()
        first.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        output.stream_rows(workflow)
        shown.append((time.perf_counter() - started) * 1000)
        batch = next_batch[0]
        next_batch[0] += 1
        rows = typical_batch(streams, last_ts + STEP_MS * batch, batch)
        started = time.perf_counter()
        sink.write(batch, rows)
        written.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        output.alarms()
        output.stream_rows(workflow)
        again.append((time.perf_counter() - started) * 1000)
    times.update({"dashboard, first look": statistics.median(first), "dashboard, a workflow": statistics.median(shown),
                  "dashboard, a new batch": statistics.median(again), "batch written": statistics.median(written)})
    return times


def typical_batch(streams: pd.DataFrame, ts: int, batch: int) -> BatchRows:
    """A row per stream (windows closing at ts), and the metrics a batch writes."""
    window = streams["kind"] == "window"
    results = pd.DataFrame({"stream": streams["name"], "ts": ts, "window_start": ts - STEP_MS, "window_end": ts,
                            "value": 1.5, "version": 1, "plan_version": 1})
    results.loc[~window, ["window_start", "window_end"]] = None
    metrics = pd.DataFrame([(batch, p, time.time(), name, 1.0) for p in (0, 1)
                            for name in ("readings", "lag_ms", "watermark", "state_bytes", "late", "coverage", "latency",
                                         "buffer", "rows", "batch_ms")], columns=list(METRIC_COLUMNS))
    return BatchRows(results, pd.DataFrame(columns=list(QUARANTINE_COLUMNS)), None, metrics)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1000000,10000000,50000000", help="store sizes, one per comma")
    parser.add_argument("--streams", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", help="where the stores are built (default: a new folder under /tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the stores")
    parser.add_argument("--compare", action="store_true", help="time the schema of the release before too")
    args = parser.parse_args()
    reading.READ_EVERY_S = -1.0  # every look reads the sink
    work = Path(args.dir or tempfile.mkdtemp(prefix="sscript-bench-stores-"))
    streams = stream_names(args.streams)
    for rows in map(int, args.rows.split(",")):
        out = work / f"out-{rows}"
        shutil.rmtree(out, ignore_errors=True)
        compiled = subprocess.run([sys.executable, "-m", "sensorscript.cli", "compile",
                                   *sorted(str(p) for p in (ROOT / "workflows").glob("*.ss")), "-o", str(out),
                                   "--sensors", str(ROOT / "workflows" / "sensors.csv")], capture_output=True, text=True)
        if compiled.returncode:
            print(compiled.stderr, file=sys.stderr)
            return 1
        path = out / "results.db"
        sink, count, seconds = build(path, rows, streams)
        print(f"{count:,} rows loaded in {seconds:.0f} s; {path.stat().st_size / 2**30:.2f} GiB without indexes",
              flush=True)
        next_batch = [1]
        before = None
        if args.compare:
            started = time.time()
            db = sqlite3.connect(path)
            db.executescript(BEFORE)
            db.close()
            print(f"  before: index built in {time.time() - started:.0f} s; "
                  f"{path.stat().st_size / 2**30:.2f} GiB", flush=True)
            before = measure(out, sink, streams, args.runs, next_batch)
        started = time.time()
        SQLiteSink(path)  # as when a job of this release opens the store
        print(f"  the sink opened the store (its index built) in {time.time() - started:.0f} s; "
              f"{path.stat().st_size / 2**30:.2f} GiB", flush=True)
        after = measure(out, sink, streams, args.runs, next_batch)
        print(f"\n{count:,} rows, {args.streams:,} streams, median ms of {args.runs}")
        print(f"{'query':30}{'before':>12}{'after':>12}" if before else f"{'query':30}{'ms':>12}")
        for name, ms in after.items():
            print(f"{name:30}{before[name]:12.1f}{ms:12.1f}" if before else f"{name:30}{ms:12.1f}")
        print(flush=True)
        if not args.keep:
            shutil.rmtree(out)
    if not args.keep and not args.dir:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
