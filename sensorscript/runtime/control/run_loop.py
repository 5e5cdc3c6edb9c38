"""The run loop: start the job's query, write each micro-batch to the sink, report progress in the
user's terms (batches, readings, windows), end the input for `--once`."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import shutil
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from sensorscript.runtime.ingest import archive, drop_folder, source as sources
from sensorscript.runtime.control import correction, failures
from sensorscript.runtime.control.housekeeping import Housekeeping, event_now
from sensorscript.runtime.output import expiry
from sensorscript.runtime.plan import retention as retaining
from sensorscript.runtime.plan import versions
from sensorscript.runtime.ingest.archive import FOLDER as ARCHIVE
from sensorscript.runtime.state.engine import POS_INF
from sensorscript.runtime.ingest.packets import END_OF_INPUT
from sensorscript.runtime.plan.program import SELECTIVITY, Job
from sensorscript.runtime.control.session import SPARK_LOG, spark_session
from sensorscript.runtime.control.run_options import REFRESH_AFTER, RunSettings
from sensorscript.runtime.output.status import Status
from sensorscript.runtime.output.alerts import Alerts
from sensorscript.times import human_time
from sensorscript.runtime.control.stopping import StopOnSignals, clear_request, read_request
from sensorscript.runtime.state.watermark import check_late_policy, parse_late_policy, parse_policy
from sensorscript.runtime.output.sinks import PLAN_COLUMN, SIDE_TABLES, BatchRows, open_sink

CHECKPOINT = "checkpoint"  # under OUT: Spark's checkpoint (state/), the control folder (control/)
ENDED = "ended"  # in the checkpoint: its run ended the input, so the next run starts afresh
PLAN = "plan"  # in the checkpoint: the fingerprint of the plan whose state it holds
SPOOL = "spool"  # in the checkpoint: what a socket or broker sent, spooled for the query (runtime/ingest/spool.py)
MQTT_JOURNAL = "mqtt-journal"  # in the checkpoint: the MQTT spool's journals (runtime/ingest/mqtt_spool.py)
# A fresh start keeps these: they are input received (a broker was told so) and not yet read, not state.
KEPT_BY_A_FRESH_START = (SPOOL, MQTT_JOURNAL)


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
        self.first: int | None = None  # the first batch this query began

    def open(self) -> None:
        """A query starts: its first batch may be one a stop cut short, done again."""
        with self.lock:
            self.closed, self.writing, self.written, self.failure, self.first = False, None, None, None, None

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


@dataclass
class RunSummary:
    batches: int = 0
    readings: int = 0
    quarantined: int = 0
    unread: int = 0  # readings of sensors no workflow reads (ignored, counted)
    skipped: int = 0  # blank lines and CSV headers
    late: int = 0
    too_late: int = 0  # late readings older than the archive's horizon (late policy correct): not corrected
    results: int = 0
    division_by_zero: int = 0
    forwarded: int = 0  # tuples sent to second operators (over cut edges, and local inputs beside them)
    forwarded_remote: int = 0  # those sent to another partition's second operator: cut edges
    forward_packets: int = 0  # the rows that carried them
    matches: int = 0  # result rows of pattern streams
    cut: int = 0  # partial matches the patterns' caps cut
    corrected: int = 0  # rows written by corrections of late data (new versions and tombstones)
    seconds: float = 0.0
    last_batch: int | None = None  # the last micro-batch written
    outcome: str = ""  # finished | ended (input ended: every window emitted) | stopped (to be continued)
    # Per pattern node and condition: [rows tested, rows passed] (kept in OUT/selectivity.json).
    selectivity: dict = field(default_factory=dict)


def run(job: Job, build_query, settings: RunSettings, spark=None, echo=print) -> RunSummary:
    """Run the job's query (`build_query`, from job.py) until its input ends or it is stopped.

    A run continues from the checkpoint in OUT (state, windows, partial matches, the files read)
    unless the last run ended its input or `fresh` is set: then it starts afresh and writes its
    results anew. `once`: process what is there, then end the input, so that every window is
    emitted, and stop. Otherwise the run goes on until stopped (stopping.py: `sscript stop OUT
    [--drain]`, Ctrl-C, SIGTERM). The other settings (run_options.py) say what each does."""
    source, out, once, sink, master = settings.input, settings.out, settings.once, settings.sink, settings.master
    trigger_seconds, max_files_per_trigger = settings.trigger_seconds, settings.max_files_per_trigger
    watermark, late, replay_order, fresh = settings.watermark, settings.late, settings.replay_order, settings.fresh
    retain, input_cleanup, refresh_after = settings.retain, settings.input_cleanup, settings.refresh_after
    sensor_from_topic, mqtt_tls, alerts = settings.sensor_from_topic, settings.tls, settings.alert_settings
    out = Path(out)
    if replay_order == "name" and not sources.streamed(source):
        files = order_by_name(Path(source))
        echo(f"replaying {files:,} files in name order (their modification times now follow their names)")
    job = with_policies(job, watermark, late)
    job = dataclasses.replace(job, input_cleanup=_input_cleanup(build_query, input_cleanup, source, once, echo))
    sink_spec = sink or f"sqlite:{out / 'results.db'}"
    if once and sources.streamed(source):
        raise ValueError("--once reads a folder of files; a socket, broker or Kafka source runs until stopped "
                         "(sscript stop OUT --drain ends it)")
    sources.check_feed(source, sensor_from_topic)
    checkpoint = out / CHECKPOINT
    given = retaining.parse(retain)
    late_policy, gamma_ms = parse_late_policy(job.late)
    correcting = late_policy == "correct"
    if correcting and sink_spec == "console":
        raise ValueError("late policy correct compares corrections with the results written: use a sqlite, "
                         "csv or parquet sink")
    if alerts:
        if sink_spec == "console":
            raise ValueError("--alerts delivers alarms from the results written: use a sqlite, csv or parquet sink")
        alerts.check(job)
    after = None if fresh else last_committed(checkpoint)
    held = _plan_of(checkpoint) if after is not None else None
    switching = held is not None and held[1] != plan_fingerprint(job)
    if switching and not _earlier_version(out, held, job):
        raise ValueError(f"{out} was compiled again since its checkpoint was written, and the checkpoint's state "
                         f"belongs to the plan it replaced: 'sscript run --fresh' starts afresh")
    # The horizons: the job's, then those earlier runs on the checkpoint gave (none when it starts
    # afresh: the checkpoint goes), then this run's; checked before a fresh start clears the sink.
    retention = retaining.resolve(job.retention, retaining.kept(checkpoint) if after is not None else {}, given)
    expiry.check(sink_spec, retention["results"])
    if after is None:  # a run that starts afresh writes its own results, with the plan as it is now
        (versions.folder(out, job.version.number) / versions.APPLIED).unlink(missing_ok=True)
        if (checkpoint / ENDED).exists() and not fresh:
            echo(f"the last run on {out} ended its input: this one starts afresh and writes its results anew")
        elif fresh and (checkpoint / "state").exists():
            echo(f"starting afresh (--fresh): the checkpoint in {checkpoint} and the results written are discarded")
        start_afresh(out, sink_spec)
    else:
        echo(f"continuing from the checkpoint in {checkpoint} after batch {after} (sscript run --fresh starts anew)")
    # A live feed's folder and a socket's spool are read by the drop-folder source, whose checkpoint
    # stays bounded, unless the checkpoint began on Spark's file source (runtime/ingest/drop_folder.py).
    spool_folder = checkpoint / SPOOL
    folder = str(spool_folder.resolve()) if sources.spooled(source) else source
    kind, cleanup = drop_folder.source_of(checkpoint, folder, job.input_cleanup, after is None,
                                          sources.spooled(source), _takes_cleanup(build_query), echo)
    job = dataclasses.replace(job, input_cleanup=cleanup)
    if after is not None:  # what a killed run left of the batches it committed
        sources.clean_committed(checkpoint / "state", folder, job.input_cleanup)
    clear_request(out)
    retaining.keep(checkpoint, given)
    if correcting:
        job = dataclasses.replace(job, archive=str((out / ARCHIVE).resolve()))
        if not (out / ARCHIVE).exists():  # nothing archived yet: both folders begin with this run
            archive.begin(job.archive)
    pending = correction.Pending(out)
    control = checkpoint / "control"
    control.mkdir(parents=True, exist_ok=True)
    target = open_sink(sink_spec, matches=job.has_matches)
    spark = spark or spark_session(job, master, log=out / SPARK_LOG)
    summary = RunSummary()
    status = Status.start(out, job, sink_spec, target.describe(), fresh=after is None, source=source)
    if switching:  # the checkpoint holds an earlier version's state: switch now, at the run's start
        echo(f"the checkpoint holds the state of plan version {held[0]}: switching to version "
             f"{job.version.number} (sscript update) before the first batch")
    job = _switched(job, out, status, after, switching, echo)
    if (versions.requested(out) or 0) <= job.version.number:
        versions.clear_request(out)  # a request this run already follows
    _hold_plan(checkpoint, job)
    ended = threading.Event()  # a batch carried the end of the input to every partition
    housekeeping = Housekeeping(out, job, sink_spec, retention, status, correcting, echo)
    alarms_out = Alerts.open(alerts, out, job, status, echo, fresh=after is None) if alerts else None

    def run_correction(until: int) -> None:
        found = correction.correct(job, out, sink_spec, until, written=alarms_out and (
            lambda number, changed: alarms_out.corrected(number, changed, sink_spec, job)))
        summary.corrected += found.rows + found.retracted
        status.corrected(found)
        echo(found.describe())

    started = time.monotonic()

    gate = Gate()

    def write_batch(batch, batch_id: int) -> None:
        if not gate.enter(batch_id):  # a stop came before this batch began: the next run does it
            raise BatchCutShort(batch_id)
        done = False
        try:
            if correcting and gate.written is None:  # maybe done again: forget what a cut attempt archived
                archive.forget(job.archive, batch_id)
            write(batch, batch_id)
            done = True
        except Exception as exc:
            if gate.closed:  # `stop --now` cut it short: not committed, the next run does it again
                raise BatchCutShort(batch_id) from None
            gate.failed(batch_id, exc)
            raise BatchCutShort(batch_id, "failed") from None
        finally:
            gate.leave(batch_id, done)

    def write(batch, batch_id: int) -> None:
        t0 = time.monotonic()
        rows = batch.toPandas()
        kinds = rows["kind"]
        results = rows[kinds == "result"]
        quarantine = rows[kinds == "quarantine"]
        counted = rows[kinds == "metric"]
        metrics = counted.groupby("stream")["value"].sum()
        measures = _measures(job, batch_id, counted, rows[kinds == "gauge"], results)
        late_rows = _late_rows(rows[kinds == "late"], batch_id)
        too_late = np.zeros(len(late_rows), bool)  # older than the archive's horizon: no correction takes them
        if correcting:
            now = event_now(status, job)
            if now is not None and retention["archive"] is not None:
                too_late = late_rows["ts"].to_numpy(np.int64) < now - retention["archive"]
            late_rows["too_late"] = too_late.astype(np.int64)
        results = results.assign(**{PLAN_COLUMN: job.plan_versions(results["stream"].to_numpy(),
                                                                    results["ts"].to_numpy(np.int64))})
        # The status first: an update's switch time comes from it (`_switched`), and a batch done again
        # after a kill leaves it as it was, so a switch at a restart starts where this one would have.
        too_late_count = int(too_late.sum())
        status.batch(batch_id, metrics, measures, len(quarantine), len(results), too_late_count)
        target.write(batch_id, BatchRows(results, quarantine, late_rows, measures))
        if alarms_out is not None:  # into the outbox only: the delivery threads send them
            alarms_out.batch(batch_id, results, job)
        correctable = late_rows[~too_late]
        if correcting and len(correctable):
            pending.add(batch_id, correctable["sensor_id"].map(lambda s: job.sensors[s][0]).to_numpy(np.int64),
                        correctable["ts"].to_numpy(np.int64), correctable["value"].to_numpy(np.float64))
        readings, late = int(metrics.get("readings", 0)), int(metrics.get("late", 0))
        unread = int(metrics.get("unread", 0))
        dbz = int(sum(v for k, v in metrics.items() if k.startswith("division_by_zero:")))
        summary.batches += 1
        summary.readings += readings
        summary.quarantined += len(quarantine)
        summary.unread += unread
        summary.skipped += int(metrics.get("skipped", 0))
        summary.late += late
        summary.too_late += too_late_count
        summary.results += len(results)
        summary.division_by_zero += dbz
        summary.forwarded += int(metrics.get("forwarded", 0))
        summary.forwarded_remote += int(metrics.get("forwarded_remote", 0))
        summary.forward_packets += int(metrics.get("forward_packets", 0))
        matches = int(results["events"].notna().sum()) if "events" in results else 0
        cut = int(sum(v for k, v in metrics.items() if k.startswith("pattern_cut:")))
        summary.matches += matches
        summary.cut += cut
        for key, count in metrics.items():
            if key.startswith(("pattern_tested:", "pattern_passed:")):
                what, node, condition = key.split(":", 3)[0], *key.split(":", 1)[1].rsplit(":", 1)
                entry = summary.selectivity.setdefault(node, {}).setdefault(condition, [0, 0])
                entry[0 if what == "pattern_tested" else 1] += int(count)
        summary.last_batch = batch_id
        if int(metrics.get("ended", 0)) >= job.partitions:
            ended.set()
        lag = measures[measures["name"] == "lag_ms"]["value"]
        state = measures[measures["name"] == "state_bytes"]["value"]
        echo(f"batch {batch_id}: {readings:,} readings, {len(quarantine):,} quarantined, "
             + (f"{unread:,} readings of sensors no workflow reads ignored, " if unread else "") + f"{late:,} late"
             + (f" ({too_late_count:,} too late to correct: older than the archive's horizon)" if too_late_count
                else "") + ", "
             f"{len(results):,} results" + (f" ({matches:,} pattern matches)" if matches else "")
             + (f", {dbz} divisions by zero skipped" if dbz else "")
             + (f", {cut:,} partial matches cut by the patterns' limit" if cut else "")
             + (f", watermark {lag.max() / 1000:,.1f} s behind the newest reading" if len(lag) else "")
             + (f", state {_size(state.sum())} (largest partition {_size(state.max())})" if len(state) else "")
             + f" ({time.monotonic() - t0:.1f} s to write)")
        if correcting and pending.span_ms() > gamma_ms:
            run_correction(status.emitted_until(job))
        housekeeping.after_batch(batch_id)

    # A socket or an MQTT topic is read by the driver into a spool of small files that the query reads
    # (runtime/ingest/spool.py: Spark's socket source keeps its backlog in the driver's heap;
    # mqtt_spool.py: a message is acknowledged to the broker once its file is on disk).
    feed = sources.open_feed(source, spool_folder, checkpoint / MQTT_JOURNAL, out, sensor_from_topic, mqtt_tls,
                             echo) if sources.spooled(source) else None
    reads = drop_folder.PREFIX + folder if kind == drop_folder.DROP else feed.input if feed else source

    def start():
        gate.open()
        query = build_query(spark, reads, str(control), max_files_per_trigger, job=job)
        writer = query.writeStream.foreachBatch(write_batch).option("checkpointLocation", str(checkpoint / "state"))
        writer = writer.trigger(availableNow=True) if once else writer.trigger(processingTime=f"{trigger_seconds} seconds")
        return writer.queryName(f"sensorscript_{job.name}_{int(time.time() * 1000)}").start()

    def end_input() -> None:
        (control / "end-of-input.txt").write_text(END_OF_INPUT + "\n")

    # The end of the input moves the watermark to +infinity: a control line read after all the
    # input makes every partition emit what it still holds (as Flink does). When the whole input
    # is one micro-batch, the line can come in the same batch (a partition applies its readings
    # first, then the end); when micro-batches are bounded, it needs a run of its own after them.
    # `sscript stop --drain` writes the same line into a running job's control folder.
    single_batch = once and not max_files_per_trigger
    if single_batch:
        end_input()
    def switch(number: int) -> None:
        """Go on with plan version `number` (sscript update): the query stopped between batches."""
        nonlocal job, target
        newer, _ = versions.load(out, number)
        newer = dataclasses.replace(with_policies(newer, watermark, late), input_cleanup=job.input_cleanup)
        if correcting:
            newer = dataclasses.replace(newer, archive=job.archive)
        if (newer.partitions, newer.bucket_keys) != (job.partitions, job.bucket_keys):
            raise JobFailed(f"plan version {number} has other partitions than the running job's; "
                            f"it cannot take over its state")
        job = _switched(newer, out, status, summary.last_batch, True, echo)
        housekeeping.job = job
        _hold_plan(checkpoint, job)
        target = open_sink(sink_spec, matches=job.has_matches)

    outcome = "failed"
    try:
        with StopOnSignals(out, echo):
            if feed is not None:
                feed.start()
            while True:
                query = start()
                outcome = _supervise(query, gate, out, ended, end_input, job.version.number,
                                     None if once else refresh_after)
                if outcome == "refresh":
                    echo(f"after {refresh_after:,} batches the query starts anew (each state store reopens from its "
                         f"last snapshot, which keeps the snapshots small)")
                    continue
                if outcome != "update":
                    break
                switch(versions.requested(out) or versions.numbers(out)[-1])
            if once and outcome == "finished" and not single_batch:
                end_input()
                query = start()
                outcome = _supervise(query, gate, out, ended, end_input)
        if once and outcome == "finished":
            outcome = "ended"
        if outcome == "ended":
            # The next run starts afresh: what Spark left of the input read (the last batch's files) goes first.
            sources.clean_committed(checkpoint / "state", folder, job.input_cleanup, everything=True)
            (checkpoint / ENDED).write_text(f"{time.time()}\n")
            if correcting:  # the input has ended: every late reading can be settled
                run_correction(POS_INF)
    finally:
        if feed is not None:
            feed.stop()
        housekeeping.finish()
        if summary.last_batch is not None:  # the stores as this run leaves them, trimmed
            housekeeping.last_pass(summary.last_batch - 1)
        clear_request(out)
        if alarms_out is not None:  # a run whose input ended waits (--alerts-timeout) for its alarms
            alarms_out.finish(wait=outcome == "ended")
        status.finish(outcome)
    summary.outcome = outcome
    summary.seconds = time.monotonic() - started
    if summary.selectivity:
        record_selectivity(out / SELECTIVITY, summary.selectivity)
    return summary


def _supervise(query, gate: Gate, out: Path, ended: threading.Event, end_input, version: int = 1,
               refresh_after: int | None = None) -> str:
    """Wait for the query to finish, for a stop (stopping.py) or for an update (versions.py);
    returns how it ended: `finished` (all the input there was, `--once`), `ended` (its input was
    ended: every window emitted), `stopped` (the checkpoint keeps the state for the next run),
    `update` (stopped between batches to go on with a newer version of the plan) or `refresh`
    (stopped between batches after `refresh_after` of them, to start again: REFRESH_AFTER)."""
    draining = False
    while True:
        if _await(query, 0.5, gate):
            return "ended" if ended.is_set() else "finished"
        if ended.is_set():
            _stop_between_batches(query, gate)
            return "ended"
        mode = read_request(out)  # requests only grow stronger: boundary < drain < now
        newer = versions.requested(out)
        if newer is not None and newer > version and (versions.folder(out, newer) / "job.py").exists() \
                and mode is None and not draining:
            _stop_between_batches(query, gate)
            return "update"
        if mode == "now":
            gate.close()
            query.stop()
            return "stopped"
        if mode == "boundary":
            _stop_between_batches(query, gate)
            return "stopped"
        if mode == "drain" and not draining:
            end_input()
            draining = True
        if refresh_after and mode is None and not draining and gate.batches() >= refresh_after:
            _stop_between_batches(query, gate)
            return "refresh"


def _stop_between_batches(query, gate: Gate, patience: float = 60.0) -> None:
    """Stop the query once the batch being written is committed; no batch begins after this call
    (`Gate`). After `patience` seconds the query is stopped all the same: the batch cut short was
    not committed, and the next run does it again (exact, only later)."""
    gate.close()
    deadline = time.monotonic() + patience
    while query.isActive and not gate.idle(query) and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()


def last_committed(checkpoint: Path) -> int | None:
    """The last micro-batch the checkpoint committed (None: nothing to continue from, or its run
    ended its input)."""
    if (checkpoint / ENDED).exists():
        return None
    commits = [int(p.name) for p in (checkpoint / "state" / "commits").glob("[0-9]*") if p.name.isdigit()]
    return max(commits) if commits else None


def _switched(job: Job, out: Path, status: Status, after: int | None, switching: bool, echo) -> Job:
    """The job with the event time its version took over at (`Version.switch_at`): as the run that
    switched recorded it, or (`switching` now, and none recorded it yet) now: just after the newest
    reading the job has seen (of any sensor: one the update starts reading too), so that every
    reading a computation the update started reads arrives after the switch. A switch now is said
    with `echo`."""
    number = job.version.number
    found = versions.applied(out, number)
    if found is None and switching:
        newest = [gauges["max_ts"] for gauges in status.partitions.values() if "max_ts" in gauges]
        newest += [status.unread_newest] if status.unread_newest is not None else []
        switch_at = int(max(newest)) + 1 if newest else None
        versions.record_applied(out, number, after, switch_at)
        found = versions.applied(out, number)
    if found is None:
        return job
    status.switched(number, found["after_batch"], found["switch_at"])
    if switching:
        begins = ("from its first reading" if found["switch_at"] is None
                  else f"from event time {found['switch_at']} ({human_time(found['switch_at'])})")
        echo(f"plan version {number} runs " + ("from the first batch" if after is None else f"after batch {after}")
             + f": what both versions compute goes on; what this one adds starts {begins}; "
             f"versions/{number}/changes.txt says what changed")
    versions.clear_request(out)
    return dataclasses.replace(job, version=dataclasses.replace(job.version, switch_at=found["switch_at"]))


def _hold_plan(checkpoint: Path, job: Job) -> None:
    """Note in the checkpoint which plan (version, fingerprint) its state now belongs to."""
    (checkpoint / PLAN).write_text(f"{job.version.number} {plan_fingerprint(job)}\n")


def _earlier_version(out: Path, held: tuple[int, str], job: Job) -> bool:
    """Whether the checkpoint's plan is an earlier version of the job's, kept in OUT/versions
    (an update the job has not switched to yet), rather than another compile's."""
    number, fingerprint = held
    if number >= job.version.number or not (versions.folder(out, number) / "job.py").exists():
        return False
    try:
        earlier, _ = versions.load(out, number)
    except Exception:  # noqa: BLE001 (a version that cannot be loaded is not one to continue from)
        return False
    return plan_fingerprint(earlier) == fingerprint


