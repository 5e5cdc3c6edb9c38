"""Sustained load (issue #15): the compiled job fed in real time for minutes, through the file, socket, MQTT or Kafka source.

    .venv/bin/python scripts/soak.py [--source file|socket|mqtt|kafka] [--sink sqlite|parquet|postgresql|ADDRESS]
                                     [--lines-per-message 20] [--rate 40000]
                                     [--minutes 10] [--sensors 1000] [--workflows 1024] [--partitions 2]
                                     [--out DIR] [--json PATH]
    .venv/bin/python scripts/soak.py --find-max [--source file|socket|mqtt|kafka] [--start-rate 20000] [--step-factor 1.25]
                                     [--step-seconds 60] [--minutes 15] ...
    .venv/bin/python scripts/soak.py --days 30 [--day-seconds 60] [--retain STORE=DURATION ...] ...

Not part of the test suite (tests/test_scripts.py only smoke-runs it, for seconds, at a tiny rate). The
machine should be otherwise idle while it runs.

The command line of the package scripts/soaking/, whose modules say what each part does and measures:
the bundled example workflows and `--workflows` generated bridge workflows over `--sensors` sensors
are compiled into OUT/job (soaking.workload) and the job runs as `python OUT/job/job.py --input SOURCE
--out OUT/job [--sink SINK]` in a child process (soaking.job), fed readings paced by the wall clock through files, a
socket, or a broker of its own in OUT/broker, stopped at the end whatever happened (soaking.feed):
mosquitto (--source mqtt) or Apache Kafka (--source kafka, issue #41: `--input kafka://127.0.0.1:
PORT/soak`, a topic of `--partitions` partitions, the job's count), the readings in messages of
`--lines-per-message` lines (a gateway's batch). While it runs, what it wrote (soaking.sink), the lag
behind the feed, the processes' memory and CPU (soaking.sampling) are sampled, the same for every
source (a chunk counts as written once the file is renamed, the socket's send returned, or the
broker acknowledged every message of it); the feed's first `--warmup` seconds (60)
are left out of the verdict (soaking.figures, soaking.verdict). `--sink` is where the job writes,
and what the soak reads: sqlite (OUT/job/results.db, the default), parquet (OUT/job/results/, written
by the executors), postgresql (a server of the soak's own, scripts/postgres_server.py, fsync on,
removed at the end) or a postgresql:// address (the password from PGPASSWORD or ~/.pgpass). --find-max raises the rate in steps
while the lag stays bounded (soaking.findmax). A run whose job stops (or stops reading the socket) is
reported up to there, with the job's first error line (Spark's errors are in OUT/job.log), and the
script exits with 1. Results: the report on stdout and in OUT/report.txt, everything in OUT/soak.json
(or --json) (soaking.report).

--days N (issue #27: a compressed month): event time runs a day per `--day-seconds` of wall time
(the rate per wall second stays --rate), some readings come late, a few too late to correct
(soaking.feed); the job runs with --late correct and --input-cleanup delete, and `--retain
STORE=DURATION` (repeatable) and `--job-arg ARG` are passed on to job.py as they are. What the job
keeps on disk is sampled (soaking.stores) and judged per simulated day: each store flat once its
horizon has passed, batch time not growing with the batches.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from soaking.report import report
from soaking.run import run
from soaking.sink import job_sink, reading_of
from soaking.workload import prepare


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", choices=("file", "socket", "mqtt", "kafka"), default="file")
    parser.add_argument("--sink", default="sqlite",
                        help="sqlite (default), parquet, postgresql (a server of its own) or a postgresql:// address")
    parser.add_argument("--lines-per-message", type=int, default=20,
                        help="--source mqtt, kafka: readings per message (a gateway's batch)")
    parser.add_argument("--rate", type=float, default=40_000, help="readings per second, all sensors")
    parser.add_argument("--minutes", type=float, default=None, help="feed for this long (default 10; "
                                                                    "--find-max: at most this long, default 15)")
    parser.add_argument("--sensors", type=int, default=1000)
    parser.add_argument("--workflows", type=int, default=1024, help="generated bridge workflows beside the examples")
    parser.add_argument("--partitions", type=int, default=2,
                        help="the job's partitions (--source kafka: the topic's too)")
    parser.add_argument("--out", help="work folder (default: a new one under /tmp); emptied first")
    parser.add_argument("--json", help="also write the results here (they are always in OUT/soak.json)")
    parser.add_argument("--warmup", type=float, default=60, help="seconds of feed left out of the figures")
    parser.add_argument("--state-from", type=float, help="judge the state from this second of feed on "
                                                         "(default: warm-up + the job's fill time)")
    parser.add_argument("--max-lag", type=float, help="largest lag allowed, s (default 30; --find-max 10)")
    parser.add_argument("--find-max", action="store_true", help="raise the rate in steps while the lag stays bounded")
    parser.add_argument("--start-rate", type=float, default=20_000)
    parser.add_argument("--step-factor", type=float, default=1.25)
    parser.add_argument("--step-seconds", type=float, default=60)
    parser.add_argument("--days", type=float, help="feed this many days of event time, a day per --day-seconds")
    parser.add_argument("--day-seconds", type=float, default=60, help="wall seconds per day of event time (--days)")
    parser.add_argument("--retain", action="append", default=[], metavar="STORE=DURATION",
                        help="passed on to job.py as --retain=STORE=DURATION (repeatable)")
    parser.add_argument("--job-arg", action="append", default=[], metavar="ARG",
                        help="passed on to job.py as it is (repeatable; --job-arg=--watermark --job-arg=fixed:1s)")
    args = parser.parse_args()
    if args.sink not in ("sqlite", "parquet", "postgresql") and not args.sink.startswith(("postgresql://", "postgres://")):
        parser.error(f"--sink {args.sink}: sqlite, parquet, postgresql or a postgresql:// address")
    if args.days and args.find_max:
        parser.error("--days and --find-max measure different things: give one")
    if args.days:
        args.minutes = args.days * args.day_seconds / 60
    args.minutes = args.minutes if args.minutes is not None else (15 if args.find_max else 10)
    args.max_lag = args.max_lag if args.max_lag is not None else (10 if args.find_max else 30)
    if args.find_max:
        args.rate = args.start_rate
    return args


def main() -> None:
    args = arguments()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    out = Path(args.out or tempfile.mkdtemp(prefix=f"sscript-soak-{args.source}-"))
    for stale in ("job", "input", "workflows", "broker"):
        shutil.rmtree(out / stale, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    workload = prepare(args, out)
    print(f"soak: {workload.workflows} workflows over {len(workload.referenced)} referenced sensors of "
          f"{len(workload.sensors)} fed; compiled in {time.time() - started:.1f} s into {out / 'job'}; the state "
          f"fills for {workload.fill_ms / 60_000:.1f} min", flush=True)
    server = None
    if args.sink == "postgresql":  # a server of its own, on a free port of 127.0.0.1
        from postgres_server import PostgresServer  # scripts/postgres_server.py

        server = PostgresServer().start()
        os.environ.update(server.environment)  # the job's password, as libpq takes it
    spec = job_sink(server.url if server else args.sink, out / "job")
    print(f"soak: the job writes to {spec}", flush=True)
    try:
        soak = run(args, out, workload, reading_of(spec), lambda line: print(line, flush=True))
    finally:
        if server is not None:
            server.stop()
            server.remove()
    lines, document = report(args, out, workload, soak)
    print("\n".join(lines), flush=True)
    (out / "report.txt").write_text("\n".join(lines) + "\n")
    text = json.dumps(document, indent=1, default=float)
    (out / "soak.json").write_text(text)
    if args.json:
        Path(args.json).write_text(text)
    if soak.failure:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
