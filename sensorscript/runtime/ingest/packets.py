"""Stage 0 of the job: readings -> their sensor's code and partition, packed per partition.

What crosses the job's one shuffle of raw readings are packets; the end-of-input control line
(`--once`, `sscript stop --drain`) becomes one control packet per partition. Readings of sensors
no workflow reads and lines the rules skip stop here, counted; under late policy `correct` the
readings of sensors no workflow reads are archived here (runtime/ingest/archive.py), so an update
that starts reading one can be backfilled from the start of the archive.
"""

from __future__ import annotations

import numpy as np

from sensorscript.runtime.ingest import records, source
from sensorscript.runtime.plan.program import NEG_INF, Job

END_OF_INPUT = "__sscript_end_of_input__"  # the control line that ends the input
CONTROL_CODE = -2  # the code of the end-of-input marker in a control packet

# What crosses the shuffle: packets of readings, one per partition per Arrow batch of the
# source, each column a buffer (code int32, ts int64, value float64); a quarantined line
# travels as a row of its own, with `raw` and `reason`. Packets were measured when the first
# operator was a transformWithStateInPandas, which turns its input into pandas row by row
# (a million readings as a thousand packets cost it a thousandth of the time); they also keep
# the shuffle at a few Spark records per batch. `unread` and `skipped` count, per Arrow batch, the
# readings of sensors no workflow reads and the lines the rules skip (blank, the CSV header): an
# empty packet to partition 0 carries them, with `unread_newest`, the newest event time among those
# readings (an update that starts reading such a sensor must start after it: runtime/state/exactness.py).
# A packet of slice partials (runtime/state/summaries.py: stage 0 sums a sensor's readings where the
# result is the same) has `part` too: per row, which partial of which slice plan, or what else.
PACKET_SCHEMA = ("pkey int, code binary, ts binary, value binary, raw string, reason string, unread int, "
                 "skipped int, unread_newest long, part binary")


def assign_partitions(inputs, job: Job, block_bytes: int = source.BLOCK_BYTES, summarise=None):
    """What the source gives (source.read_input: files to read, or Kafka values) -> readings
    read and parsed (records.read_block) a block of at most `block_bytes` (and the rest of its last
    line) at a time, with their sensor's code and partition, packed per partition (`Packer`);
    quarantined lines go to partition 0, which writes them out. A Kafka source read with
    --sensor-from-key adds the column `key` (source.KEY_COLUMN): each message's sensor id.
    `summarise(job)`: what makes a task's summariser, which sums readings into slice partials where
    the result is the same (runtime/state/summaries.py: runtime/job.py gives it; None: readings)."""
    columns = source.INPUT_COLUMNS + ((source.KEY_COLUMN,) if source.KEY_COLUMN in inputs.columns else ())
    return inputs.select(*columns).mapInArrow(Packer(job, block_bytes, summarise), PACKET_SCHEMA)


def _message_lines(batch, values) -> bytes:
    """A batch's Kafka values as lines of readings; with --sensor-from-key (a column `key`), each
    value's lines carry only time and value and the message's key is their sensor (records.with_sensor:
    a message without a key gets an empty id, and is quarantined for it)."""
    if source.KEY_COLUMN not in batch.schema.names:
        return b"\n".join(values.drop_null().to_pylist())
    return b"".join(records.with_sensor(value, (key or b"").decode("utf-8", "replace"))
                    for value, key in zip(values.to_pylist(), batch.column(source.KEY_COLUMN).to_pylist())
                    if value is not None)


def control_rows(files, job: Job):
    """A file in the control folder (the end-of-input line) becomes one control packet per
    partition (watermark to +infinity)."""
    from pyspark.sql import functions as F

    return files.select(
        F.explode(F.array(*[F.lit(k) for k in job.bucket_keys])).alias("pkey"),
        F.lit(bytearray(np.array([CONTROL_CODE], np.int32).tobytes())).alias("code"),
        F.lit(bytearray(np.zeros(1, np.int64).tobytes())).alias("ts"),
        F.lit(bytearray(np.zeros(1, np.float64).tobytes())).alias("value"),
        F.lit(None).cast("string").alias("raw"), F.lit(None).cast("string").alias("reason"),
        F.lit(0).alias("unread"), F.lit(0).alias("skipped"), F.lit(NEG_INF).cast("long").alias("unread_newest"),
        F.lit(None).cast("binary").alias("part"))


