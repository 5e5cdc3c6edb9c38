"""A look at a SQLite sink (runtime/output/sinks.py; rows are only ever appended: a correction appends
a higher version) through a read-only connection: the rows past a rowid, of the streams asked for,
through the index by key (stream, ts, ...) when few rows of each are expected, else past the rowid.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

import pandas as pd

from sensorscript.dashboard.sink_look import BATCHES_SHOWN, METRICS_SHOWN, Sink
from sensorscript.runtime.output.sinks import METRIC_COLUMNS


class SQLite(Sink):
    """A read-only connection for one look."""

    def __init__(self, path: Path):
        self.path = path
        self.db: sqlite3.Connection | None = None
        self.tables: set[str] = set()

    def __enter__(self):
        if self.path.exists():
            self.db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=10)
            self.tables = {row[0] for row in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return self

    def __exit__(self, *_):
        if self.db is not None:
            self.db.close()
        return False

    def last_rowid(self) -> int:
        if "results" not in self.tables:
            return 0
        return self.db.execute("SELECT COALESCE(MAX(rowid), 0) FROM results").fetchone()[0]

    def rows(self, streams, after, upto, columns, by_stream=True):
        if "results" not in self.tables or not streams:
            return pd.DataFrame(columns=list(columns))
        present = {row[1] for row in self.db.execute("PRAGMA table_info(results)")}
        select = ", ".join("rowid AS _rowid" if c == "_rowid" else c if c in present else f"NULL AS {c}"
                           for c in columns)
        # The streams as one JSON parameter. By stream, SQLite looks each up in the index by key (stream,
        # ts); else (`+stream` keeps it from the index) it reads the rows past `after` and keeps theirs.
        stream = "stream" if by_stream else "+stream"
        return pd.read_sql_query(f"SELECT {select} FROM results WHERE {stream} IN (SELECT value FROM json_each(?)) "
                                 f"AND rowid > ? AND rowid <= ?", self.db, params=(json.dumps(streams), after, upto))

    def quarantine(self, after, counts):
        if "quarantine" not in self.tables:
            return counts, after
        (last,) = self.db.execute("SELECT COALESCE(MAX(rowid), 0) FROM quarantine").fetchone()
        if last < after:  # replaced under the same run
            counts, after = Counter(), 0
        counts = counts.copy()
        for reason, count in self.db.execute("SELECT reason, COUNT(*) FROM quarantine WHERE rowid > ? AND rowid <= ? "
                                             "GROUP BY reason", (after, last)):
            counts[reason] += count
        return counts, last

    def metrics(self, after):
        empty = pd.DataFrame(columns=list(METRIC_COLUMNS))
        if "metrics" not in self.tables:
            return empty, after
        newest_row = self.db.execute("SELECT rowid, batch_id FROM metrics ORDER BY rowid DESC LIMIT 1").fetchone()
        if newest_row is None or newest_row[0] <= after:
            return empty, after
        last, batch = newest_row
        names = ", ".join("?" * len(METRICS_SHOWN))
        frame = pd.read_sql_query(f"SELECT {', '.join(METRIC_COLUMNS)} FROM metrics WHERE name IN ({names}) "
                                  f"AND batch_id > ? AND rowid > ? AND rowid <= ?", self.db,
                                  params=(*METRICS_SHOWN, batch - BATCHES_SHOWN, after, last))
        return frame, last
