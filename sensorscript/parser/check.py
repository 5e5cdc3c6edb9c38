"""Semantic checks of one workflow (docs/LANGUAGE.md, "Checks"): everything the grammar lets through
but the language forbids. Each check is a function that yields diagnostics; `check`
runs them all so that a user sees every mistake of a run at once."""

from __future__ import annotations

from typing import Callable, Collection, Iterator

import math

from sensorscript.errors import Diagnostic, did_you_mean, error, warning
from sensorscript.parser import ast
from sensorscript.parser.antlr import MAX_DURATION_MS, WINDOW_FUNCTIONS

CROSS_STREAM_FUNCTIONS = ("avg", "max", "min", "sum")
ALL_FUNCTIONS = tuple(sorted({*WINDOW_FUNCTIONS, *CROSS_STREAM_FUNCTIONS, "union"}))
PATTERN_AGGREGATES = ("count", "avg", "min", "max", "sum", "first", "last")
EVENT_ATTRIBUTES = ("value", "ts", "sensor")
# Longer patterns are split into patterns over patterns: the planner and the matcher recurse
# over the elements (a pattern of 1,000 of them exceeded Python's recursion limit).
MAX_PATTERN_ELEMENTS = 32
COMPARISONS = (">", ">=", "<", "<=", "==", "!=")


class Context:
    """What the checks know besides the workflow: the sensor registry, if one was given, and the
    pattern operators registered (name -> arity; the built-in ones by default)."""

    def __init__(self, known_sensors: Collection[str] | None = None, operators: dict[str, int] | None = None):
        self.known_sensors = None if known_sensors is None else frozenset(known_sensors)
        if operators is None:
            from sensorscript.runtime.state.cep.operators import arities

            operators = arities()
        self.operators = dict(operators)


Check = Callable[[ast.Workflow, Context], Iterator[Diagnostic]]


def check(workflow: ast.Workflow, context: Context | None = None) -> list[Diagnostic]:
    """All diagnostics of one parsed workflow, in source order."""
    context = context or Context()
    found = [d for one in CHECKS for d in one(workflow, context)]
    return sorted(found, key=lambda d: (d.span.line, d.span.column) if d.span else (0, 0))


# ------------------------------------------------------------------ statements


def check_redefinitions(workflow: ast.Workflow, context: Context) -> Iterator[Diagnostic]:
    first: dict[str, ast.Statement] = {}
    for statement in workflow.statements:
        if statement.name in first:
            where = first[statement.name].name_span
            yield error(f"'{statement.name}' is already defined on line {where.line}; "
                        "each stream is defined once per workflow", statement.name_span)
        else:
            first[statement.name] = statement


def check_definitions(workflow: ast.Workflow, context: Context) -> Iterator[Diagnostic]:
    """Windows, unions and function calls: placement, arity and arguments."""
    for statement in workflow.statements:
        value = statement.value
        if isinstance(value, ast.Pattern):
            continue
        yield from _check_top(statement, value)
        # Durations where a window's length and slide stand, including in a misnamed
        # window call (`avgg(S, 1s, 1s)`): one mistake, one message.
        nodes = list(ast.walk(value))
        window_arguments = {id(d) for w in nodes if isinstance(w, ast.Window) for d in (w.length, w.slide)}
        window_arguments |= {id(a) for c in nodes if isinstance(c, ast.Call)
                             and (c.func not in CROSS_STREAM_FUNCTIONS or _looks_like_window(c)) for a in c.args}
        for node in nodes:
            if node is not value and isinstance(node, (ast.Window, ast.Union_)):
                what = "window aggregation" if isinstance(node, ast.Window) else "union"
                yield error(f"a {what} must be a statement of its own: name it (X = ...;) and use X here",
                            node.span)
            elif isinstance(node, ast.Call):
                yield from _check_call(node)
            elif isinstance(node, ast.Duration) and id(node) not in window_arguments:
                yield error(f"a duration ('{node.text}') is only valid as a window length or slide", node.span)
            elif isinstance(node, ast.Attribute):
                yield error(f"'{node.var}.{node.attr}' is only valid inside a pattern's where or yield",
                            node.span)
            elif isinstance(node, ast.Binary) and node.op in COMPARISONS:
                for side in (node.left, node.right):
                    if isinstance(side, ast.Binary) and side.op in COMPARISONS:
                        yield error("comparisons do not chain; write 'a < b and b < c'", node.span)


