"""Which result rows are alarms: every pattern match, and the moments a flag turns on. One rule for
the alerts a run delivers (`alerts/`) and the alarms the dashboard lists.

A flag is a combine stream whose expression's top operator is a comparison or and/or/not: its
values are 0 or 1 by construction (runtime/state/kernels/expressions.py), so whether a stream is a flag is
known from the plan, before any value. (A rule that looked at the values seen so far would have to
take an alert back when a later value showed the stream was no flag; an alert sent cannot be.)
A flag turns on at a row whose value is 1 when the row before it (of its stream, in event time)
is not 1, or there is none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from sensorscript.runtime.plan.program import Combine, Job, Pattern

MATCH, FLAG = "match", "flag"  # what an alarm is: a pattern's match, a flag turning on
# The top operators whose values are 0 or 1 (runtime/state/kernels/expressions.py, `evaluate`).
FLAG_OPERATORS = frozenset({">", ">=", "<", "<=", "==", "!=", "and", "or", "not"})
# plan.json's node kinds (graph/nodes.py) that can carry alarms; a combine node says `flag`.
_PLAN_PATTERN, _PLAN_COMBINE = "pattern", "combine"


def is_flag(expression: tuple) -> bool:
    """Whether a combine stream of this expression (the canonical tuple form) is a 0/1 flag."""
    return bool(expression) and expression[0] in FLAG_OPERATORS


def alarm_kinds(job: Job) -> dict[str, str]:
    """WORKFLOW.NAME -> MATCH or FLAG, for the job's output streams that have alarms."""
    found: dict[str, str] = {}
    for program in job.programs:
        for node in program.nodes:
            kind = (MATCH if isinstance(node, Pattern) else
                    FLAG if isinstance(node, Combine) and is_flag(node.expression) else None)
            for name in program.outputs.get(node.id, ()) if kind else ():
                found[name] = kind
    return dict(sorted(found.items()))


def alarm_kinds_of_plan(plan: dict) -> dict[str, str]:
    """The same from plan.json, whose combine nodes say whether they are flags (`flag`, written
    with `is_flag`; a plan.json compiled before has none, and its combine streams have no alarms
    until compiled again)."""
    nodes = {node["id"]: node for node in plan["nodes"]}
    found: dict[str, str] = {}
    for workflow, entry in plan["workflows"].items():
        for stream, node_id in entry["outputs"].items():
            node = nodes[node_id]
            if node["kind"] == _PLAN_PATTERN:
                found[f"{workflow}.{stream}"] = MATCH
            elif node["kind"] == _PLAN_COMBINE and node.get("flag"):
                found[f"{workflow}.{stream}"] = FLAG
    return dict(sorted(found.items()))


class Alarm(NamedTuple):
    ts: int
    stream: str
    value: float
    events: str | None  # a match's bound events; None for a flag that turned on


@dataclass
class StreamAlarms:
    """One output stream's alarms so far, and what its next rows are checked against."""

    kind: str  # MATCH or FLAG
    alarms: list[Alarm] = field(default_factory=list)
    last_ts: int | None = None
    last_value: float = 0.0  # before the first row a flag is off


def turned_on(values: np.ndarray, before: float = 0.0) -> np.ndarray:
    """Which of a flag's rows (values in event-time order, `before`: the value of the row before
    the first, 0 when none) turn it on."""
    values = np.asarray(values, float)
    return (values == 1.0) & (np.concatenate(([before], values[:-1])) != 1.0)


def follow_alarms(stream: str, kind: str, ts: np.ndarray, values: np.ndarray, events: np.ndarray,
                  before: StreamAlarms | None = None) -> StreamAlarms:
    """The alarms of `stream` (MATCH or FLAG) once its rows `ts, values, events` (newest versions,
    retractions left out, in time order, all later than `before`'s last row) are added to `before`
    (None: these are all of its rows)."""
    state = before or StreamAlarms(kind)
    if not len(ts):
        return state
    if kind == MATCH:
        state.alarms += [Alarm(int(t), stream, float(v), e) for t, v, e in zip(ts, values, events) if isinstance(e, str)]
    elif kind == FLAG:
        state.alarms += [Alarm(int(t), stream, 1.0, None) for t in ts[turned_on(values, state.last_value)]]
    state.last_ts, state.last_value = int(ts[-1]), float(values[-1])
    return state


def newest_first(alarms: list[Alarm]) -> list[Alarm]:
    return sorted(alarms, key=lambda a: (-a.ts, a.stream))


def alarms(results, kinds: dict[str, str]) -> list[Alarm]:
    """The alarms of result rows (a DataFrame: newest versions, retractions left out), newest
    first; `kinds`: stream -> MATCH or FLAG (`alarm_kinds`)."""
    found: list[Alarm] = []
    for stream, rows in results.groupby("stream"):
        if stream in kinds:
            rows = rows.sort_values("ts", kind="stable")
            found += follow_alarms(stream, kinds[stream], rows["ts"].to_numpy("int64"), rows["value"].to_numpy(float),
                                   rows["events"].to_numpy(object)).alarms
    return newest_first(found)
