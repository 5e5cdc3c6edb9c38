"""A pattern's operator tree: its conditions, where each is tested, in which order, and the shape.

The passes, in order (Cesar's: Meng et al. 2014, its sections 3-4; docs/REFERENCES.md):

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
from functools import cached_property, lru_cache

from sensorscript.runtime.plan import program as rt
from sensorscript.runtime.state.cep.conditions import reads, rename_elements
from sensorscript.runtime.state.cep.operators import FOLLOWED_BY, registered

DEFAULT_LIMIT = 10_000  # partial matches per key and operator, unless the pattern or the job says otherwise
SEARCHED_SHAPES = 8  # positive elements up to which every tree shape is costed
_COMPARISON_PROBABILITY = {"==": 0.1, "!=": 0.9, ">": 1 / 3, ">=": 1 / 3, "<": 1 / 3, "<=": 1 / 3}
# Relative costs of the cost model: a candidate pair examined, a condition tested, a composite made.
PAIR, TEST, MAKE = 1.0, 1.0, 2.0


@dataclass(frozen=True)
class Options:
    """Switches for the ablation of Meng et al. 2014 (scripts/bench_cep.py); the compiler uses the defaults."""

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
    pattern: rt.Pattern  # fed by its elements' streams (partitioned by sensor, placement feeds it its sources)
    shapes: list[tuple[str, float]]  # every shape compared, with its estimated cost
    chosen: str
    measured: bool  # the probabilities came from an earlier run
    placement: dict[int, str] = field(default_factory=dict)  # condition -> where it is tested
    negation_placement: dict[str, str] = field(default_factory=dict)  # negated element -> where


# ------------------------------------------------------------------------------ conditions


def split_conditions(where: tuple | None) -> list[tuple]:
    if where is None:
        return []
    if where[0] == "and":
        return split_conditions(where[1]) + split_conditions(where[2])
    return [where]


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


Tree = rt.Leaf | rt.Join


def shapes(positives: tuple[str, ...]) -> list[Tree]:
    """Every binary tree over the elements in order (nothing tested yet)."""
    return list(_shapes(positives))


@lru_cache(maxsize=None)
def _shapes(positives: tuple[str, ...]) -> tuple[Tree, ...]:
    if len(positives) == 1:
        return (rt.Leaf(positives[0]),)
    out = []
    for cut in range(1, len(positives)):
        for left in _shapes(positives[:cut]):
            for right in _shapes(positives[cut:]):
                out.append(rt.Join(left, right))
    return tuple(out)


def left_deep(positives: tuple[str, ...]) -> Tree:
    tree: Tree = rt.Leaf(positives[0])
    for element in positives[1:]:
        tree = rt.Join(tree, rt.Leaf(element))
    return tree


def shape_text(tree: Tree) -> str:
    if isinstance(tree, rt.Leaf):
        return tree.element
    return f"({shape_text(tree.left)} {shape_text(tree.right)})"


# ---------------------------------------------------------------------------- the plan


@dataclass
class _Pattern:
    """What the passes read: the description with its conditions and rates."""

    description: Description
    elements: dict[str, rt.Element]  # by variable, in order
    conditions: list[rt.Condition]
    positives: tuple[str, ...]
    gaps: dict[str, tuple[str, str | None]]  # negated element -> (positive before, positive after or None)
    rates: dict[str, float]  # events per second of each element's stream, per key
    keys: float  # how many keys (sensors, with partition by sensor)

    @cached_property
    def number(self) -> dict[str, int]:
        """Each condition's place in `conditions`, by its text."""
        return {c.text: n for n, c in enumerate(self.conditions)}


