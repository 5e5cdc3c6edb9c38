"""What retention removes from a sink (runtime/plan/retention.py): rows behind a store's horizon,
and the metrics downsampled to one row per minute, partition and measure before they go.

SQLite: a DELETE per store (results per stream, on the index by stream and time), the metrics'
aggregation and deletion in one transaction (a kill leaves both or neither). File sinks: the files a
batch wrote, once every row in them is behind the horizon; their metrics files are aggregated into
one metrics-minutes/ file named by the batches it holds (written whole, then the batch files go: a
kill between writes the same file again). A CSV sink's results are one file and cannot expire.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pandas as pd

from sensorscript import atomic
from sensorscript.runtime.output.postgres_sink import PostgresSink, is_postgres
from sensorscript.runtime.output.columns import METRIC_COLUMNS, MINUTE_COLUMNS
from sensorscript.runtime.output.sinks import MINUTES, SIDE_TABLES

MINUTES_FOLDER = "metrics-minutes"  # beside a file sink
EXPIRED = "expired.json"  # in OUT: store -> the event time before which its rows were removed
NEG_INF = -(2**63)


def expired_before(out: Path, store: str = "results") -> int:
    """The event time before which `store`'s rows were removed (NEG_INF: none): a correction or a
    backfill writes no row before it, which would come back as if new."""
    path = Path(out) / EXPIRED
    try:
        return int(json.loads(path.read_text()).get(store, NEG_INF))
    except (OSError, ValueError):
        return NEG_INF


def _expiring(out: Path, store: str, before: int) -> None:
    """Say first that `store` keeps nothing before `before`, then remove (a kill between: the
    next pass removes)."""
    path = Path(out) / EXPIRED
    found = json.loads(path.read_text()) if path.exists() else {}
    found[store] = max(int(before), int(found.get(store, NEG_INF)))
    atomic.write_json(path, found, indent=1, sort_keys=True)


def check(spec: str, results_horizon: int | None) -> None:
    """ValueError, in one sentence, for a horizon this sink cannot keep."""
    if results_horizon is not None and spec.startswith("csv:"):
        raise ValueError(f"results cannot expire from the CSV sink {spec[4:]} (one file that grows): use a sqlite "
                         f"or parquet sink, or keep the results (--retain results=forever)")


def expire_results(out: Path, spec: str, before: int, streams) -> int:
    """Remove result rows with ts < `before` (event time); returns how many rows (files: parquet)."""
    _expiring(out, "results", before)
    if is_postgres(spec):  # whole days (partitions) behind the horizon
        return PostgresSink(spec).drop_before("results", before)
    kind, _, path = spec.partition(":")
    if kind == "sqlite" and Path(path).exists():
        removed, streams = 0, sorted(streams)
        db = _connect(path)
        try:  # on the index (stream, ts): no scan of the table; a transaction per 256 streams, so
            for first in range(0, len(streams), 256):  # that the job's writes never wait long
                with db:
                    removed += sum(db.execute("DELETE FROM results WHERE stream = ? AND ts < ?", (stream, before)).rowcount
                                   for stream in streams[first:first + 256])
        finally:
            db.close()
        return removed
    if kind == "parquet":
        return _drop_files(Path(path).glob("batch-*.parquet"), lambda f: _parquet_max(f, "ts") < before)
    return 0


def expire_late(spec: str, before: int) -> int:
    """Remove late-store rows of readings with ts < `before` (event time)."""
    if is_postgres(spec):
        return PostgresSink(spec).drop_before("late", before)
    kind, _, path = spec.partition(":")
    if kind == "sqlite" and Path(path).exists():
        with _connect(path) as db:
            return db.execute("DELETE FROM late WHERE ts < ?", (before,)).rowcount
    if kind in ("csv", "parquet"):
        return _drop_files((Path(path).parent / "late").glob("batch-*.csv"),
                           lambda f: pd.read_csv(f, usecols=["ts"])["ts"].max() < before)
    return 0


def downsample_metrics(spec: str, before: float) -> int:
    """Turn the metrics rows of batches written before `before` (wall time, s; rounded down to a
    minute, so that a minute is aggregated whole) into per-minute rows; returns the rows taken."""
    before = float(int(before // 60) * 60)
    if is_postgres(spec):
        return PostgresSink(spec).downsample_metrics(before)
    kind, _, path = spec.partition(":")
    if kind == "sqlite" and Path(path).exists():
        with _connect(path) as db:  # one transaction: aggregated and deleted, or neither
            db.execute(f"INSERT INTO {MINUTES} ({', '.join(MINUTE_COLUMNS)}) "
                       "SELECT CAST(time / 60 AS INTEGER) * 60, partition, name, COUNT(*), SUM(value), MIN(value), "
                       "MAX(value) FROM metrics WHERE time < ? GROUP BY 1, 2, 3", (before,))
            return db.execute("DELETE FROM metrics WHERE time < ?", (before,)).rowcount
    if kind in ("csv", "parquet"):
        folder = Path(path).parent
        # A batch's file is written when its rows' time is: only files older than `before` are read.
        files = sorted(f for f in (folder / "metrics").glob("batch-*.csv") if _modified(f) < before)
        frames = [(f, pd.read_csv(f, float_precision="round_trip")) for f in files]
        old = [(f, frame) for f, frame in frames if len(frame) and frame["time"].max() < before]
        if not old:
            return 0
        rows = pd.concat([frame for _, frame in old], ignore_index=True).reindex(columns=list(METRIC_COLUMNS))
        rows["minute"] = (rows["time"] // 60) * 60
        minutes = (rows.groupby(["minute", "partition", "name"], dropna=False)["value"]
                   .agg(batches="count", total="sum", low="min", high="max").reset_index())
        batches = [int(f.stem.split("-", 1)[1]) for f, _ in old]
        target = folder / MINUTES_FOLDER / f"minutes-{min(batches):06d}-{max(batches):06d}.csv"
        target.parent.mkdir(exist_ok=True)
        temporary = target.with_name(f".{target.name}.tmp")
        minutes.reindex(columns=list(MINUTE_COLUMNS)).to_csv(temporary, index=False)
        os.replace(temporary, target)
        for f, _ in old:
            f.unlink(missing_ok=True)
        return len(rows)
    return 0


def expire_minutes(spec: str, before: float) -> int:
    """Remove per-minute metrics of minutes before `before` (wall time, s)."""
    if is_postgres(spec):
        return PostgresSink(spec).expire_minutes(before - 60)
    kind, _, path = spec.partition(":")
    if kind == "sqlite" and Path(path).exists():
        with _connect(path) as db:
            return db.execute(f"DELETE FROM {MINUTES} WHERE minute < ?", (before - 60,)).rowcount
    if kind in ("csv", "parquet"):
        return _drop_files((Path(path).parent / MINUTES_FOLDER).glob("minutes-*.csv"),
                           lambda f: pd.read_csv(f, usecols=["minute"])["minute"].max() < before - 60)
    return 0


def size(spec: str) -> int:
    """Bytes the sink takes on disk (its results and the tables or folders beside)."""
    if is_postgres(spec):
        return PostgresSink(spec).size()
    kind, _, path = spec.partition(":")
    target = Path(path)
    if kind == "sqlite":  # the database and its journal
        return sum(bytes_in(p) for p in target.parent.glob(target.name + "*"))
    if kind in ("csv", "parquet"):
        return sum(bytes_in(place) for place in (target, *(target.parent / name for name in (*SIDE_TABLES, MINUTES_FOLDER))))
    return 0


def bytes_in(path: Path) -> int:
    """Bytes of a file, or of every file under a folder (0 if it is not there; a file that goes
    while counted counts 0)."""
    total = 0
    for item in (path.rglob("*") if path.is_dir() else [path]):
        try:
            if item.is_file():
                total += item.stat().st_size
        except OSError:
            continue
    return total


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return float("inf")


def _connect(path) -> sqlite3.Connection:
    return sqlite3.connect(path, timeout=60)


def _drop_files(files, behind) -> int:
    removed = 0
    for f in sorted(files):
        try:
            if behind(f):
                f.unlink()
                removed += 1
        except (OSError, ValueError, KeyError, pd.errors.EmptyDataError):
            continue  # a file being written, or one the sink did not write: left as it is
    return removed


def _parquet_max(path: Path, column: str) -> float:
    """The largest value of a column of a Parquet file, from its footer's statistics."""
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    index = meta.schema.names.index(column)
    highs = [meta.row_group(i).column(index).statistics.max for i in range(meta.num_row_groups)]
    return max(highs) if highs else float("-inf")
