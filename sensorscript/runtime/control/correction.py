"""Late policy `correct` (the hybrid model of Yang et al. 2019): late readings are logged, every
reading is archived (runtime/ingest/archive.py), and a correction recomputes what the late readings
touched and writes the rows that changed with a higher `version`.

A correction runs when the pending late readings span more than Γ of event time (the run loop
checks after every batch), at the end of a bounded input, or on `sscript correct OUT`:

1. The pending late readings name the sensors they came from; the result streams those sensors
   reach are the streams to correct, and the sensors those streams read are the ones to read back.
2. The driver reads those sensors' archived readings from `start` to `until` (archive.read): `until` is
   the smallest watermark of the job's partitions less the longest `within` (what the stream has
   emitted), `start` lies far enough before the first late reading that every stream to correct is
   exact from there on. It reads on past `until` by as far as a row before it may depend on later
   readings (JobGraph.lookahead: a trailing closure under strategy next ends with its window), and
   compares rows before `until` only.
3. The job's own engine (the programs it runs, in one process) recomputes every stream over them.
   A stream's recomputed rows are exact from its *trust time* on: a sensor's from `start` (from
   the beginning when the archive holds nothing earlier), a window's a window length later, a
   union's from its latest input's, a combine's from the first tuple of each input after that
   input's trust time (its latest value is known from there), a pattern's `within` after its
   inputs'. Where a stream to correct is not exact from the first late reading on, `start` moves
   back (twice as far each time) until it is, or reaches the start of the archive.
4. Rows are compared with the newest version of each row the sink holds, per key (stream, ts,
   window bounds, match bounds) as multisets: a key whose rows differ gets all its new rows with
   the next version; a key with no rows any more gets a tombstone (value empty) with the next
   version. The SQLite view `latest` and `sscript results` show the newest version of each row.
5. Late readings whose every effect lies before `until` are settled; the others stay pending and
   are recomputed again next time (comparing with the newest versions makes that harmless).
   Downstream streams (unions, arithmetic, windows over derived streams, patterns) are corrected
   with the streams they read, since the recompute runs the whole chain.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from sensorscript import atomic
from sensorscript.runtime.ingest import archive
from sensorscript.runtime.output import expiry
from sensorscript.runtime.output import rows as output
from sensorscript.runtime.plan import versions
from sensorscript.runtime.plan import program as p
from sensorscript.runtime.state.engine import NEG_INF, POS_INF
from sensorscript.runtime.output.sinks import (KEY_COLUMNS, MATCH_COLUMNS, PLAN_COLUMN, RESULT_COLUMNS, BatchRows,
                                        key_of as _key, newest, open_sink, read_results)
from sensorscript.runtime.state.tasks import LocalRun

FOLDER = "corrections"


@dataclass
class Correction:
    """What one correction did."""

    late: int = 0  # late readings it took in
    start: int = 0  # the event-time range it recomputed
    until: int = 0
    readings: int = 0  # archived readings it recomputed from
    rows: int = 0  # corrected rows written (a changed key's rows, with the next version)
    retracted: int = 0  # keys that have no rows any more (tombstones)
    settled: int = 0  # late readings whose every effect is now corrected
    seconds: float = 0.0

    def describe(self) -> str:
        if not self.late:
            return "correction: no late readings pending"
        span = (f"{(self.until - self.start) / 1000:,.1f} s of event time" if self.until < POS_INF
                else "to the end of the input")
        return (f"correction: {self.late:,} late readings, {self.readings:,} archived readings recomputed "
                f"({span}), "
                f"{self.rows:,} rows corrected, {self.retracted:,} retracted, {self.settled:,} late readings "
                f"settled, in {self.seconds:.1f} s")


class Pending:
    """OUT/corrections/: the late readings of each batch (one Parquet file per batch that had any) and
    state.json (the files settled, the corrections run)."""

    def __init__(self, out: Path):
        self.folder = Path(out) / FOLDER
        self.state_path = self.folder / "state.json"
        self._span: tuple[int, int] | None = None  # (first, last) event time pending, once read

    def _state(self) -> dict:
        return json.loads(self.state_path.read_text()) if self.state_path.exists() else {"settled": [], "runs": 0}

    def _save(self, state: dict) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic.write_json(self.state_path, state, indent=1)  # a kill mid-write leaves the old state, not half

    def add(self, batch_id: int, code: np.ndarray, ts: np.ndarray, value: np.ndarray) -> None:
        if not len(ts):
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        pd.DataFrame({"code": code, "ts": ts, "value": value}).to_parquet(
            self.folder / f"late-{batch_id:09d}.parquet", index=False)  # a replayed batch writes the same file
        if self._span is not None:
            first, last = self._span
            self._span = (min(first, int(ts.min())), max(last, int(ts.max())))

    def files(self) -> list[Path]:
        settled = set(self._state()["settled"])
        return sorted(f for f in self.folder.glob("late-*.parquet") if f.name not in settled)

    def readings(self, files: list[Path]) -> pd.DataFrame:
        """The late readings in these files, with `file`: the index of the file each came from."""
        if not files:
            return pd.DataFrame({"code": np.empty(0, np.int64), "ts": np.empty(0, np.int64), "value": np.empty(0),
                                 "file": np.empty(0, np.int64)})
        return pd.concat([pd.read_parquet(f).assign(file=i) for i, f in enumerate(files)], ignore_index=True)

    def runs(self) -> int:
        """How many corrections have run (each writes its rows as batch -number)."""
        return self._state()["runs"]

    def span_ms(self) -> int:
        """The event time the pending late readings span (read from the files once, then kept)."""
        if self._span is None:
            ts = self.readings(self.files())["ts"]
            self._span = (int(ts.min()), int(ts.max())) if len(ts) else (POS_INF, NEG_INF)
        first, last = self._span
        return max(last - first, 0)

    def settle(self, files: list[Path]) -> int:
        """Mark these files settled (every effect of their readings corrected), then delete them:
        the late store keeps the readings. Were a batch done again to write one anew, it would be
        pending again, and corrected again to the same rows (comparing with the newest versions)."""
        self._span = None  # what stays pending is read again
        state = self._state()
        state["settled"] = sorted(set(state["settled"]) | {f.name for f in files})
        state["runs"] += 1
        self._save(state)
        for path in files:
            path.unlink(missing_ok=True)
        present = {f.name for f in self.folder.glob("late-*.parquet")}
        state["settled"] = sorted(set(state["settled"]) & present)  # a file deleted needs no mark
        self._save(state)
        return state["runs"]


def correct(job: p.Job, out: Path, sink_spec: str, until: int, alarms=None) -> Correction:
    """Run a correction now: recompute what the pending late readings touched, up to event time
    `until` (POS_INF at the end of the input), and write the rows that changed, as batch -number.
    `alarms` (runtime/output/alerts/pipeline.py, `Writes`): the alarms they change, staged before the
    write and taken after it."""
    started = time.monotonic()
    pending = Pending(out)
    files = pending.files()
    late = pending.readings(files)
    found = Correction(late=len(late))
    if not len(late):
        return found
    graph = JobGraph(job, versions.started(out, archive.archived_from(out)))
    fed = job.streams_fed
    codes = sorted({int(c) for c in late["code"]})
    streams = sorted({name for c in codes for name in fed.get(c, ())})
    first_late = int(late["ts"].min())
    earliest = archive.earliest(job.archive)
    floor = archive.floor(job.archive)  # NEG_INF: nothing expired (runtime/plan/retention.py)
    reach = max([graph.lookback(name) for name in streams] + [1_000])
    start = first_late - reach
    while True:
        if earliest is not None and start <= earliest:
            start = NEG_INF  # the archive holds nothing earlier: recompute from its beginning
        # ... or from its floor, where what came before expired: rows are trusted from there on.
        start = max(start, floor)
        code, ts, value = archive.read(job.archive, graph.sensors_read(streams), start,
                                       graph.reads_until(streams, until))
        rows, trust = graph.recompute(code, ts, value, start)
        if start == floor or all(trust[graph.node_of[name]] <= first_late for name in streams):
            break
        start = first_late - 2 * (first_late - start)
    found.start, found.until, found.readings = (int(ts.min()) if len(ts) else first_late), until, len(ts)
    # No row before the results' horizon (runtime/output/expiry.py): those rows were removed, not changed.
    kept_from = expiry.expired_before(out)
    lowest = {name: max(trust[graph.node_of[name]], kept_from) for name in streams}
    with writing(out):  # a backfill may compare and write beside it
        changed = changes(rows, read_results(sink_spec, streams, min(lowest.values()), until), lowest,
                          {name: until for name in streams})
        if len(changed):
            number = pending.runs() + 1
            changed[PLAN_COLUMN] = job.plan_versions(changed["stream"].to_numpy(), changed["ts"].to_numpy(np.int64))
            if alarms is not None:
                alarms.stage(-number, changed, sink_spec, job)
            open_sink(sink_spec, matches=job.has_matches).write(-number, BatchRows(changed, pd.DataFrame()))
            if alarms is not None:
                alarms.written(sink_spec, job)
    found.rows = int(changed["value"].notna().sum()) if len(changed) else 0
    found.retracted = int(changed["value"].isna().sum()) if len(changed) else 0
    # Settled: every effect of a file's late readings lies before `until`.
    reach_forward = max(graph.lookback(name) for name in streams) + graph.longest_slide
    per_file = late.groupby("file")["ts"].agg(["max", "size"])
    settled = per_file[(per_file["max"] + reach_forward < until) | (until == POS_INF)]
    found.settled = int(settled["size"].sum())
    pending.settle([files[i] for i in settled.index])
    found.seconds = time.monotonic() - started
    return found


class JobGraph:
    """The job's computations across stages and partitions, by node id (ids are the same everywhere)."""

    def __init__(self, job: p.Job, started: dict[str, int] | None = None):
        """`started`: node id -> the event time an update started it at (runtime/plan/versions.py)."""
        self.job = job
        self.started = started or {}
        self.programs = job.programs
        self.nodes: dict[str, p.Node] = {}
        self.inputs: dict[str, set[str]] = {}
        for program in self.programs:
            for node in program.nodes:
                if isinstance(node, p.Sensor) and program.stage > 1:
                    continue  # a forwarded stream: the node that computes it is declared in stage 1
                self.nodes.setdefault(node.id, node)
                self.inputs.setdefault(node.id, set()).update(_inputs(node))
        self.node_of = {name: node_id for q in self.programs for node_id, names in q.outputs.items() for name in names}
        if job.version.switch_at is None:  # a run that started with this version: a handed-over stream is the new one's
            self.node_of.update({h.name: h.new for h in job.handovers})
        self.order = _topological(self.inputs)
        slides = [n.slide for n in self.nodes.values() if isinstance(n, p.Window)]
        self.longest_slide = max(slides, default=1_000)
        self.reach = self._summed(lambda node: node.length if isinstance(node, p.Window) else _pattern_within(node))
        self.ahead = self._summed(_pattern_within)

    def _summed(self, own) -> dict[str, int]:
        """Per node: the largest sum of `own(node)` along a path from a sensor to it."""
        summed: dict[str, int] = {}
        for node_id in self.order:
            before = max((summed[i] for i in self.inputs[node_id]), default=0)
            summed[node_id] = before + own(self.nodes[node_id])
        return summed

    def lookback(self, stream: str) -> int:
        """How far back in event time a row of `stream` can depend on readings (combine-latest's
        latest values aside: those the trust times find in the data)."""
        return self.reach[self.node_of[stream]]

    def lookahead(self, stream: str) -> int:
        """How far past its own time a row of `stream` can depend on readings: a pattern's match
        may be dated before events that decide it (a trailing Kleene closure under strategy next
        ends with the window, `within` after its first event; a registered operator may date a
        match at its first event), and so may every row computed from one. A recompute that is to
        give every row before T reads up to T plus this (`reads_until`): were its input to end at
        T, it would close such a closure early and write a match the readings do not make."""
        return self.ahead[self.node_of[stream]]

    def reads_until(self, streams: list[str], until: int) -> int:
        """Where a recompute that gives every row of these streams before `until` stops reading:
        `until` plus the longest `lookahead` of them (POS_INF stays)."""
        return _later(until, max((self.lookahead(name) for name in streams), default=0))

    def upstream(self, streams: list[str]) -> set[str]:
        """The nodes that compute these output streams and every node they read, at any depth."""
        todo, seen = [self.node_of[s] for s in streams], set()
        while todo:
            node_id = todo.pop()
            if node_id not in seen:
                seen.add(node_id)
                todo.extend(self.inputs[node_id])
        return seen

    def sensors_read(self, streams: list[str]) -> dict[int, str]:
        """The sensors these streams read, directly or through others: code -> sensor id."""
        seen = self.upstream(streams)
        return {n.code: n.sensor_id for i, n in sorted(self.nodes.items()) if i in seen and isinstance(n, p.Sensor)}

    def recompute(self, code, ts, value, start: int) -> tuple[pd.DataFrame, dict[str, int]]:
        """Every output row over these readings (the job's programs, one batch, then the end of the
        input), and each node's trust time."""
        run = self.runner()
        run.feed(code, ts, value)
        return run.finish(start)

    def runner(self, keep: set[str] | None = None) -> "Recompute":
        """A recompute fed in pieces of event time, in order (`keep`: the output streams whose rows
        to keep; None: all)."""
        return Recompute(self, keep)

    def trust(self, start: int, first_after, exact: dict[str, int]) -> dict[str, int]:
        """Each node's trust time over readings from `start` on. `first_after(node id, t)`: the first
        ts the node emitted at t or later (a sensor: its first reading there; POS_INF: none), for the
        combines' inputs; `exact`: node id -> its exact-from time in the recompute (runtime/state/exactness.py: a node
        an update started reads only from its start, `self.started`), which trust never precedes."""
        trust: dict[str, int] = {}
        for node_id in self.order:
            node = self.nodes[node_id]
            inputs = self.inputs[node_id]
            if isinstance(node, p.Sensor):
                own = start
            elif isinstance(node, p.Window):
                own = _later(trust[node.input], node.length)
            elif isinstance(node, p.Union):
                own = max(trust[i] for i in inputs)
            elif isinstance(node, p.Pattern):
                own = _later(max(trust[i] for i in inputs), node.within)
            else:  # combine-latest: each input's latest value is known from its first exact tuple on
                own = max(NEG_INF if trust[i] == NEG_INF else first_after(i, trust[i]) for i in inputs)
            trust[node_id] = max(own, exact.get(node_id, NEG_INF))
        return trust

    def combined(self) -> set[str]:
        """The nodes a combine reads (their first tuples set its trust time)."""
        return {i for node_id, node in self.nodes.items() if isinstance(node, p.Combine) for i in self.inputs[node_id]}