def plan_pattern(node_id: str, key: tuple, variables: tuple[str, ...], rates: dict[str, float],
                 sensor_codes: dict[str, int], keys: int = 1, measured: dict | None = None,
                 options: Options = Options(), limit: int = DEFAULT_LIMIT) -> PatternPlan:
    """The operator tree of one pattern node. `rates`: tuples per second of every stream;
    `measured`: condition index (as text) -> [tested, passed] from an earlier run."""
    d = Description.of(key)
    links = (None,) + tuple(d.links)
    elements = tuple(rt.Element(variables[i], kleene=kleene, negated=negated, operator=operator, link=links[i])
                     for i, (negated, kleene, _, operator) in enumerate(d.elements))
    streams: dict[str, tuple[str, ...]] = {}
    for var, (_, _, input_id, _) in zip(variables, d.elements):
        streams[input_id] = streams.get(input_id, ()) + (var,)
    positives = tuple(e.var for e in elements if not e.negated)
    gaps = {}
    for i, e in enumerate(elements):
        if e.negated:
            before = [f.var for f in elements[:i] if not f.negated]
            after = [f.var for f in elements[i + 1:] if not f.negated]
            gaps[e.var] = (before[-1], after[0] if after else None)
    conditions: list[rt.Condition] = []
    is_measured = False
    for expression in split_conditions(d.where):
        text = condition_text(rename_elements(expression, variables))
        if any(c.text == text for c in conditions):  # written twice: one condition (the tree names them by text)
            continue
        every, aggregated = reads(expression)
        negated = next((i for i in sorted(every) if elements[i].negated), None)
        probability = estimate(expression)
        seen = (measured or {}).get(str(len(conditions)))
        if seen and seen[0] >= 100:  # enough rows tested to trust the measure
            probability, is_measured = max(seen[1], 0.5) / seen[0], True
        conditions.append(rt.Condition(
            text=text, expression=_declared(expression, variables, sensor_codes),
            reads=tuple(variables[i] for i in sorted(every)),
            aggregates=tuple(variables[i] for i in sorted(aggregated)),
            negation=None if negated is None else variables[negated], probability=probability))
    per_key = max(keys, 1)
    rate = {var: rates.get(input_id, 1.0) / per_key for var, (_, _, input_id, _) in zip(variables, d.elements)}
    spec = _Pattern(d, {e.var: e for e in elements}, conditions, positives, gaps, rate, per_key)
    # Tested once a match is whole: a trailing negation (with its own conditions, which only it
    # reads), and under strategy next the conditions no element could test earlier.
    trailing_conditions = tuple(c for c, condition in enumerate(conditions)
                                if condition.negation in gaps and gaps[condition.negation][1] is None)
    trailing = tuple(var for var, (_, after) in gaps.items() if after is None)
    named_links = any(link is not None for link in d.links)
    declared_yield = _declared(d.yield_, variables, sensor_codes) if d.yield_ is not None else None
    if d.strategy == "next" or _first_is_next(d, elements, positives, trailing, named_links, declared_yield):
        tree, end, placement, negation_placement = _chain(spec, options)
        whole = rt.Whole(conditions=end.conditions, negations=end.negations + trailing)
        compared = [(shape_text(left_deep(positives)), _cost(spec, left_deep(positives), options))]
        chosen = compared[0][0]
    else:
        if named_links:
            candidates = [left_deep(positives)]
        elif len(positives) > SEARCHED_SHAPES:
            candidates = [left_deep(positives), _right_deep(positives)]
        else:
            candidates = shapes(positives)
        compared = [(shape_text(t), _cost(spec, t, options)) for t in candidates]
        if options.shape == "left":
            pick = left_deep(positives)
        elif options.shape == "right":
            pick = _right_deep(positives)
        elif options.shape is not None:
            pick = next(t for t in candidates if shape_text(t) == options.shape)
        else:
            pick = min(candidates, key=lambda t: (_cost(spec, t, options), shape_text(t)))
        chosen = shape_text(pick)
        tree, placement, negation_placement = _place(spec, pick, options)
        whole = rt.Whole(negations=trailing)
    for c in trailing_conditions:
        placement.setdefault(c, "when the match is whole (with the trailing negation)")
    pattern = rt.Pattern(
        id=node_id, feeds=tuple(rt.Feed(stream=s, elements=read) for s, read in streams.items()), elements=elements,
        within=d.within, tree=tree, conditions=tuple(conditions), whole=whole,
        strategy=d.strategy, emit=d.emit, by_sensor=d.partition_by == "sensor",
        yield_=declared_yield,
        limit=d.limit or limit)
    return PatternPlan(pattern, compared, chosen, is_measured, placement, negation_placement)


