"""What the job wrote, read while it runs, from any of the sinks the soak can give it (`--sink`):
OUT/job/results.db (sqlite, the default), a Parquet folder OUT/job/results (parquet, written by the
executors, committed by the driver's journal), or a PostgreSQL database (postgresql: a server of
the soak's own in OUT/postgres, or an address given). A `Reading` of each kind gives the same three
things per poll, and what the sink keeps on disk for soaking.stores:
  commit       a batch's commit time: the earliest of (a) when the job's "batch N:" line, printed
               after the sink's commit, reaches the soak, and (b) the first poll (every 0.1 s) that
               sees N among the sink's committed batches (SQLite's and PostgreSQL's sscript_batches,
               the Parquet journal). Result rows are those of the batches a poll found committed
               (SQLite: new rowids in `results`, written in the same transaction).
  batch        a batch's duration: its commit in the checkpoint (OUT/job/checkpoint/state/commits/N,
               modification time) minus its trigger time (batchTimestampMs in offsets/N).
  state        per partition, `state_bytes` of its latest batch (metrics): the pickled size of
               the partition's stage-1 state (engine, watermark policy), as written to the state store.
  processed    the `readings` counters of the batches committed, which count referenced readings;
               `max_ts` and `watermark`, each partition's newest, for the lag (soaking.sampling).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from sensorscript.runtime.output.sinks import file_batch, journal_path, read_journal

from .job import JobProcess

POLL_SECONDS = 0.1
GAUGES = ("readings", "state_bytes", "max_ts", "watermark")


@dataclass
class Polled:
    """What one poll found: the batches newly committed, the window ends of their result rows (None:
    a row without a window), and their gauges (batch_id, partition, name, value)."""

    batches: list[int]
    window_ends: list
    metrics: list[tuple]


class Reading:
    """One kind of sink, read-only: `poll(after)` the batches committed past batch `after`;
    `stored()` the bytes and rows it keeps (its own connection: soaking.stores calls it from the
    sampler's thread). `errors`: what a poll may raise while the sink is not there yet, or busy."""

    errors: tuple[type[BaseException], ...] = (OSError,)
    spec = ""

    def poll(self, after: int) -> Polled | None:
        raise NotImplementedError

    def stored(self) -> tuple[dict[str, int], dict[str, int]]:
        raise NotImplementedError

    def reset(self) -> None:
        """After an error: the next poll starts afresh."""


class SQLiteReading(Reading):
    """OUT/job/results.db: a poll is one read transaction (the batches, their rows and metrics together)."""

    errors = (sqlite3.Error,)

    def __init__(self, database: Path):
        self.database = database
        self.spec = f"sqlite:{database}"
        self.db: sqlite3.Connection | None = None
        self.last_rowid = 0

    def _open(self) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{self.database}?mode=ro", uri=True, timeout=5, isolation_level=None,
                               check_same_thread=False)

    def reset(self) -> None:
        self.db = None

    def poll(self, after):
        if self.db is None:
            if not self.database.exists():
                return None
            self.db = self._open()
        db = self.db
        db.execute("BEGIN")
        try:
            new = [b for (b,) in db.execute("SELECT batch_id FROM sscript_batches WHERE batch_id > ? ORDER BY batch_id",
                                            (after,))]
            if not new:
                return None
            rows = db.execute("SELECT rowid, window_end FROM results WHERE rowid > ? ORDER BY rowid",
                              (self.last_rowid,)).fetchall()
            metrics = db.execute(
                f"SELECT batch_id, partition, name, value FROM metrics WHERE batch_id > ? AND batch_id <= ? "
                f"AND name IN ({', '.join('?' * len(GAUGES))})", (after, new[-1], *GAUGES)).fetchall()
        finally:
            db.execute("COMMIT")
        if rows:
            self.last_rowid = rows[-1][0]
        return Polled(new, [w for _, w in rows], metrics)

    def stored(self):
        sizes = {"results.db": sum(Path(f"{self.database}{end}").stat().st_size
                                   for end in ("", "-wal", "-shm") if Path(f"{self.database}{end}").exists())}
        rows: dict[str, int] = {}
        if self.database.exists():
            try:
                db = self._open()
                for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").fetchall():
                    rows[table] = db.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0]
                db.close()
            except sqlite3.Error:
                pass
        return sizes, rows


