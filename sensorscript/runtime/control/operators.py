"""The job's stateful Spark operators: per partition and micro-batch, the engine's work of each stage.

Stage 1 of every partition runs in one `applyInPandasWithState` right after the shuffle of raw
readings; later stages (only where the plan cut edges) in a `transformWithStateInPandas` each.
Both call `runtime/state/tasks.py`, which the Spark-free `LocalRun` shares.
"""

from __future__ import annotations

import functools
import pickle
import time
import warnings
from typing import Iterator

import numpy as np
import pandas as pd

# Spark's applyInPandasWithState concatenates the frames a partition yields with empty padding
# rows; pandas 2.x warns about that concatenation on every call. Not ours to fix, and not the user's.
warnings.filterwarnings("ignore", message="The behavior of DataFrame concatenation with empty or all-NA",
                        category=FutureWarning)

from sensorscript.runtime.ingest import archive
from sensorscript.runtime.output import rows as output  # noqa: E402 (after the warning filter)
from sensorscript.runtime.state.cep import operators as cep  # noqa: E402
from sensorscript.runtime.ingest.packets import CONTROL_CODE  # noqa: E402
from sensorscript.runtime.plan import shipping  # noqa: E402
from sensorscript.runtime.plan.program import NEG_INF, Job  # noqa: E402
from sensorscript.runtime.state import summaries  # noqa: E402
from sensorscript.runtime.state.tasks import FirstStage  # noqa: E402
from sensorscript.runtime.control.later_stage import STATE_SCHEMA, LaterStageProcessor  # noqa: E402


def run_partitions(keyed, job: Job):
    """The watermark, slices and windows, combine (and CEP) stages, per partition.

    `repartition(n, pkey)` is the job's one shuffle of raw readings; grouping on the
    same key reuses it (spark.sql.shuffle.partitions = n), so each partition's operator
    runs where its readings landed. Edges the plan cut are forwarded to a second
    operator keyed by their destination (the naive placement hash by sensor id has one
    operator per level of the workflow graph, each keyed the same way).

    The first operator is `applyInPandasWithState` with one binary state value per
    partition (the engine's state, pickled) and no Spark timeout: the engine keeps its own
    event time and watermark. `transformWithStateInPandas` was measured too: it runs each
    operator once more in a Python process on the driver while planning the query
    (2-3.5 s per operator here, against 0.3 s), and turns its input into pandas row by row.
    Spark allows one `applyInPandasWithState` per query: the second is a `transformWithStateInPandas`.
    """
    from pyspark.sql.streaming.state import GroupStateTimeout

    # The functions below carry the job's file's name only; the file carries the pattern operators
    # a user registered too, for the workers to register before they run the job.
    job = shipping.ship(keyed.sparkSession, job, also=[functools.partial(cep.register_all, cep.users())])
    first = (keyed.repartition(job.partitions, "pkey").groupBy("pkey")
             .applyInPandasWithState(_first_stage_function(job), output.OUTPUT_SCHEMA, STATE_SCHEMA, "append",
                                     GroupStateTimeout.NoTimeout))
    emitted = first
    # Spark allows one applyInPandasWithState per query: later stages are transformWithStateInPandas.
    for number, _ in job.stages_after_first():
        emitted = emitted.groupBy("dest").transformWithStateInPandas(
            statefulProcessor=LaterStageProcessor(job, number), outputStructType=output.OUTPUT_SCHEMA,
            outputMode="Append", timeMode="None")
    return emitted


def _load(state, task):
    return pickle.loads(state.get[0]) if state.exists else task.new_state()


def _save(state, value) -> int:
    """Keep the stage's state; returns its size in bytes."""
    blob = pickle.dumps(value, protocol=5)
    state.update((blob,))
    return len(blob)


def _first_stage_function(job: Job):
    """Stage 1 of every partition: one call per partition key and micro-batch."""
    tasks: dict[int, FirstStage] = {}  # per Python worker: the engines, built once

    def first_stage(key, frames, state) -> Iterator[pd.DataFrame]:
        partition = job.bucket_keys.index(int(key[0]))
        task = tasks.get(partition) or tasks.setdefault(
            partition, FirstStage(job.first_stage[partition], job.watermark, job.version))
        yield from _first_stage_batch(job, partition, task, frames, state)

    return first_stage


