"""Sinks for results, quarantined rows, late readings and the job's metrics (docs/LANGUAGE.md, "Results").

A sink receives each micro-batch's rows on the driver (`foreachBatch`) and writes
them once: a batch id already written is skipped, so a batch that Spark replays
after a failure does not duplicate rows. Parquet's and PostgreSQL's result rows are
written by the executors instead (`Sink.on_executors`), the rest by the driver.

    sqlite:PATH   tables `results`, `quarantine`, `late` and `metrics` (the default)
    csv:PATH      one CSV file with a header; quarantine/, late/ and metrics/ folders beside it
    parquet:PATH  a folder of Parquet files, one per batch and partition written by the executors
                  (runtime/output/executor_writes.py); the same folders beside it
    console       printed (metrics are not)
    topic:OUT     the results topic of the job in OUT (`--sink kafka://...`), the rest in OUT's store:
                  what corrections and backfills read back and write (runtime/output/kafka_sink.py)
    postgresql://[USER@]HOST[:PORT]/DB[?schema=NAME&...]   tables in PostgreSQL, the results
                  written by the executors (runtime/output/postgres_sink.py)

`late` holds the readings that came behind their partition's watermark (late policy `log`):
the sensor, its reading, the watermark it came behind and the result streams it missed; under late
policy `correct`, `too_late` is 1 for a reading older than the archive's horizon, which no
correction takes (runtime/plan/retention.py).
`metrics` holds, per batch and partition, what `sscript status` and the dashboard show (the
watermark, its lag, the policy's buffer, late readings per stream, coverage, latency, state size),
one row per measure; rows older than the metrics' horizon become per-minute aggregates in
`metrics_minutes` (a folder metrics-minutes/ beside a file sink; runtime/output/expiry.py).
"""

from __future__ import annotations

import csv
from abc import ABC, abstractmethod
from dataclasses import dataclass
import itertools
import json
import math
import re
import sqlite3
import time
from pathlib import Path
from typing import Iterable, Iterator

import pandas as pd

# The columns, named in columns.py; their importers may take them from here too.
from sensorscript.runtime.output.columns import (KEY_COLUMNS, LATE_COLUMNS, MATCH_COLUMNS, METRIC_COLUMNS,
                                                 PLAN_COLUMN, QUARANTINE_COLUMNS, RESULT_COLUMNS)
from sensorscript.runtime.output.executor_writes import ExecutorWrite
from sensorscript.runtime.output.kafka_sink import (FIELDS, SPEC_PREFIX, ResultsTopic, TopicIndex, is_topic,
                                                    spark_for_read_back)
from sensorscript.runtime.output.postgres_sink import Address, PostgresSink, is_postgres
from sensorscript.runtime.output.status import read_status

SIDE_TABLES = ("quarantine", "late", "metrics")  # tables in SQLite, folders beside a file sink
MINUTES = "metrics_minutes"  # the table (a folder metrics-minutes/ beside a file sink)


@dataclass
class BatchRows:
    """What one micro-batch writes, each frame in its table's columns."""

    results: pd.DataFrame
    quarantine: pd.DataFrame
    late: pd.DataFrame | None = None
    metrics: pd.DataFrame | None = None
    # More result rows, a frame at a time, taken by the sink as it writes: a batch too large for the
    # driver to hold at once (runtime/output/executor_writes.py, `DriverCollect`).
    more: Iterable[pd.DataFrame] = ()

    def result_frames(self) -> Iterator[pd.DataFrame]:
        """The result rows, a frame at a time."""
        yield self.results
        yield from self.more

    def side_tables(self):
        """(folder or table name, columns, frame) of everything but the results."""
        return tuple(zip(SIDE_TABLES, (QUARANTINE_COLUMNS, LATE_COLUMNS, METRIC_COLUMNS),
                         (self.quarantine, self.late, self.metrics)))


class Sink(ABC):
    """Write one batch's rows; skip a batch already written. A sink whose result rows the executors
    write (`on_executors`) has `write_on_executors(batch, batch_id, job, keep)`
    (runtime/output/executor_writes.py), and its `write` then takes the batch's other rows."""

    on_executors = False

    @abstractmethod
    def write(self, batch_id: int, rows: BatchRows) -> None: ...

    @abstractmethod
    def describe(self) -> str: ...

    def wrote(self, batch_id: int) -> bool:
        """Whether the batch (or a correction's or backfill's write: a negative id) is in the sink."""
        return False


