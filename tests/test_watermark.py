"""Watermark policies and late readings (docs/LANGUAGE.md), without Spark: the policies on their own, and
the job's stages (LocalRun) on disordered input against the reference evaluator."""

from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sensorscript.codegen.program import programs
from sensorscript.parser import load
from sensorscript.partition.plan import make_plan
from oracles.streams import evaluate
from sensorscript.runtime.ingest.records import Reading, parse_line
from sensorscript.runtime.state.tasks import LocalRun
from sensorscript.runtime.state.watermark import NONE_YET, Adaptive, FixedDelay, Quality, ordered_share, parse_policy
from oracles.lateness import judge
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
    """The job's stages (LocalRun) under a watermark policy: (rows, late readings, sensor codes, the
    plan's partition of each sensor)."""
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
    return rows, [(ids[c], t, v) for c, t, v in late], codes, plan.partitions.sensor_partition


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


def expected_lateness(spec: str, batches: list[list[str]], partition_of: dict[str, int], sensors):
    """The late readings by the rule for `spec` (oracles/lateness.py), computed here, not
    taken from the job. `sensors`: those some workflow reads (only they have a watermark);
    `partition_of`: the plan's partition of each."""
    readings = [[(r.sensor_id, r.ts, r.value) for r in map(parse_line, batch)
                 if isinstance(r, Reading) and r.sensor_id in sensors] for batch in batches]
    return judge(spec, readings, partition_of)


def assert_same_late(job_late: list[tuple], expected: list[tuple]) -> None:
    """The same late readings (which ones, as a multiset), not only as many."""
    job, rule = Counter(job_late), Counter(expected)
    assert job == rule, f"late by the job only: {sorted((job - rule).elements())[:20]}; " \
                        f"late by the rule only: {sorted((rule - job).elements())[:20]}"


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
    """Whatever the policy: the late readings are those its rule makes late (computed by
    the test, oracles/lateness.py), the results equal the reference over the others, and every
    reading is either on time or in the late store."""
    rng = np.random.default_rng(seed)
    lines = [f"S{rng.integers(0, 5)},{int(t)},{rng.integers(-8, 8) / 4}"
             for t in np.sort(rng.integers(0, 30_000, 120))]
    batches = disordered_batches(lines, 6, seed)
    rows, late, codes, partition_of = run_with_policy(scripts, batches, spec, partitions)
    judged = expected_lateness(spec, batches, partition_of, codes)
    assert_same_late(late, judged.late)
    on_time = without([line for batch in batches for line in batch], judged.late)
    expected = evaluate(load([f"{n}.ss" for n in scripts],
                             texts={f"{n}.ss": t for n, t in scripts.items()}).workflows, [on_time])
    same_rows(rows, expected.rows)
    referenced = sum(1 for line in lines if line.split(",")[0] in codes)
    assert expected.late == 0 and len(late) + sum(1 for l in on_time if l.split(",")[0] in codes) == referenced


BURSTY = """
A   = avg(S1, 2s, 1s);
U   = union(S2, S3);
B   = max(U, 2s, 1s);
D   = A - B;
ALL = union(S1, U);
N   = count(ALL, 1s, 1s);   // every reading counts: one judged wrongly changes a count
"""


