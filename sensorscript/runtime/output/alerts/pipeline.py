"""What the run loop, a correction and a backfill call: a run's alarms found in each written batch
(`Alerts.batch`), and in each write of a correction or a backfill (`Writes`: staged before it, taken
once the sink holds it; detection.py), taken into the outbox once (outbox.py), delivered beside the
query by the delivery threads (delivery.py), and waited for when the input ended (`--once`,
`stop --drain`). `deliver` is `sscript alerts deliver OUT`: what waits, sent with no job running.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from sensorscript.runtime.output.alarms import FLAG, alarm_kinds
from sensorscript.runtime.output.alerts.delivery import Busy, Deliverer
from sensorscript.runtime.output.alerts.detection import batch_alarms, correction_alarms
from sensorscript.runtime.output.alerts.outbox import Outbox
from sensorscript.runtime.output.alerts.settings import NONE, AlertSettings, Target
from sensorscript.runtime.output.alerts.templates import load_template, routing_key
from sensorscript.runtime.output.rows import stacked
from sensorscript.runtime.output.sinks import newest, open_sink, read_results
from sensorscript.runtime.plan.program import Job


def kept_settings(given: AlertSettings | None, out: Path) -> tuple[AlertSettings | None, str]:
    """The run's alarm settings: those given (kept in OUT for later runs and commands), or those
    kept, or none (`--alerts none` forgets them); and where they come from, in words."""
    if given is not None and given.targets == (NONE,):
        AlertSettings.forget(out)
        return None, ""
    if given is not None:
        given.save(out)
        return given, ""
    kept = AlertSettings.load(out)
    return kept, "" if kept is None else f" (kept in {Path(out) / 'alerts' / 'settings.json'}; --alerts none stops them)"


def streams_of(settings: AlertSettings, job: Job) -> dict[str, str]:
    """The streams whose alarms are delivered (of the workflows asked for): MATCH or FLAG."""
    wanted = set(settings.workflows)
    return {s: k for s, k in alarm_kinds(job).items() if not wanted or s.rsplit(".", 1)[0] in wanted}


FIRST_SPAN_MS = 60_000  # flag_history's first reach on each side of the rows changed


def flag_history(sink_spec: str, stream: str, lo: int, hi: int) -> pd.DataFrame:
    """Every version of a flag stream's rows that a change of its rows in [lo, hi] is judged by:
    from its last row before lo that is not 1 (where the run over lo, if any, began) to its first
    row after hi that is not 1 (where the run over hi ends), or its first or last row. Read in
    windows that double on each side until they hold such a row or grow no more, so that a
    correction reads the runs it touches, not the stream's years of history."""
    span, before, after, counts = FIRST_SPAN_MS, FIRST_SPAN_MS, FIRST_SPAN_MS, (-1, -1)
    while True:
        rows = read_results(sink_spec, [stream], lo - before, hi + after + 1)
        living = newest(rows)
        living = living[living["value"].notna()]
        earlier, later = living[living["ts"] < lo], living[living["ts"] > hi]
        grown = (len(rows[rows["ts"] < lo]), len(rows[rows["ts"] > hi]))
        start_done = (earlier["value"] != 1.0).any() or grown[0] == counts[0]
        end_done = (later["value"] != 1.0).any() or grown[1] == counts[1]
        if start_done and end_done:
            return rows
        counts = grown
        before, after = before * (1 if start_done else 4), after * (1 if end_done else 4)
        span = max(before, after)
        if span > 400 * 365 * 86_400_000:  # past any time a reading has (a flag at 1 from the start)
            return rows


