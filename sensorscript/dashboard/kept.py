"""What the dashboard keeps between looks at the sink, so that each look reads only what is new:
the alarms (runtime/output/alarms.py), kept up to date from the new rows of the streams that can have
alarms and worked out again for a stream that was corrected (`Results`); the rows of the streams the
pages show, the STREAMS_KEPT shown last (`Results.streams`); the quarantine's counts and the metrics
(`HealthTables`). A new run, a new plan or a sink whose rows went back: everything is read again.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sensorscript.dashboard.plan_summary import PlanSummary
from sensorscript.dashboard.sink_look import BATCHES_SHOWN, COLUMNS, Sink
from sensorscript.runtime.control.correction import newest
from sensorscript.runtime.output import alarms as alarm_rule
from sensorscript.runtime.output.alarms import Alarm, StreamAlarms
from sensorscript.runtime.output.sinks import METRIC_COLUMNS

STREAMS_KEPT = 256  # the rows of this many streams stay in memory (those pages showed last)


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


class Results:
    """The alarms, kept up to date, and the rows of the streams pages show, as far as `rowid`."""

    def __init__(self):
        self.read_at = 0.0
        self.key: tuple = ()  # (run, plan's mtime): another one, and all is read again
        self.rowid = 0
        self.alarms: dict[str, StreamAlarms] = {}
        self.view = AlarmView([], {}, ())
        self.changes = 0
        self.rows: OrderedDict[str, tuple[int, pd.DataFrame]] = OrderedDict()  # stream -> (its rowid, rows)

    def read(self, sink: "Sink", run, plan: PlanSummary) -> None:
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

    def _all_rows(self, sink: "Sink", stream: str) -> pd.DataFrame:
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

    def streams(self, sink: "Sink", streams: list[str]) -> dict[str, pd.DataFrame]:
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


class HealthTables:
    """Quarantine counts and metrics, kept up to date by rowid."""

    def __init__(self):
        self.read_at = 0.0
        self.key: tuple = ()
        self.quarantine: Counter[str] = Counter()
        self.quarantine_rowid = 0
        self.metrics = pd.DataFrame(columns=list(METRIC_COLUMNS))
        self.metrics_rowid = 0

    def read(self, sink: "Sink", run) -> None:
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
