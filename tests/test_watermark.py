"""Watermark policies and late readings (SPEC §6), without Spark: the policies on their own, and
the job's stages (LocalRun) on disordered input against the reference evaluator."""

from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sensorscript.codegen.program import programs
from sensorscript.parser import load
from sensorscript.partition.plan import make_plan
from tests.oracles.streams import evaluate
from sensorscript.runtime.ingest.records import Reading, parse_line
from sensorscript.runtime.state.tasks import LocalRun
from sensorscript.runtime.state.watermark import NONE_YET, Adaptive, FixedDelay, Quality, ordered_share, parse_policy
from tests.strategies import scripts as random_scripts
from tests.test_engine import result_rows, same_rows


@pytest.mark.parametrize("spec, kind, buffer", [
    ("fixed:5s", FixedDelay, 5000), ("fixed:250ms", FixedDelay, 250), ("fixed:0", FixedDelay, 0),
    ("adaptive:10s", Adaptive, 0), ("adaptive:1min,k=20", Adaptive, 0), ("quality:0.05,0.05", Quality, 0),
    ("quality:0.1,0.01,kp=0.5,kd=1", Quality, 0), ("fixed:1s,ahead=1h", FixedDelay, 1000),
])
def test_policies_are_parsed(spec, kind, buffer):
    policy = parse_policy(spec)
    assert type(policy) is kind and policy.buffer_ms() == buffer and policy.current() == NONE_YET


@pytest.mark.parametrize("spec, message", [
    ("later:5s", "unknown watermark policy 'later'"), ("fixed:5 sec", "not a duration"),
    ("adaptive", "expected adaptive:MAX_DELAY"), ("quality:0.05", "expected quality:EPS,DELTA"),
    ("quality:0,0.05", "between 0 and 1"), ("adaptive:5s,k=1", "k must be 2 or more"),
    ("adaptive:5s,k=x", "not a whole number"), ("fixed:1s,wait=2s", "unknown option wait"),
])
def test_bad_policies_say_what_is_wrong(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_policy(spec)


def test_ordered_share():
    assert ordered_share(np.array([1, 2, 3, 4])) == 1.0
    assert ordered_share(np.array([4, 3, 2, 1])) == 0.0
    assert ordered_share(np.array([1, 3, 2, 4])) == pytest.approx(5 / 6)
    assert ordered_share(np.array([7])) == 1.0


def test_a_sensor_with_a_wrong_clock_cannot_carry_the_watermark():
    policy = parse_policy("fixed:1s")
    day = 86_400_000
    policy.observe(np.array([1, 2, 3, 9, 1, 2, 3]), np.array([1000, 1000, 1000, day, 2000, 2000, 2000]), 0)
    assert policy.current() == 1000 and policy.frontier.ahead == 1  # held out, counted
    policy.observe(np.array([9, 1]), np.array([day + 10, 3000]), 0)  # still a day ahead of the rest
    assert policy.current() == 2000 and policy.frontier.ahead == 1
    # A sensor alone on its partition is its partition's event time: it is followed.
    alone = parse_policy("fixed:1s")
    alone.observe(np.array([1, 1]), np.array([1000, day]), 0)
    assert alone.current() == day - 1000 and alone.frontier.ahead == 0
    # When most sensors move on together, so does the watermark (a gap in the feed, not a clock).
    # (Readings held out before stay out: N is the newest reading accepted.)
    policy.observe(np.array([1, 2, 3]), np.array([day, day, day]), 0)
    assert policy.current() == day - 1000


@settings(max_examples=60, deadline=None)
@given(spec=st.sampled_from(["fixed:0", "fixed:300", "adaptive:2s,k=10", "quality:0.1,0.1"]),
       batches=st.lists(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 20_000)), max_size=30), max_size=12))
def test_watermarks_never_decrease(spec, batches):
    policy = parse_policy(spec)
    seen = NONE_YET
    for batch in batches:
        code = np.array([c for c, _ in batch], np.int64)
        ts = np.array([t for _, t in batch], np.int64)
        late = int((ts < policy.current()).sum())
        policy.observe(code, ts, late)
        assert policy.current() >= seen
        seen = policy.current()
        if policy.frontier.largest is not None:
            assert policy.current() <= policy.frontier.largest


def disordered(count: int, delay_ms, seed: int, step_ms: int = 10) -> np.ndarray:
    """Event times 0, step, 2 step, ... in arrival order, each delayed by `delay_ms(rng, n)`."""
    rng = np.random.default_rng(seed)
    ts = np.arange(count, dtype=np.int64) * step_ms
    arrival = ts + delay_ms(rng, count)
    return ts[np.argsort(arrival, kind="stable")]


def feed(policy, ts: np.ndarray, batch: int = 100) -> list[tuple[float, float]]:
    """(lag, coverage) after each batch."""
    out = []
    for start in range(0, len(ts), batch):
        part = ts[start:start + batch]
        late = int((part < policy.current()).sum())
        policy.observe(np.zeros(len(part), np.int64), part, late)
        out.append((policy.frontier.largest - policy.current(), policy.coverage))
    return out