class Writes:
    """The alarms of a correction's or a backfill's writes to the sink (by the job, `sscript
    correct` or `sscript backfill`): found before the write and staged in the outbox, taken once
    the sink holds the write, so that a kill between the two loses none and sends none of a write
    that did not happen (outbox.py)."""

    def __init__(self, out: Path, settings: AlertSettings, targets: list[str], kinds: dict[str, str] | None = None):
        """`kinds`: the streams delivered (MATCH or FLAG); by default the job's, of the workflows asked for."""
        self.out, self.settings, self.targets = Path(out), settings, targets
        self.outbox = Outbox(out, settings.limit)
        self._kinds: tuple = (None, {}) if kinds is None else (..., kinds)

    @staticmethod
    def of(out: Path) -> "Writes | None":
        """For `sscript correct` and `sscript backfill`: the alarms the job's kept settings ask for, or None."""
        settings = AlertSettings.load(out)
        if settings is None:
            return None
        return Writes(out, settings, [Target.key_of(t) for t in settings.targets])

    def kinds(self, job: Job) -> dict[str, str]:
        if self._kinds[0] is not job and self._kinds[0] is not ...:
            self._kinds = (job, streams_of(self.settings, job))
        return self._kinds[1]

    def stage(self, unit: int, changed: pd.DataFrame, sink_spec: str, job: Job) -> None:
        """Before the write of `changed` as the sink's unit `unit` (negative)."""
        kinds = self.kinds(job)
        if self.outbox.taken(unit) or not kinds:
            return
        touched = sorted(set(changed["stream"]) & {s for s, k in kinds.items() if k == FLAG})
        histories = []
        for stream in touched:
            ts = changed.loc[changed["stream"] == stream, "ts"]
            histories.append(flag_history(sink_spec, stream, int(ts.min()), int(ts.max())))
        stored = stacked(histories, when_none=pd.DataFrame(columns=changed.columns))
        found, last = correction_alarms(changed, kinds, stored, self.outbox.flags(touched))
        self.outbox.stage(unit, found, last)

    def written(self, sink_spec: str, job: Job | None = None) -> int:
        """After a write: take every staged write the sink holds. Returns how many alarms were new."""
        if not self.outbox.staged():
            return 0
        return self.outbox.settle(open_sink(sink_spec).wrote, self.targets)

    def close(self) -> None:
        self.outbox.close()


@dataclass
class Alerts:
    """A run's alarms: taken from each batch and correction into the outbox, delivered beside the
    query by the delivery threads, waited for when the input ended (`--once`, `stop --drain`)."""

    settings: AlertSettings
    out: Path
    status: object  # runtime/output/status.py's Status: its `alerts`
    echo: object = print
    targets: list[Target] = field(default_factory=list)
    writes: Writes | None = None
    deliverer: Deliverer | None = None
    sink_spec: str | None = None

    @property
    def outbox(self) -> Outbox:
        return self.writes.outbox

    @staticmethod
    def open(given: AlertSettings | None, out: Path, job: Job, status, echo=print, fresh: bool = False,
             sink_spec: str | None = None) -> "Alerts | None":
        """The run's alarms (None when it has none: no --alerts and none kept in OUT, or --alerts none)."""
        settings, kept = kept_settings(given, out)
        if settings is None:
            return None
        targets = settings.check(job)
        alerts = Alerts(settings, Path(out), status, echo, targets, sink_spec=sink_spec)
        alerts.writes = Writes(out, settings, [t.key for t in targets])
        outbox = alerts.outbox
        if fresh:
            outbox.start_afresh()
        moved = outbox.retarget([t.key for t in targets])
        if sink_spec is not None:
            alerts.writes.written(sink_spec, job)  # a correction's write a kill left untaken
        alerts.deliverer = deliverer(out, settings, targets, status.alerted).start()
        counts = outbox.counts()
        status.alerted(counts)
        which = ", ".join(settings.workflows) if settings.workflows else "every workflow"
        echo(f"alarms of {which} go to {', '.join(t.key for t in targets)}{kept}, grouped by {settings.group_by}"
             + (f"; {counts['waiting']:,} left by an earlier run wait in {outbox.path}" if counts["waiting"] else "")
             + "".join(f"; the {n:,} that waited for {old} go to these instead" for old, n in sorted(moved.items())))
        return alerts

    def batch(self, batch_id: int, results: pd.DataFrame, job: Job) -> None:
        """The batch path: a written batch's alarms into the outbox (once), then the deliverer woken."""
        kinds = self.writes.kinds(job)
        if self.outbox.staged() and self.sink_spec is not None:  # a backfill's write a kill left untaken
            self.writes.written(self.sink_spec)
        if self.outbox.taken(batch_id) or not kinds:
            return
        flag_streams = {s for s, k in kinds.items() if k == FLAG}
        present = set(results["stream"].unique()) & flag_streams if len(results) else set()
        found, last = batch_alarms(results, kinds, self.outbox.flags(present))
        if self.outbox.take(batch_id, found, last, [t.key for t in self.targets]):
            self.deliverer.wake()

    def finish(self, wait: bool) -> None:
        """The run ends: with `wait` (--once), first until every alarm is delivered or the timeout
        passed (groups no longer wait); then say, in one sentence, what was delivered and what waits."""
        deadline = time.monotonic() + self.settings.timeout_s
        keys = [t.key for t in self.targets]
        if wait:
            self.deliverer.flush()
        while wait and self.outbox.waiting(keys) and time.monotonic() < deadline and self.deliverer.alive():
            time.sleep(0.05)
        self.deliverer.stop()
        counts = self.outbox.counts()
        self.writes.close()
        self.status.alerted(counts)
        self.echo(said(counts, self.out, self.settings.timeout_s if wait else None))