def open_sink(spec: str, matches: bool = False) -> Sink:
    """`matches`: the job has pattern streams among its outputs, so results carry MATCH_COLUMNS too
    (always in SQLite, where they are empty for other streams)."""
    if spec.startswith(SPEC_PREFIX):
        return TopicSink(Path(spec[len(SPEC_PREFIX):]))
    check_sink(spec)
    if is_postgres(spec):
        return PostgresSink(spec)
    kind, _, path = spec.partition(":")
    columns = RESULT_COLUMNS + (MATCH_COLUMNS if matches else ()) + (PLAN_COLUMN,)
    if kind == "sqlite":
        return SQLiteSink(Path(path))
    if kind == "csv":
        return CsvSink(Path(path), columns)
    if kind == "parquet":
        return ParquetSink(Path(path), columns)
    return ConsoleSink(columns)


_SQLITE_HEADER = b"SQLite format 3\x00"
_EXAMPLE_PATHS = {"sqlite": "results.db", "csv": "results.csv", "parquet": "results"}


def check_sink(spec: str) -> None:
    """Raise ValueError, in one sentence, for a sink that cannot be written: checked before Spark
    starts, and before a bounded run clears the sink (it would delete what stands at PATH)."""
    kind, _, path = spec.partition(":")
    if spec == "console":
        return
    if is_topic(spec):  # results to a topic: its own check (one topic)
        ResultsTopic.of(spec)
        return
    if is_postgres(spec):  # the address alone: the database is reached when the job starts
        Address.parse(spec)
        return
    if kind not in _EXAMPLE_PATHS:
        raise ValueError(f"unknown sink '{spec}': use sqlite:PATH, csv:PATH, parquet:PATH, console, "
                         f"kafka://HOST:PORT/TOPIC or postgresql://[USER@]HOST[:PORT]/DB")
    if not path:
        raise ValueError(f"the sink '{spec}' needs a path, e.g. {kind}:{_EXAMPLE_PATHS[kind]}")
    target = Path(path)
    if kind in ("sqlite", "csv") and target.is_dir():
        raise ValueError(f"the sink '{spec}': {path} is a folder, and a {kind} sink writes one file "
                         f"(e.g. {kind}:{target / _EXAMPLE_PATHS[kind]})")
    if kind == "parquet" and target.exists() and not target.is_dir():
        raise ValueError(f"the sink '{spec}': {path} is a file, and a parquet sink writes a folder of files")
    if kind == "sqlite" and target.is_file() and target.stat().st_size:
        with target.open("rb") as f:
            if f.read(len(_SQLITE_HEADER)) != _SQLITE_HEADER:
                raise ValueError(f"the sink '{spec}': {path} is not an SQLite database, and the results would "
                                 f"replace it")
    folder = target.parent if kind != "parquet" else target
    while not folder.exists():  # the nearest folder that is there: the sink makes the rest
        folder = folder.parent
    if not folder.is_dir():
        raise ValueError(f"the sink '{spec}': {folder} is a file, not a folder")


# By key, then version, then every other column: a stream's rows in time (for `sscript results`,
# the dashboard, a time range) and each row's versions (for `latest`) are read from the index
# alone, without a look-up in the table per row (3 to 5 times faster at 50 M rows, where one
# stream's rows are spread over the whole table; the index is 20 % larger than without them).
# results_by_time: the rows of all streams in a time range (written in about that order).
RESULTS_BY_KEY = KEY_COLUMNS + ("version", "value", "events", PLAN_COLUMN)
# The newest version of each row: what corrections of late data (version > 1) leave, retractions
# (a newest version whose value is empty) left out. Each row's newer versions are one look-up in
# the index results_by_key, which holds a key's versions side by side.
LATEST_VIEW = ("CREATE VIEW latest AS SELECT r.* FROM results r WHERE r.value IS NOT NULL AND NOT EXISTS ("
               "SELECT 1 FROM results n WHERE " + " AND ".join(f"n.{c} IS r.{c}" for c in KEY_COLUMNS)
               + " AND n.version > r.version)")


