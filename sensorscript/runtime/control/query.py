"""The job's Spark query as the run loop drives it: started with the batch writer (`Query.start`),
its input ended by a control line (`end_input`), and watched until it finishes, is stopped
(runtime/control/stopping.py), switches to a newer version of the plan (versions.py) or is started
anew (`refresh_after`: run_options.REFRESH_AFTER)."""

from __future__ import annotations

import time
from pathlib import Path

from sensorscript.runtime.control import failures
from sensorscript.runtime.control.batch_writer import BatchWriter, Gate
from sensorscript.runtime.control.stopping import read_request
from sensorscript.runtime.ingest import kafka
from sensorscript.runtime.ingest.packets import END_OF_INPUT
from sensorscript.runtime.plan import versions


class JobFailed(RuntimeError):
    """The Spark query stopped with an error; the message is the first line a user needs. `passing`:
    the error says nothing of the job (failures.PASSING), and the query may start again."""

    def __init__(self, message: str, passing: bool = False):
        super().__init__(message)
        self.passing = passing


class Query:
    """Starts the job's query (`build_query`, from job.py) on `reads`, with its control folder
    `control` and Spark's checkpoint in `state`; `once`: reads what there is (availableNow), else a
    batch every `trigger_seconds`."""

    def __init__(self, build_query, spark, reads: str, control: Path, state: Path, writer: BatchWriter,
                 once: bool, trigger_seconds: float, max_files_per_trigger: int | None):
        self.build_query, self.spark, self.reads, self.control, self.state = build_query, spark, reads, control, state
        self.writer, self.once, self.trigger_seconds = writer, once, trigger_seconds
        self.max_files_per_trigger = max_files_per_trigger
        self.watched = -1  # the last batch whose progress `watch` took
        self.tuned: tuple | None = None  # the Kafka settings a "retune" asks the next query to read with

    def start(self):
        self.writer.gate.open()
        job = self.writer.job
        query = self.build_query(self.spark, self.reads, str(self.control), self.max_files_per_trigger, job=job)
        writer = query.writeStream.foreachBatch(self.writer).option("checkpointLocation", str(self.state))
        writer = (writer.trigger(availableNow=True) if self.once
                  else writer.trigger(processingTime=f"{self.trigger_seconds} seconds"))
        return writer.queryName(f"sensorscript_{job.name}_{int(time.time() * 1000)}").start()

    def end_input(self) -> None:
        """The end of the input moves the watermark to +infinity: a control line read after all the
        input makes every partition emit what it still holds (as Flink does). `sscript stop
        --drain` writes the same line into a running job's control folder."""
        (self.control / "end-of-input.txt").write_text(END_OF_INPUT + "\n")

    def supervise(self, query, out: Path, version: int = 1, refresh_after: int | None = None,
                  retune: bool = True) -> str:
        """Wait for the query (started) to finish, for a stop (stopping.py) or for an update
        (versions.py); returns how it ended: `finished` (all the input there was, `--once`), `ended`
        (its input was ended: every window emitted), `stopped` (the checkpoint keeps the state for
        the next run), `update` (stopped between batches to go on with a newer version of the plan)
        or `refresh` (stopped between batches after `refresh_after` of them, to start again) or, with
        `retune`, `retune` (stopped between batches: a Kafka backlog's batches take another number of
        messages from now on, `self.tuned`)."""
        gate, ended = self.writer.gate, self.writer.ended
        draining = False
        while True:
            stopped = _await(query, 0.5, gate)
            tuned = self.watch(query)
            if stopped:
                return "ended" if ended.is_set() else "finished"
            if ended.is_set():
                stop_between_batches(query, gate)
                return "ended"
            if tuned is not None and retune and not draining:  # a Kafka backlog in batches of another size
                stop_between_batches(query, gate)
                self.tuned = tuned
                return "retune"
            mode = read_request(out)  # requests only grow stronger: boundary < drain < now
            newer = versions.requested(out)
            if newer is not None and newer > version and (versions.folder(out, newer) / "job.py").exists() \
                    and mode is None and not draining:
                stop_between_batches(query, gate)
                return "update"
            if mode == "now":
                gate.close()
                query.stop()
                return "stopped"
            if mode == "boundary":
                stop_between_batches(query, gate)
                return "stopped"
            if mode == "drain" and not draining:
                self.end_input()
                draining = True
            if refresh_after and mode is None and not draining and gate.batches() >= refresh_after:
                stop_between_batches(query, gate)
                return "refresh"

    def watch(self, query) -> tuple | None:
        """What the last batch's progress says of a Kafka source, into status (its lag per topic
        partition) and, for messages the broker deleted before the job read them, a line; the Kafka
        settings the next query should read with when the batch shows its bound in messages is off
        (`kafka.retuned`), else None. Other sources have nothing to say there: their progress is not
        fetched from the JVM."""
        if not self.reads.startswith(kafka.PREFIX):
            return None
        progress = query.lastProgress
        if progress is None or progress["batchId"] <= self.watched:
            return None
        self.watched = progress["batchId"]
        settings = self.writer.job.kafka
        try:
            found = kafka.progress_of(progress, kafka.BrokerOffsets(self.spark, self.reads, settings))
            summary = self.writer.summary
            tuned = (kafka.retuned(settings, summary.last_lines, int(progress["numInputRows"]))
                     if summary.last_batch == progress["batchId"] else None)
        except (KeyError, TypeError, ValueError):  # a progress of another shape: status only, never the job
            found = tuned = None
        if found is None:
            return None
        self.writer.status.kafka(found)
        if found["skipped"]:
            self.writer.echo(f"batch {progress['batchId']}: {found['skipped']:,} Kafka messages were deleted by the "
                             f"broker before the job read them (its retention passed while the job was away): their "
                             f"readings are not in the results")
        return tuned


def stop_between_batches(query, gate: Gate, patience: float = 60.0) -> None:
    """Stop the query once the batch being written is committed; no batch begins after this call
    (`Gate`). After `patience` seconds the query is stopped all the same: the batch cut short was
    not committed, and the next run does it again (exact, only later)."""
    gate.close()
    deadline = time.monotonic() + patience
    while query.isActive and not gate.idle(query) and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()


def _await(query, timeout: float, gate: Gate) -> bool:
    """Wait up to `timeout` seconds for the query to end; True if it has ended (JobFailed if with an error)."""
    from pyspark.errors import StreamingQueryException

    try:
        ended = bool(query.awaitTermination(timeout))
    except StreamingQueryException as exc:
        passing = gate.passing if gate.failure else failures.passing(exc)
        raise JobFailed(f"the job stopped with an error: {gate.failure or failures.describe(exc)}", passing) from exc
    if ended and gate.failure is not None:  # should the query end without reporting the writer's error
        raise JobFailed(f"the job stopped with an error: {gate.failure}", gate.passing)
    return ended