def deliverer(out: Path, settings: AlertSettings, targets: list[Target], on_counts=None) -> Deliverer:
    template = load_template(settings.template) if settings.template else None
    key = routing_key(template) if template is not None else None
    return Deliverer(out, targets, template, settings.tls, settings.limit, on_counts=on_counts, login=settings.login,
                     group_by=settings.group_by, group_wait_s=settings.group_wait_s, routing_key=key,
                     kafka_options=settings.kafka_options)


def said(counts: dict, out: Path, waited_s: float | None) -> str:
    """What a run (or `sscript alerts deliver`) says of its alarms as it ends: one sentence."""
    per_target = counts["targets"]
    delivered = ", ".join(f"{c.get('delivered', 0):,} to {t}" for t, c in sorted(per_target.items()))
    sentence = f"alarms: {delivered or 'none'} delivered so far"
    if counts["silenced"]:
        sentence += f", {counts['silenced']:,} held back by silences"
    if counts["waiting"]:
        failing = [f"{t}: {c['last_error']}" for t, c in sorted(per_target.items())
                   if c.get("waiting") and c.get("last_error")]
        sentence += (f"; {counts['waiting']:,} still wait in {counts['outbox']}"
                     + (f" after {waited_s:g} s" if waited_s is not None else "")
                     + (f" ({'; '.join(failing)})" if failing else "")
                     + f": 'sscript alerts deliver {out}' sends them now, and any later run on {out} sends them first "
                       f"(even one that starts its results afresh)")
    if counts["dropped"]:
        sentence += f"; {counts['dropped']:,} were not kept: the outbox was full ({counts['limit']:,})"
    return sentence


def deliver(out: Path, timeout_s: float | None = None, echo=print) -> dict | None:
    """`sscript alerts deliver OUT` (and `sscript correct` and `sscript backfill` when no job runs):
    take what a killed write left staged, send what waits to the targets kept in OUT, until all is
    delivered or the timeout; say it in one sentence. None when OUT keeps no alarm settings."""
    settings = AlertSettings.load(out)
    if settings is None:
        return None
    targets = settings.check()
    keys = [t.key for t in targets]
    outbox = Outbox(out, settings.limit)
    outbox.retarget(keys)
    sink_spec = _sink_spec(out)
    if sink_spec is not None and outbox.staged():
        outbox.settle(open_sink(sink_spec).wrote, keys)
    timeout_s = settings.timeout_s if timeout_s is None else timeout_s
    if outbox.waiting(keys):
        sending = deliverer(out, settings, targets)
        sending.flushing.set()  # nothing more comes: no group waits
        try:
            sending.start(wait=False)
        except Busy as exc:
            counts = outbox.counts()
            outbox.close()
            echo(f"alarms: {exc}; it sends what waits ({counts['waiting']:,})")
            return counts
        deadline = time.monotonic() + timeout_s
        while outbox.waiting(keys) and time.monotonic() < deadline and sending.alive():
            time.sleep(0.05)
        sending.stop()
    counts = outbox.counts()
    outbox.close()
    echo(said(counts, out, timeout_s))
    return counts


def _status(out: Path) -> dict | None:
    """OUT/status.json (runtime/output/status.py), or None before the job's first run."""
    from sensorscript.runtime.output.status import read_status

    try:
        return read_status(out)
    except FileNotFoundError:
        return None


def _sink_spec(out: Path) -> str | None:
    status = _status(out)
    return None if status is None else status.get("sink_spec")


def running_elsewhere(out: Path) -> bool:
    """Whether a job runs in OUT (its delivery threads send what a command adds to the outbox)."""
    from sensorscript.runtime.output.status import run_state

    status = _status(out)
    return status is not None and run_state(status) == "running" and status.get("pid") != os.getpid()