def bursty(seed: int, batches: int, burst_ms: float = 1500) -> list[list[str]]:
    """60 s of S1..S3 at 20 Hz in arrival order, cut into batches: every other 10 s the gateway holds
    readings back (exponential delays of mean `burst_ms`), otherwise they come nearly in order."""
    rng = np.random.default_rng(seed)
    lines, arrival = [], []
    for sensor in ("S1", "S2", "S3"):
        ts = np.arange(0, 60_000, 50) + rng.integers(0, 5)
        delay = rng.exponential(burst_ms, len(ts)) * ((ts // 10_000) % 2 == 1) + rng.exponential(30, len(ts))
        lines += [f"{sensor},{int(t)},{rng.integers(-8, 9) / 4}" for t in ts]
        arrival += list(ts + delay)
    order = np.argsort(arrival, kind="stable")
    return [[lines[i] for i in part] for part in np.array_split(order, batches)]


@pytest.mark.parametrize("spec", ["adaptive:3s", "adaptive:3s,k=20", "quality:0.05,0.05",
                                  "quality:0.1,0.1,kp=0.5,kd=1"])
def test_the_job_makes_late_exactly_what_the_policy_makes_late(spec):
    """A bursty feed over two partitions: the job's late readings are those the
    policy's rule makes late (which ones, not only how many), and its results are the reference's over the
    others. A watermark that dropped on-time readings, or kept late ones, fails here."""
    batches = bursty(seed=1, batches=12)
    rows, late, codes, partition_of = run_with_policy({"w": BURSTY}, batches, spec, 2)
    assert len(set(partition_of.values())) == 2  # two watermarks
    judged = expected_lateness(spec, batches, partition_of, codes)
    assert len(judged.late) > 50 and judged.ahead == 0
    assert_same_late(late, judged.late)
    on_time = without([line for batch in batches for line in batch], judged.late)
    same_rows(rows, evaluate(load(["w.ss"], texts={"w.ss": BURSTY}).workflows, [on_time]).rows)


def readings_of(*ts: int, sensor: str = "S") -> list[tuple]:
    return [(sensor, t, 0.0) for t in ts]


def test_the_lateness_rule_on_inputs_worked_by_hand():
    """The oracle itself (oracles/lateness.py) on inputs whose watermarks are worked out here
    from docs/LANGUAGE.md, so that the job is held to the rules and not to a slip of the oracle."""
    # adaptive:2s: [1000, 3000, 2000] has 2 ordered pairs of 3, P = 2/3: W = 3000 - 2000 * 1/3.
    judged = judge("adaptive:2s", [readings_of(1000, 3000, 2000), readings_of(2333, 2334, 500)])
    assert judged.watermarks[1] == {0: Fraction(7000, 3)} and judged.late == readings_of(2333, 500)
    # In order (equal times too): P = 1 and W = N.
    assert judge("adaptive:2s", [readings_of(10, 20, 20), readings_of(19, 20)]).late == readings_of(19)
    # Only the latest k arrivals count: with k = 2, (50, 200) is in order, so W = N = 200.
    assert judge("adaptive:1s,k=2", [readings_of(100, 50, 200), readings_of(199)]).watermarks[1] == {0: 200}
    # Never decreasing: P falls from 1 to 1/2 in the second batch (W would be 200 - 500), W stays at 200.
    judged = judge("adaptive:1s", [readings_of(100, 200), readings_of(150, 120), readings_of(199)])
    assert judged.watermarks[2] == {0: 200} and judged.late == readings_of(150, 120, 199)
    # fixed:100 per partition: each its own N; the watermark holds for the whole batch.
    judged = judge("fixed:100", [[("A", 1000, 0.0), ("B", 50, 0.0)], [("A", 850, 0.0), ("B", 0, 0.0), ("A", 5000, 0.0)]],
                   {"A": 0, "B": 1})
    assert judged.watermarks[1] == {0: 900, 1: -50} and judged.late == [("A", 850, 0.0)]
    # quality:0.1,0.1 aims at coverage 1 - 0.1 * 0.1 / 2 = 0.995.
    judged = judge("quality:0.1,0.1", [readings_of(1000, 0), readings_of(500, 400, 300, 2000),
                                       readings_of(3000, 2500, 1900), readings_of(2000)])
    # Batch 1: all on time (no watermark yet); 0 arrives 1000 behind N; err = -0.005, alpha = 0: W = N = 1000.
    assert judged.watermarks[1] == {0: 1000}
    # Batch 2: 3 of 4 late; coverage faded over batches 2.8 / 5.8; the controller's output
    # 0 + 0.2 err + 4 (err + 0.005) passes 2, so it is 2 and alpha 1: W = 2000 - 1 * 1000.
    err1, err2 = 0.995 - 1, 0.995 - 2.8 / 5.8
    assert 0.2 * err2 + 4 * (err2 - err1) > 2 and judged.watermarks[2] == {0: 1000}
    # Batch 3: none late: 5.52 / 8.22; output 2 + 0.2 err + 4 (err - err2), still above 1, so alpha
    # stays 1; largest delay 1100 (1900 behind 3000): W = 3000 - 1100.
    err3 = 0.995 - 5.52 / 8.22
    output = 2 + 0.2 * err3 + 4 * (err3 - err2)
    assert 1 < output < 2 and judged.watermarks[3] == {0: 1900}
    assert judged.late == readings_of(500, 400, 300)  # 2000 in batch 4 is above 1900
    # The guard: a reading an hour ahead of the others does not move N (nor is it late).
    judged = judge("fixed:0", [readings_of(1000, 3_600_000 + 1000, 900) + readings_of(950, sensor="T"),
                               readings_of(999)])
    assert judged.ahead == 1 and judged.watermarks[1] == {0: 1000} and judged.late == readings_of(999)


def test_a_reading_a_third_of_a_millisecond_below_the_adaptive_watermark_is_late():
    """W = 3000 - 2000 * (1 - 2/3) = 2333.33: 2333 is late, 2334 is not (the job keeps ceil(W),
    not a rounded W)."""
    batches = [["S,1000,0", "S,3000,0", "S,2000,0"], ["S,2333,0", "S,2334,0"]]
    assert judge("adaptive:2s", [readings_of(1000, 3000, 2000), readings_of(2333, 2334)]).late == readings_of(2333)
    _, late, _, _ = run_with_policy({"w": "X = count(S, 1s, 1s);\n"}, batches, "adaptive:2s", 1)
    assert late == readings_of(2333)


def test_the_quality_controller_keeps_what_a_burst_taught():
    """The controller's output goes on to 2 and alpha is it clamped at 1 (docs/LANGUAGE.md): after
    the burst of batch 2 the whole buffer stays, so 1900 (1100 behind 3000) is on time in batch 4,
    where a controller clamped at 1 would have let alpha fall to 0.31 and W rise to 2659."""
    stamps = [(1000, 0), (500, 400, 300, 2000), (3000, 2500, 1900), (2000, 1900)]
    judged = judge("quality:0.1,0.1", [readings_of(*b) for b in stamps])
    assert judged.watermarks[3] == {0: 1900} and judged.late == readings_of(500, 400, 300)
    _, late, _, _ = run_with_policy({"w": "X = count(S, 1s, 1s);\n"}, [[f"S,{t},0" for t in b] for b in stamps],
                                    "quality:0.1,0.1", 1)
    assert late == judged.late