def _first_is_next(d, elements: tuple, positives: tuple[str, ...], trailing: tuple, named_links: bool,
                   yield_) -> bool:
    """Whether `strategy any emit first` emits what `next` does, so that it runs as runs (#38: a
    start that waits costs each event a search, not a pair per partial match of the window): two
    plain positive elements, negations between them alone, no operator of the user's, and no
    division in `yield` (a match it divides by zero is skipped and the start's next one emitted,
    which next would not look for). The match emitted for a start is then the one with the earliest
    second event that qualifies (the first in (ts, assignment) order), which is the one next takes."""
    plain = all(not e.kleene and e.operator is None for e in elements)
    return d.strategy == "any" and d.emit == "first" and len(positives) == 2 and plain and not trailing \
        and not named_links and not _divides(yield_)


def _divides(expression) -> bool:
    if not isinstance(expression, tuple) or not expression:
        return False
    return expression[0] == "/" or any(_divides(e) for e in expression[1:])


def _right_deep(positives: tuple[str, ...]) -> Tree:
    tree: Tree = rt.Leaf(positives[-1])
    for element in reversed(positives[:-1]):
        tree = rt.Join(rt.Leaf(element), tree)
    return tree


def _declared(expression, variables: tuple[str, ...], sensor_codes: dict[str, int]):
    """An expression as the runtime reads it: elements by variable, and quoted names as the codes
    events carry: a stream's from its node id, a sensor's from the job's table (-1, which no event
    carries, for a sensor the job does not read)."""
    if not isinstance(expression, tuple) or not expression:
        return expression
    if expression[0] == "stream":
        return ("code", rt.derived_code(expression[1]))
    if expression[0] == "sensor":
        return ("code", sensor_codes.get(expression[1], -1))
    if expression[0] in ("attr", "var"):
        return rename_elements(expression, variables)
    return tuple(_declared(e, variables, sensor_codes) for e in expression)


def _ordered(spec: _Pattern, indices, options: Options) -> tuple[str, ...]:
    """The texts of these conditions, in the order they are tested."""
    indices = sorted(indices)
    if options.ordering:
        indices.sort(key=lambda c: (spec.conditions[c].probability, c))
    return tuple(spec.conditions[c].text for c in indices)


def _positive_reads(spec: _Pattern, condition: rt.Condition) -> set[str]:
    return {var for var in condition.reads if var in spec.positives}


def _place(spec: _Pattern, tree: Tree, options: Options) -> tuple[Tree, dict[int, str], dict[str, str]]:
    """The tree with conditions and negations pushed down (or all at the root)."""
    placement: dict[int, str] = {}
    negation_placement: dict[str, str] = {}
    assigned: dict[str, list[int]] = {}
    negations_at: dict[str, list[str]] = {}
    nodes = _paths(tree, "")
    for c, condition in enumerate(spec.conditions):
        if condition.negation is not None:
            continue
        wanted = _positive_reads(spec, condition) or {spec.positives[0]}
        home = _lowest(nodes, wanted) if options.pushdown else ""
        assigned.setdefault(home, []).append(c)
    for m, (before, after) in spec.gaps.items():
        if after is None:
            continue
        wanted = {before, after} | {v for c in spec.conditions if c.negation == m for v in _positive_reads(spec, c)}
        home = _lowest(nodes, wanted) if options.pushdown else ""
        negations_at.setdefault(home, []).append(m)

    def build(node: Tree, at: str) -> Tree:
        where = (f"on each {node.element} event" if isinstance(node, rt.Leaf)
                 else f"at the join {shape_text(node)}")
        for c in assigned.get(at, []):
            placement[c] = where
        conditions = _ordered(spec, assigned.get(at, []), options)
        if isinstance(node, rt.Leaf):
            return rt.Leaf(node.element, conditions=conditions)
        negated = tuple(negations_at.get(at, []))
        for m in negated:
            negation_placement[m] = where
        return rt.Join(left=build(node.left, at + "L"), right=build(node.right, at + "R"), conditions=conditions,
                       negations=negated)

    return build(tree, ""), placement, negation_placement