class Recompute:
    """The job's programs run in this process over archived readings fed in event-time order: the
    rows they emit, and what the trust times need (JobGraph.trust)."""

    def __init__(self, graph: JobGraph, keep: set[str] | None = None):
        self.graph, self.keep = graph, keep
        everything = [dataclasses.replace(q, outputs={**{n.id: (f"#{n.id}",) for n in q.nodes}, **q.outputs})
                      for q in graph.programs]
        firsts = [q for q in everything if q.stage == 1]
        seconds = tuple(next((q for q in everything if q.stage == 2 and q.partition == k), None)
                        for k in range(len(firsts)))
        # As the job runs them: what an update added reads from its switch on, and (mode dual) the
        # previous version's computations run until their handover.
        self.run = LocalRun(tuple(firsts), seconds, "fixed:0", version=graph.job.version)
        self.tasks = [*zip(self.run.firsts, self.run.first_states),
                      *((t, s) for tasks, states in zip(self.run.later, self.run.later_states)
                        for t, s in zip(tasks, states) if t is not None)]
        for task, state in self.tasks:
            task.engine.start_at(state.engine, graph.started)
        self.watched = graph.combined()
        self.times: dict[str, list[np.ndarray]] = {}  # node id -> the ts of its tuples (combines' inputs)
        self.watched_sensors = {graph.nodes[i].code: i for i in self.watched if isinstance(graph.nodes[i], p.Sensor)}
        self.frames: list[pd.DataFrame] = []
        self.readings = 0

    def feed(self, code, ts, value) -> None:
        """The next readings, all later than those fed before (their ts in order)."""
        self.readings += len(ts)
        for c, node_id in self.watched_sensors.items():
            mine = ts[code == c]
            if len(mine):
                self.times.setdefault(node_id, []).append(mine)
        self._take(self.run.batch(np.asarray(code, np.int64), np.asarray(ts, np.int64),
                                  np.asarray(value, np.float64)))

    def finish(self, start: int, floors: dict[str, int] | None = None) -> tuple[pd.DataFrame, dict[str, int]]:
        """The end of the input: every row, and each node's trust time over readings from `start` on
        (`floors`: node id -> a time its trust time is not before, such as a sensor's archive start)."""
        self._take(self.run.batch(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0), end_of_input=True))
        rows = output.stacked(self.frames)
        graph = self.graph
        exact: dict[str, int] = dict(floors or {})
        for _, state in self.tasks:
            for node_id, at in state.engine.exact.items():
                exact[node_id] = max(exact.get(node_id, NEG_INF), at)
        return rows, graph.trust(start, self._first_after, exact)

    def _first_after(self, node_id: str, at: int) -> int:
        seen = np.concatenate(self.times[node_id]) if node_id in self.times else np.empty(0, np.int64)
        after = seen[seen >= at]
        return int(after.min()) if len(after) else POS_INF

    def _take(self, emitted) -> None:
        graph = self.graph
        for program, result in emitted:
            for node_id, tuples in result.outputs.items():
                if node_id in self.watched and len(tuples):
                    self.times.setdefault(node_id, []).append(tuples.ts)
            original = next(q for q in graph.programs if q.stage == program.stage and q.partition == program.partition)
            kept = {k: v for k, v in result.outputs.items() if k in original.outputs
                    and (self.keep is None or not self.keep.isdisjoint(original.outputs[k]))}
            frame = output.results(dataclasses.replace(result, outputs=kept), original, 0, graph.job)
            if self.keep is not None and len(frame):
                frame = frame[frame["stream"].isin(list(self.keep))]
            if len(frame):
                self.frames.append(frame)