def _check_top(statement: ast.Statement, value: object) -> Iterator[Diagnostic]:
    if isinstance(value, ast.Window):
        if not isinstance(value.stream, ast.Ref):
            yield error(f"a window reads one stream; name this expression first "
                        f"(X = ...;) and write {value.func}(X, ...)", value.stream.span)
        for what, duration in (("length", value.length), ("slide", value.slide)):
            if duration.ms <= 0 and duration.text:
                yield error(f"the window {what} must be positive, not {duration.text}", duration.span)
    elif isinstance(value, ast.Union_):
        if len(value.streams) < 2:
            yield error("union takes two or more streams", value.span)
        for arg in value.streams:
            if not isinstance(arg, ast.Ref):
                yield error("union takes stream names; name this expression first (X = ...;)", arg.span)
    elif not any(isinstance(n, (ast.Ref, ast.Attribute)) for n in ast.walk(value)):  # attributes: reported apart
        yield error(f"'{statement.name}' reads no stream; an expression needs at least one stream",
                    statement.span)


def _looks_like_window(call: ast.Call) -> bool:
    """A call with a duration argument meant to be a window (durations have no other use)."""
    return call.func in WINDOW_FUNCTIONS and any(isinstance(a, ast.Duration) for a in call.args)


def _check_call(call: ast.Call) -> Iterator[Diagnostic]:
    name_span = ast.Span(call.span.file, call.span.line, call.span.column,
                         call.span.line, call.span.column + len(call.func))
    if call.func not in ALL_FUNCTIONS:
        yield error(f"unknown function '{call.func}'{did_you_mean(call.func, ALL_FUNCTIONS)}", name_span)
    elif call.func == "count":
        yield error("count is a window aggregation: count(STREAM, LENGTH, SLIDE)", call.span)
    elif _looks_like_window(call):
        yield error(f"a window aggregation takes a stream, a length and a slide: {call.func}(STREAM, LENGTH, "
                    f"SLIDE); this call has {len(call.args)} argument(s)", call.span)
    elif len(call.args) < 2:
        yield error(f"{call.func} over streams takes two or more arguments; "
                    f"for a window write {call.func}(STREAM, LENGTH, SLIDE)", call.span)


# ---------------------------------------------------------------- references


def check_references(workflow: ast.Workflow, context: Context) -> Iterator[Diagnostic]:
    """A reference is a stream of this workflow or else a raw sensor.

    Without a registry we cannot tell a sensor from a typo, so only a bare name very
    close to a defined stream is flagged. With a registry, a name in neither is an unknown sensor:
    a warning (it gets the default frequency), with the nearest name suggested.
    """
    defined = {s.name for s in workflow.statements}
    unparsed = set(workflow.broken) - defined  # their syntax errors are reported already
    for statement in workflow.statements:
        for ref in ast.references(statement.value):
            if ref.name in defined or ref.name in unparsed:
                continue
            if context.known_sensors is None:
                # A quoted name is deliberate: sensor ids like "8MD1-AZ" need quotes.
                hint = "" if ref.quoted else did_you_mean(ref.name, defined | unparsed, cutoff=0.75)
                if hint:
                    yield warning(f"'{ref.name}' is not defined in this workflow and is read as a raw "
                                  f"sensor{hint}", ref.span)
            elif ref.name not in context.known_sensors:
                hint = did_you_mean(ref.name, defined | unparsed | context.known_sensors)
                yield warning(f"'{ref.name}' is neither a stream of this workflow nor a sensor of the "
                              f"registry; it is read as a raw sensor with the default frequency{hint}",
                              ref.span)


