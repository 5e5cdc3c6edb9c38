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
  (_FileReads); the rows read are kept in memory, less those of files removed since.
A run that starts (status.json's `started` changes) may have started afresh: then everything is read
again from the beginning; so is a sink whose rows went back (replaced under the same run), and every
alarm when the job is compiled again.
"""

from __future__ import annotations

import io
import json
import sqlite3
import threading
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from sensorscript.dashboard import figures
from sensorscript.graph.nodes import SENSOR
from sensorscript.runtime.control.backfill import Backfill, newest as newest_backfill
from sensorscript.runtime.control.correction import newest
from sensorscript.runtime.output import alarms as alarm_rule
from sensorscript.runtime.output.alarms import Alarm, StreamAlarms
from sensorscript.runtime.output.sinks import MATCH_COLUMNS, METRIC_COLUMNS, RESULT_COLUMNS, read_journal
from sensorscript.runtime.output.status import STATUS, read_status

COLUMNS = RESULT_COLUMNS + MATCH_COLUMNS
PLAN, PLAN_TEXT = "plan.json", "plan.txt"
METRICS_SHOWN = ("readings", "lag_ms", "watermark", "state_bytes")  # the health plots' measures
BATCHES_SHOWN = 300  # the health plots show the last this many batches
STREAMS_KEPT = 256  # the rows of this many streams stay in memory (those pages showed last)
CROSSINGS_SHOWN = 10  # the plan names the busiest edges between partitions, and counts the rest
READ_EVERY_S = 1.0  # however many pages are open, each part is read at most once a second


@dataclass(frozen=True)
class PlanSummary:
    """What the page shows of plan.json, kept from one compile to the next."""

    mtime: float
    workflows: dict[str, dict[str, str]]  # workflow -> {WORKFLOW.STREAM: kind of the node computing it}
    kinds: dict[str, str]  # WORKFLOW.STREAM -> kind
    alarm_kinds: dict[str, str]  # WORKFLOW.STREAM -> match or flag, for those that have alarms (alarms.py)
    nodes: int
    shared: int  # computations shared by several workflows
    sensors: int  # sensors the job reads
    partitions: int
    balance: float
    loads_hz: list[float]  # per partition, planned
    sensors_placed: list[int]  # per partition
    crossings: int  # edges between partitions
    crossing_rate: float  # tuples per second over them, planned
    busiest_crossings: list[dict]  # CROSSINGS_SHOWN of plan.json's crossings, the highest rate first
    cost: dict  # tuples per minute over the network: ours, lower_bound, naive_sensor_hash, naive_workflow_hash
    drawable: dict | None  # plan.json's nodes and workflows when the DAG is small enough to draw

    @classmethod
    def of(cls, plan: dict, mtime: float) -> "PlanSummary":
        partitions = plan["partitions"]
        placed = [0] * partitions["count"]
        for partition in partitions["sensors"].values():
            placed[partition] += 1
        crossings = partitions["crossings"]
        workflows = figures.output_streams(plan)
        small = len(plan["nodes"]) <= figures.DAG_NODES_DRAWN
        kinds = {s: k for outputs in workflows.values() for s, k in outputs.items()}
        return cls(mtime, workflows, kinds, alarm_rule.alarm_kinds_of_plan(plan),
                   len(plan["nodes"]), len(plan.get("shared", {})),
                   sum(1 for node in plan["nodes"] if node["kind"] == SENSOR), partitions["count"],
                   partitions["balance"], list(partitions["loads_hz"]), placed, len(crossings),
                   sum(c["rate_per_s"] for c in crossings),
                   sorted(crossings, key=lambda c: (-c["rate_per_s"], c["from"], c["to"]))[:CROSSINGS_SHOWN],
                   plan["cost_tuples_per_minute"],
                   {"nodes": plan["nodes"], "workflows": plan["workflows"]} if small else None)

    def workflow_of(self, stream: str) -> str:
        return stream.rsplit(".", 1)[0]


@dataclass(frozen=True)
class AlarmView:
    """The alarms as the last look left them."""

    newest_first: list[Alarm]
    by_workflow: dict[str, tuple[int, int]]  # workflow -> (alarms, time of its newest), newest first
    version: tuple  # changes whenever the alarms may have


@dataclass(frozen=True)
class Health:
    """What the sink says of the job's health, besides status.json."""

    quarantine: list[tuple[str, int]]  # reason, lines; the most first
    metrics: pd.DataFrame  # METRIC_COLUMNS, the last BATCHES_SHOWN batches, METRICS_SHOWN only
    version: tuple


class JobOutput:
    """OUT as the dashboard reads it, shared by every page open on it."""

    def __init__(self, out: Path):
        self.out = Path(out)
        self._status_lock, self._plan_lock = threading.Lock(), threading.Lock()
        self._results_lock, self._health_lock = threading.Lock(), threading.Lock()
        self._status: tuple[tuple, dict | None] = ((), None)
        self._plan: PlanSummary | None = None
        self._results = _Results()
        self._health = _HealthTables()
        self._files: dict = {}  # a CSV or Parquet sink as far as it was read (_FileReads)
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

    def _sink(self) -> "_Sink":
        spec = self.sink_spec()
        kind, _, path = spec.partition(":")
        if kind == "sqlite":
            return _SQLite(self._sink_path(path))
        if kind in ("csv", "parquet"):
            return _Files(kind, self._sink_path(path), self._files, (self.status() or {}).get("started"))
        return _Nothing(spec)

    def _guard(self, part: str, read) -> None:
        """Read; a sink being replaced or written just now is said, and what was read before stays."""
        try:
            read()
            self._problems[part] = ""
        except _Unreadable as exc:
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


# ---------------------------------------------------------------------- what is kept between looks


class _Results:
    """The alarms, kept up to date, and the rows of the streams pages show, as far as `rowid`."""

    def __init__(self):
        self.read_at = 0.0
        self.key: tuple = ()  # (run, plan's mtime): another one, and all is read again
        self.rowid = 0
        self.alarms: dict[str, StreamAlarms] = {}
        self.view = AlarmView([], {}, ())
        self.changes = 0
        self.rows: OrderedDict[str, tuple[int, pd.DataFrame]] = OrderedDict()  # stream -> (its rowid, rows)

    def read(self, sink: "_Sink", run, plan: PlanSummary) -> None:
        with sink:
            last = sink.last_rowid()
            key = (run, plan.mtime)
            if key != self.key or last < self.rowid:  # a new run, a new plan, a sink replaced
                self.__init__()
                self.key = key
                self.view = AlarmView([], {}, (key, self.changes))
            if last == self.rowid:
                return
            # The first look reads the watched streams' rows through the index; later ones the rows past the last look.
            new = sink.rows(list(plan.alarm_kinds), self.rowid, last, COLUMNS, by_stream=self.rowid == 0)
            self.rowid = last
            if self._follow(new, plan.alarm_kinds, lambda stream: self._all_rows(sink, stream)):
                self._publish(plan)

    def _follow(self, new: pd.DataFrame, kinds: dict[str, str], all_rows) -> bool:
        """Add the new rows to each stream's alarms; a stream with rows no later than its last (so
        with any correction: it rewrites a row there was) has its alarms worked out again from all
        its rows. True when an alarm came or went."""
        new = new.sort_values(["stream", "ts"], kind="stable")
        streams, ts, values, events = _arrays(new, "stream")
        versions = new["version"].to_numpy()
        starts = np.flatnonzero(np.r_[True, streams[1:] != streams[:-1]]) if len(new) else []
        changed = False
        for a, b in zip(starts, [*starts[1:], len(new)]):
            stream, before = streams[a], self.alarms.get(streams[a])
            if before is not None and (before.last_ts is None or ts[a] <= before.last_ts):
                before, rows = None, _arrays(all_rows(stream))
            elif (versions[a:b] > 1).any() or np.isnan(values[a:b]).any():  # its first rows, corrections among them
                rows = _arrays(_newest(new.iloc[a:b]).sort_values("ts", kind="stable"))
            else:
                rows = ts[a:b], values[a:b], events[a:b]
            alarms = len(before.alarms) if before is not None else -1
            self.alarms[stream] = alarm_rule.follow_alarms(stream, kinds[stream], *rows, before)
            changed = changed or len(self.alarms[stream].alarms) != alarms
        return changed

    def _all_rows(self, sink: "_Sink", stream: str) -> pd.DataFrame:
        return _newest(sink.rows([stream], 0, self.rowid, COLUMNS)).sort_values("ts", kind="stable")

    def _publish(self, plan: PlanSummary) -> None:
        found = alarm_rule.newest_first([a for state in self.alarms.values() for a in state.alarms])
        by_workflow: dict[str, tuple[int, int]] = {}
        for alarm in found:
            workflow = plan.workflow_of(alarm.stream)
            count, ts = by_workflow.get(workflow, (0, alarm.ts))
            by_workflow[workflow] = (count + 1, ts)
        self.changes += 1
        self.view = AlarmView(found, by_workflow, (self.key, self.changes))

    def streams(self, sink: "_Sink", streams: list[str]) -> dict[str, pd.DataFrame]:
        """Each stream's rows so far: read whole the first time, then only those added since."""
        behind: dict[int, list[str]] = {}  # rowid read up to -> the streams read that far
        for stream in streams:
            after = self.rows[stream][0] if stream in self.rows else 0
            if after < self.rowid:
                behind.setdefault(after, []).append(stream)
        if behind:
            with sink:
                for after, some in behind.items():
                    new = sink.rows(sorted(some), after, self.rowid, ("_rowid",) + COLUMNS)
                    groups = dict(tuple(new.groupby("stream", sort=False)))
                    for stream in some:
                        kept = self.rows[stream][1] if stream in self.rows else new.iloc[0:0]
                        if stream in groups:
                            rows = pd.concat([kept, groups[stream]], ignore_index=True) if len(kept) else groups[stream]
                            kept = _newest(rows).sort_values("ts", kind="stable")
                        self.rows[stream] = (self.rowid, kept)
        for stream in streams:
            if stream in self.rows:
                self.rows.move_to_end(stream)
        while len(self.rows) > STREAMS_KEPT:
            self.rows.popitem(last=False)
        empty = pd.DataFrame(columns=["_rowid", *COLUMNS])
        return {s: self.rows[s][1] if s in self.rows else empty for s in streams}


def _arrays(rows: pd.DataFrame, *first: str) -> tuple:
    """`first` columns, then ts, values and events, as numpy arrays."""
    return (*(rows[c].to_numpy(object) for c in first), rows["ts"].to_numpy("int64"), rows["value"].to_numpy(float),
            rows["events"].to_numpy(object))


def _newest(rows: pd.DataFrame) -> pd.DataFrame:
    """The newest version of each row, retractions left out."""
    if len(rows) and (rows["version"] > 1).any():
        rows = newest(rows.reindex(columns=list(dict.fromkeys([*rows.columns, *COLUMNS]))))
    return rows[rows["value"].notna()]


class _HealthTables:
    """Quarantine counts and metrics, kept up to date by rowid."""

    def __init__(self):
        self.read_at = 0.0
        self.key: tuple = ()
        self.quarantine: Counter[str] = Counter()
        self.quarantine_rowid = 0
        self.metrics = pd.DataFrame(columns=list(METRIC_COLUMNS))
        self.metrics_rowid = 0

    def read(self, sink: "_Sink", run) -> None:
        with sink:
            if run != self.key:
                self.__init__()
                self.key = run
            counts, self.quarantine_rowid = sink.quarantine(self.quarantine_rowid, self.quarantine)
            self.quarantine = counts
            new, self.metrics_rowid = sink.metrics(self.metrics_rowid)
            if len(new):
                kept = pd.concat([self.metrics, new], ignore_index=True) if len(self.metrics) else new
                self.metrics = kept[kept["batch_id"] > kept["batch_id"].max() - BATCHES_SHOWN]

    def view(self) -> Health:
        quarantine = sorted(self.quarantine.items(), key=lambda item: (-item[1], item[0]))
        return Health(quarantine, self.metrics, (self.key, self.quarantine_rowid, self.metrics_rowid))


# ---------------------------------------------------------------------- the sinks, as read


class _Unreadable(Exception):
    """A sink the page cannot show, in one sentence."""


class _Sink:
    """One look at a sink: `with sink:` opens it, then its rows by rowid (the order they were written)."""

    def __enter__(self):
        return self

    def __exit__(self, *_):
        return False

    def last_rowid(self) -> int:
        return 0

    def rows(self, streams: list[str], after: int, upto: int, columns: tuple[str, ...],
             by_stream: bool = True) -> pd.DataFrame:
        """The rows of these streams with after < rowid <= upto; `by_stream`: few rows of each stream
        are expected (else: few rows past `after`)."""
        return pd.DataFrame(columns=list(columns))

    def quarantine(self, after: int, counts: Counter) -> tuple[Counter, int]:
        return counts, after

    def metrics(self, after: int) -> tuple[pd.DataFrame, int]:
        return pd.DataFrame(columns=list(METRIC_COLUMNS)), after


class _Nothing(_Sink):
    def __init__(self, spec: str):
        self.spec = spec

    def __enter__(self):
        raise _Unreadable(f"the job writes its results to the {self.spec}: there is nothing to show")


class _SQLite(_Sink):
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


class _Files(_Sink):
    """A CSV or Parquet sink, as far as its journal says it was written: each look reads only what
    came since the last (_FileReads, kept by JobOutput between looks)."""

    def __init__(self, kind: str, path: Path, cache: dict, run):
        self.kind, self.path, self.cache, self.run = kind, path, cache, run

    def __enter__(self):
        # The results' look and the health's share what was read: one at a time.
        self.lock = self.cache.setdefault("lock", threading.Lock())
        self.lock.acquire()
        try:
            reads = self.cache.get("reads")
            if reads is None or reads.key != (self.kind, self.path, self.run) or not reads.look():
                reads = _FileReads(self.kind, self.path, self.run)  # a new run, or the sink written anew
                reads.look()
        except BaseException:
            self.lock.release()
            raise
        self.cache["reads"] = self.reads = reads
        return self

    def __exit__(self, *_):
        self.lock.release()
        return False

    def last_rowid(self):
        return self.reads.results.rowid

    def rows(self, streams, after, upto, columns, by_stream=True):
        rows = self.reads.results.after(after)
        rows = rows[rows["stream"].isin(streams) & (rows["_rowid"] <= upto)]
        return rows.reindex(columns=list(columns)).reset_index(drop=True)

    def quarantine(self, after, counts):
        lines = self.reads.side["quarantine"]
        if lines.rowid < after:  # written anew under the same run
            counts, after = Counter(), 0
        counts = counts.copy()
        counts.update(lines.after(after)["reason"].astype(str))
        return counts, lines.rowid

    def metrics(self, after):
        metrics = self.reads.side["metrics"]
        return metrics.after(after).reindex(columns=list(METRIC_COLUMNS)).reset_index(drop=True), metrics.rowid


class _FileReads:
    """What a CSV or Parquet sink's files held at the looks so far. The sink journals each batch once
    its files are written (sinks.read_journal): a look reads the journal past where the last one
    stopped, then the CSV file's rows up to the size journalled last (from where the last look
    stopped), or the per-batch files of the batches journalled that were not read yet (Parquet files,
    the quarantine/ and metrics/ folders' CSV files). Files removed since (retention) take their rows
    with them; the rowids of the rest stay."""

    def __init__(self, kind: str, path: Path, run):
        self.kind, self.path, self.run = kind, path, run
        self.key = (kind, path, run)
        self.journal_offset = 0
        self.journalled = -1  # the last batch journalled (a run journals its batches in order, each once)
        self.csv_offset, self.csv_header, self.csv_size = 0, None, 0
        self.results = _Appended(COLUMNS)
        self.side = {"quarantine": _Appended(("reason",)), "metrics": _Appended(METRIC_COLUMNS)}
        self.files: dict[Path, int] = {}  # a per-batch file read -> its number (the rows' _file)
        self.numbered = 0

    def look(self) -> bool:
        """Read what is new; False when the sink was written anew (read it afresh)."""
        try:
            entries, self.journal_offset = read_journal(self.path, self.journal_offset)
        except ValueError:
            return False
        self.journalled = max([self.journalled, *(batch for batch, _ in entries)])
        sizes = [size for _, size in entries if size is not None]
        if self.kind == "csv":
            self.csv_size = sizes[-1] if sizes else self.csv_size
            if not self._read_csv():
                return False
        else:
            self._read_batches(self.path, "parquet", self.results, lambda f: pd.read_parquet(f))
        self._read_batches(self.path.parent / "quarantine", "csv", self.side["quarantine"],
                           lambda f: pd.read_csv(f, usecols=["reason"]))
        metrics = self.side["metrics"]
        self._read_batches(self.path.parent / "metrics", "csv", metrics,
                           lambda f: (m := pd.read_csv(f))[m["name"].isin(METRICS_SHOWN)])
        if metrics.chunks:  # only the last BATCHES_SHOWN batches are shown
            newest_batch = max(chunk["batch_id"].max() for chunk in metrics.chunks)
            metrics.keep(lambda rows: rows["batch_id"] > newest_batch - BATCHES_SHOWN)
        return True

    def _read_csv(self) -> bool:
        """The CSV file's rows from the last look's end up to the size journalled last."""
        if self.csv_size == self.csv_offset:
            return True
        if self.csv_size < self.csv_offset or not self.path.exists():
            return False
        with self.path.open("rb") as f:
            f.seek(self.csv_offset)
            text = f.read(self.csv_size - self.csv_offset)
        if len(text) < self.csv_size - self.csv_offset:
            return False
        if self.csv_offset == 0:
            rows = pd.read_csv(io.BytesIO(text))
            self.csv_header = list(rows.columns)
        else:
            rows = pd.read_csv(io.BytesIO(text), header=None, names=self.csv_header)
        self.csv_offset = self.csv_size
        self.results.add(rows, 0)
        return True

    def _read_batches(self, folder: Path, suffix: str, into: "_Appended", read) -> None:
        present = {f: int(f.stem[len("batch-"):]) for f in folder.glob(f"batch-*.{suffix}")
                   if f.stem[len("batch-"):].isdigit()}  # the sink's: batch-000042.csv
        gone = [f for f in self.files if f.parent == folder and f not in present]
        if gone:
            into.drop({self.files.pop(f) for f in gone})
        for f, batch in sorted(present.items(), key=lambda item: item[1]):
            if f not in self.files and batch <= self.journalled:  # written whole
                self.numbered += 1
                self.files[f] = self.numbered
                into.add(read(f), self.files[f])


class _Appended:
    """Rows read so far, numbered by `_rowid` in the order read and marked with their file (`_file`),
    in a few frames (the newest small, merged as they grow) so that adding rows or reading those past a
    rowid does not copy all the rows kept."""

    def __init__(self, columns: tuple[str, ...]):
        self.columns = columns  # those the rows have at least
        self.chunks: list[pd.DataFrame] = []
        self.rowid = 0  # the last given

    def add(self, rows: pd.DataFrame, file: int) -> None:
        if not len(rows):
            return
        self.chunks.append(rows.assign(_rowid=np.arange(self.rowid + 1, self.rowid + len(rows) + 1), _file=file))
        self.rowid += len(rows)
        while len(self.chunks) > 1 and len(self.chunks[-2]) <= 2 * len(self.chunks[-1]):
            newer = self.chunks.pop()
            self.chunks[-1] = pd.concat([self.chunks[-1], newer], ignore_index=True)

    def after(self, rowid: int) -> pd.DataFrame:
        found = [chunk[chunk["_rowid"] > rowid] if chunk["_rowid"].iloc[0] <= rowid else chunk
                 for chunk in self.chunks if chunk["_rowid"].iloc[-1] > rowid]
        if not found:
            return pd.DataFrame(columns=["_rowid", "_file", *self.columns])
        return pd.concat(found, ignore_index=True) if len(found) > 1 else found[0]

    def drop(self, files: set[int]) -> None:
        self.keep(lambda rows: ~rows["_file"].isin(files))

    def keep(self, which) -> None:
        kept = [chunk[which(chunk)] for chunk in self.chunks]
        self.chunks = [chunk.reset_index(drop=True) for chunk in kept if len(chunk)]
