"""The reference matcher: docs/LANGUAGE.md's "Patterns" in plain Python, by brute force. The oracle for the CEP stage.

It shares nothing with the job's matcher (sensorscript/runtime/state/cep/): it defines the built-in
operators itself, and calls a user's operator (Q, F and Z, docs/OPERATORS.md: user code, not the
product's) only when the caller hands it over (`match(..., operators={name: operator})`). It
enumerates assignments, keeps those that satisfy the pattern, then applies the strategy and the emit
rule, as docs/LANGUAGE.md ("Patterns") states them:

- The pattern's input is the multiset union of its elements' distinct streams, per key (the
  sensor, with `partition by sensor`; one key otherwise), in the total order of events: event time,
  then sensor (raw sensors by id, before derived streams by name: a derived event's sensor is its
  stream's name), then value, then stream.
- An assignment binds one event to each positive element (a non-empty run of events with strictly
  increasing times to a Kleene element; the events a unary operator keeps to a `v: op(S)` element).
  Its composites are folded left to right: each element's composite spans its events (or what the
  unary operator's F says), and the link before an element (`->`, or a binary operator) must accept
  the composite so far and the element's (Q), and makes the next (F). `within T`: the largest bound
  event time minus the smallest is below T.
- `where` is split at its top-level `and`s into conditions. A condition that reads a negated variable
  belongs to that negation; every other one must hold. A condition that reads a Kleene variable
  without an aggregate must hold for each of its events (for every combination, if it reads several).
  A division by zero makes a condition false.
- Negation `p -> !n -> q`: no event x of n's stream with p_last.ts < x.ts < q_first.ts satisfies all
  of n's conditions; trailing `p -> !n`: none with p_last.ts < x.ts < first.ts + T.
- Strategies: any (every assignment), strict (the bound events are consecutive in the input),
  next (each event that qualifies for the first element starts one run; each later element takes the
  earliest qualifying event; a Kleene element keeps taking qualifying events until the earliest event
  qualifying for the element after it, which ends it, or until the window ends).
- emit first: per start event (the first event bound), only the match with the smallest
  (ts, assignment) in the total order.
- Output: ts = the root composite's end (first.ts + T - 1 with a trailing negation), start_ts = its
  start (first.ts with a trailing negation), value = yield (1.0 by default; a division by zero skips
  the match and is counted), events = the bound events in order.
"""

from __future__ import annotations

import bisect
import itertools
import json
from dataclasses import dataclass

from sensorscript.parser import ast


@dataclass(frozen=True)
class Event:
    """One event of the pattern's input (docs/LANGUAGE.md, "Events"): `sensor` is a raw reading's
    sensor id, or the name of the stream that made a derived tuple; `code` is the number a unary
    operator sees as its sensor; `n` keeps arrival order among identical events."""

    k: int  # which of the pattern's distinct streams it came from
    ts: int
    value: float
    sensor: str
    derived: bool
    code: int
    n: int

    @property
    def key(self) -> tuple:
        """The total order of events: event time, then sensor (raw sensors by id, before derived
        streams by name), then value, then stream."""
        return (self.ts, self.derived, self.sensor, self.value, self.k, self.n)


@dataclass(frozen=True)
class Match:
    ts: int
    value: float
    start_ts: int
    end_ts: int
    events: tuple[tuple[str, int, float, str], ...]  # (variable, ts, value, sensor) in order

    def events_json(self) -> str:
        """The bound events in order, as the `events` column writes them
        (docs/LANGUAGE.md, "Output"): `[{"var":"a","ts":10,"value":1.5,"sensor":"S-1"},...]`, no blanks."""
        return json.dumps([{"var": var, "ts": ts, "value": float(value), "sensor": sensor}
                           for var, ts, value, sensor in self.events], separators=(",", ":"))


# -------------------------------------------------------------------------------- operators


@dataclass(frozen=True)
class Composite:
    """A partial match as a binary operator sees it (docs/OPERATORS.md): the interval its operators
    gave it (start, end), and the smallest and largest times of its events (first, last), on which
    `within` is measured."""

    start: int
    end: int
    first: int
    last: int


@dataclass(frozen=True)
class OperatorEvent:
    """An event as a unary operator sees it (docs/OPERATORS.md): `sensor` is the sensor's code."""

    ts: int
    value: float
    sensor: int