def check_cycles(workflow: ast.Workflow, context: Context) -> Iterator[Diagnostic]:
    defined = workflow.defined
    reads = {s.name: [r.name for r in ast.references(s.value) if r.name in defined] for s in workflow.statements}
    if _acyclic(reads):  # cheap test first; networkx only to name the cycles (imported then: 0.1 s)
        return
    import networkx as nx

    graph = nx.DiGraph()
    for statement in workflow.statements:
        for ref in ast.references(statement.value):
            if ref.name in defined:
                graph.add_edge(statement.name, ref.name)
    reported: set[frozenset[str]] = set()
    for cycle in sorted(nx.simple_cycles(graph), key=lambda c: (len(c), sorted(c))):
        key = frozenset(cycle)
        if key in reported:
            continue
        reported.add(key)
        start = min(cycle, key=lambda name: defined[name].span.line)
        i = cycle.index(start)
        path = cycle[i:] + cycle[:i] + [start]
        yield error("cycle: " + " reads ".join(f"'{n}'" for n in path)
                    + "; a stream cannot depend on itself", defined[start].name_span)


def _acyclic(reads: dict[str, list[str]]) -> bool:
    """Whether the streams can be ordered (Kahn's algorithm): what graphlib's prepare() tests."""
    waiting = {name: 0 for name in reads}
    readers: dict[str, list[str]] = {}
    for name, inputs in reads.items():
        for input_name in inputs:
            waiting[name] += 1
            readers.setdefault(input_name, []).append(name)
    ready = [name for name, count in waiting.items() if count == 0]
    ordered = 0
    while ready:
        name = ready.pop()
        ordered += 1
        for reader in readers.get(name, ()):
            waiting[reader] -= 1
            if waiting[reader] == 0:
                ready.append(reader)
    return ordered == len(waiting)


def check_magnitudes(workflow: ast.Workflow, context: Context) -> Iterator[Diagnostic]:
    """Numbers the job can hold: a literal that overflows a double, a duration past 64-bit epoch
    milliseconds' comfort (a window of a million years would overflow the job's times)."""
    for statement in workflow.statements:
        for node in ast.walk(statement.value):
            if isinstance(node, ast.Number) and not math.isfinite(node.value):
                yield error(f"the number {_shortened(node.text)} is too large", node.span)
            elif isinstance(node, ast.Duration) and node.ms > MAX_DURATION_MS:
                yield error(f"the duration {_shortened(node.text)} is too long: durations are at most 100 years "
                            f"({MAX_DURATION_MS:_} ms)", node.span)


def _shortened(text: str) -> str:
    return text if len(text) <= 24 else f"{text[:10]}...{text[-10:]} ({len(text)} characters)"


# ------------------------------------------------------------------- patterns


def check_patterns(workflow: ast.Workflow, context: Context) -> Iterator[Diagnostic]:
    for statement in workflow.statements:
        if isinstance(statement.value, ast.Pattern):
            yield from _check_pattern(statement.value, context)


