"""Which alarms a written batch raises, and which a correction raises or retracts (runtime/output/
alarms.py is the rule): given the streams delivered (MATCH or FLAG) and each flag's last row taken so
far, the alarms in event-time order and each flag's last row after them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sensorscript.runtime.output.alarms import FLAG, MATCH, turned_on
from sensorscript.runtime.output.alerts.payload import alarm_object
from sensorscript.runtime.output.sinks import KEY_COLUMNS, newest


def batch_alarms(results: pd.DataFrame, kinds: dict[str, str], flags: dict[str, tuple[int, float]]):
    """The alarms among a batch's result rows (`kinds`: the streams delivered, MATCH or FLAG) and each
    flag's last row after it, given `flags` (its last row before; off when none)."""
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
            values = group["value"].to_numpy(float)
            on = turned_on(values, flags.get(stream, (0, 0.0))[1])
            found += [alarm_object(r, FLAG) for r, yes in zip(records, on) if yes]
            last[stream] = (int(group["ts"].iloc[-1]), float(values[-1]))
    return sorted(found, key=_in_time), last


def _in_time(alarm: dict):
    """Alarms are sent in event-time order (then by stream): a receiver reads them as they happened."""
    return alarm["ts_ms"], alarm["stream"], alarm["retracted"]


def correction_alarms(changed: pd.DataFrame, kinds: dict[str, str], stored: pd.DataFrame,
                      flags: dict[str, tuple[int, float]]):
    """What a correction's rows (`changed`: new versions and tombstones) change among the alarms:
    a match's new version, a match retracted; a flag that now turns on at a row where it did not
    (its version), or no longer does (retracted, with the row's newest version). `stored`: every
    version of the flag streams' rows, the correction's included. Returns the alarms and the flags'
    last rows where the correction changed them."""
    changed = changed[changed["stream"].isin(kinds.keys())]
    found: list[dict] = []
    for record in changed[changed["stream"].map(kinds) == MATCH].to_dict("records"):
        if pd.isna(record["value"]):
            found.append(alarm_object(record, MATCH, retracted=True))
        elif isinstance(record.get("events"), str):
            found.append(alarm_object(record, MATCH))
    last = {}
    flag_streams = sorted(set(changed["stream"]) & {s for s, k in kinds.items() if k == FLAG})
    for stream in flag_streams:
        rows = stored[stored["stream"] == stream]
        mine = changed[changed["stream"] == stream]
        ours = _rows_of(rows, mine)
        after = newest(rows).sort_values("ts", kind="stable")
        before = newest(rows[~ours]).sort_values("ts", kind="stable")
        on_after = _turning_on(after)
        on_before = _turning_on(before)
        for record in after[after["ts"].isin(on_after - on_before)].to_dict("records"):
            found.append(alarm_object(record, FLAG))
        for record in after[after["ts"].isin(on_before - on_after)].to_dict("records"):
            found.append(alarm_object(record, FLAG, retracted=True))
        living = after[after["value"].notna()]
        if len(living) and int(living["ts"].iloc[-1]) >= flags.get(stream, (-(2**63), 0.0))[0]:
            last[stream] = (int(living["ts"].iloc[-1]), float(living["value"].iloc[-1]))
    return sorted(found, key=_in_time), last


def _rows_of(rows: pd.DataFrame, written: pd.DataFrame) -> np.ndarray:
    """Which of `rows` are among `written` (the same key and version)."""
    columns = [c for c in (*KEY_COLUMNS, "version") if c in rows.columns and c in written.columns]
    marks = set(map(tuple, written[columns].astype(object).where(written[columns].notna(), None).to_numpy()))
    keys = rows[columns].astype(object).where(rows[columns].notna(), None).to_numpy()
    return np.array([tuple(k) in marks for k in keys], bool)


def _turning_on(rows: pd.DataFrame) -> set[int]:
    """The times a flag (its newest rows, in time order, tombstones among them) turns on."""
    rows = rows[rows["value"].notna()]
    return set(rows["ts"].to_numpy(np.int64)[turned_on(rows["value"].to_numpy(float))].tolist())