class ParquetReading(Reading):
    """A Parquet sink's folder: the batches its journal holds past the last read, the `window_end` of
    their files (a file per partition, from the executors), their metrics/ files beside it."""

    errors = (OSError, ValueError)  # ValueError: the journal written anew; pyarrow's ArrowInvalid

    def __init__(self, folder: Path):
        self.folder = folder
        self.spec = f"parquet:{folder}"
        self.offset = 0
        self.counted: dict[str, tuple[float, int]] = {}  # file -> (mtime, rows): stored() reads each file once

    def reset(self) -> None:
        self.offset = 0

    def poll(self, after):
        import pyarrow.parquet as pq

        entries, self.offset = read_journal(self.folder, self.offset)
        new = sorted(b for b, _ in entries if b > after)
        if not new:
            return None
        ends, metrics = [], []
        for batch in new:
            for path in sorted(self.folder.glob(f"batch-{batch:06d}*.parquet")):
                if file_batch(path) == batch:
                    ends += pq.read_table(path, columns=["window_end"]).column("window_end").to_pylist()
            found = self.folder.parent / "metrics" / f"batch-{batch:06d}.csv"
            if found.exists():
                frame = pd.read_csv(found)
                frame = frame[frame["name"].isin(GAUGES)]
                metrics += [(batch, None if pd.isna(p) else p, n, v)
                            for p, n, v in zip(frame["partition"], frame["name"], frame["value"])]
        return Polled(new, ends, metrics)

    def _rows(self, path: Path) -> int:
        """Rows of a result or side file, counted once per version of the file."""
        import pyarrow.parquet as pq

        mtime = path.stat().st_mtime
        seen = self.counted.get(str(path))
        if seen is None or seen[0] != mtime:
            if path.suffix == ".parquet":
                count = pq.ParquetFile(path).metadata.num_rows
            else:
                with path.open("rb") as f:
                    count = max(sum(1 for _ in f) - 1, 0)  # the header
            seen = self.counted[str(path)] = (mtime, count)
        return seen[1]

    def stored(self):
        from .stores import folder_bytes

        journalled = {b for b, _ in read_journal(self.folder)[0]}
        parts = {"results": (self.folder, "*.parquet"),
                 **{side: (self.folder.parent / side, "*.csv")
                    for side in ("quarantine", "late", "metrics", "metrics-minutes")}}
        sizes = {f"{name}/": folder_bytes(folder) for name, (folder, _) in parts.items()}
        sizes["journal"] = journal_path(self.folder).stat().st_size if journal_path(self.folder).exists() else 0
        rows: dict[str, int] = {}
        present = set()
        for name, (folder, pattern) in parts.items():
            total = 0
            for path in (folder.glob(pattern) if folder.exists() else ()):
                if name == "results" and file_batch(path) not in journalled:
                    continue
                try:
                    total += self._rows(path)
                    present.add(str(path))
                except (OSError, ValueError):
                    continue  # went while counted (retention)
            rows[name] = total
        self.counted = {k: v for k, v in self.counted.items() if k in present}
        return sizes, rows


class PostgresReading(Reading):
    """A PostgreSQL sink: the batches in its ledger (sscript_batches, written by the driver once the
    executors' rows are committed), their rows' window ends and metrics, in one read-only snapshot."""

    def __init__(self, spec: str):
        import psycopg

        from sensorscript.runtime.output.postgres_sink import Address

        self.spec = spec
        self.address = Address.parse(spec)
        self.errors = (psycopg.Error, ConnectionError)
        self.db = None

    def _name(self, table: str) -> str:
        return f'"{self.address.schema}".{table}'

    def _open(self):
        db = self.address.connect_waiting(patience=0)
        db.autocommit = True
        db.execute("SET default_transaction_read_only = on")
        return db

    def reset(self) -> None:
        if self.db is not None:
            try:
                self.db.close()
            finally:
                self.db = None

    def poll(self, after):
        if self.db is None:
            self.db = self._open()
        if self.db.execute("SELECT to_regclass(%s)", (self._name("sscript_batches"),)).fetchone()[0] is None:
            return None  # the job has not made its tables yet
        with self.db.transaction():
            self.db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            new = [b for (b,) in self.db.execute(f"SELECT batch_id FROM {self._name('sscript_batches')} "
                                                 f"WHERE batch_id > %s ORDER BY batch_id", (after,))]
            if not new:
                return None
            ends = [w for (w,) in self.db.execute(f"SELECT window_end FROM {self._name('results')} "
                                                  f"WHERE batch_id = ANY(%s)", (new,))]
            metrics = self.db.execute(f"SELECT batch_id, partition, name, value FROM {self._name('metrics')} "
                                      f"WHERE batch_id > %s AND batch_id <= %s AND name = ANY(%s)",
                                      (after, new[-1], list(GAUGES))).fetchall()
        return Polled(new, ends, metrics)

    def stored(self):
        try:
            db = self._open()
        except ConnectionError:
            return {}, {}
        try:
            tables = [t for (t,) in db.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
                "AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY c.relname", (self.address.schema,))]
            # Bytes: every table, partition and index of the schema (a partitioned parent holds none itself).
            size = db.execute("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN "
                              "pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
                              (self.address.schema,)).fetchone()[0]
            rows = {t: db.execute(f"SELECT count(*) FROM {self._name(t)}").fetchone()[0] for t in tables}
            partitions = db.execute("SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhparent "
                                    "WHERE c.relname = 'results' AND c.relnamespace = %s::regnamespace",
                                    (self.address.schema,)).fetchone()[0]
            return {"postgresql": int(size)}, {**rows, "results partitions": int(partitions)}
        finally:
            db.close()


