"""The raw archive of late policy `correct` (every reading is archived), in Parquet,
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

Kept bounded for years (runtime/plan/retention.py, runtime/control/housekeeping.py):
- `compact`: once an hour is well behind the watermark, its small files are merged, per partition
  (archive/) or all together (archive-unread/), into one: p{partition}-upto{B}.parquet holds every
  row of that partition's files of batches up to B. Readers take, per hour and partition, the
  newest merged file and the small files of later batches (`_chosen`): a late reading archived
  into a merged hour is a new small file, merged again once enough of them gather. The merged file
  appears whole (written hidden, then renamed); only then are the files it replaces superseded, and
  they are deleted only while no reader holds the archive (`reading`, `_sweep`): a correction reads
  the small files or the merged one, never both, never neither, and a kill at any step loses and
  doubles nothing (what it left is superseded, or hidden, and swept by the next pass).
- `expire`: hours behind the horizon are removed; `_floor` says from when the archive is whole, so
  that a correction or backfill starts there, not at the first hour it finds.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
from pathlib import Path

import numpy as np

from sensorscript.runtime.plan.program import NEG_INF

HOUR_MS = 3_600_000
FOLDER = "archive"  # under OUT
UNREAD = "archive-unread"  # under OUT, beside FOLDER
WHOLE = "_whole"  # in UNREAD: made when both folders began together (a fresh run), so each holds its share from the start
FLOOR = "_floor"  # in FOLDER: the event time before which the archive keeps nothing any more (expired)
LOCK = ".lock"  # in FOLDER: held shared by readers, exclusively by whoever deletes files
SMALL = re.compile(r"(?P<group>p\d+|t)\d*-b(?P<batch>\d+)\.parquet")  # p3-b17: partition 3; t1-b17: stage 0's task 1
MERGED = re.compile(r"(?P<group>p\d+|t)-upto(?P<batch>\d+)\.parquet")
AGAIN_AFTER = 16  # small files gathered beside a merged one before the hour is merged again
ROW_GROUP = 1 << 20  # rows of a merged file's row group


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

    # Hidden until complete: an executor killed mid-write leaves a file Spark's reader skips
    # (it reads every file of a folder but those named .* or _*), and a reader never sees half a file.
    temporary = target.parent / f".{target.name}.{os.getpid()}.tmp"
    for attempt in (1, 2):  # the hour's folder may go (`expire`) between the two steps: once more
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, temporary)
            os.replace(temporary, target)
            return
        except FileNotFoundError:
            if attempt == 2:
                raise


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
    ids = [sensors[c] for c in codes]
    with reading(folder):
        read = _scan(Path(folder), "code", codes, start, until)
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
    first, last = start // HOUR_MS, (until - 1) // HOUR_MS
    files = [str(path) for hour, where in _hours(folder) if first <= hour <= last for path in _chosen(where)[0]]
    if not wanted or not files:
        return pa.table({key: pa.array([], pa.int32() if key == "code" else pa.string()),
                         "ts": pa.array([], pa.int64()), "value": pa.array([], pa.float64())})
    ts = pc.field("ts")
    chosen = (ts >= start) & (ts < until) & pc.field(key).isin(wanted)
    return ds.dataset(files, format="parquet").to_table(columns=columns, filter=chosen)


def _hours(folder: Path) -> list[tuple[int, Path]]:
    """(hour, its folder) of every hour=H folder, in order."""
    found = []
    for where in folder.glob("hour=*") if folder.exists() else ():
        with contextlib.suppress(ValueError):
            found.append((int(where.name.split("=", 1)[1]), where))
    return sorted(found)


def _groups(hour: Path) -> dict[str, tuple[list[tuple[int, Path]], list[tuple[int, Path]]]]:
    """An hour's files per partition (one group for the unread): (merged, small), each as (batch,
    path) in batch order (a merged file's batch: the last it holds)."""
    found: dict[str, tuple[list, list]] = {}
    for path in hour.glob("*.parquet"):
        for pattern, kind in ((MERGED, 0), (SMALL, 1)):
            match = pattern.fullmatch(path.name)
            if match:
                found.setdefault(match["group"], ([], []))[kind].append((int(match["batch"]), path))
                break
    return {group: (sorted(merged), sorted(small)) for group, (merged, small) in sorted(found.items())}


def _chosen(hour: Path) -> tuple[list[Path], list[Path]]:
    """(what a reader takes, what is superseded) among an hour's files: per partition (per folder
    for the unread), the newest merged file and the small files of batches after it."""
    taken, superseded = [], []
    for merged, small in _groups(hour).values():
        upto = merged[-1][0] if merged else -1
        taken += [path for _, path in merged[-1:]]
        superseded += [path for _, path in merged[:-1]]
        for batch, path in small:
            (taken if batch > upto else superseded).append(path)
    return taken, superseded


@contextlib.contextmanager
def reading(folder: str | Path):
    """Held while files of the archive are listed and read: nothing is deleted meanwhile."""
    with _locked(folder, fcntl.LOCK_SH):
        yield


@contextlib.contextmanager
def _locked(folder: str | Path, how: int):
    """The archive's lock (flock: between processes, and between threads that open it apart),
    taken `how`; yields whether it was taken (LOCK_NB: maybe not)."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    with open(Path(folder) / LOCK, "a") as lock:
        try:
            fcntl.flock(lock, how)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def compact(folder: str | Path, before: int, upto_batch: int) -> int:
    """Merge the small files of each hour that ends at or before event time `before`, of batches up
    to `upto_batch` (committed ones: a batch done again rewrites only its own small files), then
    sweep what the merged files supersede; returns the number of small files merged."""
    merged = 0
    for where in (Path(folder), unread_folder(folder)):
        for hour, path in _hours(where):
            if (hour + 1) * HOUR_MS <= before:
                merged += _merge_hour(path, upto_batch)
    sweep(folder)
    return merged


def _merge_hour(hour: Path, upto_batch: int) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    count = 0
    for group, (merged, small) in _groups(hour).items():
        upto = merged[-1][0] if merged else -1
        earlier = [path for _, path in merged[-1:]]
        newer = [(batch, path) for batch, path in small if upto < batch <= upto_batch]
        if not newer or (not earlier and len(newer) < 2) or (earlier and len(newer) < AGAIN_AFTER):
            continue
        target = hour / f"{group}-upto{newer[-1][0]}.parquet"
        temporary = hour / f".{target.name}.{os.getpid()}.tmp"
        writer, held, rows = None, [], 0
        try:  # in row groups of about ROW_GROUP rows (a small file's are tiny): bounded memory, fast reads
            for source in [*earlier, *(path for _, path in newer)]:
                for batch in pq.ParquetFile(source).iter_batches(batch_size=ROW_GROUP):
                    writer = writer or pq.ParquetWriter(temporary, batch.schema)
                    held.append(batch)
                    rows += len(batch)
                    if rows >= ROW_GROUP:
                        writer.write_table(pa.Table.from_batches(held), row_group_size=2 * ROW_GROUP)
                        held, rows = [], 0
            if held:
                writer.write_table(pa.Table.from_batches(held), row_group_size=2 * ROW_GROUP)
        finally:
            if writer is not None:
                writer.close()
        if writer is None:
            continue
        os.replace(temporary, target)  # from here readers take it, and no longer what it holds
        count += len(newer)
    return count


def sweep(folder: str | Path) -> bool:
    """Delete the files merged files supersede, hours behind the floor, and what a killed merge left
    (hidden); only while no reader holds the archive: True when done, False to do next time."""
    with _locked(folder, fcntl.LOCK_EX | fcntl.LOCK_NB) as held:
        if not held:
            return False
        lowest = floor(folder)
        below = lowest // HOUR_MS if lowest > NEG_INF else None
        for where in (Path(folder), unread_folder(folder)):
            for hour, path in _hours(where):
                if below is not None and hour < below:
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                for stale in [*_chosen(path)[1], *path.glob(".*-upto*.parquet.*.tmp")]:
                    stale.unlink(missing_ok=True)
        return True


def expire(folder: str | Path, before: int) -> int | None:
    """Keep nothing before event time `before` (rounded down to an hour): the floor moves there, and
    the next `sweep` (`compact` ends with one) removes the hours behind it; returns the new floor, or
    None when it did not move."""
    new = (before // HOUR_MS) * HOUR_MS
    first = earliest(folder)  # the floor says what was removed: it moves only when something goes
    if first is None or first >= new or new <= floor(folder):
        return None
    path = Path(folder) / FLOOR
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{FLOOR}.tmp")
    temporary.write_text(f"{new}\n")
    os.replace(temporary, path)
    return new


def floor(folder: str | Path) -> int:
    """The event time from which the archive holds every reading the job received since it began
    keeping them (NEG_INF: nothing expired yet)."""
    path = Path(folder) / FLOOR
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return NEG_INF


def size(folder: str | Path) -> tuple[int, int]:
    """(bytes, files) of both folders."""
    total = files = 0
    for where in (Path(folder), unread_folder(folder)):
        for path in where.rglob("*.parquet") if where.exists() else ():
            with contextlib.suppress(OSError):
                total += path.stat().st_size
                files += 1
    return total, files


def earliest(folder: str | Path) -> int | None:
    """The first hour the archive holds, in ms (None when it is empty): nothing came before it
    but what expired (`floor`)."""
    below = floor(folder)
    hours = [hour for where in (Path(folder), unread_folder(folder)) for hour, p in _hours(where)
             if hour * HOUR_MS >= below and any(p.glob("*.parquet"))]
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
