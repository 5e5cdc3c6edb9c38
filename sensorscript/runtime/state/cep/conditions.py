"""A pattern's conditions over tables of partial matches, vectorised.

A condition is the compiler's canonical expression (see graph/build.canonical) over event
attributes: ("attr", element, "value" | "ts" | "sensor"), aggregates over a Kleene element's
closure ("call", "count", ("var", element)) or ("call", "avg", ("attr", element, "value")), and
sensor codes ("code", n). The job names elements by variable; the matcher numbers them, as its
tables' columns are (`rename_elements`). Arithmetic, comparisons and logic are
runtime/state/expressions.py's, shared with combine-latest. A condition that reads a Kleene element
without an aggregate must hold for each of its events: the rows are expanded to one per event (per
combination, for several) and folded back with `all`. A division by zero makes a condition false.
"""

from __future__ import annotations

import numpy as np

from sensorscript.runtime.state.cep.tables import ClosureStore, EventStore, Table, size, take
from sensorscript.runtime.state.kernels.expressions import evaluate

_REDUCE = {"sum": np.add, "min": np.minimum, "max": np.maximum}


def rename_elements(expression, rename):
    """The expression with each element it reads, e in ("attr", e, field) and ("var", e), as
    rename[e]: variables by index (the compiler's), or indexes by variable (the matcher's)."""
    if not isinstance(expression, tuple) or not expression:
        return expression
    if expression[0] in ("attr", "var"):
        return (expression[0], rename[expression[1]], *expression[2:])
    return tuple(rename_elements(e, rename) for e in expression)


def reads(expression: tuple) -> tuple[set[int], set[int]]:
    """(elements read, elements read inside an aggregate): the planner's, and the matcher's for a
    threshold's side."""
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


def bare_kleene(expression: tuple, kleene: frozenset[int]) -> list[int]:
    """Kleene elements read outside any aggregate, in order of first reading."""
    found: list[int] = []

    def visit(e) -> None:
        if not isinstance(e, tuple) or not e:
            return
        if e[0] == "call":
            return
        if e[0] == "attr":
            if e[1] in kleene and e[1] not in found:
                found.append(e[1])
            return
        for child in e[1:]:
            visit(child)

    visit(expression)
    return found


class Frame:
    """A table of partial matches with what its conditions read: the events, and the closures."""

    def __init__(self, table: Table, store: EventStore, closures: ClosureStore, kleene: frozenset[int]):
        self.table = table
        self.store = store
        self.closures = closures
        self.kleene = kleene
        self.single: set[int] = set()  # Kleene elements expanded to one event per row

    def rows(self) -> int:
        return size(self.table)

    def leaf(self, e: tuple):
        kind = e[0]
        if kind == "attr":
            return self.store.column(e[2], self.table[f"e{e[1]}"])
        if kind == "code":
            return np.full(self.rows(), float(e[1]))
        if kind == "call":
            return self.aggregate(e[1], e[2])
        return None

    def aggregate(self, func: str, arg: tuple) -> np.ndarray:
        element = arg[1]
        lengths = self.table[f"n{element}"]
        if func == "count":
            return lengths.astype(np.float64)
        members = self.closures.members(self.table[f"o{element}"], lengths)
        values = self.store.column(arg[2], members)
        starts = np.cumsum(lengths) - lengths
        if func == "first":
            return values[starts]
        if func == "last":
            return values[starts + lengths - 1]
        if func == "avg":
            return np.add.reduceat(values, starts) / lengths if len(values) else np.empty(0)
        return _REDUCE[func].reduceat(values, starts) if len(values) else np.empty(0)


def holds(expression: tuple, frame: Frame) -> np.ndarray:
    """Whether the condition holds, per row of the frame."""
    rows = frame.rows()
    if not rows:
        return np.zeros(0, bool)
    bare = [k for k in bare_kleene(expression, frame.kleene) if k not in frame.single]
    if not bare:
        values, divided = evaluate(expression, {}, rows, frame.leaf)
        return (values != 0) & ~divided
    # One row per event of each closure read bare (per combination), then `all` per row.
    table, origin = frame.table, np.arange(rows)
    for element in bare:
        lengths = table[f"n{element}"]
        repeat = np.repeat(np.arange(size(table)), lengths)
        members = frame.closures.members(table[f"o{element}"], lengths)
        table = take(table, repeat)
        table[f"e{element}"] = members
        origin = origin[repeat]
    expanded = Frame(table, frame.store, frame.closures, frame.kleene)
    expanded.single = frame.single | set(bare)
    ok = holds(expression, expanded)
    failed = np.bincount(origin[~ok], minlength=rows)
    return failed == 0


def value_of(expression: tuple, frame: Frame) -> tuple[np.ndarray, np.ndarray]:
    """A `yield` expression's values and its divided-by-zero mask (a yield reads no Kleene
    element bare: the checker requires an aggregate)."""
    return evaluate(expression, {}, frame.rows(), frame.leaf)