def _check_pattern(pattern: ast.Pattern, context: Context) -> Iterator[Diagnostic]:
    elements = pattern.elements
    if len(elements) > MAX_PATTERN_ELEMENTS:
        yield error(f"a pattern may have at most {MAX_PATTERN_ELEMENTS} elements, this one has {len(elements)}; "
                    f"split it into patterns over patterns", pattern.span)
    variables: dict[str, ast.PatternElement] = {}
    for element in elements:
        if element.var in variables:
            yield error(f"pattern variable '{element.var}' is bound twice", element.span)
        variables.setdefault(element.var, element)
        if element.negated and element.kleene:
            yield error(f"a negated element cannot be Kleene: write '!{element.var}: "
                        f"{element.stream.name}' without '+'", element.span)
        if element.operator is not None:
            yield from _check_operator(element.operator, 1, context, element.span)
            if element.negated or element.kleene:
                yield error(f"'{element.operator}(...)' makes the events of '{element.var}' itself: it cannot be "
                            f"{'negated' if element.negated else 'Kleene'} too", element.span)
    for link, element in zip(pattern.links, elements[1:]):
        if link is not None:
            yield from _check_operator(link, 2, context, element.span)
            if element.negated:
                yield error(f"'->[{link}]' cannot lead to a negated element: a negation binds no event to "
                            f"join; put the operator on the link after it", element.span)
    if elements and elements[0].negated:
        yield error("a pattern may not start with a negation: there is nothing yet to follow",
                    elements[0].span)
    if pattern.strategy == "strict" and any(e.negated for e in elements):
        first = next(e for e in elements if e.negated)
        yield error("negation is not allowed with 'strategy strict': strict already requires "
                    "consecutive events", first.span)
    if pattern.within.ms <= 0 and pattern.within.text:
        yield error(f"'within' must be positive, not {pattern.within.text}", pattern.within.span)
    for clause, expr in (("where", pattern.where), ("yield", pattern.yield_)):
        if expr is not None:
            yield from _check_pattern_expr(expr, variables, clause)
            yield from _check_names(expr, clause, variables)
    if pattern.yield_ is not None:
        for node in _bare_attributes(pattern.yield_):
            element = variables.get(node.var)
            if element is not None and element.kleene:
                yield error(f"'{node.var}' is Kleene: yield one value of it with an aggregate, e.g. "
                            f"last({node.var}.{node.attr}) or avg({node.var}.value)", node.span)
    for condition in _conjuncts(pattern.where):
        negated = sorted({n.var for n in ast.walk(condition) if isinstance(n, ast.Attribute)
                          and n.var in variables and variables[n.var].negated})
        if len(negated) > 1:
            yield error(f"a condition may read one negated variable, this one reads {', '.join(negated)}; "
                        f"split it with 'and'", condition.span)


def _check_operator(name: str, arity: int, context: Context, span) -> Iterator[Diagnostic]:
    known = context.operators
    if name not in known:
        wanted = [n for n, a in known.items() if a == arity]
        yield error(f"unknown {'unary' if arity == 1 else 'binary'} operator '{name}'{did_you_mean(name, wanted)}"
                    f" (registered: {', '.join(sorted(wanted)) or 'none'}; register your own with "
                    f"sscript compile --operators FILE.py)", span)
    elif known[name] != arity:
        where = "on an element, as name(STREAM)" if known[name] == 1 else "between elements, as ->[name]"
        yield error(f"'{name}' is a {'unary' if known[name] == 1 else 'binary'} operator: write it {where}", span)


def _conjuncts(expr):
    if expr is None:
        return []
    if isinstance(expr, ast.Binary) and expr.op == "and":
        return _conjuncts(expr.left) + _conjuncts(expr.right)
    return [expr]


def _bare_attributes(expr) -> list[ast.Attribute]:
    """Attributes read outside any aggregate."""
    found = []

    def visit(node):
        if isinstance(node, ast.Call):
            return
        if isinstance(node, ast.Attribute):
            found.append(node)
        for child in ast.children(node):
            visit(child)

    visit(expr)
    return found


def _is_name(node) -> bool:
    """A sensor or stream name: a quoted string, VAR.sensor, or first/last(VAR.sensor)."""
    if isinstance(node, ast.String):
        return True
    if isinstance(node, ast.Attribute):
        return node.attr == "sensor"
    return isinstance(node, ast.Call) and node.func in ("first", "last") and len(node.args) == 1 \
        and isinstance(node.args[0], ast.Attribute) and node.args[0].attr == "sensor"


