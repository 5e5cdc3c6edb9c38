"""Result rows written by the executors (the PostgreSQL and Parquet sinks): the batch writer maps a
micro-batch's partitions, in the tasks of its last stage, through an `ExecutorWrite`, which stores
the partition's result rows where they go (`store`, a sink's own) and hands the driver the rest: the
batch's other rows, the result rows of the streams whose alarms the run delivers, and one row of
counts per partition. The driver's memory no longer bounds a batch's results.

Exactly once is the sink's: a batch done again (after a kill, a task retried) is computed the same
from the same checkpoint, and its partitions store the same rows under the same names (a ledger row
per partition in PostgreSQL, a file per partition for Parquet).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sensorscript.runtime.output.rows import OUTPUT_SCHEMA
from sensorscript.runtime.plan.program import plan_versions_of

SUMMARY = "written"  # the kind of the row a partition sends the driver of what it stored: ts the newest
# row time, window_start how many result rows, window_end how many of them were pattern matches


@dataclass
class ExecutorWrite:
    """A micro-batch's write on the executors (pickled into Spark's tasks): its number, the stage
    whose partitions write (the job's last), the plan version that computes it with the streams an
    update handed over (`Job.handed_over()`), and the streams whose result rows the driver needs too."""

    batch_id: int
    stage: int
    plan: int
    handed_over: tuple
    keep: frozenset

    def __call__(self, batches):
        """mapInArrow: the partition's rows in; out, the rows the driver needs and one row of counts."""
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyspark import TaskContext

        part = TaskContext.get().partitionId()
        results, schema = [], None
        keep = pa.array(sorted(self.keep), pa.string())
        for batch in batches:
            schema = batch.schema
            is_result = pc.equal(batch.column(schema.get_field_index("kind")), "result").fill_null(False)
            driver = pc.invert(is_result)
            if self.keep:
                kept = pc.is_in(batch.column(schema.get_field_index("stream")), value_set=keep).fill_null(False)
                driver = pc.or_(driver, kept)
            if pc.any(is_result).as_py():
                results.append(batch.filter(is_result))
            if pc.any(driver).as_py():
                yield batch.filter(driver)
        if schema is None:  # an empty partition
            return
        rows = matches = 0
        newest = None
        if results:
            table = pa.Table.from_batches(results)
            stream, ts = table.column("stream").to_numpy(zero_copy_only=False), table.column("ts").to_numpy()
            table = table.append_column("plan_version", pa.array(
                plan_versions_of(self.plan, self.handed_over, stream, ts), pa.int32()))
            self.store(part, table, ts)
            rows, matches, newest = table.num_rows, table.num_rows - table.column("events").null_count, int(ts.max())
        values = {"kind": SUMMARY, "ts": newest, "window_start": rows, "window_end": matches}
        yield pa.RecordBatch.from_pydict({n: [values.get(n)] for n in schema.names}, schema=schema)

    def store(self, part: int, table, ts: np.ndarray) -> None:
        """Store the partition's result rows (rows.OUTPUT_SCHEMA's columns and `plan_version`; `ts` as
        numpy), once however often the batch is done."""
        raise NotImplementedError


def write_on_executors(batch, write: ExecutorWrite) -> tuple[pd.DataFrame, int, int]:
    """Run `write` over the micro-batch's partitions; what the driver needs: the batch's other rows
    (and the kept result rows), how many result rows were stored, how many were pattern matches."""
    found = batch.mapInArrow(write, OUTPUT_SCHEMA).toPandas()
    counted = found["kind"] == SUMMARY
    counts = found[counted]
    return (found[~counted].reset_index(drop=True), int(counts["window_start"].fillna(0).sum()),
            int(counts["window_end"].fillna(0).sum()))


def last_stage(job) -> int:
    """The number of the job's last stage, whose partitions write."""
    return max([1, *(number for number, _ in job.stages_after_first())])


# ------------------------------------------------------------------ a sink the driver writes

CHUNK_ROWS = 200_000  # the result rows a driver-side sink (SQLite, CSV, console) takes in at once,
DRIVER_ROWS = "SSCRIPT_DRIVER_ROWS"  # unless this environment variable says another number
KEPT = "kept"  # a held partition's result row of a stream whose alarms the run delivers (the driver
# writes it with the partition's chunks, and takes its alarms from it)


def driver_rows() -> int:
    """How many result rows the driver takes in at once (CHUNK_ROWS, or SSCRIPT_DRIVER_ROWS)."""
    import os

    given = os.environ.get(DRIVER_ROWS, "").replace("_", "").replace(",", "")
    return int(given) if given.isdigit() and int(given) > 0 else CHUNK_ROWS


COUNTS = "part int, rows long, matches long"


def _count(batches):
    """mapInArrow: a partition's result rows (their `events`) in; out, its number, how many, how
    many were pattern matches."""
    import pyarrow as pa
    from pyspark import TaskContext

    rows = matches = 0
    for batch in batches:
        rows, matches = rows + batch.num_rows, matches + batch.num_rows - batch.column(0).null_count
    yield pa.RecordBatch.from_pydict({"part": [TaskContext.get().partitionId()], "rows": [rows],
                                      "matches": [matches]}, schema=pa.schema(
        [("part", pa.int32()), ("rows", pa.int64()), ("matches", pa.int64())]))


class DriverCollect:
    """A micro-batch collected for a sink the driver writes, with its memory bounded. The batch is
    computed once (kept by the executors, spilling to disk) and its result rows counted per
    partition; a partition with more than its share of the driver's rows (`driver_rows()` over the
    job's partitions) is held. `rows`: the batch's rows but the held partitions' result rows (of
    which those of the streams in `keep`, whose alarms the run delivers, come as KEPT); `chunks()`:
    the held result rows, about `driver_rows()` at a time, each chunk the rows whose key hashes to
    its number, so that a chunk is the same set of rows however often the batch is computed (a
    shuffle's order is not fixed). Every step but the count (a Python worker sees the column
    `events`) runs in the JVMs. `close` lets the batch go."""

    def __init__(self, batch, job, keep: frozenset = frozenset()):
        from pyspark import StorageLevel

        self.batch, self.chunk_rows = batch, driver_rows()
        batch.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            self._collect(job, keep)
        except BaseException:  # a failed or cut batch: what Spark kept goes
            batch.unpersist()
            raise

    def _collect(self, job, keep: frozenset) -> None:
        from pyspark.sql import functions as F

        batch = self.batch
        is_result = F.col("kind") == "result"
        # Counted in each partition's task, by a Python worker that sees one column: no shuffle (its
        # records would add to the tuples the job's report says crossed the network).
        counts = batch.where(is_result).select("events").mapInArrow(_count, COUNTS).collect()
        limit = max(1, self.chunk_rows // max(1, job.partitions))
        self.held = {row["part"]: row["rows"] for row in counts if row["rows"] > limit}
        self.held_matches = sum(row["matches"] for row in counts if row["part"] in self.held)
        if not self.held:
            self.rows = batch.toPandas()
            return
        held = is_result & F.spark_partition_id().isin(sorted(self.held))
        wanted = ~held | F.col("stream").isin(sorted(keep)) if keep else ~held
        self.rows = (batch.where(wanted).withColumn("kind", F.when(held, F.lit(KEPT)).otherwise(F.col("kind")))
                     .toPandas())

    def chunks(self):
        """The held partitions' result rows (OUTPUT_SCHEMA's columns), a frame a chunk."""
        from pyspark.sql import functions as F

        if not self.held:
            return
        count = -(-sum(self.held.values()) // self.chunk_rows)
        results = self.batch.where((F.col("kind") == "result") & F.spark_partition_id().isin(sorted(self.held)))
        share = F.pmod(F.xxhash64("stream", "ts", "window_start", "version", "start_ts", "events"), F.lit(count))
        for number in range(count):
            yield results.where(share == number).toPandas()

    def close(self) -> None:
        self.batch.unpersist()
