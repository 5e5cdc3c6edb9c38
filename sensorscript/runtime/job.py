"""What a generated job.py calls: its stages as functions, the Spark session and `main`.

The generated job holds its plan as data (sensors, partitions, programs) and
wires these stages in order. The stateful work runs in one Spark operator per
partition right after the single shuffle of raw readings; a second operator
exists only when the plan cut edges to keep the balance (SPEC §5).
"""

from __future__ import annotations

import argparse
import os
import pickle
import shutil
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd

# Spark's applyInPandasWithState concatenates the frames a partition yields with empty padding
# rows; pandas 2.x warns about that concatenation on every call. Not ours to fix, and not the user's.
warnings.filterwarnings("ignore", message="The behavior of DataFrame concatenation with empty or all-NA",
                        category=FutureWarning)

from sensorscript.runtime.engine import BatchResult, Tuples
from sensorscript.runtime.program import Program, sender_id
from sensorscript.runtime.sinks import open_sink
from sensorscript.runtime.tasks import FirstStage, LaterStage

# Rows leaving a stateful stage: results, quarantined input, counters, and (to a later stage)
# forwarded tuples and watermark heartbeats. `dest` is the key of the partition a row goes to,
# `stage` the stage that takes a forward or a heartbeat (the ones between pass it on).
# Forwarded tuples travel packed, one row per edge and batch (`times`, `values`: buffers).
OUTPUT_SCHEMA = ("kind string, stream string, ts long, window_start long, window_end long, value double, "
                 "version int, raw string, reason string, dest int, fcode int, times binary, values binary, "
                 "stage int")
OUTPUT_COLUMNS = [c.split()[0] for c in OUTPUT_SCHEMA.split(", ")]
END_OF_INPUT = "__sscript_end_of_input__"  # the control line `--once` feeds after the input
CONTROL_CODE = -2  # the code of the end-of-input marker in a control packet


@dataclass(frozen=True)
class Job:
    """A compiled job: the plan as data. `sensors` maps sensor id -> (code, home partition)."""

    name: str
    workflows: tuple[str, ...]
    sensors: dict[str, tuple[int, int]]
    first_stage: tuple[Program, ...]
    second_stage: tuple[Program | None, ...]
    bucket_keys: tuple[int, ...]  # partition p's rows carry key bucket_keys[p]: Spark hashes it to task p
    watermark: str = "fixed:0"
    # Sensor id -> further partitions its readings also go to. Our plans send each reading to
    # one partition; the naive placements the report measures (hash by workflow) copy them.
    replicas: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # Stages 3, 4, ...: only the naive placement hash by sensor id (a shuffle per level) has them.
    later_stages: tuple[tuple[Program | None, ...], ...] = ()

    @property
    def partitions(self) -> int:
        return len(self.first_stage)

    @property
    def has_second_stage(self) -> bool:
        return any(p is not None for p in self.second_stage)

    def stages_after_first(self) -> list[tuple[int, tuple[Program | None, ...]]]:
        """(stage number, a program or None per partition) for stage 2 on, where any exists."""
        stages = [(2, self.second_stage)] if self.has_second_stage or self.later_stages else []
        return stages + list(enumerate(self.later_stages, start=3))


# ----------------------------------------------------------------------------- stages

# What crosses the shuffle: packets of readings, one per partition per Arrow batch of the
# source, each column a buffer (code int32, ts int64, value float64); a quarantined line
# travels as a row of its own, with `raw` and `reason`. Packets were measured when the first
# operator was a transformWithStateInPandas, which turns its input into pandas row by row
# (a million readings as a thousand packets cost it a thousandth of the time); they also keep
# the shuffle at a few Spark records per batch.
PACKET_SCHEMA = "pkey int, code binary, ts binary, value binary, raw string, reason string"


def assign_partitions(records, job: Job):
    """Readings -> their sensor's code and partition, packed per partition (`Packer`).

    Rows here are quarantined or read a referenced sensor (the job filters first, with
    a hash set); quarantined rows go to partition 0, which writes them out.
    """
    from pyspark.sql import functions as F

    # The raw line goes to Python only where it is needed, for a quarantined row.
    raw = F.when(F.col("reason").isNotNull(), F.col("raw")).alias("raw")
    return records.select("sensor_id", "ts", "value", "reason", raw).mapInArrow(Packer(job), PACKET_SCHEMA)