class Packer:
    """Stage 0 in Python, vectorised with Arrow: the input's bytes read in blocks of whole lines
    (source.blocks) and parsed (records.read_block); sensor id -> code and partition key, then one
    packet per partition key. The ids are looked up in a hash table (Arrow's `index_in`, while
    parsing); that lookup is also the job's filter to the sensors its workflows read: the
    readings of other sensors are counted and go no further."""

    def __init__(self, job: Job, block_bytes: int = source.BLOCK_BYTES, summarise=None):
        self.block_bytes = block_bytes
        self.summarise = summarise  # job -> a summariser, made in each task (it reads the batch's board)
        items = sorted(job.sensors.items())
        self.ids = [sensor_id for sensor_id, _ in items]
        self.codes = np.array([code for _, (code, _) in items], np.int32)
        self.keys = np.array([job.bucket_keys[partition] for _, (_, partition) in items], np.int32)
        self.quarantine_key = job.bucket_keys[0]
        self.job = job
        self.archive = job.archive  # late policy `correct`: where unread readings are kept
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

        known = pa.array(self.ids, pa.string())
        kept = []  # the unread readings of this task (archived once, at its end)
        self.summariser = self.summarise(self.job) if self.summarise is not None else None
        for batch in batches:
            paths, lengths = batch.column("path").to_pylist(), batch.column("length").to_pylist()
            for path, length in zip(paths, lengths):
                if path is not None:
                    for number, data in enumerate(source.blocks(path, length, self.block_bytes)):
                        yield self._pack(records.read_piece(data, known, file_start=number == 0), kept)
            values = batch.column("value")
            if values.null_count < len(values):  # Kafka: each value a line, or several
                yield self._pack(records.read_block(_message_lines(batch, values), known), kept)
        if kept:
            self._archive(pa.Table.from_batches(kept))

    def _pack(self, block: records.Block, kept: list):
        import pyarrow as pa

        found = block.known >= 0
        unread = int(len(block) - found.sum())
        skipped = block.skipped
        unread_newest = int(block.ts[~found].max()) if unread else NEG_INF
        if unread and self.archive is not None:
            kept.append(pa.RecordBatch.from_arrays(
                [block.sensor_id.filter(pa.array(~found)), pa.array(block.ts[~found]), pa.array(block.value[~found])],
                ["sensor_id", "ts", "value"]))
        index = block.known[found] if unread else block.known
        ts, value = (block.ts[found], block.value[found]) if unread else (block.ts, block.value)
        code, key = self.codes[index], self.keys[index]
        summed = []
        if self.summariser is not None and len(code):
            keep, summed = self.summariser(code, ts, value)
            if not keep.all():
                code, key, ts, value = code[keep], key[keep], ts[keep], value[keep]
        if self.copy_keys.size:
            positions, key = self._replicated(index, key)
            code, ts, value = code[positions], ts[positions], value[positions]
        order = np.argsort(key, kind="stable")
        code, key, ts, value = code[order], key[order], ts[order], value[order]
        bounds = np.flatnonzero(np.r_[True, key[1:] != key[:-1], True]) if len(key) else np.array([0])
        packets = [(int(key[lo]), code[lo:hi].tobytes(), ts[lo:hi].tobytes(), value[lo:hi].tobytes(), None)
                   for lo, hi in zip(bounds[:-1], bounds[1:])]
        packets += [(int(self.job.bucket_keys[partition]), p_code.tobytes(), p_ts.tobytes(), p_value.tobytes(),
                     part.tobytes()) for partition, p_code, p_ts, p_value, part in summed]
        if unread or skipped:  # an empty packet to partition 0 carries the counts
            packets.append((self.quarantine_key, b"", b"", b"", None))
        raw = [r.raw for r in block.rejected]
        reason = [r.reason for r in block.rejected]
        counts = np.zeros((2, len(packets) + len(raw)), np.int32)
        newest = np.full(len(packets) + len(raw), NEG_INF, np.int64)
        if unread or skipped:
            counts[:, len(packets) - 1] = unread, skipped
            newest[len(packets) - 1] = unread_newest
        return pa.RecordBatch.from_pydict({
            "pkey": pa.array([p[0] for p in packets] + [self.quarantine_key] * len(raw), pa.int32()),
            "code": pa.array([p[1] for p in packets] + [None] * len(raw), pa.binary()),
            "ts": pa.array([p[2] for p in packets] + [None] * len(raw), pa.binary()),
            "value": pa.array([p[3] for p in packets] + [None] * len(raw), pa.binary()),
            "raw": pa.array([None] * len(packets) + raw, pa.string()),
            "reason": pa.array([None] * len(packets) + reason, pa.string()),
            "unread": pa.array(counts[0]),
            "skipped": pa.array(counts[1]),
            "unread_newest": pa.array(newest, pa.int64()),
            "part": pa.array([p[4] for p in packets] + [None] * len(raw), pa.binary()),
        })

    def _archive(self, table) -> None:
        """Keep the unread readings of this task's share of the micro-batch (one file per hour)."""
        from pyspark import TaskContext

        from sensorscript.runtime.ingest import archive

        task = TaskContext.get()
        archive.write_unread(self.archive, task.partitionId(), int(task.getLocalProperty("streaming.sql.batchId")),
                             table.column("sensor_id").combine_chunks(), table.column("ts").to_numpy(),
                             table.column("value").to_numpy())
