"""Hypothesis strategies for differential tests: random valid workflows as SensorScript
text, and random input lines for their sensors.

    @given(workflows_and_lines())
    def test_something(example):
        scripts, lines = example        # {"w0": "X0 = avg(S1, 2s, 1000);\\n...", ...}, ["S1,1200,0.5", ...]

Workflows read the sensors S0..S4 and are built from windows, unions and arithmetic
(no patterns: the CEP stage is not built yet). Window lengths and slides come from a
small set of durations with common divisors, so that slicing by their GCD is exercised.
"""

from __future__ import annotations

import json

from hypothesis import strategies as st

from sensorscript.parser.printer import format_ms

SENSORS = ("S0", "S1", "S2", "S3", "S4")
UNREFERENCED_SENSOR = "S9"  # never read by a workflow: its readings must be filtered out
DURATIONS_MS = (1000, 2000, 3000, 5000, 6000, 10000)
WINDOW_FUNCTIONS = ("avg", "max", "min", "sum", "count")
CROSS_STREAM_FUNCTIONS = ("avg", "max", "min", "sum")
ARITHMETIC = ("+", "-", "*", "/")
COMPARISONS = (">", ">=", "<", "<=", "==", "!=")
LOGIC = ("and", "or")
# Literals keep a decimal point: `max(X, 1, 2)` would be read as a window of 1 ms every 2 ms.
LITERALS = ("0.0", "0.5", "1.0", "2.0", "3.0")
MAX_TS = 60_000

# One line for each quarantine reason, and two lines that are skipped (blank, header).
MALFORMED_LINES = (
    "S0,1000",
    "S1,10x,1.0",
    ",1000,1.0",
    "S2,1000,abc",
    "S3,1000,nan",
    '{"sensor_id": "S4", "ts": 1000}',
    "{not json",
    "",
    "sensor_id,ts,value",
)


def workflows_and_lines() -> st.SearchStrategy[tuple[dict[str, str], list[str]]]:
    """1-3 workflows (name -> script text, names distinct) and input lines for their sensors."""
    return st.tuples(scripts(), input_lines())


@st.composite
def scripts(draw) -> dict[str, str]:
    texts = draw(st.lists(workflow_text(), min_size=1, max_size=3))
    return {f"w{i}": text for i, text in enumerate(texts)}


@st.composite
def workflow_text(draw) -> str:
    """1-6 statements, each reading raw sensors or streams defined before it."""
    lines = []
    streams: list[str] = []
    for i in range(draw(st.integers(1, 6))):
        readable = [*SENSORS, *streams]
        kind = draw(st.sampled_from(("window", "union", "expression")))
        if kind == "window":
            definition = draw(window(readable))
        elif kind == "union":
            definition = draw(union(readable))
        else:
            definition = draw(arithmetic(readable))
        name = f"X{i}"
        lines.append(f"{name} = {definition};")
        streams.append(name)
    return "\n".join(lines) + "\n"


@st.composite
def window(draw, readable: list[str]) -> str:
    func = draw(st.sampled_from(WINDOW_FUNCTIONS))
    stream = draw(st.sampled_from(readable))
    length, slide = draw(duration()), draw(duration())
    return f"{func}({stream}, {length}, {slide})"


@st.composite
def duration(draw) -> str:
    """A duration as a user may write it: `5000`, `5_000` or `5s`."""
    ms = draw(st.sampled_from(DURATIONS_MS))
    return draw(st.sampled_from((str(ms), f"{ms:_}", format_ms(ms))))


@st.composite
def union(draw, readable: list[str]) -> str:
    streams = draw(st.lists(st.sampled_from(readable), min_size=2, max_size=3, unique=True))
    return f"union({', '.join(streams)})"


@st.composite
def arithmetic(draw, readable: list[str]) -> str:
    """An expression over 1-3 streams; it always reads at least one of them."""
    inputs = draw(st.lists(st.sampled_from(readable), min_size=1, max_size=3, unique=True))
    text, _, reads_stream = draw(expression(inputs, depth=3, comparison_allowed=True))
    if not reads_stream:
        text = f"({text} + {inputs[0]})"
    return text


@st.composite
def expression(draw, inputs: list[str], depth: int, comparison_allowed: bool) -> tuple[str, bool, bool]:
    """(text, is a comparison, reads a stream), fully parenthesised.

    Comparisons do not chain in SensorScript: a comparison's operand may not itself
    be a comparison, so `comparison_allowed` is False for them.
    """
    forms = ["stream", "literal"]
    if depth > 0:
        forms += ["arithmetic", "logic", "negate", "not", "function"] + (["compare"] if comparison_allowed else [])
    form = draw(st.sampled_from(forms))
    if form == "stream":
        return draw(st.sampled_from(inputs)), False, True
    if form == "literal":
        return draw(st.sampled_from(LITERALS)), False, False
    if form in ("negate", "not"):
        operand, _, reads = draw(expression(inputs, depth - 1, True))
        return (f"(-{operand})" if form == "negate" else f"(not {operand})"), False, reads
    if form == "function":
        args = draw(st.lists(expression(inputs, depth - 1, True), min_size=2, max_size=3))
        func = draw(st.sampled_from(CROSS_STREAM_FUNCTIONS))
        return f"{func}({', '.join(a[0] for a in args)})", False, any(a[2] for a in args)
    op = draw(st.sampled_from({"arithmetic": ARITHMETIC, "logic": LOGIC, "compare": COMPARISONS}[form]))
    left, _, reads_left = draw(expression(inputs, depth - 1, form != "compare"))
    right, _, reads_right = draw(expression(inputs, depth - 1, form != "compare"))
    return f"({left} {op} {right})", form == "compare", reads_left or reads_right


# ---------------------------------------------------------------------- input


@st.composite
def input_lines(draw) -> list[str]:
    """Readings of S0..S4 (and of a sensor no workflow reads) in random order, some sharing
    timestamps across sensors, with a few malformed lines among them."""
    shared_ts = draw(st.lists(st.integers(0, MAX_TS), min_size=1, max_size=8))
    reading = st.tuples(
        st.sampled_from((*SENSORS, UNREFERENCED_SENSOR)),
        st.one_of(st.sampled_from(shared_ts), st.integers(0, MAX_TS)),
        value_text(),
        st.booleans(),  # as JSON rather than CSV
    )
    lines = [render(*r) for r in draw(st.lists(reading, max_size=60))]
    lines += draw(st.lists(st.sampled_from(MALFORMED_LINES), max_size=3))
    return draw(st.permutations(lines))


def value_text() -> st.SearchStrategy[str]:
    """Small integers often (so that equal values and zero divisors occur), quarters up to
    1000 otherwise, and now and then a boolean.

    Quarters add up exactly in double precision, so a window's sum does not depend on the
    order in which the job happens to add its slices: a comparison downstream cannot flip
    on a last-bit difference, and nothing overflows to inf or nan.
    """
    return st.one_of(
        st.integers(-3, 3).map(str),
        st.integers(-4000, 4000).map(lambda quarters: repr(quarters / 4)),
        st.sampled_from(("true", "false")),
    )


def render(sensor_id: str, ts: int, value: str, as_json: bool) -> str:
    if not as_json:
        return f"{sensor_id},{ts},{value}"
    number = {"true": True, "false": False}.get(value) if value in ("true", "false") else float(value)
    return json.dumps({"sensor_id": sensor_id, "ts": ts, "value": number})