class SQLiteSink(Sink):
    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.executescript("""
                CREATE TABLE IF NOT EXISTS results (stream TEXT NOT NULL, ts INTEGER NOT NULL,
                    window_start INTEGER, window_end INTEGER, value REAL, version INTEGER NOT NULL,
                    start_ts INTEGER, end_ts INTEGER, events TEXT, plan_version INTEGER);
                CREATE TABLE IF NOT EXISTS quarantine (raw TEXT NOT NULL, reason TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS late (sensor_id TEXT NOT NULL, ts INTEGER NOT NULL, value REAL,
                    watermark INTEGER NOT NULL, streams TEXT NOT NULL, batch_id INTEGER NOT NULL, too_late INTEGER);
                CREATE TABLE IF NOT EXISTS metrics (batch_id INTEGER NOT NULL, partition INTEGER, time REAL NOT NULL,
                    name TEXT NOT NULL, value REAL);
                CREATE INDEX IF NOT EXISTS metrics_by_name ON metrics (name, batch_id);
                CREATE TABLE IF NOT EXISTS metrics_minutes (minute REAL NOT NULL, partition INTEGER,
                    name TEXT NOT NULL, batches INTEGER NOT NULL, total REAL, low REAL, high REAL);
                -- What retention deletes by (runtime/output/expiry.py).
                CREATE INDEX IF NOT EXISTS metrics_by_time ON metrics (time);
                CREATE INDEX IF NOT EXISTS metrics_minutes_by_minute ON metrics_minutes (minute);
                CREATE TABLE IF NOT EXISTS sscript_batches (batch_id INTEGER PRIMARY KEY);
            """)
            present = {row[1] for row in db.execute("PRAGMA table_info(results)")}
            for column, kind in (("start_ts", "INTEGER"), ("end_ts", "INTEGER"), ("events", "TEXT"),
                                 (PLAN_COLUMN, "INTEGER")):
                if column not in present:  # a results table written before patterns ran, or before updates
                    db.execute(f"ALTER TABLE results ADD COLUMN {column} {kind}")
            if "too_late" not in {row[1] for row in db.execute("PRAGMA table_info(late)")}:  # before retention
                db.execute("ALTER TABLE late ADD COLUMN too_late INTEGER")
            db.execute("CREATE INDEX IF NOT EXISTS late_by_ts ON late (ts)")
            # A store of an earlier release gets the indexes and the view of this one (built in two
            # minutes at 50 M rows, once); its index on (stream, ts) is results_by_key's prefix.
            db.execute(f"CREATE INDEX IF NOT EXISTS results_by_key ON results ({', '.join(RESULTS_BY_KEY)})")
            db.execute("CREATE INDEX IF NOT EXISTS results_by_time ON results (ts)")
            db.execute("DROP INDEX IF EXISTS results_by_stream")
            view = db.execute("SELECT sql FROM sqlite_master WHERE type = 'view' AND name = 'latest'").fetchone()
            if view != (LATEST_VIEW,):
                db.execute("DROP VIEW IF EXISTS latest")
                db.execute(LATEST_VIEW)

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=60)

    def wrote(self, batch_id: int) -> bool:
        db = self._connect()
        try:
            return db.execute("SELECT 1 FROM sscript_batches WHERE batch_id = ?", (batch_id,)).fetchone() is not None
        finally:
            db.close()

    def write(self, batch_id, rows):
        with self._connect() as db:  # one transaction: the rows and the batch id, or nothing
            if db.execute("SELECT 1 FROM sscript_batches WHERE batch_id = ?", (batch_id,)).fetchone():
                return
            tables = (("results", RESULT_COLUMNS + MATCH_COLUMNS + (PLAN_COLUMN,), frame)
                      for frame in rows.result_frames())  # a frame at a time
            for table, columns, frame in itertools.chain(tables, rows.side_tables()):
                db.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                               _each_record(frame, columns))
            db.execute("INSERT INTO sscript_batches VALUES (?)", (batch_id,))

    def describe(self) -> str:
        return f"sqlite:{self.path} (tables results, quarantine, late, metrics)"


