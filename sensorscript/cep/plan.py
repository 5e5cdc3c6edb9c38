"""A pattern's operator tree: its conditions, where each is tested, in which order, and the shape.

The passes, in order (the Cesar paper, ../shared/papers/000, §3-4):

1. `split_conditions`: `where` is split at its top-level `and`s; each condition knows the
   elements it reads, those it aggregates over, and the negated element it belongs to.
2. `estimate`: each condition's pass probability, measured by an earlier run of the job when
   OUT/selectivity.json has it, else estimated from its form (== 0.1, != 0.9, an inequality
   1/3, `and` multiplies, `or` adds less the overlap, `not` complements).
3. `shapes`: every binary tree over the positive elements in order (left-deep, right-deep and
   bushy; strategy next and registered links keep the left-deep chain, the only shape whose
   composition is element by element). There are Catalan(n - 1) of them, 429 for 8 elements
   but 2.7 million for 15: beyond SEARCHED_SHAPES elements only the two chains are compared.
4. `push_down`: each condition goes to the lowest operator that binds every element it reads (a
   condition on one element to its leaf), each negation to the lowest join spanning its gap and
   its conditions' elements; a trailing negation is tested when the match is whole.
5. `order`: the conditions on one operator by ascending pass probability, so that the most
   selective runs first on the most rows.
6. `cost`: the estimated work per second of each shape, from the rates of the pattern's streams
   (sensor frequencies, window slides), `within` and the probabilities; the cheapest is kept.

`plan_pattern` runs them and returns the runtime's declaration with its explanation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

from sensorscript.runtime.plan import program as rt
from sensorscript.runtime.state.cep.operators import FOLLOWED_BY, registered

DEFAULT_LIMIT = 10_000  # partial matches per key and operator, unless the pattern or the job says otherwise
SEARCHED_SHAPES = 8  # positive elements up to which every tree shape is costed
_COMPARISON_PROBABILITY = {"==": 0.1, "!=": 0.9, ">": 1 / 3, ">=": 1 / 3, "<": 1 / 3, "<=": 1 / 3}
# Relative costs of the cost model: a candidate pair examined, a condition tested, a composite made.
PAIR, TEST, MAKE = 1.0, 1.0, 2.0


@dataclass(frozen=True)
class Options:
    """Switches for the paper's ablation (scripts/bench_cep.py); the compiler uses the defaults."""

    pushdown: bool = True
    ordering: bool = True
    shape: str | None = None  # force "left", "right" or a shape's text; None: the cheapest


@dataclass(frozen=True)
class Description:
    """A pattern node's key, by name (graph/build.py makes it)."""

    elements: tuple[tuple[bool, bool, str, str | None], ...]  # (negated, kleene, input node, unary operator)
    where: tuple | None
    within: int
    strategy: str
    emit: str
    partition_by: str | None
    yield_: tuple | None
    links: tuple[str | None, ...]
    limit: int | None

    @staticmethod
    def of(key: tuple) -> "Description":
        return Description(*key[1])


@dataclass
class PatternPlan:
    pattern: rt.Pattern  # without feeds: placement decides what each partition reads
    shapes: list[tuple[str, float]]  # every shape compared, with its estimated cost
    chosen: str
    measured: bool  # the probabilities came from an earlier run
    placement: dict[int, str] = field(default_factory=dict)  # condition -> where it is tested
    negation_placement: dict[int, str] = field(default_factory=dict)


# ------------------------------------------------------------------------------ conditions


def split_conditions(where: tuple | None) -> list[tuple]:
    if where is None:
        return []
    if where[0] == "and":
        return split_conditions(where[1]) + split_conditions(where[2])
    return [where]


def reads(expression: tuple) -> tuple[set[int], set[int]]:
    """(elements read, elements read inside an aggregate)."""
    every, aggregated = set(), set()

    def visit(e, inside: bool) -> None:
        if not isinstance(e, tuple) or not e:
            return
        if e[0] in ("attr", "var"):
            every.add(e[1])
            if inside:
                aggregated.add(e[1])
            return
        if e[0] in ("num", "code", "str", "stream", "sensor"):
            return
        if e[0] == "call":
            for child in e[2:]:
                visit(child, True)
            return
        for child in e[1:]:
            visit(child, inside)

    visit(expression, False)
    return every, aggregated


