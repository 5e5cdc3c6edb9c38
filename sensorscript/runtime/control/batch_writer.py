"""The writer of the query's micro-batches (Spark's foreachBatch): each batch's rows to the sink,
the status, the alarms and the late corrections, its counts to the run's summary and one line of
progress; and the `Gate` between the writer and the run loop, through which a stop lets the batch
being written end and no other begin."""

from __future__ import annotations

import logging
import threading
import time
import warnings

import numpy as np
import pandas as pd

from sensorscript.runtime.control import failures
from sensorscript.runtime.control.housekeeping import Housekeeping
from sensorscript.runtime.control.late_corrections import LateCorrections
from sensorscript.runtime.control.run_summary import BatchCounts, RunSummary
from sensorscript.runtime.ingest import archive
from sensorscript.runtime.output.alarms import alarm_kinds
from sensorscript.runtime.output.executor_writes import KEPT, DriverCollect
from sensorscript.runtime.output.kafka_sink import ResultsTopic, TopicIndex
from sensorscript.runtime.output.postgres_sink import PostgresSink
from sensorscript.runtime.output.sinks import PLAN_COLUMN, BatchRows, open_sink
from sensorscript.runtime.output.status import Status
from sensorscript.runtime.plan.program import Job


class _QuietWriterErrors(logging.Filter):
    """py4j logs, with its stack trace, the error of every micro-batch whose writer raised. The
    writer raises only `BatchCutShort`: a batch that a stop cut short or refused (`Gate`), which is
    no error for the user (it was not committed, and the next run does it again), or one that
    failed, which the run loop reports in one sentence. This filter on py4j's loggers drops those
    records; any other passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], BatchCutShort))


_QUIET_WRITER_ERRORS = _QuietWriterErrors()
logging.getLogger("py4j.clientserver").addFilter(_QUIET_WRITER_ERRORS)
logging.getLogger("py4j.java_gateway").addFilter(_QUIET_WRITER_ERRORS)
# pyspark warns with the whole error before raising it when Arrow's collection fails midway; the
# error itself is raised (and reported) anyway.
warnings.filterwarnings("ignore", message="toPandas attempted Arrow optimization", category=UserWarning)


class BatchCutShort(RuntimeError):
    """What the writer of a micro-batch raises to Spark instead of an error: the batch was refused or
    cut short by a stop (`Gate`), or failed (the run loop keeps the error: `Gate.failure`). Its
    message is one line: Spark matches the text of a foreachBatch error against a pattern that
    recurses once per character, and a long one (a Java stack trace) overflows the stream thread's
    stack (`StreamExecution.PROXY_ERROR`)."""

    def __init__(self, batch_id: int, why: str = "was cut short by a stop; the next run does it again"):
        super().__init__(f"micro-batch {batch_id} {why}")


class Gate:
    """Between the run loop and the writer of a query's micro-batches. Once a stop is decided
    (`close`), no batch begins: the next one is refused before Spark has computed any of it (stage
    1 runs when the writer collects the batch), so nothing of it is written anywhere. The batch
    being written ends and is committed (`idle`), and only then is the query stopped."""

    def __init__(self):
        self.lock = threading.Lock()
        self.closed = False
        self.writing: int | None = None  # the batch being written
        self.written: int | None = None  # the last batch this query wrote
        self.failure: str | None = None  # why a batch could not be written, in one sentence
        self.passing = False  # the failure says nothing of the job (failures.PASSING)
        self.first: int | None = None  # the first batch this query began

    def open(self) -> None:
        """A query starts: its first batch may be one a stop cut short, done again."""
        with self.lock:
            self.closed, self.writing, self.written, self.failure, self.first = False, None, None, None, None
            self.passing = False

    def batches(self) -> int:
        """How many batches this query has written."""
        with self.lock:
            return 0 if self.first is None or self.written is None else self.written - self.first + 1

    def enter(self, batch_id: int) -> bool:
        """A batch begins; False when a stop came first."""
        with self.lock:
            if self.closed:
                return False
            self.writing = batch_id
            self.first = batch_id if self.first is None else self.first
            return True

    def leave(self, batch_id: int, done: bool) -> None:
        with self.lock:
            self.writing = None
            if done:
                self.written = batch_id

    def failed(self, batch_id: int, exc: BaseException) -> None:
        self.failure = f"micro-batch {batch_id} could not be written: {failures.describe(exc)}"
        self.passing = failures.passing(exc)

    def close(self) -> None:
        with self.lock:
            self.closed = True

    def idle(self, query) -> bool:
        """No batch is being written, and the last one written is committed (Spark reports a batch's
        progress after its commit)."""
        with self.lock:
            writing, written = self.writing, self.written
        if writing is not None:
            return False
        progress = query.lastProgress
        return written is None or (progress is not None and progress.get("batchId", -1) >= written)


class BatchWriter:
    """Writes each micro-batch (called by Spark with the batch and its id) for the job it holds,
    which a switch to a newer version of the plan replaces (`switch`), to `target` (the sink
    `sink_spec` opened). `alarms` (the run's alarms) and `corrections` (late policy correct) are
    None when the run has none; `ended` is set once a batch carried the end of the input to every
    partition."""

    def __init__(self, job: Job, sink_spec: str, target, status: Status, summary: RunSummary,
                 housekeeping: Housekeeping, alarms=None, corrections: LateCorrections | None = None, echo=print,
                 results_topic: ResultsTopic | None = None):
        """`results_topic`: with a Kafka sink, the executors write the results there and `target`
        takes the rest (runtime/output/kafka_sink.py)."""
        self.job, self.sink_spec, self.target, self.status, self.summary = job, sink_spec, target, status, summary
        self.housekeeping, self.alarms, self.corrections, self.echo = housekeeping, alarms, corrections, echo
        self.results_topic = results_topic
        # Where a read back of the topic starts (corrections, backfills): beside the ledger, in the
        # SQLite store that takes the rest of a topic run's rows.
        self.index = TopicIndex(target.path) if results_topic is not None else None
        self._name_streams()
        self.gate = Gate()
        self.ended = threading.Event()

    def switch(self, job: Job) -> None:
        """Write for `job`, a newer version of the plan, from the next batch on."""
        self.job = self.housekeeping.job = job
        self.target = open_sink(self.sink_spec, matches=job.has_matches)
        self._name_streams()

    def _name_streams(self) -> None:
        """A database sink keeps the job's output streams, for Grafana (runtime/output/postgres_sink.py)."""
        if isinstance(self.target, PostgresSink):
            self.target.name_streams(alarm_kinds(self.job), (name for program in self.job.programs
                                                             for names in program.outputs.values() for name in names))

    def __call__(self, batch, batch_id: int) -> None:
        if not self.gate.enter(batch_id):  # a stop came before this batch began: the next run does it
            raise BatchCutShort(batch_id)
        done = False
        try:
            if self.corrections and self.gate.written is None:  # maybe done again: forget what a cut attempt archived
                archive.forget(self.job.archive, batch_id)
            self.write(batch, batch_id)
            done = True
        except Exception as exc:
            if self.gate.closed:  # `stop --now` cut it short: not committed, the next run does it again
                raise BatchCutShort(batch_id) from None
            self.gate.failed(batch_id, exc)
            raise BatchCutShort(batch_id, "failed") from None
        finally:
            self.gate.leave(batch_id, done)

    def write(self, batch, batch_id: int) -> None:
        started, job = time.monotonic(), self.job
        on_executors = self.results_topic is not None or self.target.on_executors
        keep = frozenset(self.alarms.writes.kinds(job)) if self.alarms is not None else frozenset()
        collected = None
        try:
            if not on_executors:  # the driver writes: the batch collected with its memory bounded
                collected = DriverCollect(batch, job, keep)
                rows, written = collected.rows, None
            elif self.results_topic is not None:  # the executors write the results; the driver gets
                rows, *written = self.results_topic.write(batch, job, keep, self.index)  # the alarms' rows
            else:
                rows, *written = self.target.write_on_executors(batch, batch_id, job, keep)
            self._write(batch_id, job, rows, written, collected, started)
        finally:
            if collected is not None:
                collected.close()

    def _write(self, batch_id: int, job: Job, rows, written, collected: DriverCollect | None, started: float) -> None:
        kinds = rows["kind"]
        results, quarantine, counted = rows[kinds == "result"], rows[kinds == "quarantine"], rows[kinds == "metric"]
        if collected is not None:  # with the large partitions' results, which the sink takes in chunks
            written = (len(results) + sum(collected.held.values()), _matches(results) + collected.held_matches)
        written = tuple(written) if written else (len(results), _matches(results))
        metrics = counted.groupby("stream")["value"].sum()
        measures = _measures(job, batch_id, counted, rows[kinds == "gauge"], written[0])
        late_rows = _late_rows(rows[kinds == "late"], batch_id)
        # Late readings older than the archive's horizon: no correction takes them.
        corrections = self.corrections
        too_late = corrections.mark_too_late(late_rows, job) if corrections else np.zeros(len(late_rows), bool)
        results = _planned(results, job)
        counts = BatchCounts.of(metrics, len(quarantine), written, int(too_late.sum()))
        # The status first: an update's switch time comes from it (`switching.switched`), and a batch done again
        # after a kill leaves it as it was, so a switch at a restart starts where this one would have.
        self.status.batch(batch_id, metrics, measures, len(quarantine), counts.results, counts.too_late)
        if collected is None:  # in the topic or the database already
            stored = BatchRows(results.iloc[:0], quarantine, late_rows, measures)
        else:
            stored = BatchRows(results, quarantine, late_rows, measures,
                               more=(_planned(chunk, job) for chunk in collected.chunks()))
            kept = rows[kinds == KEPT]
            if len(kept):  # the alarms' rows of the partitions the sink takes in chunks
                results = pd.concat([results, _planned(kept.assign(kind="result"), job)], ignore_index=True)
        self.target.write(batch_id, stored)
        if self.alarms is not None:  # into the outbox only: the delivery threads send them
            self.alarms.batch(batch_id, results, job)
        if self.corrections:
            self.corrections.add(batch_id, late_rows[~too_late], job)
        self.summary.add(batch_id, counts, metrics)
        if int(metrics.get("ended", 0)) >= job.partitions:
            self.ended.set()
        self.echo(counts.describe(batch_id, measures, time.monotonic() - started))
        if self.corrections:
            self.corrections.after_batch(job)
        self.housekeeping.after_batch(batch_id)


def _planned(results, job: Job):
    """Result rows with the plan version that computed each (`Job.plan_versions`)."""
    return results.assign(**{PLAN_COLUMN: job.plan_versions(results["stream"].to_numpy(),
                                                            results["ts"].to_numpy(np.int64))})


def _matches(results) -> int:
    """How many of the result rows are pattern matches."""
    return int(results["events"].notna().sum()) if "events" in results else 0


def _late_rows(rows, batch_id: int):
    """The late store's rows (sinks.LATE_COLUMNS) from the operators' `late` rows."""
    return pd.DataFrame({"sensor_id": rows["stream"].to_numpy(), "ts": rows["ts"].to_numpy(),
                         "value": rows["value"].to_numpy(), "watermark": rows["window_start"].to_numpy(),
                         "streams": rows["reason"].to_numpy(), "batch_id": batch_id})


def _measures(job: Job, batch_id: int, counted, gauges, results: int):
    """The metrics table's rows of a batch (sinks.METRIC_COLUMNS): every partition's counters and
    gauges, and for the whole job the results written (`results` of them)."""
    partition_of = {key: number for number, key in enumerate(job.bucket_keys)}
    per_partition = pd.concat([counted.groupby(["dest", "stream"], as_index=False)["value"].sum(),
                               gauges[["dest", "stream", "value"]]], ignore_index=True)
    per_partition = per_partition[~per_partition["stream"].str.startswith(("pattern_tested:", "pattern_passed:"))]
    now = time.time()
    frame = pd.DataFrame({"batch_id": batch_id, "partition": per_partition["dest"].map(partition_of).to_numpy(),
                          "time": now, "name": per_partition["stream"].to_numpy(),
                          "value": per_partition["value"].to_numpy(np.float64)})
    whole = pd.DataFrame({"batch_id": [batch_id], "partition": [None], "time": [now], "name": ["results"],
                          "value": [float(results)]})
    return pd.concat([frame, whole], ignore_index=True)