Sink.register(PostgresSink)  # on_executors: its own


class TopicSink(Sink):
    """`topic:OUT`: the results of a job that sends them to a Kafka topic, as a correction or a
    backfill writes them from the driver: the rows to the topic (through Spark), then the unit in
    the ledger of OUT's store, so that a unit in the ledger is in the topic."""

    def __init__(self, out: Path):
        self.out = out
        self.topic, store = _topic_of(out)
        self.side = SQLiteSink(store)

    def wrote(self, batch_id: int) -> bool:
        return self.side.wrote(batch_id)

    def write(self, batch_id, rows):
        if self.side.wrote(batch_id):
            return
        results = rows.results
        if len(results):
            TopicIndex(self.side.path).note(time.time(), int(results["ts"].max()))
            self.topic.send(spark_for_read_back(self.out), _records(results, FIELDS))
        self.side.write(batch_id, BatchRows(results.iloc[:0], rows.quarantine, rows.late, rows.metrics))

    def describe(self) -> str:
        return f"{self.topic.url} (results; the rest to {self.side.describe()})"


def _topic_of(out: Path) -> tuple[ResultsTopic, Path]:
    """The results topic of the job in OUT and the SQLite store beside it (the ledger, `TopicIndex`),
    as its run's status keeps them."""
    status = read_status(out)
    return ResultsTopic.of_status(status), Path(status["sink_spec"].partition(":")[2])


class _FileSink(Sink):
    """Shared by the CSV and Parquet sinks: a journal of written batch ids beside the output."""

    def __init__(self, path: Path, columns: tuple[str, ...] = RESULT_COLUMNS):
        self.path = path
        self.columns = columns
        self.journal = journal_path(path)
        path.parent.mkdir(parents=True, exist_ok=True)

    def wrote(self, batch_id: int) -> bool:
        return self.journal.exists() and any(line.split()[:1] == [str(batch_id)]
                                             for line in self.journal.read_text().splitlines())

    def _done(self, batch_id: int) -> None:
        with self.journal.open("a") as f:
            f.write(f"{batch_id}\n")

    def _write_side_tables(self, batch_id: int, rows: BatchRows) -> None:
        """quarantine/, late/ and metrics/ beside the results: a CSV file per batch that has rows."""
        for name, columns, frame in rows.side_tables():
            if frame is not None and len(frame):
                folder = self.path.parent / name
                folder.mkdir(exist_ok=True)
                frame.reindex(columns=list(columns)).to_csv(folder / f"batch-{batch_id:06d}.csv", index=False)


class CsvSink(_FileSink):
    """One CSV file that each batch appends to. Its journal line keeps the file's size after the
    batch, so rows a killed run appended without journalling them are cut off before the batch is
    written again."""

    def _done(self, batch_id: int) -> None:
        with self.journal.open("a") as f:
            f.write(f"{batch_id} {self.path.stat().st_size}\n")

    def _journalled_size(self) -> int:
        sizes = [line.split()[1] for line in self.journal.read_text().splitlines()
                 if len(line.split()) == 2] if self.journal.exists() else []
        return int(sizes[-1]) if sizes else 0

    def write(self, batch_id, rows):
        if self.wrote(batch_id):
            return
        if self.path.exists() and self.path.stat().st_size > self._journalled_size():
            with self.path.open("r+b") as f:  # a batch that was appended but not journalled
                f.truncate(self._journalled_size())
        new = not self.path.exists() or self.path.stat().st_size == 0
        with self.path.open("a", newline="") as f:
            writer = csv.writer(f)
            if new:
                writer.writerow(self.columns)
            for frame in rows.result_frames():
                writer.writerows(("" if v is None else v for v in row) for row in _each_record(frame, self.columns))
        self._write_side_tables(batch_id, rows)
        self._done(batch_id)

    def describe(self) -> str:
        return f"csv:{self.path} (quarantine/, late/ and metrics/ in {self.path.parent}/)"