def estimate(expression: tuple) -> float:
    """A condition's pass probability from its form alone."""
    kind = expression[0]
    if kind in _COMPARISON_PROBABILITY:
        return _COMPARISON_PROBABILITY[kind]
    if kind == "and":
        return estimate(expression[1]) * estimate(expression[2])
    if kind == "or":
        a, b = estimate(expression[1]), estimate(expression[2])
        return a + b - a * b
    if kind == "not":
        return 1 - estimate(expression[1])
    return 0.5


# ---------------------------------------------------------------------------------- shapes


def shapes(positives: tuple[int, ...]) -> list[tuple]:
    """Every binary tree over the elements in order: ("leaf", i) or ("join", left, right)."""
    return list(_shapes(positives))


@lru_cache(maxsize=None)
def _shapes(positives: tuple[int, ...]) -> tuple:
    if len(positives) == 1:
        return (("leaf", positives[0]),)
    out = []
    for cut in range(1, len(positives)):
        for left in _shapes(positives[:cut]):
            for right in _shapes(positives[cut:]):
                out.append(("join", left, right))
    return tuple(out)


def left_deep(positives: tuple[int, ...]) -> tuple:
    tree = ("leaf", positives[0])
    for i in positives[1:]:
        tree = ("join", tree, ("leaf", i))
    return tree


def shape_text(tree: tuple, names: tuple[str, ...]) -> str:
    if tree[0] == "leaf":
        return names[tree[1]]
    return f"({shape_text(tree[1], names)} {shape_text(tree[2], names)})"


def elements_of(tree: tuple) -> set[int]:
    return {tree[1]} if tree[0] == "leaf" else elements_of(tree[1]) | elements_of(tree[2])


# ---------------------------------------------------------------------------- the plan


@dataclass
class _Pattern:
    """What the passes read: the description with its conditions and rates."""

    description: Description
    conditions: list[rt.Condition]
    positives: tuple[int, ...]
    gaps: dict[int, tuple[int, int | None]]  # negated element -> (positive before, positive after or None)
    rates: list[float]  # events per second of each element's stream, per key
    keys: float  # how many keys (sensors, with partition by sensor)
    variables: tuple[str, ...] = ()


def plan_pattern(node_id: str, key: tuple, variables: tuple[str, ...], rates: dict[str, float],
                 sensor_codes: dict[str, int], keys: int = 1, measured: dict | None = None,
                 options: Options = Options(), limit: int = DEFAULT_LIMIT) -> PatternPlan:
    """The operator tree of one pattern node. `rates`: tuples per second of every stream;
    `measured`: condition index (as text) -> [tested, passed] from an earlier run."""
    d = Description.of(key)
    streams = list(dict.fromkeys(input_id for _, _, input_id, _ in d.elements))
    links = (None,) + tuple(d.links)
    elements = tuple(rt.Element(variables[i], streams.index(input_id), kleene, negated, operator, links[i])
                     for i, (negated, kleene, input_id, operator) in enumerate(d.elements))
    positives = tuple(i for i, e in enumerate(elements) if not e.negated)
    gaps = {}
    for i, e in enumerate(elements):
        if e.negated:
            gaps[i] = (max(j for j in positives if j < i), min((j for j in positives if j > i), default=None))
    conditions = []
    is_measured = False
    for index, expression in enumerate(split_conditions(d.where)):
        every, aggregated = reads(expression)
        negated = next((i for i in every if elements[i].negated), -1)
        probability = estimate(expression)
        seen = (measured or {}).get(str(index))
        if seen and seen[0] >= 100:  # enough rows tested to trust the measure
            probability, is_measured = max(seen[1], 0.5) / seen[0], True
        conditions.append(rt.Condition(_codes(expression, sensor_codes), tuple(sorted(every)),
                                       tuple(sorted(aggregated)), negated, probability))
    per_key = max(keys, 1)
    spec = _Pattern(d, conditions, positives, gaps,
                    [rates.get(d.elements[i][2], 1.0) / per_key for i in range(len(elements))], per_key, variables)
    # Tested once a match is whole: a trailing negation (with its own conditions, which only it
    # reads), and under strategy next the conditions no element could test earlier.
    trailing_conditions = tuple(c for c, condition in enumerate(conditions)
                                if condition.negated in gaps and gaps[condition.negated][1] is None)
    final_conditions: tuple[int, ...] = ()
    final_negations = tuple(i for i, (_, after) in gaps.items() if after is None)
    named_links = any(link is not None for link in d.links)
    if d.strategy == "next":
        tree, placement, negation_placement = _chain(spec, elements, options)
        final_conditions = tuple(tree[2]) + final_conditions
        final_negations = tuple(tree[3]) + final_negations
        compared = [(shape_text(left_deep(positives), variables), _cost(spec, left_deep(positives), options))]
        chosen = compared[0][0]
    else:
        if named_links:
            candidates = [left_deep(positives)]
        elif len(positives) > SEARCHED_SHAPES:
            candidates = [left_deep(positives), _right_deep(positives)]
        else:
            candidates = shapes(positives)
        compared = [(shape_text(t, variables), _cost(spec, t, options)) for t in candidates]
        if options.shape == "left":
            pick = left_deep(positives)
        elif options.shape == "right":
            pick = _right_deep(positives)
        elif options.shape is not None:
            pick = next(t for t in candidates if shape_text(t, variables) == options.shape)
        else:
            pick = min(candidates, key=lambda t: (_cost(spec, t, options), shape_text(t, variables)))
        chosen = shape_text(pick, variables)
        tree, placement, negation_placement = _place(spec, pick, "", options)
    for c in trailing_conditions:
        placement.setdefault(c, "when the match is whole (with the trailing negation)")
    pattern = rt.Pattern(
        id=node_id, feeds=(), elements=elements, within=d.within, tree=tree, conditions=tuple(conditions),
        final=(_ordered(spec, final_conditions, options), final_negations),
        strategy=d.strategy, emit=d.emit, by_sensor=d.partition_by == "sensor",
        yield_=_codes(d.yield_, sensor_codes) if d.yield_ is not None else None,
        limit=d.limit or limit)
    return PatternPlan(pattern, compared, chosen, is_measured, placement, negation_placement)


