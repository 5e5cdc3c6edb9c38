"""An alarm as delivered: one JSON object (`alarm_object`) made from a result row, the same for
every target. Alarms are the states of incidents (Alertmanager's alerts, PagerDuty's dedup_key):

- an incident is a pattern's match (its row: stream, time and bounds; and the events it bound), or a flag's run of 1s (from the
  row where it turns on); its `incident` key stays the same from firing through updates to resolution;
- `state`: `firing` (a match, a flag turning on; or again after a retraction was taken back), `updated`
  (a correction wrote a new version of the match), `resolved` (the flag's row turned 0, or a correction
  retracted the match or the turning on: `retracted` true);
- `revision` counts an incident's states as the outbox takes them (outbox.py), and `id` is
  INCIDENT/REVISION: what a receiver deduplicates by (delivery is at least once).

Detection (detection.py) makes an alarm's object without its revision; the outbox numbers it.
"""

from __future__ import annotations

import hashlib
import json
import math

import pandas as pd

from sensorscript.runtime.output.alarms import MATCH
from sensorscript.times import iso_utc

FIRING, UPDATED, RESOLVED = "firing", "updated", "resolved"
# Marks detection.py puts on an alarm for the outbox, not delivered: REOPENED on a firing alarm of a
# flag's run that a correction made last to the end again (it had resolved): the incident fires again;
# SUPERSEDES on the alarms of a correction's rows of one match row key (all its matches at once, or
# its tombstone): the row prefix (row_prefix) whose incidents not among them are retracted.
REOPENED, SUPERSEDES = "reopened", "supersedes"
PRIVATE = (REOPENED, SUPERSEDES)


def iso(ms) -> str | None:
    """Epoch milliseconds as ISO 8601 in UTC (2026-01-01T00:12:00.000Z; any time a window's bound
    can reach, past the year 9999 too: times.iso_utc)."""
    if ms is None or (isinstance(ms, float) and math.isnan(ms)) or ms is pd.NA:
        return None
    return iso_utc(int(ms))


def to_json(alarms) -> str:
    """Alarms (or a body holding them) as JSON text for a receiver, a topic or a jsonb column: an
    infinite or NaN number (a window's sum past the double range) as Prometheus' API writes one,
    the text "+Inf", "-Inf" or "NaN". JSON has no such numbers: Python would write `Infinity`,
    which a receiver's parser and PostgreSQL's jsonb refuse, and the alarm would be sent again and
    again."""
    return json.dumps(_finite(alarms), allow_nan=False)


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def _int(value) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


def row_prefix(stream: str, ts: int, start=None, end=None) -> str:
    """What the incident keys of a match row's key (stream, time, bounds) begin with: STREAM/TS/HASH/."""
    return f"{stream}/{int(ts)}/" + hashlib.sha1(f"{_int(start)}/{_int(end)}".encode()).hexdigest()[:12] + "/"


def incident_key(stream: str, ts: int, kind: str, start=None, end=None, events: list | None = None) -> str:
    """STREAM/TS of a flag's turning on; STREAM/TS/HASH/HASH of a match: its row's key (several
    matches may end at one time: their bounds tell them apart) and the events it bound (a pattern
    partitioned by sensor matches on several sensors at the same instants), by variable, sensor and
    time, not value: a correction's new version of the match (a value late data changed) keeps it."""
    if kind != MATCH:
        return f"{stream}/{int(ts)}"
    bound = json.dumps([[e.get("var"), e.get("sensor"), e.get("ts")] for e in events or ()])
    return row_prefix(stream, ts, start, end) + hashlib.sha1(bound.encode()).hexdigest()[:8]


def stream_of(incident: str) -> str:
    """The stream of an incident key (STREAM/TS[/HASH]: a stream's name, WORKFLOW.NAME, has no slash)."""
    return incident.split("/", 1)[0]


def alarm_object(row: dict, kind: str, state: str = FIRING, retracted: bool = False,
                 started_ms: int | None = None) -> dict:
    """One alarm (without its revision and id, which the outbox gives), from a result row (a dict of
    its columns). `started_ms`: when the incident began (a flag's turning on, for its resolution at
    a later row); by default the row's own time."""
    stream, ts, version = row["stream"], int(row["ts"]), int(row["version"])
    value = None if row.get("value") is None or pd.isna(row["value"]) else float(row["value"])
    events = row.get("events") if isinstance(row.get("events"), str) else None
    started = ts if started_ms is None else int(started_ms)
    bound = json.loads(events) if events else None
    incident = incident_key(stream, started, kind, row.get("start_ts"), row.get("end_ts"), bound)
    found = {"incident": incident, "fingerprint": hashlib.sha1(incident.encode()).hexdigest()[:16], "state": state, "stream": stream, "workflow": stream.rsplit(".", 1)[0], "kind": kind,
             "ts": iso(ts), "ts_ms": ts, "started": iso(started), "started_ms": started}
    if kind == MATCH:
        start, end = _int(row.get("start_ts")), _int(row.get("end_ts"))
        found.update(start=iso(start), start_ms=start, end=iso(end), end_ms=end)
    window_start, window_end = _int(row.get("window_start")), _int(row.get("window_end"))
    if window_start is not None:
        found.update(window_start=iso(window_start), window_start_ms=window_start, window_end=iso(window_end),
                     window_end_ms=window_end)
    plan_version = _int(row.get("plan_version"))
    found.update(value=value, events=bound, version=version,
                 plan_version=plan_version, retracted=retracted)
    found["summary"] = summary(found)
    return found


def summary(alarm: dict) -> str:
    """One line a person reads (a chat message, a page's title)."""
    stream, when = alarm["stream"], _when(alarm["ts_ms"])
    match = alarm["kind"] == MATCH
    if alarm["retracted"]:
        return (f"{stream}: the {'match' if match else 'flag turning on'} at {_when(alarm['started_ms'])} is "
                f"retracted (version {alarm['version']})")
    if alarm["state"] == RESOLVED:
        return f"{stream} turned off at {when} (on since {_when(alarm['started_ms'])})"
    if match:
        value = alarm["value"]
        return (f"{stream}: pattern matched at {when} "
                + (f"(value {value:.6g})" if value is not None else "(its value is not a number)")
                + (f", updated to version {alarm['version']}" if alarm["state"] == UPDATED else ""))
    return f"{stream} turned on at {when}"


def _when(ms: int) -> str:
    return iso(ms).replace("T", " ").replace("Z", " UTC")


def numbered(alarm: dict, revision: int, state: str) -> dict:
    """The alarm as the outbox takes it: its state (firing, updated or resolved) and revision, and
    its id INCIDENT/REVISION."""
    alarm = {"id": f"{alarm['incident']}/{revision}", **alarm, "state": state, "revision": revision}
    alarm["summary"] = summary(alarm)
    return alarm


def example() -> dict:
    """An alarm to try a template on."""
    events = json.dumps([{"var": "a", "ts": 1767226320000, "value": 0.61, "sensor": "TILT1"}])
    return numbered(alarm_object({"stream": "pier_alarms.JUMP", "ts": 1767226320000, "version": 1, "value": 0.61,
                                  "start_ts": 1767226300000, "end_ts": 1767226320000, "events": events}, MATCH),
                    1, FIRING)
