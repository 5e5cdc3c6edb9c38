"""Hypothesis strategies for patterns: random SensorScript patterns of 2 to 6 elements (negations,
Kleene closures, every strategy and emit rule, partition by sensor, conditions and yields) over
raw sensors, unions and windows, and small random inputs (the reference matcher enumerates every
assignment, so the inputs stay small)."""

from __future__ import annotations

from hypothesis import strategies as st

SENSORS = ("A", "B", "C", "D")
STREAMS = {  # name -> definition (raw sensors are read directly)
    "U": "union(A, B)",
    "V": "union(B, C, D)",
    "W": "max(union_ABCD, 4, 4)",
}


@st.composite
def pattern_scripts(draw) -> dict[str, str]:
    """One workflow whose outputs are a pattern (and, sometimes, a window over it)."""
    size = draw(st.sampled_from((2, 2, 2, 3, 3, 4, 5, 6)))
    strategy = draw(st.sampled_from(("any", "next", "strict")))
    by_sensor = draw(st.booleans())
    readable = list(SENSORS) + ["U", "V"] + (["W"] if not by_sensor else [])
    elements, variables = [], []
    for i in range(size):
        var = f"v{i}"
        stream = draw(st.sampled_from(readable))
        negated = i > 0 and strategy != "strict" and draw(st.integers(0, 3)) == 0 and not (variables and
                                                                                         variables[-1][2])
        kleene = not negated and draw(st.integers(0, 4)) == 0
        elements.append(f"{'!' if negated else ''}{var}: {stream}{'+' if kleene else ''}")
        variables.append((var, kleene, negated))
    if all(neg for _, _, neg in variables[1:]) and len(variables) > 1 and variables[-1][2] and \
            sum(not n for _, _, n in variables) == 0:
        return draw(pattern_scripts())
    conditions = draw(st.lists(condition(variables), max_size=2))
    within = draw(st.sampled_from((10, 20, 40)))
    text = f"P = pattern({' -> '.join(elements)})"
    if conditions:
        text += " where " + " and ".join(conditions)
    text += f" within {within} strategy {strategy} emit {draw(st.sampled_from(('all', 'first')))}"
    if by_sensor:
        text += " partition by sensor"
    positives = [(v, k) for v, k, n in variables if not n]
    if draw(st.booleans()):
        var, kleene = draw(st.sampled_from(positives))
        text += f" yield {'last(' + var + '.value)' if kleene else var + '.value'} * 2 - 1"
    base = ["U = union(A, B);", "V = union(B, C, D);", "UA = union(A, B, C, D);", "W = max(UA, 4, 4);",
            text + ";"]
    # Two workflows share the pattern: in one it is an output (its rows carry start_ts, end_ts and
    # events), the other reads it on (a window over its matches, or combine-latest).
    reader = "N = count(P, 20, 10);" if draw(st.booleans()) else "Q = P + 0;"
    return {"p": "\n".join(base) + "\n", "q": "\n".join(base + [reader]) + "\n"}


@st.composite
def condition(draw, variables) -> str:
    positives = [(v, k) for v, k, n in variables if not n]
    every = [(v, k) for v, k, _ in variables]
    form = draw(st.sampled_from(("const", "pair", "sensor", "aggregate", "same_sensor", "loose")))
    var, kleene = draw(st.sampled_from(every))
    if form == "const":
        return f"{var}.value {draw(st.sampled_from(('>', '<', '>=', '!=')))} {draw(st.sampled_from(('0', '1', '2')))}"
    if form == "pair" and len(every) > 1:
        other, _ = draw(st.sampled_from([e for e in every if e[0] != var]))
        if any(n for v, _, n in variables if v in (var, other)) and all(n for v, _, n in variables if v in (var, other)):
            return f"{var}.value > 0"  # two negated variables may not meet in one condition
        return f"{var}.value {draw(st.sampled_from(('<', '>', '<=')))} {other}.value"
    if form == "sensor":
        return f'{var}.sensor {draw(st.sampled_from(("==", "!=")))} "{draw(st.sampled_from(SENSORS))}"'
    if form == "same_sensor" and len(every) > 1:
        other, _ = draw(st.sampled_from([e for e in every if e[0] != var]))
        if any(n for v, _, n in variables if v in (var, other)) and all(n for v, _, n in variables if v in (var, other)):
            return f"{var}.sensor != \"A\""
        return f"{var}.sensor == {other}.sensor"
    kleenes = [v for v, k in positives if k]
    if form == "aggregate" and kleenes:
        k = draw(st.sampled_from(kleenes))
        return draw(st.sampled_from((f"count({k}) >= 2", f"avg({k}.value) > 1", f"max({k}.value) < 3",
                                     f"first({k}.value) != last({k}.value)")))
    return f"{var}.value >= {draw(st.sampled_from(('0', '1')))}"