def plan_fingerprint(job: Job) -> str:
    """What the checkpoint's state depends on: the sensors, partitions and programs (not the
    policies, which a run may change and whose state carries over)."""
    shape = (job.sensors, job.bucket_keys, job.first_stage, job.second_stage, job.later_stages, job.replicas)
    return hashlib.sha1(repr(shape).encode()).hexdigest()


def _plan_of(checkpoint: Path) -> tuple[int, str] | None:
    """(version, fingerprint) of the plan whose state the checkpoint holds (a bare fingerprint:
    version 1, as written before updates existed)."""
    path = checkpoint / PLAN
    if not path.exists():
        return None
    words = path.read_text().split()
    return (int(words[0]), words[1]) if len(words) == 2 else (1, words[0]) if words else None


def start_afresh(out: Path, sink_spec: str) -> None:
    """Forget the checkpoint, the archive, pending corrections and the results written. A feed's
    spool stays (KEPT_BY_A_FRESH_START): its readings were received, and acknowledged to an MQTT
    broker, which will not send them again; the fresh run reads them."""
    checkpoint = out / CHECKPOINT
    for entry in checkpoint.iterdir() if checkpoint.is_dir() else ():
        if entry.name not in KEPT_BY_A_FRESH_START:
            shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(missing_ok=True)
    for folder in (ARCHIVE, archive.UNREAD, correction.FOLDER):
        shutil.rmtree(out / folder, ignore_errors=True)
    (out / expiry.EXPIRED).unlink(missing_ok=True)
    _reset_sink(sink_spec)


