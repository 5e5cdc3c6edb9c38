"""An alarm as delivered: one JSON object (`alarm_object`) made from a result row, the same for
every target; its `id` (stream, row, version; a match's bounds and events; retracted or not) is what
receivers deduplicate by and what the outbox keys it by.
"""

from __future__ import annotations

import hashlib
import json
import math
from datetime import datetime, timezone

import pandas as pd

from sensorscript.runtime.output.alarms import MATCH


def iso(ms) -> str | None:
    """Epoch milliseconds as ISO 8601 in UTC (2026-01-01T00:12:00.000Z)."""
    if ms is None or (isinstance(ms, float) and math.isnan(ms)) or ms is pd.NA:
        return None
    return datetime.fromtimestamp(int(ms) / 1000, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _int(value) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


def alarm_object(row: dict, kind: str, retracted: bool = False) -> dict:
    """One alarm as delivered, from a result row (a dict of its columns)."""
    stream, ts, version = row["stream"], int(row["ts"]), int(row["version"])
    value = None if row.get("value") is None or pd.isna(row["value"]) else float(row["value"])
    events = row.get("events") if isinstance(row.get("events"), str) else None
    ident = f"{stream}/{ts}/{version}"
    if kind == MATCH:  # several matches may end at one time: their bounds and events tell them apart
        bound = f"{_int(row.get('start_ts'))}/{_int(row.get('end_ts'))}/{events or ''}"
        ident += "/" + hashlib.sha1(bound.encode()).hexdigest()[:12]
    if retracted:
        ident += "/retracted"
    found = {"id": ident, "stream": stream, "workflow": stream.rsplit(".", 1)[0], "kind": kind,
             "ts": iso(ts), "ts_ms": ts}
    if kind == MATCH:
        start, end = _int(row.get("start_ts")), _int(row.get("end_ts"))
        found.update(start=iso(start), start_ms=start, end=iso(end), end_ms=end)
    window_start, window_end = _int(row.get("window_start")), _int(row.get("window_end"))
    if window_start is not None:
        found.update(window_start=iso(window_start), window_start_ms=window_start, window_end=iso(window_end),
                     window_end_ms=window_end)
    plan_version = _int(row.get("plan_version"))
    found.update(value=value, events=json.loads(events) if events else None, version=version,
                 plan_version=plan_version, retracted=retracted)
    when = iso(ts).replace("T", " ").replace("Z", " UTC")
    found["summary"] = (f"{stream}: the {'match' if kind == MATCH else 'flag turning on'} at {when} is retracted "
                        f"(version {version})" if retracted else
                        f"{stream}: pattern matched at {when} (value {value:.6g})" if kind == MATCH else
                        f"{stream} turned on at {when}")
    return found


def example() -> dict:
    """An alarm to try a template on."""
    events = json.dumps([{"var": "a", "ts": 1767226320000, "value": 0.61, "sensor": "TILT1"}])
    return alarm_object({"stream": "pier_alarms.JUMP", "ts": 1767226320000, "version": 1, "value": 0.61,
                         "start_ts": 1767226300000, "end_ts": 1767226320000, "events": events}, MATCH)
