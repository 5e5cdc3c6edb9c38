"""Backfill (`sscript update OUT FILES --backfill [SINCE]`, `sscript backfill OUT`): what an update
added or changed, computed over the archived readings (late policy `correct`) from SINCE, so that
its rows are complete from SINCE on, with no gap at the switch.

After an update the running job writes every row exact or absent (runtime/state/exactness.py): an
added computation's output is whole only from its exact-from time E, which the job reports
(status.json `exact_from`). The backfill writes the rest, beside the running job, in a process of
its own:

1. Its streams: the output streams of the version that are new, now computed differently, or fed
   by a computation the version started (added, moved, sliced anew). Each is written up to the
   time from which the running job writes it whole (its E; the switch for a stream the job had
   whole all along), once that is known and every partition's watermark has passed what the
   backfill reads (the archive holds what came before it; what comes later than that is late, and
   corrections take it).
2. It reads the archive hour by hour (archive.read), from SINCE less the longest a stream's row
   looks back, to the latest end plus the longest a row before it looks ahead (`reads_until`: a
   match of a trailing closure under strategy next is dated at its last event but decided by its
   window); the version's own programs (runtime/control/correction.py `Recompute`: the new
   computations only, a handed-over stream's old one left out) run over it in this process.
   A row of a stream is exact from its trust time on (as for a correction); where that is later
   than SINCE and the archive holds earlier readings, the read starts twice as far back.
3. Rows are compared, key by key, with the newest version the sink holds from SINCE (or the trust
   time) to the stream's E: equal keys are skipped, others get the next version, stored keys with
   no row any more a tombstone; all with the version's `plan_version`. A backfill run again after
   a kill so writes nothing twice, and a correction of late data running meanwhile compares with
   what it wrote (the two hold `correction.writing` while they compare and write).

From the moment a backfill is asked for, a correction recomputes the version's new computations
from where the backfill reads (runtime/plan/versions.py `started`), so it corrects backfilled rows
too instead of retracting them. OUT/versions/N/backfill.json holds the request and its progress,
which `sscript status` and the dashboard show.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from sensorscript import atomic
from sensorscript.runtime.ingest import archive
from sensorscript.runtime.output import expiry
from sensorscript.runtime.output.sinks import PLAN_COLUMN, BatchRows, open_sink, read_results
from sensorscript.runtime.plan import program as p
from sensorscript.runtime.plan import versions
from sensorscript.runtime.plan.program import NEG_INF
from sensorscript.runtime.control.correction import JobGraph, changes, writing
from sensorscript.times import UTC, human_time

# A backfill's rows are written as batch -(IDS + version * 10,000 + attempt): apart from the
# corrections' (-1, -2, ...) and the job's own batches.
IDS = 1_000_000_000


@dataclass
class Backfill:
    """OUT/versions/N/backfill.json: a backfill of version N, asked for and as far as it got."""

    version: int
    since: int | None  # the event time asked for; None: the start of the archive
    state: str = "requested"  # requested, running, done, failed
    streams: dict[str, int] = field(default_factory=dict)  # stream -> the time the running job writes it whole from
    complete_from: dict[str, int | None] = field(default_factory=dict)  # once done: from when each is complete
    read_start: int | None = None  # the archive is read from here (NEG_INF: from its start)
    hours: int = 0  # hours of archive to read, and read so far
    hours_done: int = 0
    readings: int = 0
    rows: int = 0  # rows written (a changed or new key's rows), tombstones apart
    retracted: int = 0
    attempts: int = 0
    pid: int = 0
    host: str = ""
    problem: str = ""
    started: float = 0.0
    updated: float = 0.0
    seconds: float = 0.0

    def save(self, out: Path) -> None:
        self.updated = time.time()
        path = versions.folder(out, self.version) / versions.BACKFILL
        atomic.write_json(path, asdict(self), indent=1, sort_keys=True)  # a reader never sees half a file

    @property
    def alive(self) -> bool:
        """Running, in a process that is still there (on this host; another's is taken at its word)."""
        from sensorscript.runtime.output.status import alive

        return self.state == "running" and alive(self.pid, self.host)

    def describe(self, out: Path, tz=UTC) -> list[str]:
        """What `sscript status` and the dashboard say of it."""
        since = "the start of the archive" if self.since is None else human_time(self.since, tz)
        head = f"backfill of plan version {self.version} from {since}: "
        if self.state == "requested":
            return [head + "asked for; it runs once the job has switched and written its new streams whole "
                           f"from a time its watermark has passed ('sscript backfill {out}' runs it then)"]
        if self.state == "running" and not self.alive:
            return [head + f"cut short ({self.hours_done:,} of {self.hours:,} hours of archive read): "
                           f"'sscript backfill {out}' runs it again, writing nothing twice"]
        if self.state == "running":
            share = f" ({100 * self.hours_done / self.hours:.0f} %)" if self.hours else ""
            return [head + f"running: {self.hours_done:,} of {self.hours:,} hours of archive read{share}, "
                           f"{self.readings:,} readings"]
        if self.state == "failed":
            return [head + f"failed: {self.problem}; 'sscript backfill {out}' runs it again"]
        lines = [head + f"done: {self.rows:,} rows written, {self.retracted:,} retracted, from {self.readings:,} "
                        f"archived readings in {self.seconds:,.1f} s; complete (with the running job's rows):"]
        for name, at in sorted(self.complete_from.items()):
            lines.append(f"  {name}: from {'the start of the archive' if at is None or at == NEG_INF else human_time(at, tz)}")
        return lines


def load(out: Path, number: int) -> Backfill | None:
    try:
        return Backfill(**json.loads((versions.folder(out, number) / versions.BACKFILL).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def newest(out: Path) -> Backfill | None:
    """The backfill of the newest version that has one asked for."""
    for number in reversed(versions.numbers(out)):
        found = load(out, number)
        if found is not None:
            return found
    return None


def request(out: Path, number: int, since: int | None) -> Backfill:
    """Ask for a backfill of version `number` from `since` (None: the start of the archive)."""
    found = Backfill(number, since)
    found.save(out)
    return found


# ------------------------------------------------------------------ what it writes

def new_computations(job: p.Job, number: int) -> p.Job:
    """Version `number`'s programs as a run that started with it runs them: its own computations
    only (mode dual's old ones, kept for a handover, write nothing: Handover.written)."""
    return dataclasses.replace(job, version=p.Version(number, {}, None))


def streams_of(out: Path, number: int, job: p.Job) -> list[str]:
    """The output streams version `number` added, computes differently, or feeds from a computation
    it started."""
    previous, _ = versions.load(out, number - 1)
    old = {name: node for q in (*previous.first_stage, *previous.second_stage) if q is not None
           for node, names in q.outputs.items() for name in names}
    graph = JobGraph(new_computations(job, number))
    started = next((nodes for n, _, nodes, _ in versions.switches(out) if n == number), set())
    return [name for name, node_id in sorted(graph.node_of.items())
            if old.get(name) != node_id or graph.upstream([name]) & started]


class Readiness:
    """Whether a backfill can run yet, asked again with each new status while a command waits: each
    stream's end (from when the running job writes it whole), once every one is known and the job's
    watermark has passed them. Which streams it writes depends on the version's plan and its switch
    only, so that is worked out once, when the job has switched."""

    def __init__(self, out: Path, backfill: Backfill, job: p.Job):
        self.out, self.backfill, self.job = out, backfill, job
        self.streams: list[str] | None = None
        self.graph = JobGraph(new_computations(job, backfill.version))

    def check(self, status: dict) -> tuple[dict[str, int] | None, str]:
        """(each stream's end, "") or (None, why not yet)."""
        from sensorscript.runtime.output.status import run_state

        number = self.backfill.version
        record = versions.applied(self.out, number)
        if record is None or record.get("switch_at") is None or status.get("plan_version") != number:
            return None, f"the job has not switched to plan version {number} yet"
        switch_at = int(record["switch_at"])
        after = status.get("plan_after_batch")
        if status.get("last_batch") is None or after is not None and status["last_batch"] <= after:
            return None, "the job has not written a batch on the new version yet"
        if self.streams is None:
            self.streams = streams_of(self.out, number, self.job)
        ends = ends_of(self.streams, self.job, status.get("exact_from", {}), switch_at)
        unknown = sorted(name for name, at in ends.items() if at is None)
        if unknown:
            return None, f"{unknown[0]} is not written whole yet (not before its inputs have had values)"
        if run_state(status) != "ended" and ends:  # ended: every reading of the input is in the archive
            why = self.waiting(status.get("partitions", {}), ends)
            if why:
                return None, why
        return ends, ""

    def waiting(self, partitions: dict, ends: dict[str, int]) -> str:
        """Why the job's watermark does not let the backfill run yet ("": it does): the job must
        have emitted every row before the streams' ends, and the archive must hold every reading the
        backfill reads (`reads_until`), which a partition's watermark says it does once past."""
        from sensorscript.runtime.output.status import emitted_until, smallest_watermark

        for reached, needed in ((emitted_until(partitions, self.job), max(ends.values())),
                                (smallest_watermark(partitions, self.job), reads_until(self.graph, ends))):
            if reached < needed:
                return (f"the job's watermark ({human_time(reached) if reached > NEG_INF else 'none yet'}) "
                        f"has not passed {human_time(needed)} yet")
        return ""


def ends_of(streams: list[str], job: p.Job, exact_from: dict[str, int | None],
            switch_at: int) -> dict[str, int | None]:
    """Each stream of a backfill (`streams_of`) -> from when the running job writes it whole
    (`exact_from`, status.json's; None: not known yet): not before the switch, nor, for a stream
    handed over in mode dual, before the old computation's last row (the switch plus the fill)."""
    fill = {h.name: h.fill for h in job.handovers}
    ends = {}
    for name in streams:
        at = exact_from.get(name, switch_at)
        ends[name] = None if at is None else max(int(at), switch_at + fill.get(name, 0))
    return ends


def reads_until(graph: JobGraph, ends: dict[str, int]) -> int:
    """Where a backfill's read of the archive ends: past the streams' latest end by as far as a row
    before its end may depend on later readings (JobGraph.reads_until). Its rows from the latest
    end on are not written (the running job writes them)."""
    return graph.reads_until(list(ends), max(ends.values()))


def run(out: Path, backfill: Backfill, job: p.Job, sink_spec: str, ends: dict[str, int], read, earliest: int | None,
        echo=print, alarms=None) -> Backfill:
    """Compute and write the backfill; `read(sensors, lo, hi)` -> (code, ts, value) of the archived
    readings of these sensors (code -> sensor id) with lo <= ts < hi in event-time order; `earliest`: the archive's first hour (None:
    empty). Saves its progress in backfill.json as it goes. `alarms` (runtime/output/alerts/pipeline.py,
    `Writes`): the alarms its rows raise, staged before the write and taken after it."""
    t0 = time.monotonic()
    job = new_computations(job, backfill.version)
    graph = JobGraph(job)
    streams = sorted(ends)
    backfill.streams, backfill.state, backfill.problem = dict(ends), "running", ""
    backfill.attempts += 1
    backfill.pid, backfill.host, backfill.started = os.getpid(), socket.gethostname(), time.time()
    backfill.readings = backfill.hours_done = 0
    if not streams:
        backfill.state, backfill.seconds = "done", time.monotonic() - t0
        backfill.save(out)
        return backfill
    since = NEG_INF if backfill.since is None else backfill.since
    reach = max(graph.lookback(name) for name in streams) + graph.longest_slide
    start = NEG_INF if since == NEG_INF else since - reach
    until = max(ends.values())
    read_until = reads_until(graph, ends)
    sensors = graph.sensors_read(streams)
    # The archive holds a sensor's readings from when the job first read it: a stream that needs a
    # sensor an update started reading is complete only from there (exact or absent).
    archived = {node_id: at for node_id, at in archive.archived_from(out).items() if at != NEG_INF}
    # What came before the archive's floor expired (runtime/plan/retention.py): it starts there.
    floor = archive.floor(job.archive or Path(out) / archive.FOLDER)
    best = graph.trust(floor, lambda node_id, at: at, archived)  # from the archive's start, at best
    while True:
        if earliest is None or start <= earliest:
            start = NEG_INF  # the archive holds nothing earlier: read it from its beginning
        start = max(start, floor)
        backfill.read_start = start
        first = (earliest if earliest is not None else read_until) if start == NEG_INF else start
        hours = (list(range(first // archive.HOUR_MS, (read_until - 1) // archive.HOUR_MS + 1))
                 if first < read_until else [])
        backfill.hours, backfill.hours_done = len(hours), 0
        backfill.save(out)
        recompute = graph.runner(keep=set(streams))
        for hour in hours:
            lo, hi = max(hour * archive.HOUR_MS, first), min((hour + 1) * archive.HOUR_MS, read_until)
            code, ts, value = read(sensors, lo, hi)
            recompute.feed(code, ts, value)
            backfill.hours_done += 1
            backfill.readings = recompute.readings
            backfill.save(out)
            echo(f"backfill: {backfill.hours_done:,} of {len(hours):,} hours of archive read, "
                 f"{recompute.readings:,} readings")
        rows, trust = recompute.finish(start, archived)
        lowest = {name: max(trust[graph.node_of[name]], since, expiry.expired_before(out)) for name in streams}
        if start == floor or all(trust[graph.node_of[name]] <= max(since, best[graph.node_of[name]])
                                   for name in streams):
            break
        start = since - 2 * (since - start)
    with writing(out):  # a correction of late data may compare and write beside it
        stored = read_results(sink_spec, streams, min(lowest.values()), until)
        written = changes(rows, stored, lowest, ends)
        if len(written):
            written[PLAN_COLUMN] = backfill.version
            unit = -(IDS + backfill.version * 10_000 + backfill.attempts)
            if alarms is not None:
                alarms.stage(unit, written, sink_spec, job)
            open_sink(sink_spec, matches=job.has_matches).write(unit, BatchRows(written, pd.DataFrame()))
            if alarms is not None:
                alarms.written(sink_spec, job)
    backfill.rows = int(written["value"].notna().sum()) if len(written) else 0
    backfill.retracted = int(written["value"].isna().sum()) if len(written) else 0
    # Complete from where its rows begin, or the job's if those begin earlier (nothing to add).
    backfill.complete_from = {name: (None if low == NEG_INF else int(min(low, ends[name]))) for name, low in lowest.items()}
    backfill.state, backfill.seconds = "done", time.monotonic() - t0
    backfill.save(out)
    return backfill


def yield_to_the_job() -> None:
    """A backfill runs beside the job on the same machine: it takes the CPU the job leaves (nice 10)."""
    try:
        os.nice(10)
    except OSError:  # not allowed here: it runs as it is
        pass


def main(argv: list[str] | None = None) -> int:
    """`python -m sensorscript.runtime.control.backfill OUT`: what `sscript backfill OUT` runs (the
    newest version's backfill, once it can: `Readiness`); prints progress lines and the backfill as one JSON line."""
    import sys

    from sensorscript.runtime.output.status import read_status, results_spec

    out = Path((argv or sys.argv[1:])[0])
    backfill = newest(out)
    status = read_status(out)
    job, _ = versions.load(out, backfill.version)
    ends, why = Readiness(out, backfill, job).check(status)
    if ends is None:
        print(f"not ready: {why}")
        return 3
    folder = out / archive.FOLDER
    yield_to_the_job()
    from sensorscript.runtime.control.session import read_back_session
    from sensorscript.runtime.output.alerts.pipeline import Writes

    read_back_session(out, status, job)
    try:
        alarms = Writes.of(out)  # the alarms the job's kept settings ask for
        found = run(out, backfill, job, results_spec(out, status), ends,
                    lambda sensors, lo, hi: archive.read(folder, sensors, lo, hi), archive.earliest(folder),
                    alarms=alarms)
        if alarms is not None:
            alarms.close()
    except Exception as exc:  # said in the record, and by `sscript backfill` in one line
        backfill.state, backfill.problem = "failed", f"{type(exc).__name__}: {exc}"
        backfill.save(out)
        raise
    print(json.dumps(asdict(found)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