class FollowedBy:
    """`a -> b`: b after a; the composite spans from a's start to b's end."""

    def Q(self, left: Composite, right: Composite) -> bool:  # noqa: N802 (the operator model's names)
        return left.end < right.start

    def F(self, left: Composite, right: Composite) -> tuple[int, int]:  # noqa: N802
        return left.start, right.end


class AtFirst(FollowedBy):
    """`a ->[at_first] b` (docs/LANGUAGE.md, "Operators"): b after a, and the composite takes the
    time of its first event."""

    def F(self, left: Composite, right: Composite) -> tuple[int, int]:  # noqa: N802
        return left.start, left.start


class FirstOfRun:
    """`v: first_of_run(S)` (docs/LANGUAGE.md, "Operators"): one event per run of equal values, at
    its first. The state is the value of the event before."""

    def Q(self, state, event: OperatorEvent) -> bool:  # noqa: N802
        return state is None or event.value != state

    def F(self, state, event: OperatorEvent) -> tuple[int, int]:  # noqa: N802
        return event.ts, event.ts

    def Z(self, state, event: OperatorEvent):  # noqa: N802
        return event.value


FOLLOWED_BY = "->"
BUILT_IN = {FOLLOWED_BY: FollowedBy(), "at_first": AtFirst(), "first_of_run": FirstOfRun()}


class _DivisionByZero(Exception):
    pass


_ALIASES: dict[str, str] = {}


# ----------------------------------------------------------------------------- conditions


def conjuncts(expr: ast.Expr | None) -> list[ast.Expr]:
    """`a and b and c` -> [a, b, c]; anything else is one condition."""
    if expr is None:
        return []
    if isinstance(expr, ast.Binary) and expr.op == "and":
        return conjuncts(expr.left) + conjuncts(expr.right)
    return [expr]


def variables(expr: ast.Expr) -> tuple[set[str], set[str]]:
    """(every variable the expression reads, those it reads inside an aggregate)."""
    every, aggregated = set(), set()
    for node in ast.walk(expr):
        if isinstance(node, ast.Call):
            for arg in node.args:
                name = arg.name if isinstance(arg, ast.Ref) else arg.var if isinstance(arg, ast.Attribute) else None
                if name is not None:
                    aggregated.add(name)
                    every.add(name)
        elif isinstance(node, ast.Attribute):
            every.add(node.var)
    return every, aggregated


def _bare_kleene(expr: ast.Expr, kleene: set[str]) -> list[str]:
    """Kleene variables read without an aggregate somewhere in `expr`."""
    found = []

    def visit(node, inside_call: bool):
        if isinstance(node, ast.Call):
            for arg in node.args:
                visit(arg, True)
            return
        if isinstance(node, ast.Attribute) and not inside_call and node.var in kleene and node.var not in found:
            found.append(node.var)
        for child in ast.children(node):
            visit(child, inside_call)

    visit(expr, False)
    return found


def holds(condition: ast.Expr, env: dict, kleene: set[str]) -> bool:
    """A condition under bindings (var -> Event, or a list of Events for a Kleene variable)."""
    bare = _bare_kleene(condition, kleene)
    for combination in itertools.product(*(env[v] for v in bare)):
        local = {**env, **dict(zip(bare, combination))}
        try:
            if not _truth(evaluate(condition, local)):
                return False
        except _DivisionByZero:
            return False
    return True


def _truth(value) -> bool:
    return value != 0


def evaluate(expr: ast.Expr, env: dict):
    if isinstance(expr, ast.Number):
        return expr.value
    if isinstance(expr, ast.String):
        return _ALIASES.get(expr.value, expr.value)
    if isinstance(expr, ast.Attribute):
        return _attribute(env[expr.var], expr.attr)
    if isinstance(expr, ast.Unary):
        operand = evaluate(expr.operand, env)
        return -operand if expr.op == "-" else float(not _truth(operand))
    if isinstance(expr, ast.Call):
        return _aggregate(expr, env)
    if isinstance(expr, ast.Binary):
        left, right = evaluate(expr.left, env), evaluate(expr.right, env)
        op = expr.op
        if op == "/":
            if right == 0:
                raise _DivisionByZero
            return left / right
        if op == "+":
            return left + right
        if op == "-":
            return left - right
        if op == "*":
            return left * right
        if op == "and":
            return float(_truth(left) and _truth(right))
        if op == "or":
            return float(_truth(left) or _truth(right))
        return float({">": left > right, ">=": left >= right, "<": left < right, "<=": left <= right,
                      "==": left == right, "!=": left != right}[op])
    raise TypeError(f"not a pattern expression: {expr!r}")