def _paths(tree: Tree, at: str) -> list[tuple[str, set[str]]]:
    """(path, elements) of every node, deepest first."""
    found = [(at, set(tree.elements))]
    if isinstance(tree, rt.Join):
        found = _paths(tree.left, at + "L") + _paths(tree.right, at + "R") + found
    return found


def _lowest(nodes: list[tuple[str, set[str]]], wanted: set[str]) -> str:
    """The smallest subtree holding every wanted element."""
    fitting = [(len(elements), path) for path, elements in nodes if wanted <= elements]
    return min(fitting)[1]


def _chain(spec: _Pattern, options: Options) -> tuple[rt.Chain, rt.Whole, dict[int, str], dict[str, str]]:
    """Strategy next: the left-deep chain, each condition and negation tested as soon as the
    elements it reads are bound (and an aggregated Kleene closure is closed); what no step could
    test, when the match is whole."""
    positives, elements = spec.positives, spec.elements
    at_step: dict[int, list[int]] = {}
    negations_at: dict[int, list[str]] = {}
    closure: dict[str, list[int]] = {}
    placement: dict[int, str] = {}
    negation_placement: dict[str, str] = {}

    def first_step(wanted: set[str], aggregated: set[str]) -> int | None:
        for step, element in enumerate(positives):
            if wanted <= set(positives[:step + 1]) and not (elements[element].kleene and element in aggregated):
                return step
        return None

    for c, condition in enumerate(spec.conditions):
        wanted = _positive_reads(spec, condition) or {positives[0]}
        if condition.negation is not None:
            continue
        step = first_step(wanted, set(condition.aggregates)) if options.pushdown else None
        if step is None:
            step = len(positives)  # when the match is whole
        at_step.setdefault(step, []).append(c)
        for element in positives:
            if elements[element].kleene and element in condition.reads and element not in condition.aggregates \
                    and wanted <= set(positives[:positives.index(element) + 1]):
                closure.setdefault(element, []).append(c)
    for m, (before, after) in spec.gaps.items():
        if after is None:
            continue
        mine = [c for c in spec.conditions if c.negation == m]
        wanted = {before, after} | {v for c in mine for v in _positive_reads(spec, c)}
        aggregated = {v for c in mine for v in c.aggregates}
        step = first_step(wanted, aggregated) if options.pushdown else None
        negations_at.setdefault(len(positives) if step is None else step, []).append(m)
    steps = []
    for step, element in enumerate(positives):
        for c in at_step.get(step, []):
            placement[c] = f"when {element} is bound"
        for m in negations_at.get(step, []):
            negation_placement[m] = f"when {element} is bound"
        steps.append(rt.Step(element, conditions=_ordered(spec, at_step.get(step, []), options),
                             negations=tuple(negations_at.get(step, [])),
                             closure=_ordered(spec, closure.get(element, []), options)))
    for c in at_step.get(len(positives), []):
        placement[c] = "when the match is whole"
    end = rt.Whole(conditions=_ordered(spec, at_step.get(len(positives), []), options),
                   negations=tuple(negations_at.get(len(positives), [])))
    return rt.Chain(steps=tuple(steps)), end, placement, negation_placement


# ------------------------------------------------------------------------------ the cost


def _cost(spec: _Pattern, tree: Tree, options: Options) -> float:
    """Estimated work per second of a tree: candidates examined, conditions tested, composites made."""
    placed, _, _ = _place(spec, tree, options)
    total, _ = _node_cost(spec, placed)
    return total