class ParquetSink(_FileSink):
    """A folder of Parquet files; the quarantine/ folder and journal sit beside it. A micro-batch's
    result rows are written by the executors, a file per partition of its last stage
    (`batch-000042.s1p0003.parquet`, `ParquetPartitions`), and committed by the driver's journal line
    (the manifest: readers take the files of journalled batches only); the rows a correction or a
    backfill writes from the driver go to one file (`batch--00003.parquet`)."""

    on_executors = True

    def __init__(self, path: Path, columns: tuple[str, ...] = RESULT_COLUMNS):
        super().__init__(path, columns)
        self.folder = path
        path.mkdir(parents=True, exist_ok=True)

    def write(self, batch_id, rows):
        if self.wrote(batch_id):
            return
        results = rows.results
        if len(results):
            types = {"window_start": "Int64", "window_end": "Int64", "ts": "int64", "version": "int32",
                     PLAN_COLUMN: "Int32"}
            if "events" in self.columns:
                types.update({"start_ts": "Int64", "end_ts": "Int64", "events": "string"})
            results.reindex(columns=list(self.columns)).astype(types).to_parquet(
                self.folder / f"batch-{batch_id:06d}.parquet", index=False)
        self._write_side_tables(batch_id, rows)
        self._done(batch_id)

    def write_on_executors(self, batch, batch_id: int, job, keep: frozenset = frozenset()):
        """The micro-batch's result rows, a file per partition, from the executors; first, the files of
        this batch that cut attempts left (not journalled) go, since another plan version may cut the
        batch into other partitions."""
        from sensorscript.runtime.output.executor_writes import last_stage, write_on_executors

        if not self.wrote(batch_id):  # its files and the hidden ones of writes a kill cut short
            for stale in [*self.folder.glob(f"batch-{batch_id:06d}.*.parquet"),
                          *self.folder.glob(f".batch-{batch_id:06d}.*.parquet.tmp")]:
                stale.unlink(missing_ok=True)
        return write_on_executors(batch, ParquetPartitions(batch_id, last_stage(job), job.version.number,
                                                           tuple(job.handed_over()), frozenset(keep),
                                                           str(self.folder.resolve()), self.columns))

    def committed_files(self) -> list[Path]:
        """The result files of the batches the journal holds, in the order written."""
        journalled = {batch for batch, _ in read_journal(self.path)[0]}
        return sorted(f for f in self.folder.glob("batch-*.parquet") if file_batch(f) in journalled)

    def describe(self) -> str:
        return f"parquet:{self.folder} (quarantine/, late/ and metrics/ in {self.path.parent}/)"


@dataclass
class ParquetPartitions(ExecutorWrite):
    """A partition's result rows into the sink's folder (`folder`, as the executors reach it), in the
    sink's columns: written to a hidden file, then renamed, so a file is whole or absent; a batch done
    again writes the same file again."""

    folder: str = ""
    columns: tuple[str, ...] = ()

    def store(self, part: int, table, ts) -> None:
        import os

        import pyarrow.parquet as pq

        name = f"batch-{self.batch_id:06d}.s{self.stage}p{part:04d}.parquet"
        hidden = os.path.join(self.folder, f".{name}.tmp")
        pq.write_table(table.select(list(self.columns)), hidden)
        os.replace(hidden, os.path.join(self.folder, name))


_BATCH_FILE = re.compile(r"batch-(-?\d+)(?:\.s\d+p\d+)?\.(?:parquet|csv)")


def file_batch(path: Path) -> int | None:
    """The batch a file sink's per-batch file belongs to (`batch-000042.csv`, `batch-000042.parquet`,
    a partition's `batch-000042.s1p0003.parquet`, a correction's `batch--00003.parquet`); None for
    another file."""
    match = _BATCH_FILE.fullmatch(Path(path).name)
    return int(match.group(1)) if match else None


class ConsoleSink(Sink):
    def __init__(self, columns: tuple[str, ...] = RESULT_COLUMNS):
        self.columns = columns

    def write(self, batch_id, rows):
        for frame in rows.result_frames():
            for row in _each_record(frame, self.columns):
                print(json.dumps(dict(zip(self.columns, row))))
        for name, columns, frame in rows.side_tables()[:2]:
            for row in _records(frame, columns):
                print(f"{name}: " + json.dumps(dict(zip(columns, row))))

    def describe(self) -> str:
        return "console"


