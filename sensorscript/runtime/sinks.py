"""Sinks for results and quarantined rows (SPEC §7).

A sink receives each micro-batch's rows on the driver (`foreachBatch`) and writes
them once: a batch id already written is skipped, so a batch that Spark replays
after a failure does not duplicate rows.

    sqlite:PATH   tables `results` and `quarantine` (the default)
    csv:PATH      one CSV file with a header; quarantine/ folder beside it
    parquet:PATH  a folder of Parquet files, one per batch; quarantine/ folder beside it
    console       printed
"""

from __future__ import annotations

import csv
from abc import ABC, abstractmethod
import json
import math
import sqlite3
from pathlib import Path

import pandas as pd

RESULT_COLUMNS = ("stream", "ts", "window_start", "window_end", "value", "version")
MATCH_COLUMNS = ("start_ts", "end_ts", "events")  # pattern matches add these (SPEC §7)
QUARANTINE_COLUMNS = ("raw", "reason")


class Sink(ABC):
    """Write one batch's results and quarantined rows; skip a batch already written."""

    @abstractmethod
    def write(self, batch_id: int, results: pd.DataFrame, quarantine: pd.DataFrame) -> None: ...

    @abstractmethod
    def describe(self) -> str: ...


def open_sink(spec: str, matches: bool = False) -> Sink:
    """`matches`: the job has pattern streams among its outputs, so results carry MATCH_COLUMNS too
    (always in SQLite, where they are empty for other streams)."""
    kind, _, path = spec.partition(":")
    columns = RESULT_COLUMNS + (MATCH_COLUMNS if matches else ())
    if kind == "sqlite":
        return SQLiteSink(Path(path))
    if kind == "csv":
        return CsvSink(Path(path), columns)
    if kind == "parquet":
        return ParquetSink(Path(path), columns)
    if kind == "console":
        return ConsoleSink(columns)
    raise ValueError(f"unknown sink '{spec}': use sqlite:PATH, csv:PATH, parquet:PATH or console")


