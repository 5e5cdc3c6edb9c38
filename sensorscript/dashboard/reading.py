"""What the dashboard reads from a job's folder OUT, read-only: OUT/status.json, OUT/plan.json and
OUT/plan.txt, and what the job's sink holds (results, quarantine, metrics).

Each part is read on its own, so that a slow one (the first look at a large sink) holds up no other
(the page's header needs status.json only), and each look reads only what is new:
- status.json again when it changed; plan.json once per compile, boiled down to what the page shows
  (PlanSummary: plan.json is 28 MB at 10,240 workflows);
- SQLite (runtime/output/sinks.py; rows are only ever appended: a correction appends a higher
  version): the rows added since the last look, by rowid. The alarms (runtime/output/alarms.py) are
  kept up to date from the new rows of the streams that can have alarms; the rows of the streams a
  page shows are read, through the index by key (stream, ts, ...), when it first shows them and then by
  rowid; quarantine counts and metrics by rowid as well;
- CSV and Parquet sinks (runtime/output/sinks.py; each batch journalled once written): the rows of the
  batches journalled since the last look: the CSV file past the offset the last look read to, the
  Parquet files (one per batch) and the quarantine/ and metrics/ folders' files not read yet
  (file_look.FileReads); the rows read are kept in memory, less those of files removed since.
A run that starts (status.json's `started` changes) may have started afresh: then everything is read
again from the beginning; so is a sink whose rows went back (replaced under the same run), and every
alarm when the job is compiled again.

`JobOutput` is here; plan_summary.py boils plan.json down, kept.py keeps what was read between looks,
and a look at the sink is sink_look.py's, sqlite_look.py's or file_look.py's.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

import pandas as pd

from sensorscript.dashboard.file_look import Files
from sensorscript.dashboard.kept import AlarmView, Health, HealthTables, Results
from sensorscript.dashboard.plan_summary import PlanSummary
from sensorscript.dashboard.postgres_look import Postgres
from sensorscript.dashboard.sink_look import Nothing, Sink, Unreadable
from sensorscript.dashboard.sqlite_look import SQLite
from sensorscript.runtime.control.backfill import Backfill, newest as newest_backfill
from sensorscript.runtime.output.postgres_sink import is_postgres
from sensorscript.runtime.output.status import STATUS, read_status

PLAN, PLAN_TEXT = "plan.json", "plan.txt"
READ_EVERY_S = 1.0  # however many pages are open, each part is read at most once a second


class JobOutput:
    """OUT as the dashboard reads it, shared by every page open on it."""

    def __init__(self, out: Path):
        self.out = Path(out)
        self._status_lock, self._plan_lock = threading.Lock(), threading.Lock()
        self._results_lock, self._health_lock = threading.Lock(), threading.Lock()
        self._status: tuple[tuple, dict | None] = ((), None)
        self._plan: PlanSummary | None = None
        self._results = Results()
        self._health = HealthTables()
        self._files: dict = {}  # a CSV or Parquet sink as far as it was read (FileReads)
        self._problems = {"results": "", "health": ""}  # why the sink could not be read just now

    # ------------------------------------------------------------------ status.json, plan.json, plan.txt

    def status(self) -> dict | None:
        """status.json (None before the job's first run), parsed again only when it changed."""
        path = self.out / STATUS
        with self._status_lock:
            try:
                stat = path.stat()
            except FileNotFoundError:
                self._status = ((), None)
                return None
            seen = (stat.st_mtime_ns, stat.st_size)
            if seen != self._status[0]:
                try:
                    self._status = (seen, read_status(self.out))
                except (OSError, ValueError):  # written atomically, so only a file broken by hand: the last one read
                    pass
            return self._status[1]

    def plan(self) -> PlanSummary:
        path = self.out / PLAN
        with self._plan_lock:
            mtime = path.stat().st_mtime
            if self._plan is None or self._plan.mtime != mtime:  # compiled again
                self._plan = PlanSummary.of(json.loads(path.read_text()), mtime)
            return self._plan

    def plan_text(self, lines: int) -> tuple[list[str], int]:
        """The first `lines` lines of plan.txt, and how many it has."""
        path = self.out / PLAN_TEXT
        if not path.exists():
            return [], 0
        head, count = [], 0
        with path.open() as text:
            for count, line in enumerate(text, 1):
                if count <= lines:
                    head.append(line.rstrip("\n"))
        return head, count

    def backfill(self) -> Backfill | None:
        return newest_backfill(self.out)

    def sink_spec(self) -> str:
        status = self.status()
        return status["sink_spec"] if status else f"sqlite:{self.out / 'results.db'}"

    def job_name(self) -> str:
        status = self.status()
        return status["job"] if status else self.out.name

    # ------------------------------------------------------------------ the sink

    @property
    def problem(self) -> str:
        """Why the sink could not be read just now (shown; what was read before stays), or ""."""
        return next((p for p in self._problems.values() if p), "")

    def alarms(self) -> AlarmView:
        with self._results_lock:
            self._read_results()
            return self._results.view

    def stream_rows(self, streams: list[str]) -> dict[str, pd.DataFrame]:
        """The rows of these streams in COLUMNS (newest versions, retractions left out, in time order)."""
        with self._results_lock:
            self._read_results()
            return self._results.streams(self._sink(), streams)

    def health(self) -> Health:
        with self._health_lock:
            if time.time() - self._health.read_at > READ_EVERY_S:
                self._health.read_at = time.time()
                run = (self.status() or {}).get("started")
                self._guard("health", lambda: self._health.read(self._sink(), run))
            return self._health.view()

    def _read_results(self) -> None:
        results = self._results
        if time.time() - results.read_at > READ_EVERY_S:
            results.read_at = time.time()
            run = (self.status() or {}).get("started")
            plan = self.plan()
            self._guard("results", lambda: results.read(self._sink(), run, plan))

    def _sink(self) -> "Sink":
        spec = self.sink_spec()
        if is_postgres(spec):
            return Postgres(spec)
        kind, _, path = spec.partition(":")
        if kind == "sqlite":
            return SQLite(self._sink_path(path))
        if kind in ("csv", "parquet"):
            return Files(kind, self._sink_path(path), self._files, (self.status() or {}).get("started"))
        return Nothing(spec)

    def _guard(self, part: str, read) -> None:
        """Read; a sink being replaced or written just now is said, and what was read before stays."""
        try:
            read()
            self._problems[part] = ""
        except Unreadable as exc:
            self._problems[part] = str(exc)
        except (sqlite3.Error, OSError, ValueError) as exc:
            self._problems[part] = (f"the results could not be read just now ({exc}); the page shows what was "
                                    f"read before")

    def _sink_path(self, path: str) -> Path:
        """The sink's path as the run named it, relative to where it ran; from elsewhere, the
        default place in OUT."""
        given = Path(path)
        if given.is_absolute() or given.exists() or not (self.out / given.name).exists():
            return given
        return self.out / given.name