def control_rows(lines, job: Job):
    """The end-of-input line becomes one control packet per partition (watermark to +infinity)."""
    from pyspark.sql import functions as F

    return lines.select(
        F.explode(F.array(*[F.lit(k) for k in job.bucket_keys])).alias("pkey"),
        F.lit(bytearray(np.array([CONTROL_CODE], np.int32).tobytes())).alias("code"),
        F.lit(bytearray(np.zeros(1, np.int64).tobytes())).alias("ts"),
        F.lit(bytearray(np.zeros(1, np.float64).tobytes())).alias("value"),
        F.lit(None).cast("string").alias("raw"), F.lit(None).cast("string").alias("reason"))


class Packer:
    """Stage 0 in Python, vectorised with Arrow: sensor id -> code and partition key, then one
    packet per partition key. The ids are looked up in a hash table (Arrow's `index_in`);
    a literal map in Spark SQL would be searched key by key."""

    def __init__(self, job: Job):
        items = sorted(job.sensors.items())
        self.ids = [sensor_id for sensor_id, _ in items]
        self.codes = np.array([code for _, (code, _) in items], np.int32)
        self.keys = np.array([job.bucket_keys[partition] for _, (_, partition) in items], np.int32)
        self.quarantine_key = job.bucket_keys[0]
        # Copies (a naive placement only): sensor index -> its extra partition keys, as
        # offsets into one flat array.
        extra = [[job.bucket_keys[p] for p in job.replicas.get(sensor_id, ())] for sensor_id in self.ids]
        self.copies = np.array([len(e) for e in extra], np.int64)
        self.copy_start = np.cumsum(self.copies) - self.copies
        self.copy_keys = np.array([k for e in extra for k in e], np.int32)

    def _replicated(self, index: np.ndarray, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(reading positions, partition keys) with a reading repeated once per extra partition."""
        counts = self.copies[index]
        if not counts.any():
            return np.arange(len(index)), key
        positions = np.repeat(np.arange(len(index)), counts)
        nth = np.arange(len(positions)) - np.repeat(np.cumsum(counts) - counts, counts)
        extra = self.copy_keys[self.copy_start[index[positions]] + nth]
        return np.concatenate([np.arange(len(index)), positions]), np.concatenate([key, extra])

    def __call__(self, batches):
        import pyarrow as pa
        import pyarrow.compute as pc

        known = pa.array(self.ids, pa.string())
        for batch in batches:
            bad = batch.column("reason").is_valid().to_numpy(zero_copy_only=False)
            where = pc.index_in(batch.column("sensor_id"), value_set=known).to_numpy(zero_copy_only=False)
            # index_in gives null (NaN here) for an id not in the set: only quarantined rows.
            good = ~bad & ~np.isnan(where)
            index = where[good].astype(np.int64)
            code, key = self.codes[index], self.keys[index]
            # Nulls (quarantined rows) filled first: numpy would make the column float64, which
            # rounds timestamps past 2^53.
            ts = pc.fill_null(batch.column("ts"), 0).to_numpy(zero_copy_only=False)[good].astype(np.int64)
            value = batch.column("value").to_numpy(zero_copy_only=False)[good].astype(np.float64)
            if self.copy_keys.size:
                positions, key = self._replicated(index, key)
                code, ts, value = code[positions], ts[positions], value[positions]
            order = np.argsort(key, kind="stable")
            code, key, ts, value = code[order], key[order], ts[order], value[order]
            bounds = np.flatnonzero(np.r_[True, key[1:] != key[:-1], True]) if len(key) else np.array([0])
            packets = [(int(key[lo]), code[lo:hi].tobytes(), ts[lo:hi].tobytes(), value[lo:hi].tobytes())
                       for lo, hi in zip(bounds[:-1], bounds[1:])]
            rejected = np.flatnonzero(bad)
            raw = batch.column("raw").take(pa.array(rejected)).to_pylist() if len(rejected) else []
            reason = batch.column("reason").take(pa.array(rejected)).to_pylist() if len(rejected) else []
            yield pa.RecordBatch.from_pydict({
                "pkey": pa.array([p[0] for p in packets] + [self.quarantine_key] * len(raw), pa.int32()),
                "code": pa.array([p[1] for p in packets] + [None] * len(raw), pa.binary()),
                "ts": pa.array([p[2] for p in packets] + [None] * len(raw), pa.binary()),
                "value": pa.array([p[3] for p in packets] + [None] * len(raw), pa.binary()),
                "raw": pa.array([None] * len(packets) + raw, pa.string()),
                "reason": pa.array([None] * len(packets) + reason, pa.string()),
            })


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

    first = (keyed.repartition(job.partitions, "pkey").groupBy("pkey")
             .applyInPandasWithState(_first_stage_function(job), OUTPUT_SCHEMA, STATE_SCHEMA, "append",
                                     GroupStateTimeout.NoTimeout))
    rows = first
    # Spark allows one applyInPandasWithState per query: later stages are transformWithStateInPandas.
    for number, _ in job.stages_after_first():
        rows = rows.groupBy("dest").transformWithStateInPandas(
            statefulProcessor=LaterStageProcessor(job, number), outputStructType=OUTPUT_SCHEMA,
            outputMode="Append", timeMode="None")
    return rows


# ------------------------------------------------------------------------- operators

STATE_SCHEMA = "blob binary"  # one value per partition: its stage's state, pickled


def _processor_base():
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    return StatefulProcessor


def _load(state, task):
    return pickle.loads(state.get[0]) if state.exists else task.new_state()


def _save(state, value) -> None:
    state.update((pickle.dumps(value, protocol=5),))


def _first_stage_function(job: Job):
    """Stage 1 of every partition: one call per partition key and micro-batch."""
    tasks: dict[int, FirstStage] = {}  # per Python worker: the engines, built once

    def first_stage(key, frames, state) -> Iterator[pd.DataFrame]:
        partition = job.bucket_keys.index(int(key[0]))
        task = tasks.get(partition) or tasks.setdefault(
            partition, FirstStage(job.first_stage[partition], job.watermark))
        yield from _first_stage_batch(job, partition, task, frames, state)

    return first_stage


def _first_stage_batch(job: Job, partition: int, task: FirstStage, frames, state) -> Iterator[pd.DataFrame]:
    value_state = _load(state, task)
    codes, stamps, values, rejected = [], [], [], []
    for frame in frames:
        packets = frame["code"].notna().to_numpy()
        for blob, ts_blob, value_blob in zip(frame["code"][packets], frame["ts"][packets],
                                             frame["value"][packets]):
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
    step = task.step(value_state, code[good].astype(np.int64), ts[good], value[good], bool(control.any()))
    _save(state, value_state)
    own = job.bucket_keys[partition]
    parts = [_quarantine(pd.concat(rejected, ignore_index=True) if rejected else _empty(), own)]
    parts += [_results(r, task.engine.program, own) for r in step.results]
    parts += [_forwards(r, job) for r in step.results]
    parts.append(_heartbeats(task.engine.program, step.heartbeat, job))
    parts.append(_counters(step.results, task.engine.program, own, readings=int(good.sum()),
                           quarantined=quarantined))
    yield from _frames(parts)


class LaterStageProcessor(_processor_base()):
    """Stage k >= 2 of a partition: computations fed by forwarded tuples; the rows that are not
    for this stage (results, counters, forwards and heartbeats for a later one) pass through."""

    def __init__(self, job: Job, stage: int = 2):
        self.job = job
        self.stage = stage
        self.programs = dict(job.stages_after_first())[stage]

    def init(self, handle) -> None:
        self.state = handle.getValueState(f"stage{self.stage}", STATE_SCHEMA)
        self.tasks: dict[int, LaterStage] = {}

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:  # noqa: N802 (Spark's name)
        job = self.job
        own = int(key[0])
        partition = job.bucket_keys.index(own)
        frame = pd.concat(list(rows), ignore_index=True)
        kind = frame["kind"].to_numpy()
        mine = ((kind == "forward") | (kind == "heartbeat")) & (frame["stage"].to_numpy() == self.stage)
        passing = frame[~mine]
        program = self.programs[partition]
        if program is None:
            yield from _frames([passing])
            return
        task = self.tasks.get(partition) or self.tasks.setdefault(partition, LaterStage(program))
        state = pickle.loads(self.state.get()[0]) if self.state.exists() else task.new_state()
        forwards = frame[mine & (kind == "forward")]
        received = []
        for c, g in forwards.groupby("fcode", sort=True):
            ts = np.concatenate([np.frombuffer(b, np.int64) for b in g["times"]])
            value = np.concatenate([np.frombuffer(b, np.float64) for b in g["values"]])
            received.append((int(c), Tuples(ts, value, np.full(len(ts), -1, np.int32))))
        beats = frame[mine & (kind == "heartbeat")]
        # Every row carries a ts, so the column arrives as int64 and the +-2^63 sentinels are exact.
        heartbeats = {int(s): int(w) for s, w in zip(beats["fcode"], beats["ts"].to_numpy(np.int64))}
        result = task.step(state, received, heartbeats)
        self.state.update((pickle.dumps(state, protocol=5),))
        yield from _frames([passing, _results(result, program, own), _forwards(result, job),
                            _heartbeats(program, state.engine.watermark, job), _counters([result], program, own)])

    def close(self) -> None:
        pass


# ------------------------------------------------------------------ output rows

def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in OUTPUT_COLUMNS})


_INTEGER_COLUMNS = ("ts", "window_start", "window_end", "version", "dest", "fcode", "stage")
_OBJECT_COLUMNS = ("kind", "stream", "raw", "reason", "times", "values")  # text and bytes


def _frames(parts: list[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """The output frames in OUTPUT_SCHEMA's columns, each converted as Spark's Arrow writer needs.

    Parts go out one by one (a processor may yield several frames), so a part keeps exact
    numpy integers where its column has no gaps: forwarded readings stay int64 and fast.
    A column with gaps becomes Python ints or None (pandas would turn it into floats, which
    cannot hold the +-2^63 watermark sentinels; its nullable Int64 cannot go through Spark's
    conversion, which passes a mask). Text and bytes become plain objects: columns read from Spark
    arrive as pandas' `string` dtype, which converts to chunked arrays Spark does not take.
    """
    for part in parts:
        if not len(part):
            continue
        part = part.reindex(columns=OUTPUT_COLUMNS)
        for column in _INTEGER_COLUMNS:
            values = part[column]
            if values.isna().any() or values.dtype == object:
                part[column] = values.astype(object).where(values.notna(), None)
        for column in _OBJECT_COLUMNS:
            part[column] = part[column].astype(object).where(part[column].notna(), None)
        part["value"] = part["value"].astype("float64")
        yield part


def _results(result: BatchResult, program: Program, dest: int) -> pd.DataFrame:
    parts = []
    for node_id, tuples in result.outputs.items():
        for name in program.outputs[node_id] if len(tuples) else ():
            parts.append(pd.DataFrame({
                "kind": "result", "stream": name, "ts": tuples.ts,
                "window_start": tuples.start if tuples.start is not None else None,
                "window_end": tuples.end if tuples.end is not None else None,
                "value": tuples.value, "version": 1, "dest": dest}))
    return pd.concat(parts, ignore_index=True) if parts else _empty()


def _forwards(result: BatchResult, job: Job) -> pd.DataFrame:
    """One packet per cut edge: its tuples of this batch as two buffers."""
    rows = [(job.bucket_keys[f.dest], f.stage, f.code, np.ascontiguousarray(t.ts, np.int64).tobytes(),
             np.ascontiguousarray(t.value, np.float64).tobytes()) for f, t in result.forwards]
    if not rows:
        return _empty()
    dest, stage, fcode, times, values = zip(*rows)
    return pd.DataFrame({"kind": "forward", "ts": 0, "dest": list(dest), "stage": list(stage),
                         "fcode": list(fcode), "times": list(times), "values": list(values)})


def _heartbeats(program: Program, watermark: int, job: Job) -> pd.DataFrame:
    """This stage's watermark, to every stage it forwards to (`fcode`: the sender's id)."""
    targets = sorted({(f.dest, f.stage) for f in program.forwards})
    if not targets:
        return _empty()
    return pd.DataFrame({"kind": "heartbeat", "ts": watermark,
                         "fcode": sender_id(program.stage, program.partition, job.partitions),
                         "dest": [job.bucket_keys[d] for d, _ in targets], "stage": [s for _, s in targets]})


def _counters(results: list[BatchResult], program: Program, dest: int, **extra: int) -> pd.DataFrame:
    counters = dict(extra)
    counters["late"] = sum(r.late for r in results)
    forwarded = [(f.dest, len(t)) for r in results for f, t in r.forwards]  # a packet each
    if forwarded:
        counters["forwarded"] = sum(n for _, n in forwarded)
        counters["forward_packets"] = len(forwarded)
        # Only these cross between partitions; the rest feed a later stage of this partition.
        counters["forwarded_remote"] = sum(n for dest, n in forwarded if dest != program.partition)
    for r in results:
        for node_id, count in r.division_by_zero.items():
            for name in program.outputs.get(node_id, (node_id,)):
                counters[f"division_by_zero:{name}"] = counters.get(f"division_by_zero:{name}", 0) + count
    return pd.DataFrame({"kind": "metric", "stream": list(counters), "ts": 0,
                         "value": [float(v) for v in counters.values()], "dest": dest})


def _quarantine(frame: pd.DataFrame, dest: int) -> pd.DataFrame:
    if not len(frame):
        return _empty()
    return pd.DataFrame({"kind": "quarantine", "ts": 0, "raw": frame["raw"].to_numpy(),
                         "reason": frame["reason"].to_numpy(), "dest": dest})


# --------------------------------------------------------------------------- session

def spark_session(job: Job, master: str | None, ui: bool = False, app_name: str | None = None):
    """A Spark session fitted to the job: shuffle partitions = plan partitions, RocksDB state, quiet."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.appName(app_name or f"sensorscript:{job.name}")
               .config("spark.sql.shuffle.partitions", str(job.partitions))
               .config("spark.sql.streaming.stateStore.providerClass",
                       "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100000")
               .config("spark.ui.enabled", "true" if ui else "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.streaming.stopGracefullyOnShutdown", "true"))
    if master:
        builder = builder.master(master)
    spark = builder.getOrCreate()
    # Progress and errors are reported in the user's terms (batches, readings, windows);
    # Spark's own log is for debugging: SSCRIPT_SPARK_LOG=WARN brings it back.
    spark.sparkContext.setLogLevel(os.environ.get("SSCRIPT_SPARK_LOG", "OFF"))
    return spark