_INTEGERS = ("ts", "window_start", "window_end", "version", "start_ts", "end_ts", "watermark", "batch_id",
             "partition", PLAN_COLUMN, "too_late", "batches")


def _records(frame: pd.DataFrame, columns: tuple[str, ...]) -> list[tuple]:
    """Rows as plain Python values, with None for what is missing (window bounds of non-window
    rows, a tombstone's value); built column by column (a row-by-row loop cost 2 s for 400,000 rows)."""
    if frame is None or not len(frame):
        return []
    out = frame.reindex(columns=list(columns))
    lists = []
    for column in columns:
        values = out[column]
        present = values.notna().to_numpy()
        items = values.astype(object).tolist()
        if column in _INTEGERS:
            items = [int(v) if ok else None for v, ok in zip(items, present)]
        elif not present.all():
            items = [v if ok else None for v, ok in zip(items, present)]
        lists.append(items)
    return list(zip(*lists))


RECORDS_AT_ONCE = 10_000  # rows made plain Python at a time by `_each_record`


def _each_record(frame: pd.DataFrame, columns: tuple[str, ...]) -> Iterator[tuple]:
    """`_records`, made a slice of rows at a time: a large frame's rows as Python objects take about
    ten times its own memory."""
    for start in range(0, 0 if frame is None else len(frame), RECORDS_AT_ONCE):
        yield from _records(frame.iloc[start:start + RECORDS_AT_ONCE], columns)


# ------------------------------------------------------------------ reading back

def sqlite_results(path: str | Path, table: str = "results") -> list[tuple]:
    """A SQLite sink's results (or the view `latest`), sorted: (stream, ts, window_start, window_end, value)."""
    db = sqlite3.connect(path)
    try:
        return sorted(db.execute(f"SELECT stream, ts, window_start, window_end, value FROM {table}"))
    finally:
        db.close()


def sqlite_result_groups(path: Path, streams, all_versions: bool, limit: int):
    """For `sscript results` of a SQLite sink: its streams one at a time (status.selected_groups),
    the newest version of each row (the view `latest`) or every version."""
    from sensorscript.runtime.output.status import selected_groups

    if not Path(path).exists():
        return
    db = None
    try:
        db = sqlite3.connect(path)
        yield from selected_groups(lambda sql, parameters: db.execute(sql, parameters).fetchall(),
                                   "results" if all_versions else "latest", streams, limit)
    except sqlite3.DatabaseError as exc:  # not a sink's database
        raise ValueError(f"the results in sqlite:{path} cannot be read: {exc}") from None
    finally:
        if db is not None:
            db.close()


def read_results(spec: str, streams: list[str] | None = None, lo: int | None = None,
                 hi: int | None = None) -> pd.DataFrame:
    """Every version of the result rows a sink holds (of these streams, with lo <= ts < hi), in
    RESULT_COLUMNS + MATCH_COLUMNS: what corrections compare with and `sscript results` shows."""
    kind, _, path = spec.partition(":")
    columns = list(RESULT_COLUMNS + MATCH_COLUMNS)
    if spec.startswith(SPEC_PREFIX):  # scanned by the executors from where rows at lo or later begin
        topic, store = _topic_of(Path(path))
        frame = topic.read(spark_for_read_back(path), streams, lo, hi, TopicIndex(store).since(lo))
        return frame.reindex(columns=columns).reset_index(drop=True)
    if is_postgres(spec):  # selected by PostgreSQL
        return PostgresSink(spec).read(columns, streams, lo, hi)
    if kind == "sqlite":
        if not Path(path).exists():
            return pd.DataFrame(columns=columns)
        where, parameters = ["1 = 1"], []
        for column, op, value in _selection(streams, lo, hi):
            if op == "in":
                where.append(f"{column} IN ({', '.join('?' * len(value))})")
                parameters += value
            else:
                where.append(f"{column} {op} ?")
                parameters.append(value)
        db = sqlite3.connect(path)
        try:
            frame = pd.read_sql_query(f"SELECT {', '.join(columns)} FROM results WHERE {' AND '.join(where)}",
                                      db, params=parameters)
        finally:
            db.close()
    elif kind == "csv":
        frame = pd.read_csv(path, float_precision="round_trip") if Path(path).exists() else pd.DataFrame(columns=columns)
    elif kind == "parquet":  # the files of the batches its journal committed, each filtered as it is read
        files = ParquetSink(Path(path)).committed_files() if Path(path).is_dir() else []
        frame = _parquet_rows(files, streams, lo, hi, columns)
    else:
        raise ValueError(f"results cannot be read back from '{spec}': use a sqlite, csv, parquet, kafka:// or "
                         f"postgresql:// sink")
    frame = frame.reindex(columns=columns)
    if kind not in ("sqlite", "parquet"):  # SQLite and pyarrow selected them already
        if streams is not None:
            frame = frame[frame["stream"].isin(streams)]
        if lo is not None:
            frame = frame[frame["ts"] >= lo]
        if hi is not None:
            frame = frame[frame["ts"] < hi]
    return frame.reset_index(drop=True)

