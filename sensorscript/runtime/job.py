"""What a generated job.py calls: its stages as functions, the Spark session, `main`.

The generated job lists its plan (sensors, partitions, programs) and wires these
stages in order; everything stateful runs in one operator per partition, right
after the single shuffle of raw readings.
"""

from __future__ import annotations

import argparse
import os
import pickle
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd

from sensorscript.runtime.engine import POS_INF, Engine, EngineState
from sensorscript.runtime.program import Program
from sensorscript.runtime.sinks import QUARANTINE_COLUMNS, RESULT_COLUMNS, open_sink
from sensorscript.runtime.watermark import NONE_YET, parse_policy

# Rows leaving the stateful stage: results, quarantined input, and per-batch counters.
OUTPUT_SCHEMA = ("kind string, stream string, ts long, window_start long, window_end long, value double, "
                 "version int, raw string, reason string")
END_OF_INPUT = "__sscript_end_of_input__"  # the control line --once writes after the input
QUARANTINE_CODE, CONTROL_CODE = -1, -2


@dataclass(frozen=True)
class Job:
    """A compiled job: the plan as data. `sensors` maps sensor id -> (code, partitions reading it)."""

    name: str
    workflows: tuple[str, ...]
    sensors: dict[str, tuple[int, tuple[int, ...]]]
    programs: tuple[Program, ...]
    bucket_keys: tuple[int, ...]  # partition p is keyed by bucket_keys[p]: Spark hashes it to task p
    default_watermark: str = "fixed:0"
    defaults: dict = field(default_factory=dict)

    @property
    def partitions(self) -> int:
        return len(self.programs)


# ----------------------------------------------------------------------------- stages

def assign_partitions(records, job: Job):
    """Stage 4: each reading gets the key of every partition that reads its sensor (home first).

    Most sensors have one partition; a sensor whose edges the plan cut to keep the
    balance is sent to each partition that reads it. Quarantined rows go to
    partition 0, which writes them out. Sensor ids become small integer codes here,
    so the shuffle and the Python workers carry integers, not strings.
    """
    from pyspark.sql import functions as F

    codes = F.create_map(*[x for sid, (code, _) in sorted(job.sensors.items()) for x in (F.lit(sid), F.lit(code))])
    keys = F.create_map(*[x for sid, (_, parts) in sorted(job.sensors.items())
                          for x in (F.lit(sid), F.array(*[F.lit(job.bucket_keys[p]) for p in parts]))])
    good = F.col("reason").isNull()
    return records.select(
        F.when(good, F.element_at(codes, F.col("sensor_id"))).otherwise(F.lit(QUARANTINE_CODE)).alias("code"),
        F.col("ts"),
        F.col("value"),
        F.when(good, F.lit(None).cast("string")).otherwise(F.col("raw")).alias("raw"),
        F.col("reason"),
        F.explode(F.when(good, F.element_at(keys, F.col("sensor_id")))
                  .otherwise(F.array(F.lit(job.bucket_keys[0])))).alias("pkey"),
    )


def run_partitions(keyed, job: Job, watermark: str):
    """Stages 5-8: the watermark, then slices and windows, combine (and CEP) per partition.

    `repartition(n, pkey)` is the job's one shuffle; the grouping on the same key
    reuses it (spark.sql.shuffle.partitions = n), so each partition's operator runs
    where its readings landed.
    """
    return (keyed.repartition(job.partitions, "pkey")
            .groupBy("pkey")
            .transformWithStateInPandas(
                statefulProcessor=PartitionProcessor(job, watermark),
                outputStructType=OUTPUT_SCHEMA,
                outputMode="Append",
                timeMode="None"))


def _stateful_processor_base():
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    return StatefulProcessor


class PartitionProcessor(_stateful_processor_base()):
    """Spark's stateful operator for one partition: the engine, its state kept in RocksDB."""

    def __init__(self, job: Job, watermark: str):
        self.job = job
        self.watermark = watermark
        self.partition_of_key = {key: p for p, key in enumerate(job.bucket_keys)}

    def init(self, handle) -> None:
        self.state = handle.getValueState("engine", "blob binary")
        self.engines: dict[int, Engine] = {}

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:  # noqa: N802 (Spark's name)
        partition = self.partition_of_key[int(key[0])]
        engine = self.engines.get(partition)
        if engine is None:
            engine = self.engines[partition] = Engine(self.job.programs[partition])
        if self.state.exists():
            state, policy = pickle.loads(self.state.get()[0])
        else:
            state, policy = engine.new_state(), parse_policy(self.watermark)
        frame = pd.concat(list(rows), ignore_index=True)
        code = frame["code"].to_numpy(np.int64)
        control = code == CONTROL_CODE
        bad = code == QUARANTINE_CODE
        good = ~(control | bad)
        out = [_quarantine_rows(frame[bad])]
        code, ts, value = code[good], frame["ts"].to_numpy(np.int64)[good], frame["value"].to_numpy(np.float64)[good]
        results = [engine.process(state, code, ts, value, policy.current())]
        policy.observe(ts[np.isin(code, np.fromiter(engine.program.home_sensors, np.int64))])
        if control.any():  # end of the input: the watermark moves to +infinity
            empty = np.empty(0, np.int64)
            results.append(engine.process(state, empty, empty, np.empty(0, np.float64), POS_INF))
        self.state.update((pickle.dumps((state, policy), protocol=5),))
        for result in results:
            out.append(_result_rows(result, engine.program))
        out.append(_metric_rows({"readings": int(good.sum()), "quarantined": int(bad.sum()),
                                 "late": sum(r.late for r in results),
                                 **{f"division_by_zero:{n}": c for r in results
                                    for node, c in r.division_by_zero.items()
                                    for n in engine.program.outputs.get(node, (node,))}}))
        yield pd.concat([o for o in out if len(o)], ignore_index=True) if any(len(o) for o in out) \
            else _empty_output()

    def close(self) -> None:
        pass


def _empty_output() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in (
        ("kind", object), ("stream", object), ("ts", "Int64"), ("window_start", "Int64"), ("window_end", "Int64"),
        ("value", float), ("version", "Int32"), ("raw", object), ("reason", object))})


def _result_rows(result, program: Program) -> pd.DataFrame:
    parts = []
    for node_id, tuples in result.outputs.items():
        if not len(tuples):
            continue
        for name in program.outputs[node_id]:
            parts.append(pd.DataFrame({
                "kind": "result", "stream": name, "ts": tuples.ts,
                "window_start": pd.array(tuples.start, dtype="Int64") if tuples.start is not None else pd.NA,
                "window_end": pd.array(tuples.end, dtype="Int64") if tuples.end is not None else pd.NA,
                "value": tuples.value, "version": 1, "raw": None, "reason": None}))
    return pd.concat(parts, ignore_index=True) if parts else _empty_output()


def _quarantine_rows(frame: pd.DataFrame) -> pd.DataFrame:
    if not len(frame):
        return _empty_output()
    return pd.DataFrame({"kind": "quarantine", "stream": None, "ts": pd.NA, "window_start": pd.NA,
                         "window_end": pd.NA, "value": np.nan, "version": pd.NA,
                         "raw": frame["raw"].to_numpy(), "reason": frame["reason"].to_numpy()})


def _metric_rows(counters: dict[str, int]) -> pd.DataFrame:
    return pd.DataFrame({"kind": "metric", "stream": list(counters), "ts": pd.NA, "window_start": pd.NA,
                         "window_end": pd.NA, "value": [float(v) for v in counters.values()], "version": pd.NA,
                         "raw": None, "reason": None})
