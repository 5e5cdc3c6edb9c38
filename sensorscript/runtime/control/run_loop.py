"""The run loop: start the job's query, let it write each micro-batch, and watch it until its input
ends or it is stopped, starting it again for a newer version of the plan or a refresh.

As Flink's StreamTask keeps its loop short, this one hands each concern to a collaborator: the
run's settings (`run_options.RunSettings`), its input (`run_input`), the checkpoint it continues
from (`checkpoint`), the writer of each batch (`batch_writer`, with `late_corrections` and the
alarms), the query and its supervision (`query`), and the switch between plan versions
(`switching`)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from sensorscript.runtime.control import executors, failures, late_corrections, switching
from sensorscript.runtime.control.batch_writer import BatchWriter
from sensorscript.runtime.control.checkpoint import CHECKPOINT, ENDED, resume
from sensorscript.runtime.control.cluster_watch import ClusterWatch
from sensorscript.runtime.control.housekeeping import Housekeeping
from sensorscript.runtime.control.late_corrections import LateCorrections
from sensorscript.runtime.control.query import JobFailed, Query
from sensorscript.runtime.control.run_input import RunInput, prepare
from sensorscript.runtime.control.run_options import RunSettings
from sensorscript.runtime.control.run_summary import RunSummary, record_selectivity
from sensorscript.runtime.control.session import SPARK_LOG, spark_session
from sensorscript.runtime.control.stopping import StopOnSignals, clear_request
from sensorscript.runtime.ingest import kafka, source as sources
from sensorscript.runtime.output.alerts import Alerts
from sensorscript.runtime.output.sinks import open_sink
from sensorscript.runtime.output.status import Status, results_spec
from sensorscript.runtime.plan import retention as retaining
from sensorscript.runtime.plan import versions
from sensorscript.runtime.plan.program import SELECTIVITY, Job
from sensorscript.runtime.state import summaries
from sensorscript.runtime.state.watermark import parse_late_policy

__all__ = ["JobFailed", "RunSummary", "run"]


def run(job: Job, build_query, settings: RunSettings, spark=None, echo=print) -> RunSummary:
    """Run the job's query (`build_query`, from job.py) until its input ends or it is stopped.

    A run continues from the checkpoint in OUT (state, windows, partial matches, the files read)
    unless the last run ended its input or `settings.fresh` is set: then it starts afresh and
    writes its results anew. `once`: process what is there, then end the input, so that every
    window is emitted, and stop. Otherwise the run goes on until stopped (stopping.py: `sscript
    stop OUT [--drain]`, Ctrl-C, SIGTERM). run_options.py says what each other setting does."""
    out = settings.out
    job = prepare(settings.policies_for(job), build_query, settings, echo)
    _check(job, settings)
    given = retaining.parse(settings.retain)
    resumed = resume(out, job, settings.fresh, settings.sink_spec, given, echo)
    reading, job = RunInput.open(job, build_query, settings, resumed.afresh, echo)
    clear_request(out)
    retaining.keep(out / CHECKPOINT, given)
    if parse_late_policy(job.late)[0] == "correct":
        job = late_corrections.archiving(job, out)
    (out / CHECKPOINT / "control").mkdir(parents=True, exist_ok=True)
    job = summaries.with_board(job, out / CHECKPOINT / summaries.BOARD)
    spark = spark or spark_session(job, settings.master, log=out / SPARK_LOG)
    # On a cluster: its executors run the job, see OUT and the input folder (a feed's spool is in OUT).
    executors.check(spark, out, echo, () if sources.streamed(settings.input) else (str(Path(settings.input).resolve()),))
    writer = _writer(job, settings, resumed, echo)
    started = time.monotonic()
    reading.open_feed(settings, echo, writer.status.broker_seen)
    query = Query(build_query, spark, reading.reads(settings.input), out / CHECKPOINT / "control",
                  out / CHECKPOINT / "state", writer, settings.once, settings.trigger_seconds,
                  settings.max_files_per_trigger)
    outcome = "failed"
    watch = ClusterWatch.start(spark, writer.status, echo)
    try:
        with StopOnSignals(out, echo):
            if reading.feed is not None:
                reading.feed.start()
            outcome = _until_stopped(query, writer, settings, echo, resumed.afresh)
        if outcome == "ended":  # the next run starts afresh
            reading.clean_all(out / CHECKPOINT, writer.job.input_cleanup)
            (out / CHECKPOINT / ENDED).write_text(f"{time.time()}\n")
            if writer.corrections:
                writer.corrections.at_the_end(writer.job)
    finally:
        if watch is not None:
            watch.stop()
        _finish(reading, writer, outcome, out)
    summary = writer.summary
    summary.outcome, summary.seconds = outcome, time.monotonic() - started
    if summary.selectivity:
        record_selectivity(out / SELECTIVITY, summary.selectivity)
    return summary


def _check(job: Job, settings: RunSettings) -> None:
    """What this run cannot do, said before anything changes (ValueError in the user's words)."""
    if settings.once and sources.streamed(settings.input) and not settings.input.startswith(kafka.PREFIX):
        raise ValueError("--once reads a folder of files or what a Kafka topic holds; a socket or MQTT source runs "
                         "until stopped (sscript stop OUT --drain ends it)")
    settings.check(job)
    if parse_late_policy(job.late)[0] == "correct" and settings.sink_spec == "console":
        raise ValueError("late policy correct compares corrections with the results written, which it reads back: "
                         "use a sqlite, csv, parquet or kafka:// sink")


def _writer(job: Job, settings: RunSettings, resumed, echo) -> BatchWriter:
    """The writer of the run's batches with its collaborators: the sink, the status (which the
    switch to a newer version at the start reads), housekeeping, the alarms and the corrections."""
    out, sink_spec, topic = settings.out, settings.sink_spec, settings.results_topic
    target = open_sink(sink_spec, matches=job.has_matches)
    described = target.describe() if topic is None else f"{topic.describe()}; the rest to {target.describe()}"
    status = Status.start(out, job, sink_spec, described, fresh=resumed.afresh, source=settings.input,
                          results_topic=topic.url if topic else "", results_topic_options=topic.options if topic else ())
    job = switching.at_start(job, out, status, resumed.after, resumed.switching, resumed.held, echo)
    late_policy, gamma_ms = parse_late_policy(job.late)
    correcting = late_policy == "correct"
    housekeeping = Housekeeping(out, job, sink_spec, resumed.retention, status, correcting, echo)
    # The alarms given, or those kept in OUT by an earlier run (None: no alarms).
    alarms = Alerts.open(settings.alert_settings, out, job, status, echo, fresh=resumed.afresh, sink_spec=sink_spec)
    summary = RunSummary()
    # Corrections read the results back and write theirs where the results are (a topic: `topic:OUT`).
    spec = results_spec(out, {"sink_spec": sink_spec, "results_topic": status.results_topic})
    corrections = LateCorrections(out, spec, gamma_ms, resumed.retention["archive"], status, summary, alarms,
                                  echo) if correcting else None
    return BatchWriter(job, sink_spec, target, status, summary, housekeeping, alarms, corrections, echo, topic)


def _until_stopped(query: Query, writer: BatchWriter, settings: RunSettings, echo, afresh: bool = False) -> str:
    """Start the query, and again after a refresh or a switch to a newer version of the plan, until
    it ends; how it ended (`Query.supervise`). `afresh`: the run starts without a checkpoint."""
    out, once = settings.out, settings.once
    # When the whole input is one micro-batch, the end of the input can come in the same batch (a
    # partition applies its readings first, then the end); when micro-batches are bounded, it needs
    # a run of its own after them. A Kafka topic is read in bounded batches (--max-readings-per-batch):
    # in one when a run starts afresh at its oldest offsets and it holds at most half a batch.
    if settings.input.startswith(kafka.PREFIX):
        single_batch = once and afresh and kafka.in_one_batch(
            kafka.BrokerOffsets(query.spark, settings.input, writer.job.kafka), writer.job.kafka)
    else:
        single_batch = once and not settings.max_files_per_trigger
    if single_batch:
        query.end_input()
    while True:
        outcome = _supervised(query, echo, out, writer.job.version.number, None if once else settings.refresh_after)
        if outcome == "refresh":
            echo(f"after {settings.refresh_after:,} batches the query starts anew (each state store reopens from "
                 f"its last snapshot, which keeps the snapshots small)")
            continue
        if outcome == "retune":
            writer.job = writer.housekeeping.job = dataclasses.replace(writer.job, kafka=query.tuned)
            tuned = kafka.Settings.of(query.tuned)
            echo(f"the Kafka messages hold about {tuned.per_message:,.1f} readings each: a batch now takes up to "
                 f"{tuned.messages_per_batch:,} messages ({tuned.most or kafka.MAX_PER_BATCH:,} readings, "
                 f"--max-readings-per-batch)")
            continue
        if outcome != "update":
            break
        number = versions.requested(out) or versions.numbers(out)[-1]
        writer.switch(switching.between_batches(writer.job, number, settings, writer.status,
                                                writer.summary.last_batch, echo))
    if once and outcome == "finished" and not single_batch:
        query.end_input()
        outcome = _supervised(query, echo, out, retune=False)
    return "ended" if once and outcome == "finished" else outcome


# How often a query whose failure said nothing of the job (failures.PASSING) starts again before a
# batch is written, and how long it waits first (doubled each time), as Flink's fixed-delay restarts.
RESTARTS = 3
RESTART_WAIT = 2.0


def _supervised(query: Query, echo, *args, **kwargs) -> str:
    """`query.supervise` of the query started, started again from its checkpoint where Spark's
    failure said nothing of the job: the batch it cut short is done again, as after a kill (every
    sink and store takes a batch once), only in the same process. Up to RESTARTS times in a row."""
    from pyspark.errors import PySparkException

    restarts = 0
    while True:
        try:
            try:
                started = query.start()
            except PySparkException as exc:  # Spark refused the query as it started
                if not failures.passing(exc):
                    raise
                raise JobFailed(f"the job could not start its query: {failures.describe(exc)}", True) from exc
            return query.supervise(started, *args, **kwargs)
        except JobFailed as failed:
            if query.writer.gate.batches():  # it wrote since the last restart: the count starts anew
                restarts = 0
            if not failed.passing or restarts >= RESTARTS:
                raise
            wait = RESTART_WAIT * 2 ** restarts
            restarts += 1
            echo(f"{failed}; nothing of the job is wrong (a busy machine), so the query starts again from its "
                 f"checkpoint in {wait:.0f} s ({restarts} of {RESTARTS})")
            time.sleep(wait)


def _finish(reading: RunInput, writer: BatchWriter, outcome: str, out: Path) -> None:
    """However the run ended: the feed stops, the stores are trimmed as it leaves them, and a run
    whose input ended waits (--alerts-timeout) for its alarms."""
    if reading.feed is not None:
        reading.feed.stop()
    writer.housekeeping.finish()
    if writer.summary.last_batch is not None:
        writer.housekeeping.last_pass(writer.summary.last_batch - 1)
    clear_request(out)
    if writer.alarms is not None:
        writer.alarms.finish(wait=outcome == "ended")
    writer.status.finish(outcome)
