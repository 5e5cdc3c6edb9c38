"""The rows leaving a stateful stage (OUTPUT_SCHEMA): results, quarantined input, counters and, to
a later stage, forwarded tuples and watermark heartbeats; built as pandas frames in the form Spark's
Arrow writer takes."""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pandas as pd

from sensorscript.runtime.state.cep import events_json
from sensorscript.runtime.state.engine import BatchResult
from sensorscript.runtime.state.exactness import UNKNOWN
from sensorscript.runtime.plan.program import Job, Pattern, Program, sender_id

# `dest` is the key of the partition a row goes to, `stage` the stage that takes a forward or a
# heartbeat (the ones between pass it on). Forwarded tuples travel packed, one row per edge and
# batch (`times`, `values`, `sources`: buffers). A pattern's results add `start_ts`, `end_ts` and
# `events` (docs/LANGUAGE.md, "Results").
OUTPUT_SCHEMA = ("kind string, stream string, ts long, window_start long, window_end long, value double, "
                 "version int, raw string, reason string, dest int, fcode int, times binary, values binary, "
                 "stage int, sources binary, start_ts long, end_ts long, events string")
OUTPUT_COLUMNS = [c.split()[0] for c in OUTPUT_SCHEMA.split(", ")]


def empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in OUTPUT_COLUMNS})


def stacked(frames, when_none: pd.DataFrame | None = None) -> pd.DataFrame:
    """The frames' rows one after the other; `when_none` (or `empty()`) if no frame has a row.

    A column's dtype comes from the frames that hold a value in it: empty frames, and a frame's
    column of nothing but None (a pattern's window_start) where another frame has values, are left
    out of the decision, so times stay numbers (pandas will stop doing this by itself)."""
    full = [frame for frame in frames if len(frame)]
    if not full:
        return empty() if when_none is None else when_none
    if len(full) == 1:
        return full[0].reset_index(drop=True)
    blank = [{c for c in frame.columns if frame[c].isna().all()} for frame in full]
    held = set().union(*(set(frame.columns) - none for frame, none in zip(full, blank)))
    parts = [frame.drop(columns=list(none & held)) if none & held else frame for frame, none in zip(full, blank)]
    rows = pd.concat(parts, ignore_index=True)
    columns = list(dict.fromkeys(c for frame in full for c in frame.columns))
    return rows if list(rows.columns) == columns else rows.reindex(columns=columns)


_INTEGER_COLUMNS = ("ts", "window_start", "window_end", "version", "dest", "fcode", "stage", "start_ts", "end_ts")
_OBJECT_COLUMNS = ("kind", "stream", "raw", "reason", "times", "values", "sources", "events")  # text and bytes