def job_sink(sink: str, job_dir: Path) -> str:
    """job.py's --sink for soak.py's --sink: sqlite and parquet in the job's folder, an address as it is
    (postgresql: the address of the soak's own server)."""
    if "://" in sink:
        return sink
    return f"parquet:{job_dir / 'results'}" if sink == "parquet" else f"sqlite:{job_dir / 'results.db'}"


def reading_of(spec: str) -> Reading:
    """The Reading of the sink job.py is given (`job_sink`)."""
    if spec.startswith(("postgresql:", "postgres:")):
        return PostgresReading(spec)
    kind, _, path = spec.partition(":")
    return ParquetReading(Path(path)) if kind == "parquet" else SQLiteReading(Path(path))


@dataclass
class Batch:
    batch_id: int
    committed: float
    readings: int = 0
    results: int = 0
    state: dict[int, float] = field(default_factory=dict)  # partition -> state bytes
    max_ts: dict[int, float] = field(default_factory=dict)
    watermark: dict[int, float] = field(default_factory=dict)
    duration: float | None = None  # from the checkpoint


@dataclass
class Result:
    """A window result: when its batch was committed, and its window's end (ms)."""

    committed: float
    closing_ms: int


class SinkWatcher(threading.Thread):
    """Polls the job's sink (a `Reading`): committed batches, their metrics, their result rows."""

    def __init__(self, reading: Reading, job: JobProcess):
        super().__init__(daemon=True, name="sink-watcher")
        self.reading = reading
        self.job = job
        self.batches: dict[int, Batch] = {}
        self.results: list[Result] = []
        self.other_results = 0  # rows without a window (combine, patterns): no latency measured
        self.last_batch = -1
        self.partitions: dict[int, dict[str, float]] = {}  # the newest gauges of each partition
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                self.poll()
            except self.reading.errors:
                self.reading.reset()  # not there yet, or busy: try again
            time.sleep(POLL_SECONDS)

    def poll(self) -> None:
        found = self.reading.poll(self.last_batch)
        if found is None:
            return
        now = time.time()
        new = found.batches
        for batch_id in new:
            line = self.job.lines_at.get(batch_id)
            self.batches[batch_id] = Batch(batch_id, min(now, line) if line else now)
        for batch_id, partition, name, value in found.metrics:
            batch = self.batches.get(batch_id)
            if batch is None or partition is None:
                continue
            partition = int(partition)
            if name == "readings":
                batch.readings += int(value)
            elif name == "state_bytes":
                batch.state[partition] = value
            elif name == "max_ts":
                batch.max_ts[partition] = value
            elif name == "watermark":
                batch.watermark[partition] = value
            self.partitions.setdefault(partition, {})[name] = value
        # Rows of one poll belong to the batches it found; with one batch a poll (batches are a second
        # apart, polls 0.1 s) their commit is that batch's.
        committed = self.batches[new[-1]].committed if len(new) == 1 else now
        self.batches[new[-1]].results += len(found.window_ends)
        for window_end in found.window_ends:
            if window_end is None or window_end != window_end:  # None, or NaN from a file
                self.other_results += 1
            else:
                self.results.append(Result(committed, int(window_end)))
        self.last_batch = new[-1]

    def committed(self) -> list[Batch]:
        """The batches seen so far, in order (a copy: this thread adds to them)."""
        return sorted(list(self.batches.values()), key=lambda b: b.batch_id)

    def processed_ms(self, name: str = "max_ts") -> float | None:
        """The job's newest processed event time (or watermark): the smallest over partitions."""
        found = [g[name] for g in list(self.partitions.values()) if name in g]
        return min(found) if found else None

    def stop(self) -> None:
        self.stopped.set()
        self.join(5)
        try:
            self.poll()
        except self.reading.errors:
            pass
        self.reading.reset()


def checkpoint_durations(checkpoint: Path, batches: dict[int, Batch]) -> None:
    """Fill in batch durations from Spark's checkpoint: commits/N's modification time minus the
    batch's trigger time (offsets/N: batchTimestampMs). Spark keeps the last 100 of each."""
    offsets, commits = checkpoint / "offsets", checkpoint / "commits"
    if not commits.is_dir():
        return
    for path in commits.iterdir():
        if not path.name.isdigit():
            continue
        batch = batches.get(int(path.name))
        if batch is None or batch.duration is not None:
            continue
        try:
            lines = (offsets / path.name).read_text().splitlines()
            triggered = json.loads(lines[1])["batchTimestampMs"] / 1000
            batch.duration = path.stat().st_mtime - triggered
        except (OSError, IndexError, KeyError, ValueError):
            continue