def _batch_id() -> int:
    """The micro-batch this task belongs to (Spark gives it to every task of a streaming query)."""
    from pyspark import TaskContext

    return int(TaskContext.get().getLocalProperty("streaming.sql.batchId"))


def _first_stage_batch(job: Job, partition: int, task: FirstStage, frames, state) -> Iterator[pd.DataFrame]:
    began = time.monotonic()
    value_state = _load(state, task)
    codes, stamps, values, rejected = [], [], [], []
    partials: list[tuple[np.ndarray, ...]] = []  # stage 0's slice partials (runtime/state/summaries.py)
    unread = skipped = 0  # readings of sensors no workflow reads, lines the rules skip (stage 0 counted them)
    unread_newest = NEG_INF  # the newest event time among those readings
    for frame in frames:
        unread += int(frame["unread"].sum())
        skipped += int(frame["skipped"].sum())
        if "unread_newest" in frame and len(frame):
            unread_newest = max(unread_newest, int(frame["unread_newest"].max()))
        packets = frame["code"].notna().to_numpy()
        part_column = frame["part"] if "part" in frame else pd.Series([None] * len(frame), dtype=object)
        for blob, ts_blob, value_blob, part in zip(frame["code"][packets], frame["ts"][packets],
                                                   frame["value"][packets], part_column[packets]):
            if part is not None:
                partials.append((np.frombuffer(blob, np.int32), np.frombuffer(ts_blob, np.int64),
                                 np.frombuffer(value_blob, np.float64), np.frombuffer(part, np.int32)))
                continue
            codes.append(np.frombuffer(blob, np.int32))
            stamps.append(np.frombuffer(ts_blob, np.int64))
            values.append(np.frombuffer(value_blob, np.float64))
        if not packets.all():
            rejected.append(frame[~packets])
    code, ts, value = (np.concatenate(c) if c else np.empty(0, t)
                       for c, t in ((codes, np.int32), (stamps, np.int64), (values, np.float64)))
    control = code == CONTROL_CODE
    good = ~control
    quarantined = sum(len(r) for r in rejected)
    summed = summaries.Received.of(*(np.concatenate(c) for c in zip(*partials))) if partials else None
    step = task.step(value_state, code[good].astype(np.int64), ts[good], value[good], bool(control.any()), summed)
    if job.board is not None:  # the next batch's stage 0 sums what this partition will judge on time
        query, batch = summaries.task_batch()
        if query is not None:
            summaries.publish(job.board, query, partition, task.entry(value_state, batch))
    if job.archive is not None:  # late policy `correct`: every reading, on time or late, kept to recompute from
        archive.write(job.archive, partition, _batch_id(), code[good], ts[good], value[good])
    step.gauges["state_bytes"] = _save(state, value_state)
    step.gauges.update(output.exact_from(step.results, task.engine.program))
    if unread_newest != NEG_INF:
        step.gauges["unread_newest"] = float(unread_newest)
    own = job.bucket_keys[partition]
    parts = [output.quarantine(pd.concat(rejected, ignore_index=True) if rejected else output.empty(), own)]
    parts += [frame for r in step.results for frame in output.result_frames(r, task.engine.program, own, job)]
    parts += [output.forwards(r, job) for r in step.results]
    parts.append(output.heartbeats(task.engine.program, step.heartbeat, job))
    parts.append(output.late(step.results, job, own, step.in_force))
    # `ended`: this batch carried the end of the input (the run loop stops a drained job after it).
    # `summed`: readings that came as slice partials (`summary_rows` of them crossed the shuffle).
    seen = {"unread": unread, "skipped": skipped, "ahead": step.ahead, "ended": int(control.any()),
            "summed": summed.count if summed else 0, "summary_rows": summed.rows if summed else 0}
    parts.append(output.counters(step.results, task.engine.program, own, job,
                                 readings=int(good.sum()) + (summed.count if summed else 0),
                                 quarantined=quarantined, **{name: n for name, n in seen.items() if n}))
    # The partition's time in this batch (its readings in, the step, its state kept), to find a partition that
    # holds the job back (`sscript status`, the dashboard's /metrics).
    step.gauges["batch_ms"] = (time.monotonic() - began) * 1000.0
    parts.append(output.gauges(step.gauges, own))
    yield from output.frames(parts)