def _pattern_within(node) -> int:
    """A pattern's `within`; 0 for any other node."""
    return node.within if isinstance(node, p.Pattern) else 0


def _later(t: int, by: int) -> int:
    return t if t in (NEG_INF, POS_INF) else t + by


def _inputs(node) -> tuple[str, ...]:
    if isinstance(node, p.Sensor):
        return ()
    return (node.input,) if isinstance(node, p.Window) else tuple(node.inputs)


def _topological(inputs: dict[str, set[str]]) -> list[str]:
    from graphlib import TopologicalSorter

    return list(TopologicalSorter({k: {i for i in v if i in inputs} for k, v in inputs.items()}).static_order())


@contextlib.contextmanager
def writing(out: Path):
    """Held while rows are compared with the sink's and the changes written (a correction, a
    backfill: runtime/control/backfill.py): the two run in different processes, and each must see
    the other's rows, or both would write the same key."""
    folder = Path(out) / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".writing.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def changes(recomputed: pd.DataFrame, stored: pd.DataFrame, lowest: dict[str, int],
            until: dict[str, int]) -> pd.DataFrame:
    """The rows to write: per key of each stream with lowest <= ts < until, the recomputed rows with
    the next version where they differ from the newest version stored, and a tombstone where a
    stored key has no rows any more.

    Column-wise over all keys at once (a correction over a month compares millions of keys: a frame
    per key held the driver's memory at several times the rows'): each side's rows are sorted by
    key, value and events and numbered within their key; a key is unchanged when both sides have
    the same number of rows and the rows of each number are alike."""
    columns = [*RESULT_COLUMNS, *MATCH_COLUMNS]  # `version` among them
    new = _within(recomputed.reindex(columns=columns), lowest, until)
    old = newest(_within(stored.reindex(columns=columns), lowest, until))
    # One id per key over both sides.
    keys = pd.concat([pd.DataFrame({c: _key(side, c) for c in KEY_COLUMNS}) for side in (new, old)],
                     ignore_index=True)
    ids = keys.groupby(list(KEY_COLUMNS), sort=True).ngroup().to_numpy()  # in key order
    new = _numbered(new.assign(key=ids[:len(new)]))
    old = _numbered(old.assign(key=ids[len(new):]))
    n_keys = int(ids.max()) + 1 if len(ids) else 0
    count_new = np.bincount(new["key"].to_numpy(np.int64), minlength=n_keys)
    count_old = np.bincount(old["key"].to_numpy(np.int64), minlength=n_keys)
    live_old = np.bincount(old["key"].to_numpy(np.int64), weights=old["value"].notna().to_numpy(float),
                           minlength=n_keys)
    # Rows of the same number in the same key: alike when events are equal and values within 1e-9
    # (a tombstone's empty value is alike nothing).
    pairs = new[["key", "n", "value", "events"]].merge(old[["key", "n", "value", "events"]], on=["key", "n"])
    alike = (np.isclose(pairs["value_x"].astype(float), pairs["value_y"].astype(float), rtol=1e-9, atol=1e-9)
             & (pairs["events_x"].fillna("").to_numpy() == pairs["events_y"].fillna("").to_numpy()))
    unlike = np.zeros(n_keys, bool)
    np.logical_or.at(unlike, pairs["key"].to_numpy(), ~np.asarray(alike, bool))
    same = (count_new == count_old) & (count_new > 0) & ~unlike
    gone = (count_new == 0) & (live_old > 0)  # a tombstone, where the newest is not one already
    version = np.ones(n_keys, np.int64)
    if len(old):
        newest_version = old.groupby("key")["version"].max()
        version[newest_version.index.to_numpy()] = newest_version.to_numpy(np.int64) + 1
    written = new[~same[new["key"].to_numpy()]]
    tombstones = old[gone[old["key"].to_numpy()] & (old["n"] == 0).to_numpy()].copy()
    tombstones["value"], tombstones["events"] = np.nan, None
    out = [f for f in (written, tombstones) if len(f)]
    if not out:
        return pd.DataFrame(columns=columns)
    # Column by column, so that a column empty in some frames (a tombstone's value, a window bound
    # of a non-window row) keeps the type the others give it.
    both = pd.DataFrame({c: pd.concat([f[c] for f in out], ignore_index=True) for c in [*columns, "key", "n"]})
    both["version"] = version[both["key"].to_numpy()]
    both = both.sort_values(["key", "n"], kind="stable", ignore_index=True)  # in key order, as stored
    return both[columns]