def _size(count: float) -> str:
    return f"{count / 1024:,.0f} KiB" if count < 1024 ** 2 else f"{count / 1024 ** 2:,.1f} MiB"


def order_by_name(folder: Path) -> int:
    """Set the modification times of the files in `folder` one second apart, in name order, ending
    now: Spark's file source takes files by modification time."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith((".", "_")))
    now = time.time()
    for index, path in enumerate(files):
        stamp = now - (len(files) - index)
        os.utime(path, (stamp, stamp))
    return len(files)


def _takes_cleanup(build_query) -> bool:
    """Whether the job.py passes the run's input cleanup to its source (compiled since --input-cleanup)."""
    return "input_cleanup" in getattr(getattr(build_query, "__code__", None), "co_names", ("input_cleanup",))


def _input_cleanup(build_query, requested: str | None, source: str, once: bool, echo) -> str:
    """This run's input cleanup (runtime/ingest/source.py, `input_cleanup`), said when files go. A
    job.py compiled before --input-cleanup existed reads its folder without it: its files are kept."""
    cleanup = sources.input_cleanup(requested, source, once)
    if cleanup == "keep":
        return cleanup
    if not _takes_cleanup(build_query):
        echo(f"this job.py was compiled before --input-cleanup: the files of {source} are kept "
             f"('sscript compile' again to have them {'deleted' if cleanup == 'delete' else 'moved'} once read)")
        return "keep"
    echo(f"the files of {source} are " + ("deleted" if cleanup == "delete" else f"moved to {cleanup[len('archive:'):]}")
         + " once the batch that read them is committed (--input-cleanup; keep keeps them)")
    return cleanup