@st.composite
def pattern_lines(draw) -> list[str]:
    """At most 14 readings of A-D over 0..30 ms, values 0..3 (equal times and values occur): few enough
    that the reference can enumerate every Kleene closure (and that no cap of the job cuts one)."""
    count = draw(st.integers(0, 14))
    readings = draw(st.lists(st.tuples(st.sampled_from(SENSORS), st.integers(0, 30), st.integers(0, 3)),
                             min_size=count, max_size=count))
    return [f"{s},{t},{v}" for s, t, v in readings]


# Sensors of the example registry (workflows/sensors.csv), for workflows checked against it.
REGISTERED = ('"8TL3-N"', '"8TL3-S"', '"8WL3"')


@st.composite
def pattern_only_workflow(draw) -> str:
    """A workflow whose statements are all patterns (issue #15: such files were reported to crash
    `sscript compile`), each over raw sensors (of the example registry or not) and the patterns
    before it, with every clause: Kleene, negation, the registered operators, strategies, emit
    rules, partition by sensor, limit, yield. Valid by construction; the fuzz tests mutate it."""
    lines, names = [], []
    for i in range(draw(st.integers(1, 4))):
        readable = [*REGISTERED, *SENSORS, *names]
        lines.append(f"P{i} = {draw(any_pattern(readable))};")
        names.append(f"P{i}")
    return "\n".join(lines) + "\n"


@st.composite
def any_pattern(draw, readable: list[str]) -> str:
    strategy = draw(st.sampled_from(("any", "next", "strict", None)))
    elements, variables = [], []
    for i in range(draw(st.integers(1, 5))):
        var, stream = f"v{i}", draw(st.sampled_from(readable))
        link = " ->[at_first] " if i and draw(st.integers(0, 6)) == 0 else " -> "
        negated = (i > 0 and strategy != "strict" and link == " -> " and not variables[-1][2]
                   and draw(st.integers(0, 3)) == 0)
        operator = not negated and draw(st.integers(0, 8)) == 0
        kleene = not negated and not operator and draw(st.integers(0, 3)) == 0
        source = f"first_of_run({stream})" if operator else stream
        elements.append(f"{link if i else ''}{'!' if negated else ''}{var}: {source}{'+' if kleene else ''}")
        variables.append((var, kleene, negated))
    text = f"pattern({''.join(elements)})"
    conditions = draw(st.lists(condition(variables), max_size=2))
    if conditions:
        text += " where " + " and ".join(conditions)
    text += f" within {draw(st.sampled_from(('1', '40', '250ms', '5s', '10min', '1h')))}"
    if strategy:
        text += f" strategy {strategy}"
    if draw(st.booleans()):
        text += f" emit {draw(st.sampled_from(('all', 'first')))}"
    if draw(st.booleans()):
        text += " partition by sensor"
    if draw(st.integers(0, 3)) == 0:
        text += f" limit {draw(st.sampled_from((1, 3, 10_000)))}"
    if draw(st.booleans()):
        var, kleene = draw(st.sampled_from([(v, k) for v, k, n in variables if not n]))
        forms = (f"count({var})", f"last({var}.value)") if kleene else (f"{var}.value - 1", f"{var}.ts")
        text += f" yield {draw(st.sampled_from(forms))}"
    return text
