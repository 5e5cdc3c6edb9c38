"""The raw archive of late policy `correct` (SPEC §6): every reading a partition receives, on time
or late, in Parquet under OUT/archive/, partitioned by the hour of its event time.

Stage 1 writes it where it runs (an executor; on a cluster OUT must be a folder every worker and
the driver share), a file per partition, micro-batch and hour: hour=H/p{partition}-b{batch}.parquet.
A micro-batch that Spark runs again (after a kill, a stop that cut it short, an update's switch)
writes the same files again, in place; the run loop first removes what the cut attempt wrote
(`forget`), since the attempt again may not write every file the first one did (an update can send
the readings of a sensor elsewhere, or drop them). A correction and a backfill read it back on the
driver, pruned to the hours and sensors they need.
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


def read(folder: str | Path, codes: list[int], start: int, until: int):
    """The archived readings of these sensor codes with start <= ts < until, as numpy arrays
    (code, ts, value) in event-time order, read where this process runs (the driver: on a cluster
    OUT is shared), pruned to the hours that can hold them. Arrow's Parquet reader filters the code
    column in C++ threads: over one hour of the bench_job fleet (50.6 M readings, 500 MiB) it took
    the 288,000 of four sensors in 1.0 s, where a Spark batch job collecting them took 5.6 s warm
    and 14 s cold (docs/BENCHMARKS.md, backfill)."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    folder = Path(folder)
    if not codes or not folder.exists() or not any(folder.glob("hour=*/*.parquet")):
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64)
    hour, ts = pc.field("hour"), pc.field("ts")
    wanted = (hour >= start // HOUR_MS) & (hour <= (until - 1) // HOUR_MS) & (ts >= start) & (ts < until) \
        & pc.field("code").isin(list(codes))
    table = ds.dataset(str(folder), format="parquet", partitioning="hive").to_table(
        columns=["code", "ts", "value"], filter=wanted)
    code = table.column("code").to_numpy().astype(np.int64)
    ts = table.column("ts").to_numpy().astype(np.int64)
    value = table.column("value").to_numpy().astype(np.float64)
    order = np.lexsort((code, ts))  # by ts, then code
    return code[order], ts[order], value[order]


def earliest(folder: str | Path) -> int | None:
    """The first hour the archive holds, in ms (None when it is empty): nothing came before it."""
    hours = [int(p.name.split("=", 1)[1]) for p in Path(folder).glob("hour=*") if any(p.glob("*.parquet"))]
    return min(hours) * HOUR_MS if hours else None