def with_policies(job: Job, watermark: str | None, late: str | None) -> Job:
    """The job with this run's watermark and late policies (checked) instead of the compiled ones."""
    if watermark is not None:
        parse_policy(watermark)
        job = dataclasses.replace(job, watermark=watermark)
    if late is not None:
        job = dataclasses.replace(job, late=check_late_policy(late))
    return job


def _late_rows(rows, batch_id: int):
    """The late store's rows (sinks.LATE_COLUMNS) from the operators' `late` rows."""
    return pd.DataFrame({"sensor_id": rows["stream"].to_numpy(), "ts": rows["ts"].to_numpy(),
                         "value": rows["value"].to_numpy(), "watermark": rows["window_start"].to_numpy(),
                         "streams": rows["reason"].to_numpy(), "batch_id": batch_id})


def _measures(job: Job, batch_id: int, counted, gauges, results):
    """The metrics table's rows of a batch (sinks.METRIC_COLUMNS): every partition's counters and
    gauges, and for the whole job the results written."""
    partition_of = {key: number for number, key in enumerate(job.bucket_keys)}
    per_partition = pd.concat([counted.groupby(["dest", "stream"], as_index=False)["value"].sum(),
                               gauges[["dest", "stream", "value"]]], ignore_index=True)
    per_partition = per_partition[~per_partition["stream"].str.startswith(("pattern_tested:", "pattern_passed:"))]
    now = time.time()
    frame = pd.DataFrame({"batch_id": batch_id, "partition": per_partition["dest"].map(partition_of).to_numpy(),
                          "time": now, "name": per_partition["stream"].to_numpy(),
                          "value": per_partition["value"].to_numpy(np.float64)})
    whole = pd.DataFrame({"batch_id": [batch_id], "partition": [None], "time": [now], "name": ["results"],
                          "value": [float(len(results))]})
    return pd.concat([frame, whole], ignore_index=True)