def _attribute(event: Event, attr: str):
    return {"value": event.value, "ts": float(event.ts), "sensor": event.sensor}[attr]


def _aggregate(call: ast.Call, env: dict):
    arg = call.args[0]
    if call.func == "count":
        return float(len(env[arg.name]))
    values = [_attribute(e, arg.attr) for e in env[arg.var]]
    if call.func == "first":
        return values[0]
    if call.func == "last":
        return values[-1]
    if call.func == "min":
        return min(values)
    if call.func == "max":
        return max(values)
    total = 0.0
    for v in values:
        total += v
    return total if call.func == "sum" else total / len(values)


# ------------------------------------------------------------------------------- matching


class _Pattern:
    """The pattern's parts, by variable."""

    def __init__(self, pattern: ast.Pattern, operators: dict):
        self.pattern = pattern
        self.elements = pattern.elements
        self.positives = [i for i, e in enumerate(self.elements) if not e.negated]
        self.kleene = {e.var for e in self.elements if e.kleene}
        self.negated = {e.var for e in self.elements if e.negated}
        self.within = pattern.within.ms
        links = pattern.links or (None,) * (len(self.elements) - 1)
        # The link entering each element (None for the first).
        self.link_into = [None] + [_operator(operators, link or FOLLOWED_BY) for link in links]
        self.unary = {i: _operator(operators, e.operator) for i, e in enumerate(self.elements) if e.operator}
        self.conditions = []  # (condition, variables, aggregated variables, negated variable or None)
        for condition in conjuncts(pattern.where):
            every, aggregated = variables(condition)
            negated = [v for v in every if v in self.negated]
            self.conditions.append((condition, every, aggregated, negated[0] if negated else None))
        # For each negated element: its neighbours (the positive elements before and after, or None).
        self.gaps = {}
        for i, e in enumerate(self.elements):
            if e.negated:
                before = max(p for p in self.positives if p < i)
                after = min((p for p in self.positives if p > i), default=None)
                self.gaps[e.var] = (before, after)


def _operator(operators: dict, name: str):
    if name not in operators:
        raise KeyError(f"operator '{name}' is neither built in nor handed to the oracle (operators=...)")
    return operators[name]


def match(pattern: ast.Pattern, streams: list[list[Event]], element_stream: list[int],
          aliases: dict[str, str] | None = None, operators: dict | None = None) -> tuple[list[Match], int]:
    """Every match of `pattern` (its elements read streams[element_stream[i]]); and the matches a
    division by zero in `yield` skipped. `aliases`: a stream's names -> the name its events carry;
    `operators`: the user's operators the pattern names, by name (objects with Q and F, and Z for a
    unary one, as docs/OPERATORS.md describes them)."""
    global _ALIASES
    _ALIASES = aliases or {}
    spec = _Pattern(pattern, {**BUILT_IN, **(operators or {})})
    events = sorted((e for stream in streams for e in stream), key=lambda e: e.key)
    keys: dict[object, list[Event]] = {}
    for e in events:
        keys.setdefault(e.sensor if pattern.partition_by == "sensor" else None, []).append(e)
    found: list[tuple[tuple, Match]] = []
    skipped = 0
    for group in keys.values():
        spec.candidates = {i: _candidates(spec, i, group, element_stream) for i in spec.positives}
        # Event times, for binary searches that skip what lies outside a window: a pruning of the
        # enumeration, not a change of what it finds (keys of tens of thousands of events, #38).
        spec.times = [e.ts for e in group]
        spec.candidate_times = {i: [e.ts for e, _ in pairs] for i, pairs in spec.candidates.items()}
        spec.composites = {(i, id(e)): c for i, pairs in spec.candidates.items() for e, c in pairs}
        if pattern.strategy == "next":
            chosen = _next_runs(spec, group, element_stream)
        else:
            chosen = [a for a in _assignments(spec, group, element_stream) if _valid(spec, a, group, element_stream)]
        if pattern.strategy == "strict":
            position = {id(e): i for i, e in enumerate(group)}
            chosen = [a for a in chosen if _consecutive(a, position)]
        for assignment in chosen:
            out = _output(spec, assignment)
            if out is None:
                skipped += 1
            else:
                found.append((_order_key(assignment, out), out, _start(assignment)))
    found.sort(key=lambda item: item[0])
    if pattern.emit == "first":
        seen, first = set(), []
        for item in found:
            if id(item[2]) not in seen:
                seen.add(id(item[2]))
                first.append(item)
        found = first
    return [m for _, m, _ in found], skipped


