"""Running patterns without Spark (LocalRun) and by the reference, row for row with their match columns."""

from __future__ import annotations

import json
import math

import numpy as np

from sensorscript.codegen.program import programs
from sensorscript.parser import load
from sensorscript.partition.plan import make_plan
from oracles.streams import evaluate
from sensorscript.runtime.state.cep import events_json
from sensorscript.runtime.ingest.records import Reading, parse_line
from sensorscript.runtime.state.tasks import LocalRun


def loaded(scripts: dict[str, str]):
    return load([f"{n}.ss" for n in scripts], texts={f"{n}.ss": t for n, t in scripts.items()})


def run_local(scripts: dict[str, str], batches: list[list[str]], delay_ms: int = 0, partitions: int = 1,
              limit: int | None = None):
    """The compiled job's stages without Spark: (rows as tuples, late count, plan, pattern counters)."""
    workflows = loaded(scripts).workflows
    plan = make_plan(workflows, None, partitions, **({"limit": limit} if limit else {}))
    codes = plan.codes
    names = {code: sensor_id for sensor_id, code in codes.items()}
    run = LocalRun(*programs(plan), watermark=f"fixed:{delay_ms}")
    rows, late, counters = [], 0, {}
    for index, batch in enumerate([*batches, []]):
        readings = [r for r in map(parse_line, batch) if isinstance(r, Reading) and r.sensor_id in codes]
        emitted = run.batch(np.array([codes[r.sensor_id] for r in readings], np.int64),
                            np.array([r.ts for r in readings], np.int64),
                            np.array([r.value for r in readings], np.float64),
                            end_of_input=index == len(batches))
        for program, result in emitted:
            late += result.late
            for node_id, found in result.patterns.items():
                for what, count in found.items():
                    counters[what] = counters.get(what, 0) + count
            patterns = {n.id: n for n in program.nodes if hasattr(n, "names")}
            for node_id, tuples in result.outputs.items():
                for name in program.outputs[node_id]:
                    workflow = name.rsplit(".", 1)[0]
                    namer = {**names, **plan.stream_names.get(workflow, {})}
                    for i in range(len(tuples)):
                        row = [name, int(tuples.ts[i]), None if tuples.start is None else int(tuples.start[i]),
                               None if tuples.end is None else int(tuples.end[i]), float(tuples.value[i])]
                        if tuples.match is not None:
                            m = tuples.match
                            row += [int(m.start[i]), int(m.end[i]),
                                    events_json(m.events[i], patterns[node_id].names[name],
                                                lambda code: namer.get(int(code), str(code)))]
                        else:
                            row += [None, None, None]
                        rows.append(tuple(row))
    return rows, late, plan, counters


def reference_rows(scripts: dict[str, str], batches: list[list[str]], delay_ms: int = 0, plan=None,
                   operators: dict | None = None):
    """`operators`: the user's pattern operators the scripts name (handed to the oracle)."""
    homes = plan.partitions.sensor_partition if plan is not None else None
    evaluation = evaluate(loaded(scripts).workflows, batches, delay_ms, homes, operators)
    rows = [(r.stream, r.ts, r.window_start, r.window_end, r.value, r.start_ts, r.end_ts, r.events)
            for r in evaluation.rows]
    return rows, evaluation


def _key(row):
    """Sorting: by stream, times and the bound events (values rounded: a window's mean may differ in its
    last bits; two matches can differ in the value of an event alone, when a sensor has two readings
    at one time)."""
    events = tuple((e["var"], e["ts"], e["sensor"], round(e["value"], 6)) for e in json.loads(row[7])) if row[7] else ()
    return tuple(-1 if v is None else v for v in row[:4]) + (round(row[4], 6),) + \
        tuple(-1 if v is None else v for v in row[5:7]) + (events,)


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def _same_events(a: str | None, b: str | None) -> bool:
    """Events JSON alike: the same events, values to 1e-9 (a window's mean may differ in its last bits)."""
    if a is None or b is None:
        return a is b
    x, y = json.loads(a), json.loads(b)
    return len(x) == len(y) and all(
        (p["var"], p["ts"], p["sensor"]) == (q["var"], q["ts"], q["sensor"]) and _close(p["value"], q["value"])
        for p, q in zip(x, y))


def same_rows(actual, expected) -> None:
    actual, expected = sorted(actual, key=_key), sorted(expected, key=_key)
    assert len(actual) == len(expected), (len(actual), len(expected), actual[:5], expected[:5])
    for a, e in zip(actual, expected):
        assert a[:4] == e[:4] and a[5:7] == e[5:7] and _same_events(a[7], e[7]), (a, e)
        assert _close(a[4], e[4]), (a, e)
