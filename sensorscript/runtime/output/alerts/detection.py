"""Which alarms a written batch raises, and which a correction or a backfill changes
(runtime/output/alarms.py is the rule of what an alarm is): given the streams delivered (MATCH or
FLAG) and each flag's last row so far, the incidents' states in event-time order and each flag's
last row after them. A flag's incident fires where it turns on and resolves at its first row that is
not 1; a match fires, and a correction updates or retracts (resolves) it. Which of these are new to
a receiver (an update of a match already sent, not a replay of one) is the outbox's to say.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from sensorscript.runtime.output.alarms import FLAG, MATCH
from sensorscript.runtime.output.alerts.payload import REOPENED, RESOLVED, SUPERSEDES, alarm_object, row_prefix
from sensorscript.runtime.output.sinks import newest


class FlagState(NamedTuple):
    """A flag stream's last row taken (its time and value) and, while it is on, when it turned on."""

    ts: int
    value: float
    on_since: int | None = None


OFF = FlagState(-(2**63), 0.0)  # before its first row a flag is off


def batch_alarms(results: pd.DataFrame, kinds: dict[str, str], flags: dict[str, FlagState]):
    """The alarms among a batch's result rows (`kinds`: the streams delivered, MATCH or FLAG) and each
    flag's state after it, given `flags` (its state before; off when none)."""
    rows = results[results["stream"].isin(kinds.keys())] if len(results) else results
    found, last = [], {}
    if not len(rows):
        return found, last
    rows = rows.sort_values(["stream", "ts"], kind="stable")
    for stream, group in rows.groupby("stream", sort=False):
        group = group[group["value"].notna()]
        if not len(group):
            continue
        records = group.to_dict("records")
        if kinds[stream] == MATCH:
            found += [alarm_object(r, MATCH) for r in records if isinstance(r.get("events"), str)]
        else:
            alarms, last[stream] = _flag_runs(stream, records, flags.get(stream, OFF))
            found += alarms
    return sorted(found, key=in_time), last


def _flag_runs(stream: str, records: list[dict], state: FlagState):
    """A flag's rows in time order after `state`: an alarm firing where it turns on, one resolving
    where it turns off; its state after them."""
    found = []
    before, on_since = state.value, state.on_since
    for record in records:
        value = float(record["value"])
        if value == 1.0 and before != 1.0:
            on_since = int(record["ts"])
            found.append(alarm_object(record, FLAG))
        elif value != 1.0 and before == 1.0 and on_since is not None:
            found.append(alarm_object(record, FLAG, RESOLVED, started_ms=on_since))
            on_since = None
        before = value
    last = records[-1]
    return found, FlagState(int(last["ts"]), float(last["value"]), on_since if before == 1.0 else None)


def in_time(alarm: dict):
    """Alarms are sent in event-time order (then by stream; a resolution after the firing it closes)."""
    return alarm["ts_ms"], alarm["stream"], alarm["state"] == RESOLVED


def correction_alarms(changed: pd.DataFrame, kinds: dict[str, str], stored: pd.DataFrame,
                      flags: dict[str, FlagState]):
    """What a correction's (or a backfill's) rows change among the alarms, before they are written:
    `changed` (new versions and tombstones); `stored`: every version the sink holds of the flag
    streams' rows (without `changed`). A match row key's new version (the correction rewrites all the
    matches of a key at once) fires each of its matches (the outbox says whether that is an update,
    or the match back after a retraction) and marks the key's other incidents to resolve (SUPERSEDES);
    a key retracted resolves them all. A flag's incidents
    are its runs of 1s in its newest rows: a run that begins where none did fires (and resolves where
    it ends, if it does); one that no longer begins there resolves, retracted; one that lasted and
    now ends resolves, one that ended and now lasts fires again (a run whose end only moved is
    resolved already: nothing). Returns the alarms and the flags' states where the correction
    changed their last row."""
    changed = changed[changed["stream"].isin(kinds.keys())]
    found: list[dict] = []
    keys: dict[str, list[dict]] = {}  # a match row key's rows of the correction: all its matches, or its tombstone
    for record in changed[changed["stream"].map(kinds) == MATCH].to_dict("records"):
        prefix = row_prefix(record["stream"], record["ts"], record.get("start_ts"), record.get("end_ts"))
        keys.setdefault(prefix, []).append(record)
    for prefix, records in keys.items():
        living = [r for r in records if not pd.isna(r["value"]) and isinstance(r.get("events"), str)]
        # Its matches (each fires, or updates, or fires again); those of the key not among them resolve.
        found += [{**alarm_object(r, MATCH), SUPERSEDES: prefix} for r in living]
        if not living:
            found.append({**alarm_object(records[0], MATCH, RESOLVED, retracted=True), SUPERSEDES: prefix})
    last = {}
    flag_streams = sorted(set(changed["stream"]) & {s for s, k in kinds.items() if k == FLAG})
    for stream in flag_streams:
        rows = stored[stored["stream"] == stream]
        mine = changed[changed["stream"] == stream]
        before = _living(newest(rows))
        after = _living(newest(pd.concat([rows, mine], ignore_index=True) if len(rows) else mine))
        runs_before, runs_after = _runs(before), _runs(after)
        by_ts = {int(r["ts"]): r for r in after.to_dict("records")}
        by_ts_before = {int(r["ts"]): r for r in before.to_dict("records")}
        for on, off in sorted(runs_after.items()):
            if on not in runs_before:
                found.append(alarm_object(by_ts[on], FLAG))
                if off is not None:
                    found.append(alarm_object(by_ts[off], FLAG, RESOLVED, started_ms=on))
            elif off is None and runs_before[on] is not None:  # it no longer ends: firing again
                found.append({**alarm_object(by_ts[on], FLAG), REOPENED: True})
            elif off is not None and runs_before[on] is None:  # it ends now
                found.append(alarm_object(by_ts[off], FLAG, RESOLVED, started_ms=on))
        for on in sorted(set(runs_before) - set(runs_after)):
            record = dict(by_ts_before[on])
            newer = after[after["ts"] == on]  # the row's new version (0), or its tombstone
            gone = mine[(mine["ts"] == on)]
            record["version"] = int(gone["version"].max()) if len(gone) else int(record["version"])
            record["value"] = float(newer["value"].iloc[0]) if len(newer) else None
            found.append(alarm_object(record, FLAG, RESOLVED, retracted=True, started_ms=on))
        if len(after) and int(after["ts"].iloc[-1]) >= flags.get(stream, OFF).ts:
            tail_on = max((on for on, off in runs_after.items() if off is None), default=None)
            last[stream] = FlagState(int(after["ts"].iloc[-1]), float(after["value"].iloc[-1]), tail_on)
    return sorted(found, key=in_time), last


def _living(rows: pd.DataFrame) -> pd.DataFrame:
    """A stream's newest rows that hold a value (tombstones left out), in time order."""
    return rows[rows["value"].notna()].sort_values("ts", kind="stable")


def _runs(rows: pd.DataFrame) -> dict[int, int | None]:
    """A flag's runs of 1s (its newest living rows, in time order): the time each begins -> the time
    of the first row after it that is not 1 (None while it lasts)."""
    ts, values = rows["ts"].to_numpy(np.int64), rows["value"].to_numpy(float)
    runs: dict[int, int | None] = {}
    on = None
    for t, value in zip(ts.tolist(), values.tolist()):
        if value == 1.0 and on is None:
            on = t
            runs[on] = None
        elif value != 1.0 and on is not None:
            runs[on] = t
            on = None
    return runs