def _within(rows: pd.DataFrame, lowest: dict[str, int], until: dict[str, int]) -> pd.DataFrame:
    """The rows of the streams in `lowest` with lowest <= ts < until."""
    rows = rows[rows["stream"].isin(list(lowest))]
    return rows[(rows["ts"] >= rows["stream"].map(lowest)) & (rows["ts"] < rows["stream"].map(until))]


def _numbered(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows sorted by key, value and events, with `n`: the row's number within its key."""
    rows = rows.assign(_value=rows["value"].astype(float), _events=rows["events"].fillna("")).sort_values(
        ["key", "_value", "_events"], kind="stable", na_position="last", ignore_index=True)
    return rows.drop(columns=["_value", "_events"]).assign(n=rows.groupby("key").cumcount().to_numpy())


def main(argv: list[str] | None = None) -> int:
    """`python -m sensorscript.runtime.control.correction OUT`: what `sscript correct OUT` runs; prints the
    correction as one JSON line."""
    import sys

    from sensorscript.runtime.plan.loading import load_job
    from sensorscript.runtime.output.status import emitted_until, read_status, results_spec

    out = Path((argv or sys.argv[1:])[0])
    status = read_status(out)
    job = dataclasses.replace(load_job(out).JOB, late=status["late_policy"],
                              archive=str((out / archive.FOLDER).resolve()))
    from sensorscript.runtime.control.session import read_back_session
    from sensorscript.runtime.output.alerts.pipeline import Writes

    read_back_session(out, status, job)
    alarms = Writes.of(out)  # the alarms the job's kept settings ask for
    found = correct(job, out, results_spec(out, status), emitted_until(status.get("partitions", {}), job), alarms)
    if alarms is not None:
        alarms.close()
    print(json.dumps(dataclasses.asdict(found)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
