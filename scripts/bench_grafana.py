"""Grafana's panel queries on a PostgreSQL sink of 50 M result rows (issue #42, item 7).

    .venv/bin/python scripts/bench_grafana.py [--rows 50000000] [--streams 2000] [--runs 5] [--keep DIR]

A PostgreSQL of its own (scripts/postgres_server.py, fsync on) holds the product's tables
(PostgresSink makes them, with their indexes and partitions by day), filled like a long-running job's
sink: STREAMS streams of STREAMS/4 workflows, a row per stream per 10 s step in time order, written
batch after batch (a step a batch): window streams, one stream in 40 a flag (0 or 1), one in 40 a
pattern whose matches come every 10th step; 1 % of the rows a second version (a correction), one in
100 of these a retraction; late readings, quarantined lines and the alarms (a match's, a flag's
turning on and off) beside. Then every panel of
docs/grafana/sensorscript-postgresql.json and its workflow variable run as Grafana sends them (the
macros expanded for the last 6 hours of the data, the dashboard's default range, and one workflow
with a flag and a pattern; the alarms also for all workflows), each the median of RUNS, in ms, with
the rows it returned.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GRAFANA = ROOT / "docs" / "grafana" / "sensorscript-postgresql.json"
T0 = 1_767_225_600_000  # 2026-01-01, ms
STEP_MS = 10_000
HOURS = 6  # the dashboard's default range: now-6h


def grafana_sql(sql: str, start_s: int, end_s: int, workflows: list[str]) -> str:
    """A panel's SQL as Grafana's PostgreSQL data source sends it: $__unixEpochFrom()/To() as integer
    seconds, $__timeFilter(column) as a BETWEEN of two UTC timestamps, a multi-value variable as a
    list of quoted values."""
    def stamp(s: int) -> str:
        return datetime.fromtimestamp(s, timezone.utc).strftime("'%Y-%m-%dT%H:%M:%SZ'")

    sql = sql.replace("$__unixEpochFrom()", str(int(start_s))).replace("$__unixEpochTo()", str(int(end_s)))
    sql = re.sub(r"\$__timeFilter\(([^)]+)\)", lambda m: f"{m.group(1)} BETWEEN {stamp(start_s)} AND {stamp(end_s)}",
                 sql)
    sql = sql.replace("$workflow", ", ".join(f"'{w}'" for w in workflows))
    if "$" in sql:
        raise ValueError(f"a macro or variable left: {sql}")
    return sql


def fill(db, schema: str, streams: int, steps: int) -> None:
    """The rows, by SQL on the server, a chunk of steps a statement (numbers written into the SQL: it has
    no parameters, and its `%` are SQL's)."""
    s = f'"{schema}"'
    kind = "(CASE WHEN g.s % 40 = 0 THEN 'flag' WHEN g.s % 40 = 1 THEN 'match' ELSE 'window' END)"
    name = "('wf' || lpad((g.s / 4)::text, 4, '0') || '.s' || (g.s % 4)::text)"
    db.execute(f"INSERT INTO {s}.streams (stream, workflow, alarm) SELECT {name}, split_part({name}, '.', 1), "
               f"NULLIF({kind}, 'window') FROM generate_series(0, {streams - 1}) AS g(s)")
    chunk = max(1, 2_000_000 // streams)
    for first in range(0, steps, chunk):
        last = min(steps, first + chunk) - 1
        db.execute(f"""
            INSERT INTO {s}.results (stream, ts, window_start, window_end, value, version, start_ts, end_ts, events,
                                     plan_version, batch_id)
            SELECT {name}, {T0} + k * {STEP_MS} + {STEP_MS - 1},
                   CASE WHEN {kind} = 'window' THEN {T0} + k * {STEP_MS} - 50000 END,
                   CASE WHEN {kind} = 'window' THEN {T0} + k * {STEP_MS} + {STEP_MS} END,
                   CASE WHEN {kind} = 'flag' THEN ((k / 7 + g.s) % 5 = 0)::int::float8
                        ELSE ((g.s * 7 + k) % 100) / 10.0 END,
                   1,
                   CASE WHEN {kind} = 'match' THEN {T0} + k * {STEP_MS} - 3000 END,
                   CASE WHEN {kind} = 'match' THEN {T0} + k * {STEP_MS} + {STEP_MS - 1} END,
                   CASE WHEN {kind} = 'match' THEN '[{{"var": "a", "sensor": "S' || g.s || '"}}]' END,
                   1, k
            FROM generate_series({first}, {last}) AS t(k) CROSS JOIN generate_series(0, {streams - 1}) AS g(s)
            WHERE {kind} <> 'match' OR k % 10 = 0""")
    # 1 % of the rows corrected (a second version), one in 100 of those retracted; under negative ids.
    db.execute(f"""INSERT INTO {s}.results SELECT stream, ts, window_start, window_end,
                       CASE WHEN (hashtext(stream) + ts) % 10000 = 0 THEN NULL ELSE value + 1 END, 2, start_ts, end_ts,
                       events, plan_version, -1 - batch_id
                   FROM {s}.results WHERE (hashtext(stream) + ts) % 100 = 0 AND version = 1""")
    # The alarms table as --alerts postgresql://... fills it: each match fires; each flag fires where its
    # value above turns 1 (every 35 steps, for 7) and resolves 7 steps later (revision 2 of its incident).
    ts = f"{T0} + k * {STEP_MS} + {STEP_MS - 1}"
    on = f"{T0} + (k - CASE WHEN r.revision = 2 THEN 7 ELSE 0 END) * {STEP_MS} + {STEP_MS - 1}"
    db.execute(f"""
        INSERT INTO {s}.alarms (id, incident, revision, state, kind, stream, workflow, ts, started, value, version,
                                retracted, summary, alarm)
        SELECT {name} || '/' || ({on}) || '/' || r.revision, {name} || '/' || ({on}), r.revision,
               CASE WHEN r.revision = 2 THEN 'resolved' ELSE 'firing' END, {kind}, {name}, split_part({name}, '.', 1),
               {ts}, {on}, 1, 1, false, {name} || ' turned on', '{{}}'::jsonb
        FROM generate_series(0, {steps - 1}) AS t(k) CROSS JOIN generate_series(0, {streams - 1}) AS g(s)
             CROSS JOIN (VALUES (1), (2)) AS r(revision)
        WHERE ({kind} = 'match' AND k % 10 = 0 AND r.revision = 1)
           OR ({kind} = 'flag' AND k % 7 = 0 AND (k / 7 + g.s) % 5 = r.revision - 1 AND k >= 7 * (r.revision - 1))""")
    db.execute(f"""INSERT INTO {s}.late SELECT 'S' || (k % 700), {T0} + k * {STEP_MS} - 20000, 1.5,
                       {T0} + k * {STEP_MS}, 'wf0000.s0', k, 0 FROM generate_series(0, {steps - 1}) AS t(k)""")
    db.execute(f"""INSERT INTO {s}.quarantine (raw, reason, batch_id, time)
                   SELECT 'S1,x' || k, CASE WHEN k % 3 = 0 THEN 'bad ts' ELSE 'too few fields' END, k,
                          to_timestamp(({T0} + k * {STEP_MS}) / 1000.0) FROM generate_series(0, {steps - 1}, 7) AS t(k)""")
    db.execute(f"INSERT INTO {s}.sscript_batches (batch_id) SELECT k FROM generate_series(0, {steps - 1}) AS t(k)")
    db.execute(f"ANALYZE {s}.results")
    for table in ("late", "quarantine", "streams", "alarms", "sscript_batches"):
        db.execute(f"ANALYZE {s}.{table}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000_000)
    parser.add_argument("--streams", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", help="the server's folder, kept (default: a temporary one, removed)")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import os

    from postgres_server import PostgresServer

    from sensorscript.times import DAY_MS
    from sensorscript.runtime.output.sinks import open_sink

    # A window row per stream and step, a pattern's every 10th: rows a step ~ streams * (1 - 0.9 / 40).
    steps = max(1, round(args.rows / (args.streams * (1 - 0.9 / 40))))
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="sscript-bench-grafana-"))
    server = PostgresServer(folder / "pg" if args.keep else None).start()
    os.environ["PGPASSWORD"] = server.password
    try:
        url = server.url + "?schema=bench"
        sink = open_sink(url)
        end_ms = T0 + steps * STEP_MS
        with server.connect() as db:
            days = set(range(T0 // DAY_MS - 1, end_ms // DAY_MS + 1))  # as the job makes them, before it writes
            sink.tables.partitions(db, "results", days)
            sink.tables.partitions(db, "late", days)
            started = time.perf_counter()
            fill(db, "bench", args.streams, steps)
            loaded = time.perf_counter() - started
            rows, size = db.execute("SELECT (SELECT count(*) FROM bench.results), "
                                    "pg_total_relation_size('bench.results') + coalesce((SELECT sum("
                                    "pg_total_relation_size(i.inhrelid)) FROM pg_inherits i WHERE "
                                    "i.inhparent = 'bench.results'::regclass), 0)").fetchone()
        print(f"store: {rows:,} result rows of {args.streams:,} streams over {steps:,} steps of 10 s "
              f"({steps * STEP_MS / 3_600_000:,.1f} h of event time, {(end_ms - 1) // DAY_MS - T0 // DAY_MS + 1} days: "
              f"a partition each), "
              f"{size / 2**30:,.2f} GiB with indexes, loaded in {loaded:,.0f} s")
        grafana = json.loads(GRAFANA.read_text())
        start_s, end_s = (end_ms // 1000) - HOURS * 3600, end_ms // 1000
        one = ["wf0000"]  # streams 0-3: a flag (s0), a pattern (s1), two windows
        cases = [("variable workflow", grafana["templating"]["list"][0]["query"])]
        for panel in grafana["panels"]:
            sql = panel["targets"][0]["rawSql"]
            cases.append((panel["title"], grafana_sql(sql, start_s, end_s, one)))
            if panel["title"] == "Newest alarms":
                cases.append((panel["title"] + ", all workflows", grafana_sql(
                    sql, start_s, end_s, [f"wf{w:04d}" for w in range(args.streams // 4)])))
        print(f"{'query':<44} {'median ms':>10} {'rows':>8}   (last {HOURS} h of the data; workflow {one[0]})")
        with server.connect(options="-c search_path=bench") as db:
            for title, sql in cases:
                times, found = [], 0
                for _ in range(args.runs):
                    began = time.perf_counter()
                    found = len(db.execute(sql).fetchall())
                    times.append((time.perf_counter() - began) * 1000)
                print(f"{title:<44} {statistics.median(times):>10,.1f} {found:>8,}")
    finally:
        os.environ.pop("PGPASSWORD", None)
        if args.keep:
            server.stop()
        else:
            server.remove()
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