def record_selectivity(path: Path, measured: dict) -> None:
    """Add a run's measured pass counts of pattern conditions to OUT/selectivity.json, which the next
    `sscript compile` into OUT reads to order conditions and choose tree shapes."""
    known = json.loads(path.read_text()) if path.exists() else {}
    for node, conditions in measured.items():
        for condition, (tested, passed) in conditions.items():
            entry = known.setdefault(node, {}).setdefault(condition, [0, 0])
            entry[0] += tested
            entry[1] += passed
    path.write_text(json.dumps(known, indent=1, sort_keys=True) + "\n")


class JobFailed(RuntimeError):
    """The Spark query stopped with an error; the message is the first line a user needs."""


def _await(query, timeout: float, gate: Gate) -> bool:
    """Wait up to `timeout` seconds for the query to end; True if it has ended (JobFailed if with an error)."""
    from pyspark.errors import StreamingQueryException

    try:
        ended = bool(query.awaitTermination(timeout))
    except StreamingQueryException as exc:
        raise JobFailed(f"the job stopped with an error: {gate.failure or failures.describe(exc)}") from exc
    if ended and gate.failure is not None:  # should the query end without reporting the writer's error
        raise JobFailed(f"the job stopped with an error: {gate.failure}")
    return ended


def _reset_sink(spec: str) -> None:
    """Remove what the sink's earlier runs wrote, and only that: a folder beside a file sink may
    hold files of the user's, which stay."""
    kind, _, path = spec.partition(":")
    target = Path(path)
    if kind == "sqlite" and target.exists():
        target.unlink()
    elif kind in ("csv", "parquet"):  # the results, the journal of batches written, the folders beside
        if target.is_dir():
            _remove_batches(target, "batch-*.parquet")
        else:
            target.unlink(missing_ok=True)
        (target.parent / f".{target.name}.batches").unlink(missing_ok=True)
        for folder in SIDE_TABLES:
            _remove_batches(target.parent / folder, "batch-*.csv")
        _remove_batches(target.parent / expiry.MINUTES_FOLDER, "minutes-*.csv")


def _remove_batches(folder: Path, pattern: str) -> None:
    """The files a sink wrote per batch, then the folder if nothing else is left in it."""
    for path in folder.glob(pattern):
        path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        folder.rmdir()
