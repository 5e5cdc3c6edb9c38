"""What a generated job.py imports: the plan's data class, its stages and `main`.

The generated job holds its plan as data (sensors, partitions, programs: `runtime/plan/program.py`)
and wires these stages in order: stage 0 packs readings per partition (`runtime/ingest/packets.py`),
the stateful operators run each partition's computations (`runtime/control/operators.py`), and the run
loop writes what they emit (`runtime/control/run_loop.py`).

May import: plan, ingest, state, output, control.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.errors import PySparkException

from sensorscript.runtime.control import failures
from sensorscript.runtime.control.operators import run_partitions
from sensorscript.runtime.ingest import packets
from sensorscript.runtime.ingest.packets import control_rows
from sensorscript.runtime.ingest.source import streamed
from sensorscript.runtime.plan.program import Job
from sensorscript.runtime.control.run_loop import JobFailed, run
from sensorscript.runtime.control.run_options import job_settings
from sensorscript.runtime.control.session import SPARK_LOG, spark_session
from sensorscript.runtime.output.sinks import check_sink
from sensorscript.runtime.state import summaries

__all__ = ["Job", "assign_partitions", "control_rows", "run_partitions", "main", "run", "spark_session"]


def assign_partitions(inputs, job: Job):
    """Stage 0 (runtime/ingest/packets.py): readings coded and packed per partition; where the run gave
    the job a board of watermarks and its policies allow it, the readings of sensors only windows read
    go as slice partials where on time (runtime/state/summaries.py)."""
    return packets.assign_partitions(inputs, job, summarise=summaries.Summariser if summaries.usable(job) else None)


def main(job: Job, build_query, argv: list[str] | None = None) -> int:
    """`python job.py --input DATA [--once] [--sink ...]`, or the same through spark-submit."""
    description = (f"SensorScript job '{job.name}': workflows {', '.join(job.workflows)}; {job.partitions} "
                   f"partition(s); compiled with watermark policy {job.watermark} and late policy {job.late}.")
    settings = job_settings(argv, description, out=Path(sys.argv[0]).resolve().parent)
    if not streamed(settings.input) and not Path(settings.input).exists():
        print(f"error: {settings.input}: no such input folder", file=sys.stderr)
        return 1
    try:
        check_sink(settings.sink_spec)  # before Spark starts, and before a bounded run clears what stands at the path
        settings.check(job)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    spark = spark_session(job, settings.master or _default_master(), log=settings.out / SPARK_LOG)
    try:
        summary = run(job, build_query, settings, spark)
    except (JobFailed, ValueError, PySparkException) as exc:  # the last: Spark refused the query as it started
        print(f"error: {exc if not isinstance(exc, PySparkException) else failures.describe(exc)}", file=sys.stderr)
        if isinstance(exc, JobFailed) and (settings.out / SPARK_LOG).exists():
            print(f"Spark's own account of it: {settings.out / SPARK_LOG}", file=sys.stderr)
        return 1
    print(f"{'stopped' if summary.outcome == 'stopped' else 'done'}: {summary.readings:,} readings in "
          f"{summary.batches} batch(es) -> {summary.results:,} results"
          + (f" ({summary.matches:,} pattern matches)" if summary.matches else "")
          + f", {summary.quarantined:,} quarantined, {summary.late:,} late, in {summary.seconds:.1f} s"
          + f"; ignored: {summary.unread:,} readings of sensors no workflow reads, "
          f"{summary.skipped:,} blank or header lines"
          + (f"; the patterns' limit cut {summary.cut:,} partial matches (raise `limit` or --pattern-limit)"
             if summary.cut else ""))
    topic = settings.results_topic
    print(f"results: {settings.sink_spec}" if topic is None else f"results: {topic.url}; quarantine, late readings and "
                                                                  f"metrics: {settings.sink_spec}")
    after = "before its first batch" if summary.last_batch is None else f"after batch {summary.last_batch}"
    if summary.outcome == "stopped":
        print(f"stopped {after}; the checkpoint keeps every window and partial match: "
              f"'sscript run {settings.out} --input {settings.input}' continues from here (add --once to read what is "
              f"left and end the input)")
    elif summary.outcome == "ended":
        print(f"the input ended {after}: every window and pending match was emitted; a new run on {settings.out} "
              f"starts afresh")
    return 0


def _default_master() -> str | None:
    """local[2] when run with plain python; under spark-submit (which starts the Python driver
    with a gateway already open) the master is spark-submit's."""
    return None if os.environ.get("PYSPARK_GATEWAY_PORT") else "local[2]"