def _check_names(expr, clause: str, variables) -> Iterator[Diagnostic]:
    """Names (sensors, streams, quoted text) are only compared, with == or !=, to other names."""
    if isinstance(expr, ast.Binary) and expr.op in ("==", "!="):
        left, right = _is_name(expr.left), _is_name(expr.right)
        if left and right:
            return
        if left or right:
            yield error("a sensor name can only be compared with another name: write e.g. "
                        "a.sensor == \"8TL3-N\" or a.sensor == b.sensor", expr.span)
            return
    if _is_name(expr):
        if isinstance(expr, ast.Attribute) and expr.var not in variables:
            return  # an unknown variable, reported apart
        yield error(f"a name cannot be used as a number in '{clause}': compare it with == or != "
                    f"(e.g. a.sensor == \"8TL3-N\")", expr.span)
        return
    for child in ast.children(expr):
        yield from _check_names(child, clause, variables)


def _check_pattern_expr(expr: ast.Expr, variables: dict[str, ast.PatternElement],
                        clause: str) -> Iterator[Diagnostic]:
    aggregated: set[int] = set()
    for node in ast.walk(expr):
        if isinstance(node, ast.Call):
            yield from _check_aggregate(node, variables, clause)
            aggregated.update(id(a) for a in node.args)
        elif isinstance(node, ast.Attribute) and id(node) not in aggregated:
            yield from _check_attribute(node, variables, clause)
        elif isinstance(node, ast.Ref) and id(node) not in aggregated:
            yield error(f"unknown pattern variable '{node.name}'{did_you_mean(node.name, variables)} "
                        f"(in '{clause}' write VAR.value, VAR.ts or VAR.sensor)", node.span)
        elif isinstance(node, (ast.Window, ast.Union_, ast.Duration)):
            yield error(f"not valid in a pattern's '{clause}'", node.span)


def _check_attribute(node: ast.Attribute, variables, clause: str) -> Iterator[Diagnostic]:
    element = variables.get(node.var)
    if element is None:
        yield error(f"unknown pattern variable '{node.var}'{did_you_mean(node.var, variables)}", node.span)
    elif node.attr not in EVENT_ATTRIBUTES:
        yield error(f"unknown attribute '{node.attr}'{did_you_mean(node.attr, EVENT_ATTRIBUTES)} "
                    f"(an event has {', '.join(EVENT_ATTRIBUTES)})", node.span)
    elif clause == "yield" and element.negated:
        yield error(f"'{node.var}' is negated: it binds no event, so yield cannot read it", node.span)


def _check_aggregate(call: ast.Call, variables, clause: str) -> Iterator[Diagnostic]:
    if call.func not in PATTERN_AGGREGATES:
        yield error(f"unknown aggregate '{call.func}'{did_you_mean(call.func, PATTERN_AGGREGATES)} "
                    f"(over a Kleene variable: {', '.join(PATTERN_AGGREGATES)})", call.span)
        return
    if len(call.args) != 1:
        yield error(f"{call.func}() takes one argument: "
                    + ("a Kleene variable, count(c)" if call.func == "count" else f"{call.func}(c.value)"),
                    call.span)
        return
    arg = call.args[0]
    if call.func == "count":
        var = arg.name if isinstance(arg, ast.Ref) else None
        if var is None:
            yield error("count() takes a Kleene variable: count(c)", arg.span)
            return
    else:
        if not isinstance(arg, ast.Attribute):
            yield error(f"{call.func}() takes an attribute of a Kleene variable: {call.func}(c.value)", arg.span)
            return
        var = arg.var
        yield from _check_attribute(arg, variables, clause)
        if arg.attr == "sensor" and call.func not in ("first", "last"):
            yield error(f"{call.func}() needs a number; 'sensor' is a name", arg.span)
    element = variables.get(var)
    if element is None:
        if call.func == "count":
            yield error(f"unknown pattern variable '{var}'{did_you_mean(var, variables)}", arg.span)
    elif not element.kleene:
        yield error(f"{call.func}() aggregates over a Kleene variable, and '{var}' is not one "
                    f"(bind it as '{var}: {element.stream.name}+')", call.span)


CHECKS: tuple[Check, ...] = (
    check_redefinitions,
    check_definitions,
    check_references,
    check_cycles,
    check_magnitudes,
    check_patterns,
)