def test_the_adaptive_watermark_waits_only_while_the_feed_is_out_of_order():
    in_order = feed(parse_policy("adaptive:5s"), disordered(5000, lambda rng, n: np.zeros(n), 1))
    bursty = feed(parse_policy("adaptive:5s"), disordered(5000, lambda rng, n: rng.exponential(2000, n), 1))
    assert max(lag for lag, _ in in_order) == 0  # P = 1: the watermark is N
    lags = [lag for lag, _ in bursty[5:]]
    assert 500 < np.mean(lags) < 5000  # it waits, never more than M
    # Disorder in one stretch only: the lag rises there and falls after it.
    quiet = np.zeros(2000)
    mixed = feed(parse_policy("adaptive:5s"), disordered(
        6000, lambda rng, n: np.r_[quiet, rng.exponential(2000, 2000), quiet], 2))
    before, during, after = (np.mean([lag for lag, _ in mixed[a:b]]) for a, b in ((2, 18), (24, 38), (44, 60)))
    assert before < 100 and during > 500 and after < during / 3


@pytest.mark.parametrize("mean_delay_ms, batch", [(400, 100), (400, 1000), (2000, 100), (2000, 1000)])
def test_the_quality_buffer_meets_its_coverage_target(mean_delay_ms, batch):
    policy = parse_policy("quality:0.05,0.05")
    ts = disordered(600 * batch, lambda rng, n: rng.exponential(mean_delay_ms, n), 3)
    history = feed(policy, ts, batch)
    settled = history[len(history) // 4:]  # after the controller's first steps from alpha = 0
    assert np.mean([coverage for _, coverage in settled]) >= policy.target
    # ... with a buffer below the largest delay seen (max-delay K-slack). (Exponential delays are the
    # hard case: their 99.75 % quantile alone is about 60 % of the largest of 600 batches.)
    assert np.mean([lag for lag, _ in settled]) < 0.8 * policy.largest_delay_ms


# ------------------------------------------------------------------ the job's stages

def run_with_policy(scripts: dict[str, str], batches: list[list[str]], watermark: str, partitions: int):
    """The job's stages (LocalRun) under a watermark policy: (rows, late readings, sensor codes)."""
    loaded = load([f"{n}.ss" for n in scripts], texts={f"{n}.ss": t for n, t in scripts.items()})
    plan = make_plan(loaded.workflows, None, partitions)
    codes = plan.codes
    ids = {code: sensor_id for sensor_id, code in codes.items()}
    run = LocalRun(*programs(plan), watermark=watermark)
    rows, late = [], []
    for index, batch in enumerate([*batches, []]):
        readings = [r for r in map(parse_line, batch) if isinstance(r, Reading) and r.sensor_id in codes]
        emitted = run.batch(np.array([codes[r.sensor_id] for r in readings], np.int64),
                            np.array([r.ts for r in readings], np.int64),
                            np.array([r.value for r in readings], np.float64), end_of_input=index == len(batches))
        for program, result in emitted:
            if result.late_readings is not None:
                late.extend(zip(*(a.tolist() for a in result.late_readings)))
            rows.extend(result_rows(program, result))
    return rows, [(ids[c], t, v) for c, t, v in late], codes


def without(lines: list[str], late: list[tuple]) -> list[str]:
    """The lines less the late readings (as a multiset: equal readings are removed once each)."""
    left = Counter(late)
    kept = []
    for line in lines:
        parsed = parse_line(line)
        key = (parsed.sensor_id, parsed.ts, parsed.value) if isinstance(parsed, Reading) else None
        if key is not None and left[key]:
            left[key] -= 1
        else:
            kept.append(line)
    assert not +left, f"late readings that were not in the input: {+left}"
    return kept


def disordered_batches(lines: list[str], batches: int, seed: int) -> list[list[str]]:
    """The lines in a random arrival order, cut into batches."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(lines))
    cuts = np.sort(rng.integers(0, len(lines) + 1, batches - 1))
    return [[lines[i] for i in part] for part in np.split(order, cuts)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scripts=random_scripts(), seed=st.integers(0, 2**16), partitions=st.integers(1, 3),
       spec=st.sampled_from(["fixed:0", "fixed:2s", "adaptive:5s,k=8", "quality:0.1,0.1"]))
def test_results_are_those_of_the_readings_on_time(scripts, seed, partitions, spec):
    """Whatever the policy: the results equal the reference over every reading that was not late,
    and every reading is either on time or in the late store."""
    rng = np.random.default_rng(seed)
    lines = [f"S{rng.integers(0, 5)},{int(t)},{rng.integers(-8, 8) / 4}"
             for t in np.sort(rng.integers(0, 30_000, 120))]
    batches = disordered_batches(lines, 6, seed)
    rows, late, codes = run_with_policy(scripts, batches, spec, partitions)
    on_time = without([line for batch in batches for line in batch], late)
    expected = evaluate(load([f"{n}.ss" for n in scripts],
                             texts={f"{n}.ss": t for n, t in scripts.items()}).workflows, [on_time])
    same_rows(rows, expected.rows)
    referenced = sum(1 for line in lines if line.split(",")[0] in codes)
    assert expected.late == 0 and len(late) + sum(1 for l in on_time if l.split(",")[0] in codes) == referenced