# An assignment: per positive element index, an Event, or a tuple of Events (Kleene).

def _events_of(binding) -> tuple[Event, ...]:
    return binding if isinstance(binding, tuple) else (binding,)


def _start(assignment: dict) -> Event:
    return _events_of(assignment[min(assignment)])[0]


def _order_key(assignment: dict, out: Match) -> tuple:
    return (out.ts, tuple(tuple(e.key for e in _events_of(assignment[i])) for i in sorted(assignment)))


def _candidates(spec: _Pattern, i: int, group: list[Event], element_stream: list[int]) -> list[tuple[Event, Composite]]:
    """The events element i may bind, each with its composite (a unary operator's kept events)."""
    mine = [e for e in group if e.k == element_stream[i]]
    operator = spec.unary.get(i)
    if operator is None:
        return [(e, Composite(e.ts, e.ts, e.ts, e.ts)) for e in mine]
    kept, state = [], None
    for e in mine:
        seen = OperatorEvent(e.ts, e.value, e.code)
        if operator.Q(state, seen):
            start, end = operator.F(state, seen)
            kept.append((e, Composite(start, end, e.ts, e.ts)))
        state = operator.Z(state, seen)
    return kept


def _closures(events: list[tuple[Event, Composite]], within_from: int | None, limit: int):
    """Non-empty runs (strictly increasing times) of these events, as (events, composite)."""
    items = [e for e, _ in events]
    for size in range(1, len(items) + 1):
        for combination in itertools.combinations(items, size):
            if all(a.ts < b.ts for a, b in zip(combination, combination[1:])):
                if combination[-1].ts - combination[0].ts < limit:
                    first, last = combination[0].ts, combination[-1].ts
                    yield combination, Composite(first, last, first, last)


def _assignments(spec: _Pattern, group: list[Event], element_stream: list[int]) -> list[dict]:
    """Every assignment whose links accept it and which fits `within` (conditions checked apart)."""
    candidates = spec.candidates
    out = []

    def extend(position: int, assignment: dict, composite: Composite | None, low: int, high: int):
        if position == len(spec.positives):
            out.append(dict(assignment))
            return
        i = spec.positives[position]
        # Only events within the window of what is bound so far can join it (the rest could not
        # pass `within`): a pruning of the enumeration, not a change of what it finds.
        if composite is None:
            pool = candidates[i]
        else:
            times = spec.candidate_times[i]
            pool = [(e, c) for e, c in candidates[i][bisect.bisect_right(times, high - spec.within):
                                                     bisect.bisect_left(times, low + spec.within)]
                    if high - spec.within < e.ts < low + spec.within]
        if spec.elements[i].kleene:
            options = list(_closures(pool, None, spec.within))
        else:
            options = pool
        for binding, leaf in options:
            bound = _events_of(binding)
            new_low, new_high = min(low, bound[0].ts), max(high, bound[-1].ts)
            if new_high - new_low >= spec.within:
                continue
            if composite is None:
                joined = leaf
            else:
                link = spec.link_into[i]
                if not link.Q(composite, leaf):
                    continue
                start, end = link.F(composite, leaf)
                joined = Composite(start, end, new_low, new_high)
            assignment[i] = binding
            extend(position + 1, assignment, joined, new_low, new_high)
            del assignment[i]

    extend(0, {}, None, 2**63, -2**63)
    return out


def _env(spec: _Pattern, assignment: dict) -> dict:
    return {spec.elements[i].var: (list(b) if isinstance(b, tuple) else b) for i, b in assignment.items()}


def _valid(spec: _Pattern, assignment: dict, group: list[Event], element_stream: list[int]) -> bool:
    env = _env(spec, assignment)
    for condition, _, _, negated in spec.conditions:
        if negated is None and not holds(condition, env, spec.kleene):
            return False
    return all(_negation_holds(spec, var, env, assignment, group, element_stream) for var in spec.gaps)


