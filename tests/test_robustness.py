"""Random and mutated scripts: the front end raises only SensorScriptError, and never hangs."""

import random
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sensorscript.errors import SensorScriptError
from sensorscript.parser import load
from tests.conftest import EXAMPLES
from tests.test_antlr_runtime import FRAGMENTS

SEEDS = [p.read_text() for p in EXAMPLES]


class WorkBudgetExceeded(BaseException):
    """Raised inside the code being measured when it has done more work than allowed (a BaseException,
    so that no `except Exception` in the front end swallows it)."""


def work_of(function, budget: int | None = None) -> int:
    """How much work `function()` does, counted as Python and C function calls: a measure that does
    not depend on the machine's speed or load. With `budget`, the call is stopped as soon as it
    has made that many calls (a hang fails the test instead of blocking the run)."""
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        if event == "call" or event == "c_call":
            calls += 1
            if budget is not None and calls > budget:
                sys.setprofile(None)
                raise WorkBudgetExceeded(f"more than {budget:,} calls")

    previous = sys.getprofile()
    sys.setprofile(count)
    try:
        function()
    finally:
        sys.setprofile(previous)
    return calls


# The front end's work on one script: a fixed part (ANTLR builds its DFA caches on first use: about
# 40,000 calls for the first script of a run) and a part per character (at most about 45 calls per
# character of the mutated examples, measured). A front end that hung, or went quadratic or worse on
# some input, passes this budget; the speed of the machine does not matter.
WORK_FIXED = 60_000
WORK_PER_CHARACTER = 150


def check_front_end(text: str) -> None:
    try:
        load(["fuzz.ss"], texts={"fuzz.ss": text})
        load(["fuzz.ss"], {"8MD1-AZ"}, texts={"fuzz.ss": text})
    except SensorScriptError as exc:
        assert exc.diagnostics, "an error without a diagnostic"
        assert all(d.message for d in exc.diagnostics)
        exc.render()  # rendering every message must work too


def front_end(text: str) -> int:
    """Run the front end on a script within its work budget; returns the work it did."""
    budget = WORK_FIXED + WORK_PER_CHARACTER * len(text)
    try:
        return work_of(lambda: check_front_end(text), budget)
    except WorkBudgetExceeded as exc:
        raise AssertionError(f"the front end did {exc} of work on a script of {len(text)} characters "
                             f"(budget {WORK_FIXED:,} + {WORK_PER_CHARACTER} a character): {text[:200]!r}") from None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FRAGMENTS + ["avg(", "union(", "pattern(", "within 1s", " -> ", "a: X",
                                             "X = ", ";", "count(", "where ", "yield "]), max_size=40))
def test_random_token_soup(parts):
    front_end("".join(parts))


def mutate(text: str, rng: random.Random, mutations: int, pieces: list[str] | None = None) -> str:
    """A script after `mutations` random edits: a few characters deleted, a fragment (of `pieces`, by
    default the lexer's) inserted, a stretch duplicated, two neighbours swapped (also used by
    tests/test_cli_fuzz.py)."""
    pieces = pieces or FRAGMENTS + ["(", ")", ";", "->", "+", "!"]
    chars = list(text)
    for _ in range(mutations):
        i = rng.randrange(len(chars) + 1)
        action = rng.choice(["delete", "insert", "duplicate", "swap"])
        if action == "delete" and i < len(chars):
            del chars[i:i + rng.randint(1, 8)]
        elif action == "insert":
            chars[i:i] = list(rng.choice(pieces))
        elif action == "duplicate" and i < len(chars):
            chars[i:i] = chars[i:i + rng.randint(1, 30)]
        elif action == "swap" and 0 < i < len(chars):
            chars[i - 1], chars[i] = chars[i], chars[i - 1]
    return "".join(chars)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(SEEDS) - 1), st.randoms(use_true_random=False), st.integers(1, 6))
def test_mutated_examples(which, rng: random.Random, mutations):
    front_end(mutate(SEEDS[which], rng, mutations))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text(text):
    front_end(text)


PATHOLOGICAL = {
    "nested parentheses": lambda n: "X = " + "(" * n + "S" + ")" * n + ";",
    "unary minus": lambda n: "X = " + "-" * n + "S;",
    "a long sum": lambda n: "X = " + " + ".join(["S"] * n) + ";",
    "unclosed calls": lambda n: "X = " + "avg(" * n + "S;",
    "broken statements": lambda n: "X = avg(S, 1s;\n" * n,
}


@pytest.mark.parametrize("shape", PATHOLOGICAL)
def test_deep_nesting_is_an_error_not_a_crash(shape):
    """Far beyond the limits (100 parentheses deep, 250 operators a statement; docs/LANGUAGE.md), and
    without quadratic or worse work: doubling the input at most about doubles the work (measured in
    calls, warm caches: so on any machine)."""
    script = PATHOLOGICAL[shape]
    with pytest.raises(SensorScriptError):
        load(["fuzz.ss"], texts={"fuzz.ss": script(3000)})
    front_end(script(3000))  # warms ANTLR's caches for the shape too
    small, large = front_end(script(2500)), front_end(script(5000))
    assert large <= 2.3 * small, f"work {small:,} -> {large:,} calls when the input doubled"
