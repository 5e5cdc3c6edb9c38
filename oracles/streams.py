"""The reference evaluator: docs/LANGUAGE.md's "Semantics" in plain Python, the oracle for the generated Spark job.

    evaluation = evaluate(workflows, batches=[lines], delay_ms=0)

Differential tests run the same input through this module and through the job and
compare the result rows. So this module follows those rules literally and favours
obviously-correct loops over speed: every window is filled tuple by tuple, every
combine-latest step walks the timestamps one by one.

Decisions the rules leave to the implementation, taken here with the team:

- a watermark per partition, advanced between micro-batches (as Kafka Streams keeps
  stream time per task): before batch i it is the largest ts of the readings of that
  partition's sensors in batches 0..i-1 minus `delay_ms`; a reading below its
  partition's watermark is late, dropped and counted (late policy `drop`).
  `partition_of` maps sensors to partitions (the job's plan); without it there is
  one partition and so one global watermark. After the last batch the input has
  ended, the watermark is +infinity and every window is emitted;
- readings of sensors that no workflow references are filtered out before the
  watermark stage, as the job does (docs/ARCHITECTURE.md, "The generated job"): they are
  neither counted as late nor move the watermark;
- each workflow is evaluated on its own: sharing computations across workflows is an
  optimisation of the job and must not change its results.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from graphlib import TopologicalSorter

from sensorscript.parser import ast
from oracles.identity import computations, first_names
from oracles.patterns import Event, match
from oracles.records import Reading, Rejected, read_line


@dataclass(frozen=True)
class ResultRow:
    """One output tuple with the result columns (docs/LANGUAGE.md, "Results"; a pattern's add start_ts,
    end_ts, events)."""

    stream: str  # "WORKFLOW.NAME"
    ts: int
    window_start: int | None
    window_end: int | None
    value: float
    version: int = 1
    start_ts: int | None = None
    end_ts: int | None = None
    events: str | None = None


@dataclass
class Evaluation:
    rows: list[ResultRow]  # sorted by (stream, ts, window_start or -1)
    quarantine: list[tuple[str, str]]  # (raw line, reason), in input order
    late: int  # readings dropped as late
    # "WORKFLOW.NAME" of an arithmetic stream -> timestamps skipped; streams that skipped none are absent
    division_by_zero: dict[str, int]


@dataclass(frozen=True)
class StreamTuple:
    """A tuple of a stream: raw (sensor_id is the sensor) or derived (sensor_id is the
    name of the stream that produced it, which patterns read as `sensor`)."""

    sensor_id: str
    ts: int
    value: float
    window_start: int | None = None  # set on a window's own output only
    window_end: int | None = None
    match: tuple | None = None  # a pattern's own output: (start_ts, end_ts, events as JSON)


def evaluate(workflows: list[ast.Workflow], batches: list[list[str]], delay_ms: int = 0,
             partition_of: dict[str, int] | None = None, operators: dict | None = None) -> Evaluation:
    """Every output row of every workflow for the input lines, read micro-batch by micro-batch.

    `operators`: the user's pattern operators the workflows name, by name (see `patterns.match`)."""
    sensors = referenced_sensors(workflows)
    readings, quarantine, late = admit(batches, sensors, delay_ms, partition_of or {})
    rows: list[ResultRow] = []
    division_by_zero: dict[str, int] = {}
    codes = {sensor_id: code for code, sensor_id in enumerate(sorted(sensors))}
    for workflow in workflows:
        streams = evaluate_workflow(workflow, readings, division_by_zero, codes, operators)
        for name in workflow.outputs:
            rows.extend(ResultRow(f"{workflow.name}.{name}", t.ts, t.window_start, t.window_end, t.value,
                                  1, *(t.match or (None, None, None)))
                        for t in streams[name])
    rows.sort(key=lambda row: (row.stream, row.ts, row.window_start if row.window_start is not None else -1))
    return Evaluation(rows, quarantine, late, division_by_zero)


def referenced_sensors(workflows: list[ast.Workflow]) -> set[str]:
    """The raw sensor ids some workflow reads: references that name no stream of their workflow."""
    sensors = set()
    for workflow in workflows:
        defined = workflow.defined
        for statement in workflow.statements:
            sensors.update(ref.name for ref in ast.references(statement.value) if ref.name not in defined)
    return sensors


# ---------------------------------------------------------------------- input


def admit(batches: list[list[str]], sensors: set[str], delay_ms: int,
          partition_of: dict[str, int]) -> tuple[list[Reading], list[tuple[str, str]], int]:
    """The on-time readings of the referenced sensors in arrival order, the quarantine, the late count."""
    readings: list[Reading] = []
    quarantine: list[tuple[str, str]] = []
    late = 0
    largest_ts: dict[int, float] = {}  # partition -> largest ts seen so far
    for batch in batches:
        # The watermark moves between micro-batches: one value per partition holds for a whole batch.
        watermarks = {p: ts - delay_ms for p, ts in largest_ts.items()}
        for line in batch:
            parsed = read_line(line)
            if parsed is None:
                continue
            if isinstance(parsed, Rejected):
                quarantine.append((parsed.raw, parsed.reason))
                continue
            if parsed.sensor_id not in sensors:
                continue
            partition = partition_of.get(parsed.sensor_id, 0)
            largest_ts[partition] = max(largest_ts.get(partition, -math.inf), parsed.ts)
            if parsed.ts < watermarks.get(partition, -math.inf):
                late += 1
                continue
            readings.append(parsed)
    return readings, quarantine, late