def frames(parts: list[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """The output frames in OUTPUT_SCHEMA's columns, each converted as Spark's Arrow writer needs.

    Parts go out one by one (a processor may yield several frames), so a part keeps exact
    numpy integers where its column has no gaps: forwarded readings stay int64 and fast.
    A column with gaps becomes Python ints or None (pandas would turn it into floats, which
    cannot hold the +-2^63 watermark sentinels; its nullable Int64 cannot go through Spark's
    conversion, which passes a mask). Text and bytes become plain objects: columns read from Spark
    arrive as pandas' `string` dtype, which converts to chunked arrays Spark does not take.
    """
    for part in parts:
        if not len(part):
            continue
        part = part.reindex(columns=OUTPUT_COLUMNS)
        for column in _INTEGER_COLUMNS:
            values = part[column]
            if values.isna().any() or values.dtype == object:
                part[column] = values.astype(object).where(values.notna(), None)
        for column in _OBJECT_COLUMNS:
            part[column] = part[column].astype(object).where(part[column].notna(), None)
        part["value"] = part["value"].astype("float64")
        yield part


def results(result: BatchResult, program: Program, dest: int, job: Job) -> pd.DataFrame:
    """The result rows of a batch as one frame (`result_frames` together)."""
    return stacked(result_frames(result, program, dest, job))


def result_frames(result: BatchResult, program: Program, dest: int, job: Job) -> list[pd.DataFrame]:
    """The result rows of a batch: one frame for every window's rows, one for the other streams'
    (no window columns), and one per pattern stream (its bound events). A frame per output stream
    cost pandas ~0.5 ms each: 15,000 streams of a partition at 10,240 workflows took 7 s a batch."""
    windows, others, frames = [], [], []
    patterns = {n.id: n for n in program.nodes if isinstance(n, Pattern)}
    for node_id, all_tuples in result.outputs.items():
        for name in program.outputs[node_id] if len(all_tuples) else ():
            written = program.written(node_id, name, all_tuples.ts, job.version.switch_at, result.handovers)  # dual
            tuples = all_tuples if written is None else all_tuples.take(written, matches=True)
            if not len(tuples):
                continue
            if tuples.match is None:
                (windows if tuples.start is not None else others).append((name, tuples))
                continue
            match = tuples.match
            variables = patterns[node_id].names[name]
            names = job.code_names[name.rsplit(".", 1)[0]]
            namer = lambda code, names=names: names.get(int(code), str(code))  # noqa: E731
            frames.append(pd.DataFrame({
                "kind": "result", "stream": name, "ts": tuples.ts, "window_start": None, "window_end": None,
                "value": tuples.value, "version": 1, "dest": dest, "start_ts": match.start, "end_ts": match.end,
                "events": [events_json(bound, variables, namer) for bound in match.events]}))
    for group, bounds in ((windows, True), (others, False)):
        if not group:
            continue
        streams = np.repeat(np.array([name for name, _ in group], object), [len(t) for _, t in group])
        columns = {"kind": "result", "stream": streams, "ts": np.concatenate([t.ts for _, t in group])}
        if bounds:
            columns["window_start"] = np.concatenate([t.start for _, t in group])
            columns["window_end"] = np.concatenate([t.end for _, t in group])
        columns.update({"value": np.concatenate([t.value for _, t in group]), "version": 1, "dest": dest})
        frames.insert(len(frames) if not bounds else 0, pd.DataFrame(columns))
    return frames


def late(results: list[BatchResult], job: Job, dest: int, watermark: int) -> pd.DataFrame:
    """The late readings of a batch, for the late store (policy `log`): `stream` holds the sensor id,
    `reason` the result streams it missed, `window_start` the watermark it came behind."""
    parts = [r.late_readings for r in results if r.late_readings is not None]
    if job.late == "drop" or not parts:  # log and correct keep them
        return empty()
    code, ts, value = (np.concatenate(column) for column in zip(*parts))
    sensor_ids = {c: sensor_id for sensor_id, (c, _) in job.sensors.items()}
    fed = job.streams_fed
    return pd.DataFrame({"kind": "late", "stream": [sensor_ids[int(c)] for c in code], "ts": ts, "value": value,
                         "window_start": watermark, "reason": [", ".join(fed[int(c)]) for c in code], "dest": dest})


def gauges(values: dict[str, float], dest: int) -> pd.DataFrame:
    """The partition's state after the batch (watermark, its lag, the policy's buffer, coverage,
    latency): one row each, for the metrics table."""
    if not values:
        return empty()
    return pd.DataFrame({"kind": "gauge", "stream": list(values), "ts": 0,
                         "value": [float(v) for v in values.values()], "dest": dest})


def exact_from(results: list[BatchResult], program: Program) -> dict[str, float]:
    """Gauges `exact_from:WORKFLOW.NAME`: the event time from which an output stream an update
    started is written whole (runtime/state/exactness.py), when it is set or moves; +inf while it
    is not known yet (a combine whose inputs have not all had a tuple). A stream handed over in mode
    dual is whole from its handover (`Program.exact_names`)."""
    found = {}
    for result in results:
        for node_id, at in result.exact.items():
            for name in program.exact_names(node_id):
                found[f"exact_from:{name}"] = float("inf") if at == UNKNOWN else float(at)
    return found


def forwards(result: BatchResult, job: Job) -> pd.DataFrame:
    """One packet per cut edge: its tuples of this batch as buffers (times, values, sensor codes)."""
    rows = [(job.bucket_keys[f.dest], f.stage, f.code, np.ascontiguousarray(t.ts, np.int64).tobytes(),
             np.ascontiguousarray(t.value, np.float64).tobytes(),
             np.ascontiguousarray(t.source, np.int32).tobytes()) for f, t in result.forwards]
    if not rows:
        return empty()
    dest, stage, fcode, times, values, sources = zip(*rows)
    return pd.DataFrame({"kind": "forward", "ts": 0, "dest": list(dest), "stage": list(stage),
                         "fcode": list(fcode), "times": list(times), "values": list(values),
                         "sources": list(sources)})


def heartbeats(program: Program, watermark: int, job: Job) -> pd.DataFrame:
    """This stage's watermark, to every stage it forwards to (`fcode`: the sender's id)."""
    targets = sorted({(f.dest, f.stage) for f in program.forwards})
    if not targets:
        return empty()
    return pd.DataFrame({"kind": "heartbeat", "ts": watermark,
                         "fcode": sender_id(program.stage, program.partition, job.partitions),
                         "dest": [job.bucket_keys[d] for d, _ in targets], "stage": [s for _, s in targets]})


def counters(results: list[BatchResult], program: Program, dest: int, job: Job | None = None,
             **extra: int) -> pd.DataFrame:
    counters = dict(extra)
    counters["late"] = sum(r.late for r in results)
    if job is not None and counters["late"]:  # late readings per result stream they missed
        fed = job.streams_fed
        codes, counts = np.unique(np.concatenate([r.late_readings[0] for r in results if r.late_readings is not None]),
                                  return_counts=True)
        for code, count in zip(codes.tolist(), counts.tolist()):
            for name in fed[code]:
                counters[f"late:{name}"] = counters.get(f"late:{name}", 0) + count
    forwarded = [(f.dest, len(t)) for r in results for f, t in r.forwards]  # a packet each
    if forwarded:
        counters["forwarded"] = sum(n for _, n in forwarded)
        counters["forward_packets"] = len(forwarded)
        # Only these cross between partitions; the rest feed a later stage of this partition.
        counters["forwarded_remote"] = sum(n for dest, n in forwarded if dest != program.partition)
    for r in results:
        for node_id, count in r.division_by_zero.items():
            for name in program.outputs.get(node_id, (node_id,)):
                counters[f"division_by_zero:{name}"] = counters.get(f"division_by_zero:{name}", 0) + count
        # Patterns: partial matches the cap cut, matches a division by zero skipped, and per
        # condition the rows tested and passed (measured selectivity, for the next compile).
        for node_id, found in r.patterns.items():
            for what, count in found.items():
                if count:
                    counters[f"pattern_{what}:{node_id}"] = counters.get(f"pattern_{what}:{node_id}", 0) + count
    return pd.DataFrame({"kind": "metric", "stream": list(counters), "ts": 0,
                         "value": [float(v) for v in counters.values()], "dest": dest})


def quarantine(frame: pd.DataFrame, dest: int) -> pd.DataFrame:
    if not len(frame):
        return empty()
    return pd.DataFrame({"kind": "quarantine", "ts": 0, "raw": frame["raw"].to_numpy(),
                         "reason": frame["reason"].to_numpy(), "dest": dest})