def _selection(streams, lo, hi) -> list[tuple]:
    """(column, op, value) for `read_results`' choice of rows: the streams, lo <= ts < hi (an end at
    the int64 range's limit chooses nothing); as pyarrow takes filters, and SQLite's WHERE is made of."""
    chosen = []
    if streams is not None:
        chosen.append(("stream", "in", list(streams)))
    if lo is not None and lo > -(2**63):
        chosen.append(("ts", ">=", int(lo)))
    if hi is not None and hi < 2**63 - 1:
        chosen.append(("ts", "<", int(hi)))
    return chosen


def _parquet_rows(files: list[Path], streams, lo, hi, columns: list[str]) -> pd.DataFrame:
    """The rows of these streams with lo <= ts < hi from a Parquet sink's files: each file filtered
    by pyarrow as it is read (row groups whose statistics rule them out are skipped), so that a
    correction's read holds what it asked for, not the whole store."""
    import pyarrow.parquet as pq

    filters = _selection(streams, lo, hi) or None
    frames = [pq.read_table(f, filters=filters).to_pandas() for f in files]
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


_MISSING = -(2**63)  # stands for an empty key column while grouping (window bounds of non-window rows)


def key_of(frame: pd.DataFrame, column: str) -> pd.Series:
    """A KEY_COLUMNS column as a key to group by (an empty one as _MISSING)."""
    if column == "stream":
        return frame[column].astype(str)
    return frame[column].astype(object).where(frame[column].notna(), _MISSING).astype("int64")


def newest(stored: pd.DataFrame) -> pd.DataFrame:
    """The rows of the newest version of each key (tombstones included)."""
    if not len(stored):
        return stored
    keys = [key_of(stored, c) for c in KEY_COLUMNS]
    newest = stored.groupby(keys)["version"].transform("max")
    return stored[stored["version"] == newest]


def journal_path(path: Path) -> Path:
    """The journal of the batches a CSV or Parquet sink at `path` wrote, beside it."""
    return path.parent / f".{path.name}.batches"


def read_journal(path: Path, offset: int = 0) -> tuple[list[tuple[int, int | None]], int]:
    """The batches the journal of the sink at `path` holds past byte `offset`: (batch id, the CSV
    file's size once it was written, or None for Parquet), and the offset after the last whole line
    (a line being written is left for the next read). Raises ValueError when the journal is shorter
    than `offset` (the sink was written anew)."""
    journal = journal_path(path)
    if not journal.exists():
        if offset:
            raise ValueError(f"{journal} is gone")
        return [], 0
    with journal.open("rb") as f:
        f.seek(0, 2)
        if f.tell() < offset:
            raise ValueError(f"{journal} was written anew")
        f.seek(offset)
        text = f.read()
    whole = text[:text.rfind(b"\n") + 1]
    entries = []
    for line in whole.decode().splitlines():
        fields = line.split()
        if fields:
            entries.append((int(fields[0]), int(fields[1]) if len(fields) > 1 else None))
    return entries, offset + len(whole)


def same_results(a: list[tuple], b: list[tuple]) -> bool:
    """Row for row: stream, ts and window bounds exactly, values to 1e-9 relative."""
    return len(a) == len(b) and all(x[:4] == y[:4] and math.isclose(x[4], y[4], rel_tol=1e-9, abs_tol=1e-9)
                                    for x, y in zip(a, b))