def _node_cost(spec: _Pattern, node: Tree) -> tuple[float, float]:
    """(cost per second, composites per second) of a placed subtree."""
    within_s = spec.description.within / 1000
    if isinstance(node, rt.Leaf):
        rate = spec.rates[node.element]
        cost, passing = _tests(spec, rate, node.conditions)
        out = rate * passing
        if spec.elements[node.element].kleene:  # closures of the passing events
            window_events = out * within_s
            if spec.description.strategy == "strict":
                closures = max(1.0, window_events)
            else:
                closures = min(2.0 ** min(window_events, 60), float(spec.description.limit or DEFAULT_LIMIT))
            out *= closures
            cost += out * MAKE
        return cost * spec.keys, out
    left_cost, left_rate = _node_cost(spec, node.left)
    right_cost, right_rate = _node_cost(spec, node.right)
    if spec.description.strategy == "strict":
        total_rate = sum(spec.rates.values())
        candidates = left_rate * min(1.0, right_rate / max(total_rate, 1e-9))
    else:
        candidates = left_rate * right_rate * within_s / 2
    cost, passing = _tests(spec, candidates, node.conditions)
    passing *= 0.5 ** len(node.negations)
    out = candidates * passing
    own = (candidates * PAIR + cost + out * MAKE) * spec.keys
    return left_cost + right_cost + own, out


def _tests(spec: _Pattern, rows: float, texts: tuple[str, ...]) -> tuple[float, float]:
    """(cost of testing the conditions in this order on `rows`, the fraction passing all)."""
    cost, passing = 0.0, 1.0
    for c in (spec.number[text] for text in texts):
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


def condition_text(expression: tuple) -> str:
    """A canonical pattern expression (elements by variable, quoted names resolved) as the script
    would write it."""
    kind = expression[0]
    if kind == "num":
        value = expression[1]
        return str(int(value)) if float(value).is_integer() else repr(value)
    if kind == "attr":
        return f"{expression[1]}.{expression[2]}"
    if kind == "var":
        return expression[1]
    if kind in ("stream", "sensor"):
        return f'"{expression[1]}"'
    if kind == "neg":
        return f"-{condition_text(expression[1])}"
    if kind == "not":
        return f"not {condition_text(expression[1])}"
    if kind == "call":
        return f"{expression[1]}(" + ", ".join(condition_text(a) for a in expression[2:]) + ")"
    if kind in _INFIX:
        left, right = (condition_text(e) for e in expression[1:])
        wrap = lambda e, t: f"({t})" if e[0] in _INFIX else t  # noqa: E731
        return f"{wrap(expression[1], left)} {kind} {wrap(expression[2], right)}"
    return repr(expression)


def describe(plan: PatternPlan) -> list[str]:
    """The operator tree for people: shape, where each condition is tested and in which order, the
    shapes compared and where the probabilities came from."""
    pattern = plan.pattern
    runs = ", as runs: one per start event" if isinstance(pattern.tree, rt.Chain) and pattern.strategy != "next" else ""
    lines = [f"tree {plan.chosen} (strategy {pattern.strategy}, emit {pattern.emit}{runs}"
             + (", partitioned by sensor" if pattern.by_sensor else "") + f", at most {pattern.limit:,} partial "
             f"matches per key and operator)"]
    for index, condition in enumerate(pattern.conditions):
        where = plan.placement.get(index) or (f"with the negation of {condition.negation}"
                                              if condition.negation is not None else "?")
        lines.append(f"  {condition.text}: {where}, pass "
                     f"{condition.probability:.2f} ({'measured' if plan.measured else 'estimated'})")
    negated = [e.var for e in pattern.elements if e.negated]
    for var in negated:
        if var in plan.negation_placement:
            lines.append(f"  no {var} between its neighbours: {plan.negation_placement[var]}")
    for var in negated:
        if var not in plan.negation_placement:
            lines.append(f"  no {var} until the window ends: when the match is whole")
    compared = sorted(plan.shapes, key=lambda item: item[1])
    lines.append("  shapes compared (estimated work/s): " + ", ".join(
        f"{text} {log_cost(cost)}{' <- chosen' if text == plan.chosen else ''}" for text, cost in compared[:6])
        + (f", and {len(compared) - 6} more" if len(compared) > 6 else ""))
    return lines