def _right_deep(positives: tuple[int, ...]) -> tuple:
    tree = ("leaf", positives[-1])
    for i in reversed(positives[:-1]):
        tree = ("join", ("leaf", i), tree)
    return tree


def _codes(expression, sensor_codes: dict[str, int]):
    """Quoted names as the codes events carry: a stream's from its node id, a sensor's from the job's
    table (-1, which no event carries, for a sensor the job does not read)."""
    if not isinstance(expression, tuple) or not expression:
        return expression
    if expression[0] == "stream":
        return ("code", rt.derived_code(expression[1]))
    if expression[0] == "sensor":
        return ("code", sensor_codes.get(expression[1], -1))
    return tuple(_codes(e, sensor_codes) for e in expression)


def _ordered(spec: _Pattern, indices, options: Options) -> tuple[int, ...]:
    indices = sorted(indices)
    if options.ordering:
        indices.sort(key=lambda c: (spec.conditions[c].probability, c))
    return tuple(indices)


def _positive_reads(spec: _Pattern, condition: rt.Condition) -> set[int]:
    return {i for i in condition.positions if i in spec.positives}


def _place(spec: _Pattern, tree: tuple, path: str, options: Options):
    """The runtime tree with conditions and negations pushed down (or all at the root)."""
    placement: dict[int, str] = {}
    negation_placement: dict[int, str] = {}
    assigned: dict[str, list[int]] = {}
    negations_at: dict[str, list[int]] = {}
    nodes = _paths(tree, "")
    root_elements = elements_of(tree)
    for c, condition in enumerate(spec.conditions):
        if condition.negated != -1:
            continue
        wanted = _positive_reads(spec, condition) or {min(root_elements)}
        home = _lowest(nodes, wanted) if options.pushdown else ""
        assigned.setdefault(home, []).append(c)
    for m, (before, after) in spec.gaps.items():
        if after is None:
            continue
        wanted = {before, after} | {i for c in spec.conditions if c.negated == m for i in _positive_reads(spec, c)}
        home = _lowest(nodes, wanted) if options.pushdown else ""
        negations_at.setdefault(home, []).append(m)

    def build(node: tuple, at: str) -> tuple:
        conditions = _ordered(spec, assigned.get(at, []), options)
        where = (f"on each {spec.variables[node[1]]} event" if node[0] == "leaf"
                 else f"at the join {shape_text(node, spec.variables)}")
        for c in conditions:
            placement[c] = where
        if node[0] == "leaf":
            return ("leaf", node[1], conditions)
        negated = tuple(negations_at.get(at, []))
        for m in negated:
            negation_placement[m] = where
        return ("join", build(node[1], at + "L"), build(node[2], at + "R"), conditions, negated)

    return build(tree, path), placement, negation_placement


