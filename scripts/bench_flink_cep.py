"""Patterns against Flink SQL MATCH_RECOGNIZE, on the same events, in one run.

    bash scripts/flink_env.sh     # once: .venv-flink with the pinned apache-flink (not a project dependency)
    .venv/bin/python scripts/bench_flink_cep.py [--sensors 1000] [--rows 10000000] [--pattern ab|rare|abcd] [--keep DIR]
                                                [--flink-batch] [--skip-flink] [--compare-sinks]

The seeded bridge fleet (`--sensors` sensors, most at 20 Hz or more) writes about `--rows` readings
(a slow sine per sensor plus noise) in `--files` CSV files. One pattern, per sensor, strict
contiguity (each match's events are consecutive readings of its sensor), within one minute:

  ab    SensorScript  P = pattern(a: U -> b: U) where a.value > 9 and b.value <= 9
                          within 1min strategy strict partition by sensor;
        Flink SQL     PATTERN (A B) ... DEFINE A AS value > 9, B AS value <= 9
  rare  the same with a.value > 12 and b.value < 9 (few matches)
  abcd  SensorScript  P = pattern(a: U -> b: U+ -> c: U -> d: U) where a.value < -9 and
                          b.value >= -9 and b.value < -8 and c.value >= -8 and c.value < -7 and
                          d.value >= -7 within 1min strategy strict partition by sensor;
        Flink SQL     PATTERN (A B+ C D) with the same conditions (B and C exclude each other, so
                      the closure is the run of B readings Flink's greedy quantifier takes)

(U is the union of every sensor.) Both read the same files with 2 cores: ours is the compiled job
on local[2] with --once, warm (a first run on the input's first 200,000 lines, as bench_job.py), timed
from the query's start (the Spark session already up); Flink a
streaming-mode job over the bounded files, parallelism 2, ONE ROW PER MATCH, AFTER MATCH SKIP TO
NEXT ROW (every start, as strict enumerates them), timed from submitting the INSERT. Flink's
watermark lags by the input's span (its file source reads the files in no fixed order; a shorter
lag would drop readings as late), so both match with all of the input known. The matches are
compared one by one (sensor, first and last event time, length) and events per second printed.
With --compare-sinks (issue #42), ours runs again with the PostgreSQL sink (a server of its own,
scripts/postgres_server.py, fsync on: the matches written by the executors), SQLite and PostgreSQL
again, each warm, and prints each run's time and result rows a second.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sqlite3
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_flink import (compile_and_run, fleet, flink_not_run, flink_version,  # noqa: E402 (the same Flink environment)
                         run_flink_program)

from sensorscript.workload import write_readings  # noqa: E402

PATTERNS = {
    "ab": {
        "script": "P = pattern(a: U -> b: U) where a.value > 9 and b.value <= 9 within 1min strategy strict "
                  "partition by sensor;",
        "flink": "PATTERN (A B) WITHIN INTERVAL '1' MINUTE DEFINE A AS A.`value` > 9, B AS B.`value` <= 9",
        "measures": "A.ts AS first_ts, B.ts AS last_ts, 2 AS events",
    },
    "rare": {  # few matches: what a pattern costs per reading when it seldom completes
        "script": "P = pattern(a: U -> b: U) where a.value > 12 and b.value < 9 within 1min strategy strict "
                  "partition by sensor;",
        "flink": "PATTERN (A B) WITHIN INTERVAL '1' MINUTE DEFINE A AS A.`value` > 12, B AS B.`value` < 9",
        "measures": "A.ts AS first_ts, B.ts AS last_ts, 2 AS events",
    },
    "abcd": {
        "script": "P = pattern(a: U -> b: U+ -> c: U -> d: U) where a.value < -9 and b.value >= -9 and "
                  "b.value < -8 and c.value >= -8 and c.value < -7 and d.value >= -7 within 1min strategy strict "
                  "partition by sensor;",
        "flink": "PATTERN (A B+ C D) WITHIN INTERVAL '1' MINUTE DEFINE A AS A.`value` < -9, "
                 "B AS B.`value` >= -9 AND B.`value` < -8, C AS C.`value` >= -8 AND C.`value` < -7, "
                 "D AS D.`value` >= -7",
        "measures": "A.ts AS first_ts, D.ts AS last_ts, CAST(COUNT(B.ts) + 3 AS INT) AS events",
    },
}

FLINK_PROGRAM = r'''
import json, sys, time
started = time.perf_counter()
config = json.loads(sys.argv[1])
from pyflink.table import EnvironmentSettings, TableEnvironment

env = TableEnvironment.create(EnvironmentSettings.in_batch_mode() if config["batch"]
                              else EnvironmentSettings.in_streaming_mode())
conf = env.get_config()
conf.set("parallelism.default", str(config["parallelism"]))
conf.set("table.exec.resource.default-parallelism", str(config["parallelism"]))
conf.set("table.local-time-zone", "UTC")
conf.set("pipeline.name", "bench_flink_cep")
conf.set("table.exec.source.idle-timeout", "1 s")  # a reader with no split left must not hold the watermark
ready = time.perf_counter()
seconds, ms = divmod(config["delay_ms"], 1000)
delay = (f"INTERVAL '{seconds // 86400} {seconds // 3600 % 24:02}:{seconds // 60 % 60:02}:{seconds % 60:02}"
         f".{ms:03}' DAY TO SECOND(3)")
env.execute_sql(f"""
    CREATE TABLE readings (
        sensor_id STRING, ts BIGINT, `value` DOUBLE,
        rowtime AS TO_TIMESTAMP_LTZ(COALESCE(ts, 0), 3),
        WATERMARK FOR rowtime AS rowtime - {delay}
    ) WITH ('connector' = 'filesystem', 'path' = 'file://{config["data"]}', 'format' = 'csv',
            'csv.ignore-parse-errors' = 'true')""")
env.execute_sql(f"""
    CREATE TABLE found (sensor_id STRING, first_ts BIGINT, last_ts BIGINT, events INT)
    WITH ('connector' = 'filesystem', 'path' = 'file://{config["out"]}', 'format' = 'csv')""")
env.execute_sql("CREATE TEMPORARY VIEW good AS SELECT * FROM readings WHERE ts IS NOT NULL AND `value` IS NOT NULL")
submitted = time.perf_counter()
result = env.execute_sql(f"""
    INSERT INTO found
    SELECT sensor_id, first_ts, last_ts, events FROM good
    MATCH_RECOGNIZE (
        PARTITION BY sensor_id ORDER BY rowtime
        MEASURES {config["measures"]}
        ONE ROW PER MATCH
        AFTER MATCH SKIP TO NEXT ROW
        {config["pattern"]}
    )""")
result.wait()
finished = time.perf_counter()
print("BENCH " + json.dumps({"startup_seconds": ready - started, "job_seconds": finished - submitted}))
'''


def run_ours(work: Path, sensors, registry: Path, data: Path, pattern: str, partitions: int,
             also: tuple[str, ...] = (), warm_up: bool = True):
    folder = work / "workflows"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    union = "U = union(" + ", ".join(f'"{s.sensor_id}"' for s in sensors) + ");"
    (folder / "cep.ss").write_text(union + "\n" + PATTERNS[pattern]["script"] + "\n")
    summary, compile_seconds, compiled = compile_and_run(work, [str(folder / "cep.ss")], registry, data, partitions,
                                                         also, warm_up)
    with sqlite3.connect(work / "out" / "results.db") as db:
        rows = db.execute("SELECT events FROM results WHERE stream = 'cep.P'").fetchall()
    matches = []
    for (events,) in rows:
        bound = json.loads(events)
        matches.append((bound[0]["sensor"], bound[0]["ts"], bound[-1]["ts"], len(bound)))
    return summary, compile_seconds, compiled, pd.DataFrame(matches, columns=["sensor_id", "first_ts", "last_ts",
                                                                              "events"])


@contextlib.contextmanager
def _postgres(server_class):
    """A PostgreSQL of its own (scripts/postgres_server.py), its password in PGPASSWORD meanwhile."""
    server = server_class().start()
    os.environ["PGPASSWORD"] = server.password
    try:
        yield server
    finally:
        os.environ.pop("PGPASSWORD", None)
        server.remove()


def run_flink(work: Path, data: Path, pattern: str, parallelism: int, delay_ms: int, batch: bool = False):
    out = work / "flink-matches"
    shutil.rmtree(out, ignore_errors=True)
    program = work / "flink_cep.py"
    program.write_text(FLINK_PROGRAM)
    config = {"data": str(data.resolve()), "out": str(out.resolve()), "parallelism": parallelism,
              "delay_ms": delay_ms, "pattern": PATTERNS[pattern]["flink"], "measures": PATTERNS[pattern]["measures"],
              "batch": batch}
    timings, parts = run_flink_program(program, config, out)
    frames = [pd.read_csv(p, header=None, names=["sensor_id", "first_ts", "last_ts", "events"]) for p in parts]
    matches = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["sensor_id", "first_ts", "last_ts", "events"])
    return timings, matches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sensors", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=10_000_000, help="about this many readings")
    parser.add_argument("--pattern", choices=sorted(PATTERNS), default="ab")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--flink-parallelism", type=int, default=2)
    parser.add_argument("--flink-delay", type=int, help="Flink's watermark delay in ms (default: the input's span; "
                                                        "with --files 1 the input is in time order and 1000 will do)")
    parser.add_argument("--skip-flink", action="store_true")
    parser.add_argument("--flink-batch", action="store_true",
                        help="run Flink's job in batch mode (bounded input; MATCH_RECOGNIZE sorts each partition by time)")
    parser.add_argument("--keep", help="work in this folder and keep it (the input is reused when there)")
    parser.add_argument("--no-warm-up", dest="warm_up", action="store_false",
                        help="leave out the warm-up runs of our job (a smoke run; its rates are then a cold job's)")
    parser.add_argument("--compare-sinks", action="store_true",
                        help="run ours again with the PostgreSQL sink (a server of its own, fsync on) and SQLite, "
                             "alternated: PostgreSQL, SQLite, PostgreSQL")
    args = parser.parse_args()
    work, sensors, seconds, registry = fleet(args.sensors, args.rows, args.keep, "sscript-flink-cep-",
                                             need_flink=not args.skip_flink)
    data = work / "data"
    stamp = data / f".rows-{args.rows}-{args.sensors}-{args.files}"
    if not stamp.exists():
        shutil.rmtree(data, ignore_errors=True)
        started = time.perf_counter()
        write_readings(sensors, data, seconds, files=args.files)
        stamp.touch()
        print(f"wrote the input in {time.perf_counter() - started:.1f} s")
    readings = sum(sum(1 for _ in open(p)) - 1 for p in data.glob("*.csv"))
    print(f"input: {readings:,} readings of {len(sensors):,} sensors, {seconds:.1f} s of event time, "
          f"{args.files} files; pattern {args.pattern}: {PATTERNS[args.pattern]['script']}")

    with contextlib.ExitStack() as stack:
        also: tuple[str, ...] = ()
        if args.compare_sinks:
            from postgres_server import PostgresServer

            server = stack.enter_context(_postgres(PostgresServer))
            also = (server.url, f"sqlite:{work / 'out-sinks' / 'results.db'}", server.url)
        summary, compile_seconds, compiled, ours = run_ours(work, sensors, registry, data, args.pattern,
                                                            args.partitions, also, args.warm_up)
    ours_rate = readings / summary.seconds
    print(f"ours  (--once, SQLite sink): {ours_rate:>12,.0f} events/s  ({summary.seconds:.1f} s; "
          f"{len(ours):,} matches; compile {compile_seconds:.1f} s; "
          f"pattern on partitions {compiled.plan.partitions_of(next(iter(compiled.plan.patterns)))})")
    if args.skip_flink:
        flink_not_run(FLINK_PROGRAM, "--skip-flink")
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        return
    delay = args.flink_delay if args.flink_delay is not None else int(seconds * 1000) + 1000
    flink, theirs = run_flink(work, data, args.pattern, args.flink_parallelism, delay, args.flink_batch)
    flink_rate = readings / flink["job_seconds"]
    mode = "batch mode" if args.flink_batch else f"streaming, watermark delay {delay:,} ms"
    print(f"Flink (apache-flink {flink_version()}, parallelism {args.flink_parallelism}, MATCH_RECOGNIZE, {mode}): "
          f"{flink_rate:>12,.0f} events/s  ({flink['job_seconds']:.1f} s from submission; JVM + PyFlink start "
          f"{flink['startup_seconds']:.1f} s; {len(theirs):,} matches)")
    key = ["sensor_id", "first_ts", "last_ts", "events"]
    joined = ours.astype({"events": int}).merge(theirs.astype({"events": int}), on=key, how="outer", indicator=True)
    only_ours, only_flink = (joined["_merge"] == "left_only").sum(), (joined["_merge"] == "right_only").sum()
    print(f"matches: ours {len(ours):,}, Flink {len(theirs):,}; {only_ours:,} only ours, {only_flink:,} only Flink")
    for row in joined[joined["_merge"] != "both"].head(5).itertuples():
        print(f"  {row._5}: {row.sensor_id} {row.first_ts}..{row.last_ts} ({row.events} events)")
    print(f"ours / Flink: {ours_rate / flink_rate:.2f}   same matches: {'yes' if not (only_ours or only_flink) else 'NO'}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