def _negation_holds(spec: _Pattern, var: str, env: dict, assignment: dict, group: list[Event],
                    element_stream: list[int]) -> bool:
    index = next(i for i, e in enumerate(spec.elements) if e.var == var)
    before, after = spec.gaps[var]
    low = _events_of(assignment[before])[-1].ts
    if after is None:
        high = min(e.ts for b in assignment.values() for e in _events_of(b)) + spec.within
    else:
        high = _events_of(assignment[after])[0].ts
    mine = [c for c, _, _, negated in spec.conditions if negated == var]
    for x in group[bisect.bisect_right(spec.times, low):bisect.bisect_left(spec.times, high)]:
        if x.k == element_stream[index] and low < x.ts < high:
            if all(holds(c, {**env, var: x}, spec.kleene) for c in mine):
                return False
    return True


def _consecutive(assignment: dict, position: dict) -> bool:
    bound = [e for i in sorted(assignment) for e in _events_of(assignment[i])]
    return all(position[id(b)] == position[id(a)] + 1 for a, b in zip(bound, bound[1:]))


def _output(spec: _Pattern, assignment: dict) -> Match | None:
    bound = [(spec.elements[i].var, e) for i in sorted(assignment) for e in _events_of(assignment[i])]
    first = min(e.ts for _, e in bound)
    composite = _fold_composite(spec, assignment)
    if spec.positives[-1] < len(spec.elements) - 1:  # a trailing negation
        start, ts = first, first + spec.within - 1
    else:
        start, ts = composite.start, composite.end
    value = 1.0
    if spec.pattern.yield_ is not None:
        try:
            value = float(evaluate(spec.pattern.yield_, _env(spec, assignment)))
        except _DivisionByZero:
            return None
    return Match(ts, value, start, ts, tuple((v, e.ts, e.value, e.sensor) for v, e in bound))


# ---------------------------------------------------------------------------------- next


def _next_runs(spec: _Pattern, group: list[Event], element_stream: list[int]) -> list[dict]:
    """Skip-till-next-match: one run per event that qualifies for the first element."""
    runs = []
    first = spec.positives[0]
    candidates, leaf_of = spec.candidates, spec.composites
    order = {id(e): n for n, e in enumerate(group)}
    for start, leaf in candidates[first]:
        run = _run(spec, start, leaf, group, candidates, leaf_of, order, element_stream)
        if run is not None:
            runs.append(run)
    return runs


def _qualifies(spec: _Pattern, i: int, x: Event, assignment: dict, composite: Composite | None,
               group: list[Event], element_stream: list[int], leaf_of: dict, open_kleene: str | None) -> bool:
    """Whether x may be bound to element i, given the bindings so far (a Kleene closure still open
    is `open_kleene`: conditions aggregating over it wait until it closes)."""
    if (i, id(x)) not in leaf_of:
        return False
    bound = [e for b in assignment.values() for e in _events_of(b)]
    if bound and max(e.ts for e in bound + [x]) - min(e.ts for e in bound + [x]) >= spec.within:
        return False
    if composite is not None:
        leaf = leaf_of[(i, id(x))]
        if not spec.link_into[i].Q(composite, leaf):
            return False
    trial = {**assignment}
    if spec.elements[i].kleene:
        trial[i] = (x,) if i not in trial else trial[i] + (x,)
    else:
        trial[i] = x
    env = _env(spec, trial)
    bound_vars = {spec.elements[j].var for j in trial}
    for condition, every, aggregated, negated in spec.conditions:
        positive = {v for v in every if v not in spec.negated}
        if not positive <= bound_vars or (open_kleene is not None and open_kleene in aggregated):
            continue
        if negated is None:
            if not holds(condition, env, spec.kleene):
                return False
    for var, (before, after) in spec.gaps.items():
        if after is None or after not in trial or before not in trial:
            continue
        mine_vars = {v for c, every, _, negated in spec.conditions if negated == var for v in every}
        positive = {v for v in mine_vars if v not in spec.negated}
        if not positive <= bound_vars:
            continue
        if open_kleene is not None and any(open_kleene in agg for c, _, agg, negated in spec.conditions
                                           if negated == var):
            continue
        if not _negation_holds(spec, var, env, trial, group, element_stream):
            return False
    return True


