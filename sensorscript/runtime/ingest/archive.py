"""The raw archive of late policy `correct` (SPEC §6: "all raw tuples are archived"), in Parquet,
partitioned by the hour of event time, in two folders:

- OUT/archive/: every reading a partition receives, on time or late, by sensor code;
- OUT/archive-unread/: the readings of sensors no workflow reads (yet), by sensor id, written by
  stage 0 where it drops them: t{task}-b{batch}.parquet. An update that starts reading such a
  sensor can so be backfilled from the start of the archive, not only from its switch. A reading
  is in exactly one of the two: the version that runs its micro-batch either reads its sensor or not.

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
UNREAD = "archive-unread"  # under OUT, beside FOLDER
WHOLE = "_whole"  # in UNREAD: made when both folders began together (a fresh run), so each holds its share from the start


def unread_folder(folder: str | Path) -> Path:
    """The folder of the readings no workflow read, beside the archive `folder`."""
    return Path(folder).parent / UNREAD


def begin(folder: str | Path) -> None:
    """A run that starts afresh begins both folders at once: from now on every reading the job
    receives is in one of them (`whole`)."""
    unread = unread_folder(folder)
    unread.mkdir(parents=True, exist_ok=True)
    (unread / WHOLE).touch()


def whole(folder: str | Path) -> bool:
    """True when the archive holds every reading the job received, read or not, since its first
    batch (a job begun before the archive kept unread readings holds those of the sensors it read only)."""
    return (unread_folder(folder) / WHOLE).exists()


def write(folder: str, partition: int, batch: int, code: np.ndarray, ts: np.ndarray, value: np.ndarray) -> int:
    """Archive the readings one partition received in micro-batch `batch`; returns the number of files written."""
    return _by_hour(Path(folder), f"p{partition}-b{batch}.parquet", ts, value, code=np.ascontiguousarray(code, np.int32))


def write_unread(folder: str, task: int, batch: int, sensor, ts: np.ndarray, value: np.ndarray) -> int:
    """Archive the readings of sensors no workflow reads that stage 0's task `task` dropped in
    micro-batch `batch` (`sensor`: an Arrow array of their ids); returns the number of files written."""
    return _by_hour(unread_folder(folder), f"t{task}-b{batch}.parquet", ts, value, sensor=sensor)


def _by_hour(folder: Path, name: str, ts: np.ndarray, value: np.ndarray, **key) -> int:
    """One file `name` per hour of event time the readings fall in, under folder/hour=H/."""
    if not len(ts):
        return 0
    import pyarrow as pa

    ts, value = np.ascontiguousarray(ts, np.int64), np.ascontiguousarray(value, np.float64)
    table = pa.table({**key, "ts": ts, "value": value})
    hours = ts // HOUR_MS
    order = np.argsort(hours, kind="stable")
    bounds = np.flatnonzero(np.r_[True, hours[order][1:] != hours[order][:-1], True])
    for start, end in zip(bounds[:-1], bounds[1:]):
        rows = order[start:end]
        _put(folder / f"hour={int(hours[rows[0]])}" / name, table.take(pa.array(rows)))
    return len(bounds) - 1


def _put(target: Path, table) -> None:
    import pyarrow.parquet as pq

    target.parent.mkdir(parents=True, exist_ok=True)
    # Hidden until complete: an executor killed mid-write leaves a file Spark's reader skips
    # (it reads every file of a folder but those named .* or _*), and a reader never sees half a file.
    temporary = target.parent / f".{target.name}.{os.getpid()}.tmp"
    pq.write_table(table, temporary)
    os.replace(temporary, target)


def forget(folder: str | Path, batch: int) -> int:
    """Remove what an attempt at micro-batch `batch` wrote (one that was not committed: the batch is
    being done again); returns the number of files removed."""
    found = [path for where, prefix in ((Path(folder), "p"), (unread_folder(folder), "t"))
             for pattern in (f"hour=*/{prefix}*-b{batch}.parquet", f"hour=*/.{prefix}*-b{batch}.parquet.*.tmp")
             for path in where.glob(pattern)]
    for path in found:
        path.unlink(missing_ok=True)
    return len(found)


def read(folder: str | Path, sensors: dict[int, str], start: int, until: int):
    """The archived readings of these sensors (code -> sensor id) with start <= ts < until, from
    both folders, as numpy arrays (code, ts, value) in event-time order, read where this process
    runs (the driver: on a cluster OUT is shared), pruned to the hours that can hold them. Arrow's
    Parquet reader filters the code column in C++ threads: over one hour of the bench_job fleet
    (50.6 M readings, 500 MiB) it took the 288,000 of four sensors in 1.0 s, where a Spark batch
    job collecting them took 5.6 s warm and 14 s cold (docs/BENCHMARKS.md, backfill)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    codes = sorted(sensors)
    read = _scan(Path(folder), "code", codes, start, until)
    ids = [sensors[c] for c in codes]
    unread = _scan(unread_folder(folder), "sensor", ids, start, until)
    # A sensor id -> its code now (the job's codes, which an update never changes for a sensor it reads).
    where = pc.index_in(unread.column("sensor"), value_set=pa.array(ids, pa.string())).to_numpy(zero_copy_only=False)
    code = np.concatenate([read.column("code").to_numpy().astype(np.int64),
                           np.array(codes, np.int64)[where.astype(np.int64)] if len(where) else np.empty(0, np.int64)])
    ts = np.concatenate([t.column("ts").to_numpy().astype(np.int64) for t in (read, unread)])
    value = np.concatenate([t.column("value").to_numpy().astype(np.float64) for t in (read, unread)])
    order = np.lexsort((code, ts))  # by ts, then code
    return code[order], ts[order], value[order]


def _scan(folder: Path, key: str, wanted: list, start: int, until: int):
    """The rows of one folder whose `key` is one of `wanted`, with start <= ts < until."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    columns = [key, "ts", "value"]
    if not wanted or not folder.exists() or not any(folder.glob("hour=*/*.parquet")):
        return pa.table({key: pa.array([], pa.int32() if key == "code" else pa.string()),
                         "ts": pa.array([], pa.int64()), "value": pa.array([], pa.float64())})
    hour, ts = pc.field("hour"), pc.field("ts")
    chosen = (hour >= start // HOUR_MS) & (hour <= (until - 1) // HOUR_MS) & (ts >= start) & (ts < until) \
        & pc.field(key).isin(wanted)
    return ds.dataset(str(folder), format="parquet", partitioning="hive").to_table(columns=columns, filter=chosen)


def earliest(folder: str | Path) -> int | None:
    """The first hour the archive holds, in ms (None when it is empty): nothing came before it."""
    hours = [int(p.name.split("=", 1)[1]) for where in (Path(folder), unread_folder(folder))
             for p in where.glob("hour=*") if any(p.glob("*.parquet"))]
    return min(hours) * HOUR_MS if hours else None


def archived_from(out: Path) -> dict[str, int]:
    """Sensor node id -> from when the archive holds its readings whole: every sensor from the
    start (NEG_INF) when it keeps the readings no workflow reads too (`whole`); else (a job begun
    before it did) a sensor the job has read since its first version from the start, one an update
    started reading from that update's switch."""
    from sensorscript.runtime.plan import versions
    from sensorscript.runtime.plan.program import NEG_INF

    kept_all = whole(out / FOLDER)
    found: dict[str, int] = {}
    for _, switch_at, _, present in versions.switches(out):
        sensors = [node_id for node_id, node in present.items() if node["kind"] == "sensor"]
        found = {n: found.get(n, NEG_INF if switch_at is None or kept_all else switch_at) for n in sensors}
    return found