# ------------------------------------------------------------------------------ run

@dataclass
class RunSummary:
    batches: int = 0
    readings: int = 0
    quarantined: int = 0
    late: int = 0
    results: int = 0
    division_by_zero: int = 0
    forwarded: int = 0  # tuples sent to second operators (over cut edges, and local inputs beside them)
    forwarded_remote: int = 0  # those sent to another partition's second operator: cut edges
    forward_packets: int = 0  # the rows that carried them
    seconds: float = 0.0


def run(job: Job, build_query, source: str, out: Path, once: bool = False, sink: str | None = None, spark=None,
        master: str | None = None, trigger_seconds: float = 1.0, max_files_per_trigger: int | None = None,
        echo=print) -> RunSummary:
    """Run the job's query (`build_query`, from job.py). `once`: process what is there, then end
    the input, so that every window is emitted, and stop."""
    out = Path(out)
    sink_spec = sink or f"sqlite:{out / 'results.db'}"
    if once and source.startswith(("socket://", "kafka://")):
        raise ValueError("--once reads a folder of files; a socket or Kafka source runs until stopped")
    checkpoint = out / ("checkpoint-once" if once else "checkpoint")
    if once:  # a bounded run starts afresh and writes its own results
        shutil.rmtree(checkpoint, ignore_errors=True)
        _reset_sink(sink_spec)
    control = checkpoint / "control"
    control.mkdir(parents=True, exist_ok=True)
    target = open_sink(sink_spec)
    spark = spark or spark_session(job, master)
    summary = RunSummary()
    started = time.monotonic()

    def write_batch(batch, batch_id: int) -> None:
        t0 = time.monotonic()
        rows = batch.toPandas()
        kinds = rows["kind"]
        results = rows[kinds == "result"]
        quarantine = rows[kinds == "quarantine"]
        metrics = rows[kinds == "metric"].groupby("stream")["value"].sum()
        target.write(batch_id, results, quarantine)
        readings, late = int(metrics.get("readings", 0)), int(metrics.get("late", 0))
        dbz = int(sum(v for k, v in metrics.items() if k.startswith("division_by_zero:")))
        summary.batches += 1
        summary.readings += readings
        summary.quarantined += len(quarantine)
        summary.late += late
        summary.results += len(results)
        summary.division_by_zero += dbz
        summary.forwarded += int(metrics.get("forwarded", 0))
        summary.forwarded_remote += int(metrics.get("forwarded_remote", 0))
        summary.forward_packets += int(metrics.get("forward_packets", 0))
        echo(f"batch {batch_id}: {readings:,} readings, {len(quarantine):,} quarantined, {late:,} late, "
             f"{len(results):,} results" + (f", {dbz} divisions by zero skipped" if dbz else "")
             + f" ({time.monotonic() - t0:.1f} s to write)")

    streamed = source.startswith(("socket://", "kafka://"))

    def start():
        query = build_query(spark, source, None if streamed else str(control), max_files_per_trigger, job=job)
        writer = query.writeStream.foreachBatch(write_batch).option("checkpointLocation", str(checkpoint / "state"))
        writer = writer.trigger(availableNow=True) if once else writer.trigger(processingTime=f"{trigger_seconds} seconds")
        return writer.queryName(f"sensorscript_{job.name}_{int(time.time() * 1000)}").start()

    # The end of the input moves the watermark to +infinity: a control line read after all the
    # input makes every partition emit what it still holds (as Flink does). When the whole input
    # is one micro-batch, the line can come in the same batch (a partition applies its readings
    # first, then the end); when micro-batches are bounded, it needs a run of its own after them.
    single_batch = once and not max_files_per_trigger
    if single_batch:
        (control / "end-of-input.txt").write_text(END_OF_INPUT + "\n")
    query = start()
    try:
        _await(query)
        if once and not single_batch:
            (control / "end-of-input.txt").write_text(END_OF_INPUT + "\n")
            query = start()
            _await(query)
    except KeyboardInterrupt:
        echo("stopping: the checkpoint keeps the state, a new run continues from here")
        query.stop()
    summary.seconds = time.monotonic() - started
    return summary