def _run(spec: _Pattern, start: Event, leaf: Composite, group: list[Event], candidates, leaf_of, order,
         element_stream: list[int]) -> dict | None:
    positives = spec.positives
    first = positives[0]
    kleene_first = spec.elements[first].kleene
    if not _qualifies(spec, first, start, {}, None, group, element_stream, leaf_of,
                      spec.elements[first].var if kleene_first else None):
        return None
    assignment = {first: (start,) if kleene_first else start}
    composite = leaf
    position = 0
    # The events after the start, up to the end of its window (no later one can be bound).
    later = group[order[id(start)] + 1:bisect.bisect_left(spec.times, start.ts + spec.within)]
    cursor = 0
    while True:
        i = positives[position]
        following = positives[position + 1] if position + 1 < len(positives) else None
        if spec.elements[i].kleene:
            # Extend the closure until an event qualifies for the element after it (or the window ends).
            ended = False
            while cursor < len(later):
                x = later[cursor]
                cursor += 1
                low = min(e.ts for b in assignment.values() for e in _events_of(b))
                if x.ts - low >= spec.within:
                    cursor = len(later)
                    break
                closure = assignment[i]
                whole = _fold_composite(spec, assignment)
                opens = spec.elements[following].var if following is not None and \
                    spec.elements[following].kleene else None
                if following is not None and _qualifies(spec, following, x, assignment, whole, group,
                                                         element_stream, leaf_of, opens):
                    assignment[following] = (x,) if spec.elements[following].kleene else x
                    composite = _fold_composite(spec, assignment)
                    position += 1
                    ended = True
                    break
                if x.ts > closure[-1].ts and _qualifies_in_closure(spec, i, x, assignment, group, element_stream,
                                                                   leaf_of):
                    assignment[i] = closure + (x,)
            if not ended:
                if following is not None:
                    return None
                return assignment if _complete(spec, assignment, group, element_stream) else None
            continue
        if following is None:
            return assignment if _complete(spec, assignment, group, element_stream) else None
        found = False
        while cursor < len(later):
            x = later[cursor]
            cursor += 1
            low = min(e.ts for b in assignment.values() for e in _events_of(b))
            if x.ts - low >= spec.within:
                cursor = len(later)
                break
            open_kleene = spec.elements[following].var if spec.elements[following].kleene else None
            if _qualifies(spec, following, x, assignment, composite, group, element_stream, leaf_of, open_kleene):
                assignment[following] = (x,) if spec.elements[following].kleene else x
                composite = _fold_composite(spec, assignment)
                position += 1
                found = True
                break
        if not found:
            return None


def _qualifies_in_closure(spec: _Pattern, i: int, x: Event, assignment: dict, group, element_stream,
                          leaf_of) -> bool:
    """Whether x may join element i's open closure: its stream, and every condition that reads i
    without aggregating over it (and reads only bound variables) holds with x in the closure."""
    if (i, id(x)) not in leaf_of:
        return False
    trial = {**assignment, i: assignment[i] + (x,)}
    env = _env(spec, trial)
    var = spec.elements[i].var
    bound_vars = {spec.elements[j].var for j in trial}
    for condition, every, aggregated, negated in spec.conditions:
        positive = {v for v in every if v not in spec.negated}
        if negated is None and var in every and var not in aggregated and positive <= bound_vars:
            if not holds(condition, env, spec.kleene):
                return False
    return True


def _fold_composite(spec: _Pattern, assignment: dict) -> Composite:
    composite = None
    for i in sorted(assignment):
        bound = _events_of(assignment[i])
        if spec.elements[i].operator:
            leaf = spec.composites[(i, id(bound[0]))]
        else:
            leaf = Composite(bound[0].ts, bound[-1].ts, bound[0].ts, bound[-1].ts)
        if composite is None:
            composite = leaf
        else:
            start, end = spec.link_into[i].F(composite, leaf)
            composite = Composite(start, end, min(composite.first, leaf.first), max(composite.last, leaf.last))
    return composite


def _complete(spec: _Pattern, assignment: dict, group, element_stream) -> bool:
    """A finished run is a match when every condition and negation holds."""
    return _valid(spec, assignment, group, element_stream)