# ------------------------------------------------------------------ workflows


def evaluate_workflow(workflow: ast.Workflow, readings: list[Reading], division_by_zero: dict[str, int],
                      codes: dict[str, int], operators: dict | None = None) -> dict[str, list[StreamTuple]]:
    """Every stream of one workflow, each a list of tuples in event-time order. `codes`: sensor id ->
    the code a pattern's operators see; `operators`: the user's pattern operators."""
    defined = workflow.defined
    sources = Sources(workflow, codes)
    # Streams may be read before the line that defines them: evaluate in dependency order.
    dependencies = {name: {ref.name for ref in ast.references(statement.value) if ref.name in defined}
                    for name, statement in defined.items()}
    streams: dict[str, list[StreamTuple]] = {}

    def tuples_of(ref: ast.Ref) -> list[StreamTuple]:
        if ref.name in defined:
            return streams[ref.name]
        return raw_stream(ref.name, readings)

    for name in TopologicalSorter(dependencies).static_order():
        value = defined[name].value
        read = tuples_of
        if isinstance(value, ast.Window):
            streams[name] = window(name, value, read(value.stream))
        elif isinstance(value, ast.Union_):
            streams[name] = union([read(ref) for ref in value.streams])
        elif isinstance(value, ast.Pattern):
            streams[name], skipped = pattern(name, value, read, sources, operators)
            if skipped:
                division_by_zero[f"{workflow.name}.{name}"] = skipped
        else:
            inputs = {ref.name: read(ref) for ref in ast.references(value)}
            streams[name], skipped = combine_latest(name, value, inputs)
            if skipped:
                division_by_zero[f"{workflow.name}.{name}"] = skipped
    return streams


def raw_stream(sensor_id: str, readings: list[Reading]) -> list[StreamTuple]:
    """A sensor's readings in event-time order; equal timestamps keep their arrival order."""
    tuples = [StreamTuple(r.sensor_id, r.ts, r.value) for r in readings if r.sensor_id == sensor_id]
    return sorted(tuples, key=lambda t: t.ts)


# ------------------------------------------------------------------- patterns


class Sources:
    """How one workflow's tuples enter its patterns (docs/LANGUAGE.md, "Events"): the streams that
    compute the same thing are one stream (identity.py), and a derived tuple's sensor is the name of
    the first of them. Operators see codes: the raw sensors the workflows read, numbered in id
    order, then the workflow's derived streams in name order."""

    def __init__(self, workflow: ast.Workflow, codes: dict[str, int]):
        self.computations = computations(workflow)
        self.names = first_names(workflow)
        derived = sorted(set(self.names.values()))
        self.codes = codes
        self.stream_codes = {name: len(codes) + i for i, name in enumerate(derived)}

    def stream(self, ref: ast.Ref):
        """What a reference reads: a computation, or a raw sensor (docs/LANGUAGE.md, "Statements")."""
        return self.computations.get(ref.name, ("sensor", ref.name))

    def event(self, k: int, t: StreamTuple, n: int) -> Event:
        if t.sensor_id in self.names:  # a derived tuple: its stream's name
            name = self.names[t.sensor_id]
            return Event(k, t.ts, t.value, name, True, self.stream_codes[name], n)
        return Event(k, t.ts, t.value, t.sensor_id, False, self.codes[t.sensor_id], n)


def pattern(name: str, definition: ast.Pattern, read, sources: Sources,
            operators: dict | None) -> tuple[list[StreamTuple], int]:
    """A pattern's matches (`patterns.match`), as the pattern stream's tuples (docs/LANGUAGE.md, "Output")."""
    streams: list[list[Event]] = []
    read_by: list = []  # the pattern's distinct streams, in element order
    element_stream = []
    for element in definition.elements:
        stream = sources.stream(element.stream)
        if stream not in read_by:
            read_by.append(stream)
            streams.append([sources.event(len(streams), t, n) for n, t in enumerate(read(element.stream))])
        element_stream.append(read_by.index(stream))
    matches, skipped = match(definition, streams, element_stream, sources.names, operators)
    out = [StreamTuple(name, m.ts, m.value, match=(m.start_ts, m.end_ts, m.events_json())) for m in matches]
    out.sort(key=lambda t: t.ts)
    return out, skipped


# -------------------------------------------------------------------- windows


