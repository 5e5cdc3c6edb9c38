"""Random and mutated scripts: the front end raises only SensorScriptError, and never hangs."""

import random
import time

from hypothesis import HealthCheck, given, settings, strategies as st

from sensorscript.errors import SensorScriptError
from sensorscript.parser import load
from tests.conftest import EXAMPLES
from tests.test_antlr_runtime import FRAGMENTS

SEEDS = [p.read_text() for p in EXAMPLES]


def front_end(text: str) -> None:
    start = time.perf_counter()
    try:
        load(["fuzz.ss"], texts={"fuzz.ss": text})
        load(["fuzz.ss"], {"8MD1-AZ"}, texts={"fuzz.ss": text})
    except SensorScriptError as exc:
        assert exc.diagnostics, "an error without a diagnostic"
        assert all(d.message for d in exc.diagnostics)
        exc.render()  # rendering every message must work too
    assert time.perf_counter() - start < 5, "the front end took too long on one script"


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


def test_deep_nesting_is_an_error_not_a_crash():
    front_end("X = " + "(" * 3000 + "S" + ")" * 3000 + ";")
    front_end("X = " + "-" * 3000 + "S;")
    front_end("X = " + " + ".join(["S"] * 5000) + ";")
