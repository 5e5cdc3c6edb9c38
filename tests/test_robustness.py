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


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(SEEDS) - 1), st.randoms(use_true_random=False), st.integers(1, 6))
def test_mutated_examples(which, rng: random.Random, mutations):
    text = list(SEEDS[which])
    for _ in range(mutations):
        i = rng.randrange(len(text) + 1)
        action = rng.choice(["delete", "insert", "duplicate", "swap"])
        if action == "delete" and i < len(text):
            del text[i:i + rng.randint(1, 8)]
        elif action == "insert":
            text[i:i] = list(rng.choice(FRAGMENTS + ["(", ")", ";", "->", "+", "!"]))
        elif action == "duplicate" and i < len(text):
            text[i:i] = text[i:i + rng.randint(1, 30)]
        elif action == "swap" and 0 < i < len(text):
            text[i - 1], text[i] = text[i], text[i - 1]
    front_end("".join(text))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text(text):
    front_end(text)


def test_deep_nesting_is_an_error_not_a_crash():
    front_end("X = " + "(" * 3000 + "S" + ")" * 3000 + ";")
    front_end("X = " + "-" * 3000 + "S;")
    front_end("X = " + " + ".join(["S"] * 5000) + ";")
