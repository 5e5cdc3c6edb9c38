"""What a generated job.py imports: the plan's data class, its stages and `main`.

The generated job holds its plan as data (sensors, partitions, programs: `runtime/plan/program.py`)
and wires these stages in order: stage 0 packs readings per partition (`runtime/ingest/packets.py`),
the stateful operators run each partition's computations (`runtime/control/operators.py`), and the run
loop writes what they emit (`runtime/control/run_loop.py`).

May import: plan, ingest, state, output, control.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from sensorscript.runtime.control.operators import run_partitions
from sensorscript.runtime.ingest.packets import assign_partitions, control_rows
from sensorscript.runtime.ingest.mqtt import Tls
from sensorscript.runtime.ingest.source import STREAMS_HELP, check_feed, input_cleanup, streamed
from sensorscript.runtime.plan.program import Job
from sensorscript.runtime.control.run_loop import REFRESH_AFTER, JobFailed, run
from sensorscript.runtime.control.session import SPARK_LOG, spark_session
from sensorscript.runtime.output.alerts import AlertSettings
from sensorscript.runtime.output.sinks import check_sink

__all__ = ["Job", "assign_partitions", "control_rows", "run_partitions", "main", "run", "spark_session"]


def main(job: Job, build_query, argv: list[str] | None = None) -> int:
    """`python job.py --input DATA [--once] [--sink ...]`, or the same through spark-submit."""
    here = Path(sys.argv[0]).resolve().parent
    parser = argparse.ArgumentParser(prog="job.py", description=f"SensorScript job '{job.name}': workflows "
                                     f"{', '.join(job.workflows)}; {job.partitions} partition(s).")
    parser.add_argument("--input", required=True, help=f"folder of CSV/JSON-lines files, {STREAMS_HELP}")
    parser.add_argument("--once", action="store_true", help="process what is there, emit every window, stop")
    parser.add_argument("--fresh", action="store_true", help="start afresh instead of continuing from the checkpoint")
    parser.add_argument("--sink", help="sqlite:PATH (default OUT/results.db), csv:PATH, parquet:PATH or console")
    parser.add_argument("--out", default=str(here), help="folder for checkpoints and default results")
    parser.add_argument("--master", help="Spark master (default: local[2], or the one spark-submit gives)")
    parser.add_argument("--trigger-seconds", type=float, default=1.0, help="micro-batch interval when streaming")
    parser.add_argument("--max-files-per-trigger", type=int, help="bound a micro-batch to this many files")
    parser.add_argument("--replay-order", choices=("time", "name"), default="time",
                        help="the order a folder's files are read in: by modification time (Spark's) or by name")
    parser.add_argument("--watermark", help=f"watermark policy for this run (compiled: {job.watermark})")
    parser.add_argument("--late", help=f"late policy for this run: drop, log or correct[:GAMMA] (compiled: {job.late})")
    parser.add_argument("--retain", action="append", default=[], metavar="STORE=DURATION",
                        help="how long a store is kept, instead of the compiled horizon (archive, late, metrics, "
                             "metrics-minutes, results; e.g. archive=7d); kept in the checkpoint for later runs")
    parser.add_argument("--input-cleanup", metavar="keep|delete|archive:DIR",
                        help="what becomes of a folder's files once read (default: delete, or keep with --once)")
    parser.add_argument("--refresh-after", type=int, default=REFRESH_AFTER, metavar="BATCHES",
                        help=f"start the query anew between two batches after this many (default {REFRESH_AFTER:,}: "
                             f"bounds the state store's snapshots)")
    parser.add_argument("--sensor-from-topic", type=int, metavar="LEVEL",
                        help="an MQTT source: the sensor id is this level of the topic (1: the first, -1: the last)")
    parser.add_argument("--mqtt-ca", metavar="FILE", help="an MQTT broker's CA certificate (TLS)")
    parser.add_argument("--mqtt-cert", metavar="FILE", help="a client certificate for the MQTT broker (TLS)")
    parser.add_argument("--mqtt-key", metavar="FILE", help="the client certificate's key (TLS)")
    parser.add_argument("--alerts", action="append", default=[], metavar="URL",
                        help="deliver alarms to a webhook (http(s)://...), an MQTT topic (mqtt(s)://HOST[:PORT]/TOPIC) "
                             "or the URL in an environment variable (env:VARIABLE)")
    parser.add_argument("--alerts-for", action="append", default=[], metavar="WORKFLOW,...",
                        help="deliver the alarms of these workflows only (default: all)")
    parser.add_argument("--alerts-timeout", metavar="DURATION", help="--once waits this long for its alarms (60s)")
    parser.add_argument("--alerts-template", metavar="FILE", help="a Jinja2 template of a webhook's body")
    args = parser.parse_args(argv)
    if not streamed(args.input) and not Path(args.input).exists():
        print(f"error: {args.input}: no such input folder", file=sys.stderr)
        return 1
    sink = args.sink or f"sqlite:{Path(args.out) / 'results.db'}"
    try:
        check_sink(sink)  # before Spark starts, and before a bounded run clears what stands at the path
        input_cleanup(args.input_cleanup, args.input, args.once)
        check_feed(args.input, args.sensor_from_topic)
        alerts = AlertSettings.of(args.alerts, args.alerts_for, args.alerts_timeout, args.alerts_template,
                                  Tls(args.mqtt_ca, args.mqtt_cert, args.mqtt_key)) if args.alerts else None
        if alerts:
            alerts.check(job)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    spark = spark_session(job, args.master or _default_master(), log=Path(args.out) / SPARK_LOG)
    try:
        summary = run(job, build_query, args.input, Path(args.out), args.once, sink, spark,
                      trigger_seconds=args.trigger_seconds, max_files_per_trigger=args.max_files_per_trigger,
                      watermark=args.watermark, late=args.late, replay_order=args.replay_order, fresh=args.fresh,
                      retain=args.retain, input_cleanup=args.input_cleanup, refresh_after=args.refresh_after,
                      sensor_from_topic=args.sensor_from_topic, mqtt_tls=Tls(args.mqtt_ca, args.mqtt_cert, args.mqtt_key),
                      alerts=alerts)
    except (JobFailed, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        if isinstance(exc, JobFailed) and (Path(args.out) / SPARK_LOG).exists():
            print(f"Spark's own account of it: {Path(args.out) / SPARK_LOG}", file=sys.stderr)
        return 1
    print(f"{'stopped' if summary.outcome == 'stopped' else 'done'}: {summary.readings:,} readings in "
          f"{summary.batches} batch(es) -> {summary.results:,} results"
          + (f" ({summary.matches:,} pattern matches)" if summary.matches else "")
          + f", {summary.quarantined:,} quarantined, {summary.late:,} late, in {summary.seconds:.1f} s"
          + f"; ignored: {summary.unread:,} readings of sensors no workflow reads, "
          f"{summary.skipped:,} blank or header lines"
          + (f"; the patterns' limit cut {summary.cut:,} partial matches (raise `limit` or --pattern-limit)"
             if summary.cut else ""))
    print(f"results: {sink}")
    after = "before its first batch" if summary.last_batch is None else f"after batch {summary.last_batch}"
    if summary.outcome == "stopped":
        print(f"stopped {after}; the checkpoint keeps every window and partial match: "
              f"'sscript run {args.out} --input {args.input}' continues from here (add --once to read what is "
              f"left and end the input)")
    elif summary.outcome == "ended":
        print(f"the input ended {after}: every window and pending match was emitted; a new run on {args.out} "
              f"starts afresh")
    return 0


def _default_master() -> str | None:
    """local[2] when run with plain python; under spark-submit (which starts the Python driver
    with a gateway already open) the master is spark-submit's."""
    return None if os.environ.get("PYSPARK_GATEWAY_PORT") else "local[2]"