class JobFailed(RuntimeError):
    """The Spark query stopped with an error; the message is the first line a user needs."""


def _await(query) -> None:
    from pyspark.errors import StreamingQueryException

    try:
        query.awaitTermination()
    except StreamingQueryException as exc:
        text = str(exc)
        cause = next((line.strip() for line in text.splitlines()
                      if "Error" in line or "Exception" in line), text.splitlines()[0] if text else "")
        raise JobFailed(f"the job stopped with an error: {cause[:500]}") from exc


def _reset_sink(spec: str) -> None:
    kind, _, path = spec.partition(":")
    target = Path(path)
    if kind == "sqlite" and target.exists():
        target.unlink()
    elif kind == "csv":
        target.unlink(missing_ok=True)
        (target.parent / f".{target.name}.batches").unlink(missing_ok=True)
        shutil.rmtree(target.parent / "quarantine", ignore_errors=True)
    elif kind == "parquet":
        shutil.rmtree(target, ignore_errors=True)


# ----------------------------------------------------------------------------- main

def main(job: Job, build_query, argv: list[str] | None = None) -> int:
    """`python job.py --input DATA [--once] [--sink ...]`, or the same through spark-submit."""
    here = Path(sys.argv[0]).resolve().parent
    parser = argparse.ArgumentParser(prog="job.py", description=f"SensorScript job '{job.name}': workflows "
                                     f"{', '.join(job.workflows)}; {job.partitions} partition(s).")
    parser.add_argument("--input", required=True, help="folder of CSV/JSON-lines files, socket://HOST:PORT, "
                                                       "or kafka://BROKERS/TOPIC")
    parser.add_argument("--once", action="store_true", help="process what is there, emit every window, stop")
    parser.add_argument("--sink", help="sqlite:PATH (default OUT/results.db), csv:PATH, parquet:PATH or console")
    parser.add_argument("--out", default=str(here), help="folder for checkpoints and default results")
    parser.add_argument("--master", help="Spark master (default: local[2], or the one spark-submit gives)")
    parser.add_argument("--trigger-seconds", type=float, default=1.0, help="micro-batch interval when streaming")
    parser.add_argument("--max-files-per-trigger", type=int, help="bound a micro-batch to this many files")
    args = parser.parse_args(argv)
    if not args.input.startswith(("socket://", "kafka://")) and not Path(args.input).exists():
        print(f"error: {args.input}: no such input folder", file=sys.stderr)
        return 1
    spark = spark_session(job, args.master or _default_master())
    sink = args.sink or f"sqlite:{Path(args.out) / 'results.db'}"
    try:
        summary = run(job, build_query, args.input, Path(args.out), args.once, sink, spark,
                      trigger_seconds=args.trigger_seconds, max_files_per_trigger=args.max_files_per_trigger)
    except (JobFailed, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"done: {summary.readings:,} readings in {summary.batches} batch(es) -> {summary.results:,} results, "
          f"{summary.quarantined:,} quarantined, {summary.late:,} late, in {summary.seconds:.1f} s")
    print(f"results: {sink}")
    return 0


def _default_master() -> str | None:
    """local[2] when run with plain python; under spark-submit (which starts the Python driver
    with a gateway already open) the master is spark-submit's."""
    return None if os.environ.get("PYSPARK_GATEWAY_PORT") else "local[2]"
