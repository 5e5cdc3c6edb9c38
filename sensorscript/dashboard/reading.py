"""What the dashboard reads from a job's folder OUT, read-only: OUT/status.json, OUT/plan.json and
OUT/plan.txt, and what the job's sink holds (results, quarantine, the late store, metrics).

The sink's tables are those of runtime/output/sinks.py: SQLite through a read-only connection, reading
only the result rows added since the last look (rows are only ever appended: a correction appends
a higher version); CSV and Parquet sinks through sinks.read_results and the folders beside them.
A run that starts (status.json's `started` changes) may have started afresh: then everything is
read again."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from sensorscript.runtime.control.backfill import Backfill, newest as newest_backfill
from sensorscript.runtime.control.correction import newest
from sensorscript.runtime.output.sinks import MATCH_COLUMNS, METRIC_COLUMNS, RESULT_COLUMNS, SIDE_TABLES, read_results
from sensorscript.runtime.output.status import STATUS, read_status

COLUMNS = RESULT_COLUMNS + MATCH_COLUMNS
PLAN, PLAN_TEXT = "plan.json", "plan.txt"
METRICS_SHOWN = ("readings", "lag_ms", "watermark", "state_bytes")  # the health plots' measures
BATCHES_SHOWN = 300  # the health plots show the last this many batches


@dataclass
class Snapshot:
    """Everything a page shows, read at one moment."""

    status: dict | None  # None before the job's first run
    plan: dict
    results: pd.DataFrame  # the newest version of each row, retractions left out, in COLUMNS
    quarantine: list[tuple[str, int]]  # reason, count
    metrics: pd.DataFrame  # METRIC_COLUMNS, the last BATCHES_SHOWN batches, METRICS_SHOWN only
    sink: str  # the sink as its spec says it
    problem: str = ""  # why the sink could not be read just now (shown; the last rows read stay)
    backfill: Backfill | None = None  # the newest backfill asked for (runtime/control/backfill.py)
    out: str = ""  # the job's folder
    read_at: float = field(default_factory=time.time)

    def version(self) -> tuple:
        """Changes whenever what the page shows (apart from the clock) may have changed."""
        status = self.status or {}
        return (status.get("started"), status.get("updated"), status.get("state"), len(self.results),
                self.plan.get("_mtime"), self.problem,
                self.backfill.updated if self.backfill else None)


class JobOutput:
    """OUT as the dashboard reads it; `snapshot()` reads at most once a second however many ask."""

    def __init__(self, out: Path):
        self.out = Path(out)
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._rows = pd.DataFrame(columns=["_rowid", *COLUMNS])
        self._last_rowid = 0
        self._run: float | None = None  # `started` of the run the rows were read under
        self._plan: dict = {}

    def snapshot(self, max_age_s: float = 1.0) -> Snapshot:
        with self._lock:
            if self._snapshot is None or time.time() - self._snapshot.read_at > max_age_s:
                self._snapshot = self._read()
            return self._snapshot

    def plan_text(self) -> str:
        path = self.out / PLAN_TEXT
        return path.read_text() if path.exists() else ""

    # ------------------------------------------------------------------ reading

    def _read(self) -> Snapshot:
        status = self._status()
        plan = self._read_plan()
        spec = status["sink_spec"] if status else f"sqlite:{self.out / 'results.db'}"
        if status and status.get("started") != self._run:  # a new run: it may have started afresh
            self._run = status.get("started")
            self._forget_rows()
        kind, _, path = spec.partition(":")
        problem = ""
        quarantine: list[tuple[str, int]] = []
        metrics = pd.DataFrame(columns=list(METRIC_COLUMNS))
        try:
            if kind == "sqlite":
                quarantine, metrics = self._read_sqlite(self._sink_path(path))
            elif kind in ("csv", "parquet"):
                quarantine, metrics = self._read_files(spec, self._sink_path(path))
            else:
                problem = f"the job writes its results to the {spec}: there is nothing to show"
        except (sqlite3.Error, OSError, ValueError) as exc:  # a sink being replaced or written just now
            problem = f"the results could not be read just now ({exc}); the page shows what was read before"
        results = newest(self._rows[list(COLUMNS)]) if len(self._rows) else self._rows[list(COLUMNS)]
        results = results[results["value"].notna()]
        return Snapshot(status, plan, results, quarantine, metrics, spec, problem, newest_backfill(self.out),
                        str(self.out))

    def _status(self) -> dict | None:
        if not (self.out / STATUS).exists():
            return None
        try:
            return read_status(self.out)
        except (OSError, ValueError):  # written atomically, so only a file broken by hand
            return self._snapshot.status if self._snapshot else None

    def _read_plan(self) -> dict:
        path = self.out / PLAN
        mtime = path.stat().st_mtime
        if self._plan.get("_mtime") != mtime:  # compiled again
            self._plan = {**json.loads(path.read_text()), "_mtime": mtime}
        return self._plan

    def _sink_path(self, path: str) -> Path:
        """The sink's path as the run named it, relative to where it ran; from elsewhere, the
        default place in OUT."""
        given = Path(path)
        if given.is_absolute() or given.exists() or not (self.out / given.name).exists():
            return given
        return self.out / given.name

    def _forget_rows(self) -> None:
        self._rows = self._rows.iloc[0:0]
        self._last_rowid = 0

    def _read_sqlite(self, path: Path) -> tuple[list[tuple[str, int]], pd.DataFrame]:
        if not path.exists():
            self._forget_rows()
            return [], pd.DataFrame(columns=list(METRIC_COLUMNS))
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=10)
        try:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "results" not in tables:
                return [], pd.DataFrame(columns=list(METRIC_COLUMNS))
            (last,) = db.execute("SELECT COALESCE(MAX(rowid), 0) FROM results").fetchone()
            if last < self._last_rowid:  # the file was replaced under the same run
                self._forget_rows()
            present = {row[1] for row in db.execute("PRAGMA table_info(results)")}
            select = ", ".join(c if c in present else f"NULL AS {c}" for c in COLUMNS)
            new = pd.read_sql_query(f"SELECT rowid AS _rowid, {select} FROM results WHERE rowid > ? ORDER BY rowid",
                                    db, params=(self._last_rowid,))
            if len(new):
                self._rows = pd.concat([self._rows, new], ignore_index=True) if len(self._rows) else new
                self._last_rowid = int(new["_rowid"].iloc[-1])
            quarantine = []
            if "quarantine" in tables:
                quarantine = db.execute("SELECT reason, COUNT(*) FROM quarantine GROUP BY reason "
                                        "ORDER BY COUNT(*) DESC, reason").fetchall()
            metrics = pd.DataFrame(columns=list(METRIC_COLUMNS))
            if "metrics" in tables:
                names = ", ".join("?" * len(METRICS_SHOWN))
                metrics = pd.read_sql_query(
                    f"SELECT {', '.join(METRIC_COLUMNS)} FROM metrics WHERE name IN ({names}) AND batch_id > "
                    f"(SELECT COALESCE(MAX(batch_id), 0) FROM metrics) - ?", db,
                    params=(*METRICS_SHOWN, BATCHES_SHOWN))
            return quarantine, metrics
        finally:
            db.close()

    def _read_files(self, spec: str, path: Path) -> tuple[list[tuple[str, int]], pd.DataFrame]:
        """A CSV or Parquet sink: the results whole, the side tables from the folders beside them."""
        kind = spec.partition(":")[0]
        rows = read_results(f"{kind}:{path}")
        self._rows = rows.assign(_rowid=range(len(rows)))
        side = {}
        for name in SIDE_TABLES:
            files = sorted((path.parent / name).glob("batch-*.csv"))
            side[name] = pd.concat([pd.read_csv(f) for f in files], ignore_index=True) if files else None
        quarantine = []
        if side["quarantine"] is not None:
            counts = side["quarantine"].groupby("reason").size().sort_values(ascending=False)
            quarantine = [(str(reason), int(count)) for reason, count in counts.items()]
        metrics = side["metrics"]
        if metrics is None:
            metrics = pd.DataFrame(columns=list(METRIC_COLUMNS))
        else:
            metrics = metrics[metrics["name"].isin(METRICS_SHOWN)]
            metrics = metrics[metrics["batch_id"] > metrics["batch_id"].max() - BATCHES_SHOWN]
        return quarantine, metrics
