"""The raw archive of late policy `correct` (SPEC §6): every reading a partition receives, on time
or late, in Parquet under OUT/archive/, partitioned by the hour of its event time.

Stage 1 writes it where it runs (an executor; on a cluster OUT must be a folder every worker and
the driver share), a file per partition, micro-batch and hour: hour=H/p{partition}-b{batch}.parquet.
A micro-batch that Spark runs again (after a kill, a stop that cut it short, an update's switch)
writes the same files again, in place; the run loop first removes what the cut attempt wrote
(`forget`), since the attempt again may not write every file the first one did (an update can send
the readings of a sensor elsewhere, or drop them). The correction reads it back with Spark, pruned
to the hours and sensors it needs.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

HOUR_MS = 3_600_000
FOLDER = "archive"  # under OUT


def write(folder: str, partition: int, batch: int, code: np.ndarray, ts: np.ndarray, value: np.ndarray) -> int:
    """Archive the readings one partition received in micro-batch `batch`; returns the number of files written."""
    if not len(ts):
        return 0
    import pyarrow as pa
    import pyarrow.parquet as pq

    code, ts, value = (np.ascontiguousarray(a, t) for a, t in ((code, np.int32), (ts, np.int64), (value, np.float64)))
    hours = ts // HOUR_MS
    order = np.argsort(hours, kind="stable")
    bounds = np.flatnonzero(np.r_[True, hours[order][1:] != hours[order][:-1], True])
    for start, end in zip(bounds[:-1], bounds[1:]):
        rows = order[start:end]
        target = Path(folder) / f"hour={int(hours[rows[0]])}" / f"p{partition}-b{batch}.parquet"
        target.parent.mkdir(parents=True, exist_ok=True)
        # Hidden until complete: an executor killed mid-write leaves a file Spark's reader skips
        # (it reads every file of a folder but those named .* or _*), and a reader never sees half a file.
        temporary = target.parent / f".{target.name}.{os.getpid()}.tmp"
        pq.write_table(pa.table({"code": code[rows], "ts": ts[rows], "value": value[rows]}), temporary)
        os.replace(temporary, target)
    return len(bounds) - 1


def forget(folder: str | Path, batch: int) -> int:
    """Remove what an attempt at micro-batch `batch` wrote (one that was not committed: the batch is
    being done again); returns the number of files removed."""
    found = [*Path(folder).glob(f"hour=*/p*-b{batch}.parquet"), *Path(folder).glob(f"hour=*/.p*-b{batch}.parquet.*.tmp")]
    for path in found:
        path.unlink(missing_ok=True)
    return len(found)


def read(spark, folder: str | Path, codes: list[int], start: int, until: int):
    """The archived readings of these sensor codes with start <= ts < until, as numpy arrays
    (code, ts, value) in event-time order: a Spark batch job over the hours that can hold them."""
    from pyspark.sql import functions as F

    folder = Path(folder)
    if not codes or not folder.exists() or not any(folder.glob("hour=*/*.parquet")):
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64)
    frame = (spark.read.parquet(str(folder))
             .where(F.col("hour").between(start // HOUR_MS, (until - 1) // HOUR_MS))
             .where((F.col("ts") >= start) & (F.col("ts") < until) & F.col("code").isin(codes))
             .select("code", "ts", "value").toPandas())
    frame = frame.sort_values(["ts", "code"], kind="stable")
    return frame["code"].to_numpy(np.int64), frame["ts"].to_numpy(np.int64), frame["value"].to_numpy(np.float64)


def earliest(folder: str | Path) -> int | None:
    """The first hour the archive holds, in ms (None when it is empty): nothing came before it."""
    hours = [int(p.name.split("=", 1)[1]) for p in Path(folder).glob("hour=*") if any(p.glob("*.parquet"))]
    return min(hours) * HOUR_MS if hours else None