def _paths(tree: tuple, at: str) -> list[tuple[str, set[int]]]:
    """(path, elements) of every node, deepest first."""
    found = [(at, elements_of(tree))]
    if tree[0] == "join":
        found = _paths(tree[1], at + "L") + _paths(tree[2], at + "R") + found
    return found


def _lowest(nodes: list[tuple[str, set[int]]], wanted: set[int]) -> str:
    """The smallest subtree holding every wanted element."""
    fitting = [(len(elements), path) for path, elements in nodes if wanted <= elements]
    return min(fitting)[1]


def _chain(spec: _Pattern, elements, options: Options):
    """Strategy next: the left-deep chain, each condition and negation tested as soon as the
    elements it reads are bound (and an aggregated Kleene closure is closed)."""
    positives = spec.positives
    at_step: dict[int, list[int]] = {}
    negations_at: dict[int, list[int]] = {}
    closure: dict[int, list[int]] = {}
    placement: dict[int, str] = {}
    negation_placement: dict[int, str] = {}

    def first_step(wanted: set[int], aggregated: set[int]) -> int | None:
        for step, element in enumerate(positives):
            if wanted <= set(positives[:step + 1]) and not (elements[element].kleene and element in aggregated):
                return step
        return None

    for c, condition in enumerate(spec.conditions):
        wanted = _positive_reads(spec, condition) or {positives[0]}
        if condition.negated != -1:
            continue
        step = first_step(wanted, set(condition.aggregated)) if options.pushdown else None
        if step is None:
            step = len(positives)  # when the match is whole
        at_step.setdefault(step, []).append(c)
        for element in positives:
            if elements[element].kleene and element in condition.positions and element not in condition.aggregated \
                    and wanted <= set(positives[:positives.index(element) + 1]):
                closure.setdefault(element, []).append(c)
    for m, (before, after) in spec.gaps.items():
        if after is None:
            continue
        mine = [c for c in spec.conditions if c.negated == m]
        wanted = {before, after} | {i for c in mine for i in _positive_reads(spec, c)}
        aggregated = {i for c in mine for i in c.aggregated}
        step = first_step(wanted, aggregated) if options.pushdown else None
        negations_at.setdefault(len(positives) if step is None else step, []).append(m)
    steps = []
    for step, element in enumerate(positives):
        conditions = _ordered(spec, at_step.get(step, []), options)
        for c in conditions:
            placement[c] = f"when {elements[element].var} is bound"
        for m in negations_at.get(step, []):
            negation_placement[m] = f"when {elements[element].var} is bound"
        steps.append((element, conditions, tuple(negations_at.get(step, [])),
                      _ordered(spec, closure.get(element, []), options)))
    # What no step could test goes to the end (with the trailing negation's).
    end = _ordered(spec, at_step.get(len(positives), []), options)
    for c in end:
        placement[c] = "when the match is whole"
    tree = ("chain", tuple(steps), end, tuple(negations_at.get(len(positives), [])))
    return tree, placement, negation_placement


# ------------------------------------------------------------------------------ the cost


def _cost(spec: _Pattern, tree: tuple, options: Options) -> float:
    """Estimated work per second of a tree: candidates examined, conditions tested, composites made."""
    placed, _, _ = _place(spec, tree, "", options)
    total, _ = _node_cost(spec, placed)
    return total