class SQLiteSink(Sink):
    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.executescript("""
                CREATE TABLE IF NOT EXISTS results (stream TEXT NOT NULL, ts INTEGER NOT NULL,
                    window_start INTEGER, window_end INTEGER, value REAL NOT NULL, version INTEGER NOT NULL,
                    start_ts INTEGER, end_ts INTEGER, events TEXT);
                CREATE TABLE IF NOT EXISTS quarantine (raw TEXT NOT NULL, reason TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS sscript_batches (batch_id INTEGER PRIMARY KEY);
                CREATE INDEX IF NOT EXISTS results_by_stream ON results (stream, ts);
            """)
            present = {row[1] for row in db.execute("PRAGMA table_info(results)")}
            for column, kind in (("start_ts", "INTEGER"), ("end_ts", "INTEGER"), ("events", "TEXT")):
                if column not in present:  # a results table written before patterns ran
                    db.execute(f"ALTER TABLE results ADD COLUMN {column} {kind}")

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=60)

    def write(self, batch_id, results, quarantine):
        with self._connect() as db:  # one transaction: the rows and the batch id, or nothing
            if db.execute("SELECT 1 FROM sscript_batches WHERE batch_id = ?", (batch_id,)).fetchone():
                return
            columns = RESULT_COLUMNS + MATCH_COLUMNS
            db.executemany(f"INSERT INTO results ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                           _records(results, columns))
            db.executemany("INSERT INTO quarantine VALUES (?, ?)", _records(quarantine, QUARANTINE_COLUMNS))
            db.execute("INSERT INTO sscript_batches VALUES (?)", (batch_id,))

    def describe(self) -> str:
        return f"sqlite:{self.path} (tables results, quarantine)"


class _FileSink(Sink):
    """Shared by the CSV and Parquet sinks: a journal of written batch ids beside the output."""

    def __init__(self, path: Path, columns: tuple[str, ...] = RESULT_COLUMNS):
        self.path = path
        self.columns = columns
        self.quarantine = path.parent / "quarantine"
        self.journal = path.parent / f".{path.name}.batches"
        path.parent.mkdir(parents=True, exist_ok=True)

    def _written(self, batch_id: int) -> bool:
        return self.journal.exists() and str(batch_id) in self.journal.read_text().split()

    def _done(self, batch_id: int) -> None:
        with self.journal.open("a") as f:
            f.write(f"{batch_id}\n")

    def _write_quarantine(self, batch_id: int, quarantine: pd.DataFrame) -> None:
        if len(quarantine):
            self.quarantine.mkdir(exist_ok=True)
            quarantine.loc[:, list(QUARANTINE_COLUMNS)].to_csv(
                self.quarantine / f"batch-{batch_id:06d}.csv", index=False)


class CsvSink(_FileSink):
    def write(self, batch_id, results, quarantine):
        if self._written(batch_id):
            return
        new = not self.path.exists()
        with self.path.open("a", newline="") as f:
            writer = csv.writer(f)
            if new:
                writer.writerow(self.columns)
            writer.writerows(("" if v is None else v for v in row) for row in _records(results, self.columns))
        self._write_quarantine(batch_id, quarantine)
        self._done(batch_id)

    def describe(self) -> str:
        return f"csv:{self.path} (quarantine in {self.quarantine}/)"


class ParquetSink(_FileSink):
    """A folder of Parquet files, one per batch; the quarantine/ folder and journal sit beside it."""

    def __init__(self, path: Path, columns: tuple[str, ...] = RESULT_COLUMNS):
        super().__init__(path, columns)
        self.folder = path
        path.mkdir(parents=True, exist_ok=True)

    def write(self, batch_id, results, quarantine):
        if self._written(batch_id):
            return
        if len(results):
            types = {"window_start": "Int64", "window_end": "Int64", "ts": "int64", "version": "int32"}
            if "events" in self.columns:
                types.update({"start_ts": "Int64", "end_ts": "Int64", "events": "string"})
            results.reindex(columns=list(self.columns)).astype(types).to_parquet(
                self.folder / f"batch-{batch_id:06d}.parquet", index=False)
        self._write_quarantine(batch_id, quarantine)
        self._done(batch_id)

    def describe(self) -> str:
        return f"parquet:{self.folder} (quarantine in {self.quarantine}/)"


class ConsoleSink(Sink):
    def __init__(self, columns: tuple[str, ...] = RESULT_COLUMNS):
        self.columns = columns

    def write(self, batch_id, results, quarantine):
        for row in _records(results, self.columns):
            print(json.dumps(dict(zip(self.columns, row))))
        for row in _records(quarantine, QUARANTINE_COLUMNS):
            print("quarantine: " + json.dumps(dict(zip(QUARANTINE_COLUMNS, row))))

    def describe(self) -> str:
        return "console"


def _records(frame: pd.DataFrame, columns: tuple[str, ...]) -> list[tuple]:
    """Rows as plain Python values, with None for missing window bounds."""
    if frame is None or not len(frame):
        return []
    out = frame.reindex(columns=list(columns)).astype(object)
    out = out.where(pd.notna(out), None)
    integers = ("ts", "window_start", "window_end", "version", "start_ts", "end_ts")
    rows = []
    for row in out.itertuples(index=False, name=None):
        rows.append(tuple(int(v) if isinstance(v, float) and c in integers and v is not None else v
                          for v, c in zip(row, columns)))
    return rows


# ------------------------------------------------------------------ reading back

def sqlite_results(path: str | Path) -> list[tuple]:
    """A SQLite sink's results, sorted: (stream, ts, window_start, window_end, value)."""
    db = sqlite3.connect(path)
    try:
        return sorted(db.execute("SELECT stream, ts, window_start, window_end, value FROM results"))
    finally:
        db.close()


def same_results(a: list[tuple], b: list[tuple]) -> bool:
    """Row for row: stream, ts and window bounds exactly, values to 1e-9 relative."""
    return len(a) == len(b) and all(x[:4] == y[:4] and math.isclose(x[4], y[4], rel_tol=1e-9, abs_tol=1e-9)
                                    for x, y in zip(a, b))