def window(name: str, definition: ast.Window, tuples: list[StreamTuple]) -> list[StreamTuple]:
    """`agg(STREAM, L, S)`: window k covers [k·S, k·S + L); one tuple per window holding any input."""
    length, slide = definition.length.ms, definition.slide.ms
    contents: dict[int, list[float]] = {}
    for t in tuples:
        for k in windows_holding(t.ts, length, slide):
            contents.setdefault(k, []).append(t.value)
    out = []
    for k in sorted(contents):
        start = k * slide
        end = start + length
        out.append(StreamTuple(name, end - 1, AGGREGATES[definition.func](contents[k]), start, end))
    return out


def windows_holding(ts: int, length: int, slide: int) -> range:
    """Every k with k·S <= ts < k·S + L: none when ts falls in the gap of a sampling window,
    several when windows overlap. Floor division keeps negative timestamps right."""
    first = (ts - length) // slide + 1
    last = ts // slide
    return range(first, last + 1)


def total(values: list[float]) -> float:
    """The plain double-precision sum, left to right (the builtin `sum` compensates
    rounding from Python 3.12 on, which the job's sum does not)."""
    result = 0.0
    for value in values:
        result += value
    return result


def average(values: list[float]) -> float:
    return total(values) / len(values)


AGGREGATES = {
    "avg": average,
    "max": max,
    "min": min,
    "sum": total,
    "count": lambda values: float(len(values)),
}


# --------------------------------------------------------------------- unions


def union(inputs: list[list[StreamTuple]]) -> list[StreamTuple]:
    """The multiset union: every tuple of every input, in event-time order (ties: argument order).

    A tuple keeps its sensor_id, ts and value; window bounds are columns of a
    window's own output only (docs/LANGUAGE.md, "Results"), so they do not pass through.
    """
    merged = [StreamTuple(t.sensor_id, t.ts, t.value) for tuples in inputs for t in tuples]
    return sorted(merged, key=lambda t: t.ts)


# ----------------------------------------------------- arithmetic and functions


class DivisionByZero(Exception):
    pass


def combine_latest(name: str, expression: ast.Expr,
                   inputs: dict[str, list[StreamTuple]]) -> tuple[list[StreamTuple], int]:
    """An expression over streams, event-triggered; returns its tuples and the timestamps skipped
    for a division by zero.

    At every distinct timestamp where some input has a tuple, once every input has had
    one, the expression is computed from each input's latest value. An input with several
    tuples at one timestamp has their mean as its value there.
    """
    values_at = {stream: means_by_ts(tuples) for stream, tuples in inputs.items()}
    timestamps = sorted({ts for by_ts in values_at.values() for ts in by_ts})
    latest: dict[str, float] = {}
    out: list[StreamTuple] = []
    skipped = 0
    for ts in timestamps:
        for stream, by_ts in values_at.items():
            if ts in by_ts:
                latest[stream] = by_ts[ts]
        if len(latest) < len(inputs):
            continue
        try:
            out.append(StreamTuple(name, ts, compute(expression, latest)))
        except DivisionByZero:
            skipped += 1
    return out, skipped


def means_by_ts(tuples: list[StreamTuple]) -> dict[int, float]:
    grouped: dict[int, list[float]] = {}
    for t in tuples:
        grouped.setdefault(t.ts, []).append(t.value)
    return {ts: average(values) for ts, values in grouped.items()}


def compute(node: ast.Expr, latest: dict[str, float]) -> float:
    """The value of an expression given each stream's latest value.

    Every operand is computed, `and`/`or` included: a division by zero anywhere in the
    expression skips the timestamp, even where the other operand would decide the result.
    """
    if isinstance(node, ast.Number):
        return node.value
    if isinstance(node, ast.Ref):
        return latest[node.name]
    if isinstance(node, ast.Unary):
        operand = compute(node.operand, latest)
        return -operand if node.op == "-" else truth(operand == 0)
    if isinstance(node, ast.Binary):
        left = compute(node.left, latest)
        right = compute(node.right, latest)
        if node.op == "/" and right == 0:
            raise DivisionByZero
        return OPERATORS[node.op](left, right)
    if isinstance(node, ast.Call):
        args = [compute(arg, latest) for arg in node.args]
        return AGGREGATES[node.func](args)
    raise TypeError(f"not a stream expression: {node!r}")


def truth(condition: bool) -> float:
    return 1.0 if condition else 0.0


OPERATORS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    ">": lambda a, b: truth(a > b),
    ">=": lambda a, b: truth(a >= b),
    "<": lambda a, b: truth(a < b),
    "<=": lambda a, b: truth(a <= b),
    "==": lambda a, b: truth(a == b),
    "!=": lambda a, b: truth(a != b),
    "and": lambda a, b: truth(a != 0 and b != 0),
    "or": lambda a, b: truth(a != 0 or b != 0),
}


# ---------------------------------------------------------------------- held against a job's rows


def expected_rows(evaluation) -> list[tuple]:
    return sorted((r.stream, r.ts, r.window_start, r.window_end, r.value) for r in evaluation.rows)


def assert_same(actual: list[tuple], expected: list[tuple]) -> None:
    """Row for row: keys exactly, values to 1e-9 relative."""
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a[:4] == e[:4], (a, e)
        assert math.isclose(a[4], e[4], rel_tol=1e-9, abs_tol=1e-9), (a, e)