def _node_cost(spec: _Pattern, node: tuple) -> tuple[float, float]:
    """(cost per second, composites per second) of a placed subtree."""
    within_s = spec.description.within / 1000
    if node[0] == "leaf":
        _, element, conditions = node
        rate = spec.rates[element]
        cost, passing = _tests(spec, rate, conditions)
        out = rate * passing
        if spec.description.elements[element][1]:  # Kleene: closures of the passing events
            window_events = out * within_s
            if spec.description.strategy == "strict":
                closures = max(1.0, window_events)
            else:
                closures = min(2.0 ** min(window_events, 60), float(spec.description.limit or DEFAULT_LIMIT))
            out *= closures
            cost += out * MAKE
        return cost * spec.keys, out
    _, left, right, conditions, negations = node
    left_cost, left_rate = _node_cost(spec, left)
    right_cost, right_rate = _node_cost(spec, right)
    if spec.description.strategy == "strict":
        total_rate = sum(spec.rates[i] for i in set(range(len(spec.rates))))
        candidates = left_rate * min(1.0, right_rate / max(total_rate, 1e-9))
    else:
        candidates = left_rate * right_rate * within_s / 2
    cost, passing = _tests(spec, candidates, conditions)
    passing *= 0.5 ** len(negations)
    out = candidates * passing
    own = (candidates * PAIR + cost + out * MAKE) * spec.keys
    return left_cost + right_cost + own, out


def _tests(spec: _Pattern, rows: float, conditions) -> tuple[float, float]:
    """(cost of testing the conditions in this order on `rows`, the fraction passing all)."""
    cost, passing = 0.0, 1.0
    for c in conditions:
        cost += rows * passing * TEST
        passing *= spec.conditions[c].probability
    return cost, passing


def operator_names() -> set[str]:
    return {name for name in registered() if name != FOLLOWED_BY}


def log_cost(value: float) -> str:
    if value >= 1e12:
        return f"1e{math.log10(value):.0f}"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


# --------------------------------------------------------------------------------- text

_INFIX = {"+", "-", "*", "/", ">", ">=", "<", "<=", "==", "!=", "and", "or"}


def condition_text(expression: tuple, variables: tuple[str, ...], names: dict[int, str] | None = None) -> str:
    """A canonical pattern expression as the script would write it (names: code -> quoted name)."""
    kind = expression[0]
    if kind == "num":
        value = expression[1]
        return str(int(value)) if float(value).is_integer() else repr(value)
    if kind == "attr":
        return f"{variables[expression[1]]}.{expression[2]}"
    if kind == "var":
        return variables[expression[1]]
    if kind == "code":
        return f'"{(names or {}).get(expression[1], expression[1])}"'
    if kind in ("stream", "sensor"):
        return f'"{expression[1]}"'
    if kind == "neg":
        return f"-{condition_text(expression[1], variables, names)}"
    if kind == "not":
        return f"not {condition_text(expression[1], variables, names)}"
    if kind == "call":
        return f"{expression[1]}(" + ", ".join(condition_text(a, variables, names) for a in expression[2:]) + ")"
    if kind in _INFIX:
        left, right = (condition_text(e, variables, names) for e in expression[1:])
        wrap = lambda e, t: f"({t})" if e[0] in _INFIX else t  # noqa: E731
        return f"{wrap(expression[1], left)} {kind} {wrap(expression[2], right)}"
    return repr(expression)


def describe(plan: PatternPlan, names: dict[int, str] | None = None) -> list[str]:
    """The operator tree for people: shape, where each condition is tested and in which order, the
    shapes compared and where the probabilities came from."""
    pattern = plan.pattern
    variables = tuple(e.var for e in pattern.elements)
    lines = [f"tree {plan.chosen} (strategy {pattern.strategy}, emit {pattern.emit}"
             + (", partitioned by sensor" if pattern.by_sensor else "") + f", at most {pattern.limit:,} partial "
             f"matches per key and operator)"]
    for index, condition in enumerate(pattern.conditions):
        where = plan.placement.get(index) or (f"with the negation of {variables[condition.negated]}"
                                              if condition.negated != -1 else "?")
        lines.append(f"  {condition_text(condition.expression, variables, names)}: {where}, pass "
                     f"{condition.probability:.2f} ({'measured' if plan.measured else 'estimated'})")
    for element, where in sorted(plan.negation_placement.items()):
        lines.append(f"  no {variables[element]} between its neighbours: {where}")
    for element, e in enumerate(pattern.elements):
        if e.negated and element not in plan.negation_placement:
            lines.append(f"  no {variables[element]} until the window ends: when the match is whole")
    compared = sorted(plan.shapes, key=lambda item: item[1])
    lines.append("  shapes compared (estimated work/s): " + ", ".join(
        f"{text} {log_cost(cost)}{' <- chosen' if text == plan.chosen else ''}" for text, cost in compared[:6])
        + (f", and {len(compared) - 6} more" if len(compared) > 6 else ""))
    return lines
