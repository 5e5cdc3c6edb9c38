"""Pattern operators: each a match predicate Q, a compose function F and a stream-state function Z
(the operator model of Cesar, Meng et al. 2014: docs/REFERENCES.md).

A pattern is a tree of operators over its elements' events. The built-in ones are the followed-by
link `->`, the Kleene closure `+` and negation; users register their own by name and write them in
scripts:

    a: A ->[at_first] b: B          a registered binary operator in place of `->`
    a: first_of_run(ALARM)          a registered unary operator over the events of ALARM

A unary operator sees every event of its element's stream, per key (sensor, with `partition by
sensor`) and in event-time order; a binary operator sees the partial matches to its left and right.
A unary operator keeps a state per key that Z updates and Q and F may read; binary operators keep
none. F returns the time interval (start, end)
of the composite event it makes: the default takes the first event's start and the last event's
end; `->` requires left.end < right.start.

    from sensorscript.runtime.state.cep.operators import BinaryOperator, register

    @register("within_half")
    class WithinHalf(BinaryOperator):
        def Q(self, left, right):            # b at most 30 s after a
            return left.end < right.start and right.start - left.end < 30_000

Registered operators are loaded from the Python files given to `sscript compile --operators`, which
the compiled job keeps and loads again when it runs.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Event:
    """One input event as a unary operator sees it; `sensor` is the sensor (or stream) code."""

    ts: int
    value: float
    sensor: int


@dataclass(frozen=True)
class Composite:
    """A partial match as a binary operator sees it: the interval F gave it, and the smallest and
    largest event times bound in it (`within` is measured on those)."""

    start: int
    end: int
    first: int
    last: int


class UnaryOperator:
    """Makes composite events of one element's events: `v: name(STREAM)` binds the events it keeps.

    For each event of the stream, per key and in event-time order: the event is kept iff
    Q(state, event); a kept event's composite spans F(state, event); then state = Z(state, event),
    for every event. The state starts as None.
    """

    arity = 1

    def Q(self, state, event: Event) -> bool:  # noqa: N802 (the names of Meng et al.)
        return True

    def F(self, state, event: Event) -> tuple[int, int]:  # noqa: N802
        return event.ts, event.ts

    def Z(self, state, event: Event):  # noqa: N802
        return state


class BinaryOperator:
    """Joins the partial match on its left with the one on its right (`->` by default). Binary
    operators keep no state: their result depends on the two sides only, in any order of evaluation."""

    arity = 2
    # Whether F keeps the default interval (left.start, right.end) and Q implies left.end < right.start:
    # then a composite is never earlier than its last event, and the job never waits for it.
    monotone = False

    def Q(self, left: Composite, right: Composite) -> bool:  # noqa: N802
        return left.end < right.start

    def F(self, left: Composite, right: Composite) -> tuple[int, int]:  # noqa: N802
        return left.start, right.end


class FollowedBy(BinaryOperator):
    """`a -> b`: b after a; the composite spans from a's start to b's end."""

    monotone = True


class AtFirst(BinaryOperator):
    """`a ->[at_first] b`: b after a, and the composite takes the time of its first event (the
    second example of Meng et al.: in finance an event is a point in time, not an interval)."""

    def F(self, left: Composite, right: Composite) -> tuple[int, int]:  # noqa: N802
        return left.start, left.start


class FirstOfRun(UnaryOperator):
    """`a: first_of_run(ALARM)`: one composite per run of equal values, at the first event of the
    run (the first example of Meng et al.: one alert for a run of duplicate alarms, raised at once)."""

    def Q(self, state, event: Event) -> bool:  # noqa: N802
        return state is None or event.value != state

    def Z(self, state, event: Event):  # noqa: N802
        return event.value


FOLLOWED_BY = "->"
BUILTIN: dict[str, UnaryOperator | BinaryOperator] = {
    FOLLOWED_BY: FollowedBy(),
    "at_first": AtFirst(),
    "first_of_run": FirstOfRun(),
}
_registered: dict[str, UnaryOperator | BinaryOperator] = {}


def register(name: str, operator=None):
    """Register an operator (an instance, or a class, then instantiated) under `name`; usable as a
    decorator. A name already registered is replaced."""

    def add(operator):
        instance = operator() if isinstance(operator, type) else operator
        if not isinstance(instance, (UnaryOperator, BinaryOperator)):
            raise TypeError(f"operator '{name}' must be a UnaryOperator or a BinaryOperator")
        _registered[name] = instance
        return operator

    return add if operator is None else add(operator)


def registered() -> dict[str, UnaryOperator | BinaryOperator]:
    """Every operator by name: the built-in ones and those registered."""
    return {**BUILTIN, **_registered}


def users() -> dict[str, UnaryOperator | BinaryOperator]:
    """The operators registered here, by name (not the built-in ones)."""
    return dict(_registered)


def register_all(operators: dict[str, UnaryOperator | BinaryOperator]) -> None:
    """Register these operators, by name: a Spark worker receives the ones the driver registered
    (runtime/plan/shipping.py)."""
    for name, operator in operators.items():
        register(name, operator)


def arities() -> dict[str, int]:
    return {name: op.arity for name, op in registered().items() if name != FOLLOWED_BY}


def load_operators(path: str | Path):
    """Run a Python file that registers operators. Its classes are pickled by value to Spark's
    workers, which need not be able to import the file."""
    path = Path(path)
    name = f"sensorscript_operators_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    try:
        from pyspark import cloudpickle

        cloudpickle.register_pickle_by_value(module)
    except ImportError:  # no Spark here: nothing is pickled
        pass
    return module
