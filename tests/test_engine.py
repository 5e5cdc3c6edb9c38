"""The runtime engine, driven directly (no Spark), against the reference evaluator."""

import math
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sensorscript.codegen.placements import by_sensor_stages
from sensorscript.codegen.program import programs
from sensorscript.partition.cost import hash_partition
from sensorscript.parser import load
from sensorscript.partition.plan import make_plan
from oracles.streams import ResultRow, evaluate
from sensorscript.runtime.plan import program as rt
from sensorscript.runtime.state.tasks import LocalRun
from sensorscript.runtime.ingest.records import Reading, parse_line
from tests.strategies import workflows_and_lines


def run_local(scripts: dict[str, str], batches: list[list[str]], delay_ms: int = 0, partitions: int = 1,
              by_sensor: bool = False, summarise: bool = False, runs: list | None = None):
    """The compiled job's stages without Spark (or, `by_sensor`, the same workflows under the
    naive placement hash by sensor id); returns (rows, late, plan). `summarise`: stage 0 sends slice
    partials where it can (runtime/state/summaries.py); `runs` gets the LocalRun."""
    loaded = load([f"{n}.ss" for n in scripts], texts={f"{n}.ss": t for n, t in scripts.items()})
    plan = make_plan(loaded.workflows, None, partitions)
    codes = plan.codes
    if by_sensor:
        first, *later = by_sensor_stages(plan)
        run = LocalRun(first, later[0] if later else (None,) * partitions, f"fixed:{delay_ms}", tuple(later[1:]))
    else:
        run = LocalRun(*programs(plan), watermark=f"fixed:{delay_ms}", summarise=summarise)
    if runs is not None:
        runs.append(run)
    rows, late = [], 0
    for index, batch in enumerate([*batches, []]):
        readings = [r for r in map(parse_line, batch) if isinstance(r, Reading) and r.sensor_id in codes]
        emitted = run.batch(np.array([codes[r.sensor_id] for r in readings], np.int64),
                            np.array([r.ts for r in readings], np.int64),
                            np.array([r.value for r in readings], np.float64),
                            end_of_input=index == len(batches))
        for program, result in emitted:
            late += result.late
            rows.extend(result_rows(program, result))
    return rows, late, plan


def result_rows(program, result) -> list[ResultRow]:
    """The result rows a stage emitted in a batch, as the reference writes them."""
    rows = []
    for node_id, tuples in result.outputs.items():
        for name in program.outputs[node_id]:
            rows.extend(ResultRow(name, int(tuples.ts[i]), None if tuples.start is None else int(tuples.start[i]),
                                  None if tuples.end is None else int(tuples.end[i]), float(tuples.value[i]))
                        for i in range(len(tuples)))
    return rows


def canonical_order(rows):
    """Rows with equal (stream, ts, window) may come in any order (a union passes several)."""
    return sorted(rows, key=lambda r: (r.stream, r.ts, r.window_start if r.window_start is not None else -1,
                                       r.window_end if r.window_end is not None else -1, r.value))


def same_rows(actual, expected):
    actual, expected = canonical_order(actual), canonical_order(expected)
    assert len(actual) == len(expected), (len(actual), len(expected))
    for a, e in zip(actual, expected):
        assert (a.stream, a.ts, a.window_start, a.window_end) == (e.stream, e.ts, e.window_start, e.window_end), (a, e)
        assert math.isclose(a.value, e.value, rel_tol=1e-9, abs_tol=1e-9), (a, e)


def reference(scripts, batches, delay_ms=0, plan=None, by_sensor=False):
    """The reference's rows, with lateness judged per partition as `plan` places the sensors (or,
    `by_sensor`, as hash by sensor id does: on the partition of the sensor id's hash)."""
    loaded = load([f"{n}.ss" for n in scripts], texts={f"{n}.ss": t for n, t in scripts.items()})
    homes = None
    if plan is not None:
        homes = ({s: hash_partition(s, plan.partitions.count) for s in plan.frequencies} if by_sensor
                 else plan.partitions.sensor_partition)
    return evaluate(loaded.workflows, batches, delay_ms, homes)


def test_bridge_shape_in_one_batch():
    scripts = {"b": 'MD1Z = avg("A", 10, 5);\nUNI = union("B", "C");\nMD23 = avg(UNI, 10, 5);\n'
                    'MD4Z = avg("D", 10, 5);\nUNIF = union(MD1Z, MD23, MD4Z);\n'
                    'out_MZ = max(UNIF, 10, 5);\nout_AZ = avg(UNIF, 10, 5);'}
    rng = random.Random(1)
    lines = [f"{s},{t},{rng.randint(-50, 50) / 4}" for t in range(0, 60) for s in "ABCD"]
    rng.shuffle(lines)
    for partitions in (1, 2, 3):
        rows, _, _ = run_local(scripts, [lines], partitions=partitions)
        same_rows(rows, reference(scripts, [lines]).rows)


def test_combine_latest_and_division_by_zero():
    scripts = {"c": "X = A / B;\nY = max(A, B, 0.5) - (A > B);"}
    lines = ["A,1,1", "B,2,0", "A,3,4", "B,3,2", "A,3,6", "B,7,0", "A,9,3"]
    rows, _, _ = run_local(scripts, [lines])
    same_rows(rows, reference(scripts, [lines]).rows)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(workflows_and_lines(), st.integers(1, 4), st.sampled_from([0, 500, 5000]), st.integers(1, 3),
       st.randoms(use_true_random=False), st.booleans())
def test_job_stages_match_reference_on_random_workflows(example, batch_count, delay_ms, partitions, rng, summarise):
    scripts, lines = example
    cuts = sorted(rng.randint(0, len(lines)) for _ in range(batch_count - 1))
    batches = [lines[a:b] for a, b in zip([0, *cuts], [*cuts, len(lines)])]
    rows, late, plan = run_local(scripts, batches, delay_ms, partitions, summarise=summarise)
    expected = reference(scripts, batches, delay_ms, plan)
    same_rows(rows, expected.rows)
    assert late == expected.late


def test_forwarding_across_partitions_is_exercised():
    """A workflow too heavy for one partition is split; its forwarded tuples must still add up."""
    sensors = [f"S{i}" for i in range(8)]
    text = "".join(f"W{i} = avg({s}, 1000, 500);\n" for i, s in enumerate(sensors))
    text += "ALL = union(" + ", ".join(f"W{i}" for i in range(8)) + ");\nTOP = max(ALL, 2000, 1000);\n"
    text += "GAP = TOP - W0;\n"
    scripts = {"wide": text}
    rng = random.Random(3)
    lines = [f"{s},{t * 10},{rng.randint(0, 40) / 4}" for t in range(300) for s in sensors]
    batches = [lines[:800], lines[800:1600], lines[1600:]]
    rows, _, plan = run_local(scripts, batches, 200, partitions=3)
    assert plan.partitions.crossings, "the plan should have split the workflow"
    same_rows(rows, reference(scripts, batches, 200, plan).rows)


def _jittered_batches(sensors: list[str], steps: int, batch_count: int, seed: int) -> list[list[str]]:
    """Readings every 10 ms per sensor (nine in ten of them), each up to 40 ms off its time (out of
    order), cut into `batch_count` batches at random places."""
    rng = random.Random(seed)
    lines = [f"{s},{max(0, t * 10 + rng.randint(-40, 40))},{rng.randint(-80, 80) / 4}"
             for t in range(steps) for s in sensors if rng.random() < 0.9]
    cuts = sorted(rng.randint(0, len(lines)) for _ in range(batch_count - 1))
    return [lines[a:b] for a, b in zip([0, *cuts], [*cuts, len(lines)])]


@pytest.mark.parametrize("delay_ms, batch_count, seed", [(0, 1, 1), (200, 3, 2), (1500, 7, 3), (0, 12, 4)])
def test_slice_partials_cross_instead_of_readings(delay_ms, batch_count, seed):
    """A union of eight sensors too heavy for one partition, read by windows only: the sensors on
    other partitions send the union's slice partials (issue #44), not their readings, and every
    window (avg, max, min, sum, count; slices of several widths) equals the reference's over all
    the readings, with readings out of order, late ones, and batches cutting slices in two."""
    sensors = [f"S{i}" for i in range(8)]
    text = "U = union(" + ", ".join(sensors) + ");\n"
    text += "A = avg(U, 1000, 500);\nM = max(U, 2000, 500);\nN = min(U, 1500, 500);\n"
    text += "C = count(U, 1000, 1000);\nT = sum(U, 3000, 1000);\nD = M - A;\n"
    scripts = {"wide": text}
    batches = _jittered_batches(sensors, 400, batch_count, seed)
    rows, late, plan = run_local(scripts, batches, delay_ms, partitions=3)
    crossing = [c for c in plan.partitions.crossings if c.kind == "partials"]
    assert crossing and all(c.into == ("union:" + plan.graph.node(c.target).id.split(":")[1],) for c in crossing)
    assert all(c.rate_per_s < plan.frequencies[c.source.split(":", 1)[1]] for c in crossing)
    firsts, _ = programs(plan)
    assert any(f.partials for q in firsts for f in q.forwards)
    expected = reference(scripts, batches, delay_ms, plan)
    same_rows(rows, expected.rows)
    assert late == expected.late and (late > 0) == (delay_ms == 0 and batch_count > 1)


@pytest.mark.parametrize("delay_ms, batch_count, seed, partitions",
                         [(0, 2, 11, 1), (200, 3, 12, 2), (1500, 7, 13, 3), (0, 12, 14, 2), (40, 30, 15, 1)])
def test_stage_0_sends_slice_partials_of_on_time_readings(delay_ms, batch_count, seed, partitions):
    """Sensors only windows read (directly, or through unions only windows read) go from stage 0 as
    slice partials wherever the partition's watermark and event time after the batch before say
    they are on time and not held out (runtime/state/summaries.py); the rest, late ones included,
    as readings. Every window, and every late count, equals the reference's over all the readings:
    readings out of order, batches cutting slices in two, a combine and a pattern beside them."""
    sensors = [f"S{i}" for i in range(6)]
    text = "U = union(S0, S1, S2);\nA = avg(U, 1000, 500);\nM = max(U, 2000, 500);\n"
    text += "B = min(S3, 1500, 500);\nC = count(S3, 1000, 1000);\nT = sum(S4, 3000, 1000);\n"
    text += "D = M - A;\nE = S5 * 2;\nP = pattern(a: S5 -> b: S5) where b.value > a.value within 1s;\n"
    scripts = {"w": text}
    batches = _jittered_batches(sensors, 500, batch_count, seed)
    runs = []
    rows, late, plan = run_local(scripts, batches, delay_ms, partitions, summarise=True, runs=runs)
    firsts, _ = programs(plan)
    summed = {node for q in firsts for node in q.summed}  # (stage 1 passes a forwarded one's partials on)
    assert summed == {f"sensor:S{i}" for i in range(5)}
    total = sum(len(b) for b in batches)
    assert runs[0].summed_readings > total * len(summed) // 6 // 2 * (batch_count - 1) // batch_count
    expected = reference(scripts, batches, delay_ms, plan)
    same_rows(rows, expected.rows)
    assert late == expected.late and (late > 0) == (delay_ms < 100 and batch_count > 1)
    plain, plain_late, _ = run_local(scripts, batches, delay_ms, partitions)
    same_rows(plain, rows)
    assert plain_late == late


def test_a_union_that_repeats_a_sensor_takes_its_readings_twice_not_its_partials_once():
    """union(S1, S1) passes each reading of S1 twice (a multiset union): one set of slice partials
    would count it once, so such a sensor goes as readings (found in review)."""
    scripts = {"w": "U = union(S1, S1);\nC = sum(U, 1s, 1s);\nA = avg(S2, 1s, 1s);\n"}
    batches = _jittered_batches(["S1", "S2"], 600, 4, 21)
    runs = []
    rows, late, plan = run_local(scripts, batches, 100, 1, summarise=True, runs=runs)
    assert {n for q in programs(plan)[0] for n in q.summed} == {"sensor:S2"}  # S1 goes as readings
    same_rows(rows, reference(scripts, batches, 100, plan).rows)


@pytest.mark.parametrize("delay_ms, batch_count, seed", [(0, 1, 5), (200, 3, 6), (0, 9, 7)])
def test_one_set_of_slice_partials_serves_several_streams(delay_ms, batch_count, seed):
    """Four unions over the same heavy sensors, read by windows only: U and V are cut alike (500 ms)
    and take one set of each sensor's partials; W's 1.5 s slices are unions of those 500 ms ones and
    take them too (partition/partials.py cuts_for); X's 400 ms slices share no coarser cut cheaply
    and get their own. Every window equals the reference's over all the readings."""
    sensors = [f"S{i}" for i in range(8)]
    text = "U = union(" + ", ".join(sensors) + ");\nA = avg(U, 1000, 500);\nM = max(U, 2000, 500);\n"
    text += "V = union(" + ", ".join(sensors[1:]) + ");\nB = min(V, 1000, 500);\n"
    text += "W = union(" + ", ".join(sensors[2:]) + ");\nC = sum(W, 3000, 1500);\nN = count(W, 1500, 1500);\n"
    text += "X = union(" + ", ".join(sensors[3:]) + ");\nE = max(X, 1200, 400);\n"
    scripts = {"wide": text}
    batches = _jittered_batches(sensors, 600, batch_count, seed)
    rows, late, plan = run_local(scripts, batches, delay_ms, partitions=3)
    firsts, seconds = programs(plan)
    forwards = {(f.dest, f.node): f for q in firsts for f in q.forwards if f.partials}
    served = [(forwards[q.partition, node], into) for q in seconds if q for node, into in q.merged.items()]
    assert served and all(len(f.partials) < len(into) for f, into in served if len(into) > 2)
    own = {stream: plan.slices[stream].period_ms for _, into in served for stream, _ in into}
    assert {(own[stream], f.partials[k].period) for f, into in served for stream, k in into} == {
        (500, 500), (1500, 500), (400, 400)}
    expected = reference(scripts, batches, delay_ms, plan)
    same_rows(rows, expected.rows)
    assert late == expected.late


def test_a_cut_shared_by_uneven_slices_keeps_every_cut_point():
    """A tumbling 5 s window and a 4 s window every 5 s over unions of the same sensors: slices cut at
    0 and 4 s of every 5 s serve both; they are not every 4 s (found in review: such a cut merged
    readings of two of the 5 s window's slices and its avg came out wrong)."""
    sensors = [f"S{i}" for i in range(8)]
    text = "U = union(" + ", ".join(sensors) + ");\nA = avg(U, 5000, 5000);\n"
    text += "V = union(" + ", ".join(sensors[1:]) + ");\nB = avg(V, 4000, 5000);\n"
    text += "X = union(" + ", ".join(sensors[3:]) + ");\nE = max(X, 1200, 400);\n"
    scripts = {"wide": text}
    rng = random.Random(5)
    lines = [f"{s},{t * 10 + rng.randint(0, 9)},{rng.randint(-80, 80) / 4}"
             for t in range(3000) for s in sensors if rng.random() < 0.9]
    rows, _, plan = run_local(scripts, [lines], 0, partitions=3)
    firsts, _ = programs(plan)
    cuts = {(s.period, s.offsets) for q in firsts for f in q.forwards for s in f.partials}
    assert (5000, (0, 4000)) in cuts and not any(period == 4000 for period, _ in cuts), cuts
    same_rows(rows, reference(scripts, [lines], 0, plan).rows)


def test_a_job_compiled_before_partials_were_shared_still_runs():
    """The first release with slice partials wrote Program.merged as the streams alone (the k-th
    stream from the forward's k-th plan); its job.py, run by this release, merges as it did."""
    from sensorscript.runtime.state.engine import Engine

    sensors = [f"S{i}" for i in range(8)]
    text = "U = union(" + ", ".join(sensors) + ");\nA = avg(U, 1000, 500);\nM = max(U, 2000, 500);\n"
    loaded = load(["w.ss"], texts={"w.ss": text})
    _, seconds = programs(make_plan(loaded.workflows, None, 3))
    second = next(q for q in seconds if q is not None and q.merged)
    older = rt.Program(partition=second.partition, stage=2, nodes=second.nodes, slices=second.slices,
                       outputs=second.outputs, senders=second.senders,
                       merged={node: tuple(stream for stream, _ in into) for node, into in second.merged.items()})
    assert all(k == 0 for into in second.merged.values() for _, k in into)
    assert Engine(older).merged == Engine(second).merged == second.merged


_WINDOW_SLIDES = (1000, 2000, 3000, 4000, 5000, 6000, 10_000, 12_000, 15_000)
_WINDOW_LENGTHS = (1000, 2000, 3000, 4000, 5000, 6000, 7000, 9000, 10_000, 12_000, 20_000, 30_000)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.tuples(st.sampled_from(("avg", "sum", "count", "max", "min")),
                                   st.sampled_from(_WINDOW_LENGTHS), st.sampled_from(_WINDOW_SLIDES)),
                         min_size=1, max_size=3), min_size=2, max_size=4),
       st.sampled_from((0.5, 5.0, 20.0, 100.0)),
       st.lists(st.integers(-200_000, 200_000), min_size=1, max_size=200))
def test_shared_partials_add_up_to_each_streams_own_slices(streams, frequency, times):
    """partition/partials.cuts_for: whichever cut serves a stream (its own, one it shares with streams
    cut alike, or a finer one), every cut point of the stream is one of the cut's and the cut sends
    every partial the stream needs, so the partials merged into the stream's slices equal its slices
    of the readings themselves (engine.merge_partials against engine.add_to_slices)."""
    from sensorscript.graph.slicing import slice_stream
    from sensorscript.partition.partials import cuts_for
    from sensorscript.runtime.state.engine import SliceState, Tuples, add_to_slices, merge_partials, slice_partials

    slices = {f"s{i}": slice_stream(f"s{i}", [(f"w{i}{j}", *w) for j, w in enumerate(windows)])
              for i, windows in enumerate(streams)}
    cuts = cuts_for(tuple(sorted(slices)), slices, frequency)
    served = {stream: k for k, cut in enumerate(cuts) for stream in cut.streams}
    assert sorted(served) == sorted(slices)
    plans = tuple(rt.Slices(c.streams[0], c.period_ms, c.offsets_ms, c.partials) for c in cuts)
    rng = random.Random(len(times))
    readings = Tuples(np.array(times, np.int64), np.array([rng.uniform(-9, 9) for _ in times]),
                      np.zeros(len(times), np.int32))
    sent = slice_partials(readings, plans)
    for stream, k in served.items():
        own, cut = slices[stream], cuts[k]
        assert set(own.partials) <= set(cut.partials)
        span = math.lcm(own.period_ms, cut.period_ms)
        assert {c * own.period_ms + o for c in range(span // own.period_ms) for o in own.offsets_ms} <= \
            {c * cut.period_ms + o for c in range(span // cut.period_ms) for o in cut.offsets_ms}
        receiving = rt.Slices(stream, own.period_ms, own.offsets_ms, own.partials)
        merged, direct = SliceState(), SliceState()
        merge_partials(merged, receiving, k, sent)
        add_to_slices(direct, receiving, readings)
        assert merged.index.tolist() == direct.index.tolist()
        for name in own.partials:
            assert np.allclose(merged.partials[name], direct.partials[name]), name


_CUTS = (rt.Slices("a", 1000, (0,), ("count", "max", "min", "sum")), rt.Slices("b", 1000, (0,), ("count", "sum")),
         rt.Slices("c", 3000, (0, 1000), ("max",)), rt.Slices("d", 7, (0,), ("min", "sum")))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.lists(st.tuples(st.integers(-10**4, 10**4) | st.integers(-10**18, 10**18),
                                             st.floats(-1e6, 1e6)), max_size=30),
                          st.lists(st.sampled_from(_CUTS), min_size=1, max_size=3, unique=True)), max_size=8))
def test_the_partials_of_many_forwards_at_once_are_each_ones_slice_by_slice(forwards):
    """engine.slices_partials (every forward of a batch in one pass per distinct cut) sends, for each
    forward, per slice plan in order, per partial in the plan's order, per non-empty slice in time
    order, one tuple: at the slice's earliest reading, the partial of its readings, its source
    saying plan and partial."""
    from sensorscript.runtime.state.engine import Tuples, slices_partials

    given_ = [(Tuples(np.array([t for t, _ in r], np.int64), np.array([v for _, v in r]),
                      np.zeros(len(r), np.int32)), tuple(plans)) for r, plans in forwards]
    sent = slices_partials(given_)
    assert len(sent) == len(forwards)
    for (readings, plans), got in zip(forwards, sent):
        expected = []
        for k, plan in enumerate(plans if readings else ()):
            slices: dict[int, list] = {}
            for t, v in readings:
                cycle, offset = divmod(t, plan.period)
                position = max(i for i, o in enumerate(plan.offsets) if o <= offset)
                slices.setdefault(cycle * len(plan.offsets) + position, []).append((t, v))
            for name in plan.partials:
                reduce = {"count": len, "sum": lambda r: math.fsum(v for _, v in r),
                          "min": lambda r: min(v for _, v in r), "max": lambda r: max(v for _, v in r)}[name]
                expected += [(min(t for t, _ in slices[i]), float(reduce(slices[i])),
                              k * len(rt.PARTIAL_KINDS) + rt.PARTIAL_KINDS.index(name)) for i in sorted(slices)]
        assert [t for t, _, _ in expected] == got.ts.tolist()
        assert [c for _, _, c in expected] == got.source.tolist()
        assert np.allclose([v for _, v, _ in expected], got.value, rtol=1e-9, atol=1e-6)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(workflows_and_lines(), st.integers(1, 4), st.sampled_from([0, 500, 5000]), st.integers(1, 3),
       st.randoms(use_true_random=False))
def test_hash_by_sensor_placement_matches_reference(example, batch_count, delay_ms, partitions, rng):
    """The naive placement the report measures us against computes the same results: one stage per
    level of the graph, each edge forwarded on its own, watermarks carried stage to stage."""
    scripts, lines = example
    cuts = sorted(rng.randint(0, len(lines)) for _ in range(batch_count - 1))
    batches = [lines[a:b] for a, b in zip([0, *cuts], [*cuts, len(lines)])]
    rows, late, plan = run_local(scripts, batches, delay_ms, partitions, by_sensor=True)
    expected = reference(scripts, batches, delay_ms, plan, by_sensor=True)
    same_rows(rows, expected.rows)
    assert late == expected.late


def test_hash_by_sensor_stages_follow_the_graph():
    """Bridge: windows over a sensor run beside it (stage 1); a union over sensors, the window
    over it, the union of windows and the windows over that each take a stage and a shuffle."""
    text = Path("workflows/bridge.ss").read_text()
    loaded = load(["bridge.ss"], texts={"bridge.ss": text})
    plan = make_plan(loaded.workflows, None, 2)
    stages = by_sensor_stages(plan)
    # sensors, MD1Z, MD4Z | UNI | MD23 | UNIF | out_MZ, out_AZ
    assert len(stages) == 5
    edges = [f for stage in stages for program in stage if program for f in program.forwards]
    shuffled = [(u, v) for u, v in plan.graph.edges()
                if not (plan.graph.node(u).kind == "sensor" and plan.graph.node(v).kind == "window")]
    assert len(edges) == len(shuffled)  # one forward per edge, as the model counts them
    for stage in stages[1:]:
        for program in stage:
            if program is not None:
                assert program.senders and all(isinstance(n, rt.Sensor) for n in program.nodes[:1])


def _skewed_batches(ahead: list[str], behind: list[str]) -> list[list[str]]:
    """All sensors' first second; then two batches in which `ahead` sensors deliver 9 s more (a
    watermark applies from the batch after the readings that raise it) while `behind` ones are
    silent; then `behind` ones catch up (none of it late: their watermark is still 1 s)."""
    rng = random.Random(5)

    def lines(sensors, start, end):
        return [f"{s},{t},{rng.randint(0, 40) / 4}" for t in range(start, end, 100) for s in sensors]

    return [lines(ahead + behind, 0, 1_000), lines(ahead, 1_000, 5_000), lines(ahead, 5_000, 10_000),
            lines(behind, 1_000, 10_000)]


def test_a_later_stage_waits_for_its_slowest_sender():
    """A stage fed by several partitions emits a window only when every sender's watermark has
    passed it: here one partition's sensors run 9 s ahead of the other's for a batch."""
    # Our plan, split: the wide workflow of the test above.
    sensors = [f"S{i}" for i in range(8)]
    text = "".join(f"W{i} = avg({s}, 1000, 500);\n" for i, s in enumerate(sensors))
    text += "ALL = union(" + ", ".join(f"W{i}" for i in range(8)) + ");\nTOP = max(ALL, 2000, 1000);\n"
    scripts = {"wide": text}
    loaded = load(["wide.ss"], texts={"wide.ss": text})
    homes = make_plan(loaded.workflows, None, 3).partitions.sensor_partition
    ahead = [s for s in sensors if homes[s] == homes["S0"]]
    batches = _skewed_batches(ahead, [s for s in sensors if s not in ahead])
    rows, _, plan = run_local(scripts, batches, 0, partitions=3)
    assert plan.partitions.crossings
    same_rows(rows, reference(scripts, batches, 0, plan).rows)
    # Hash by sensor id: A and D hash to different partitions of 2; the union is a stage of its own.
    scripts = {"u": "U = union(A, D);\nM = max(U, 1000, 1000);\nV = avg(A, 1000, 1000);\nX = M - V;\n"}
    batches = _skewed_batches(["A"], ["D"])
    rows, _, plan = run_local(scripts, batches, 0, partitions=2, by_sensor=True)
    expected = reference(scripts, batches, 0, plan, by_sensor=True)
    assert hash_partition("A", 2) != hash_partition("D", 2)
    assert len(expected.rows) == 10  # X for each second
    same_rows(rows, expected.rows)


def test_huge_values_spoil_no_other_window():
    """A window reduces its own slices: a sum that overflows to infinity (1e308 + 1e308), or a reading
    near the largest double, leaves every other window exact (differences of prefix sums gave
    inf - inf = NaN and 1e308 + x - 1e308 = 0 for the windows after them)."""
    scripts = {"h": "S = sum(A, 10, 5);\nM = avg(A, 20, 10);\nX = max(A, 10, 10);"}
    lines = [f"A,{t},{t / 4}" for t in range(0, 10, 2)] + ["A,12,1e308", "A,13,1e308", "A,22,1e308"]
    lines += [f"A,{t},{t / 4}" for t in range(30, 60, 2)]
    rows, late, _ = run_local(scripts, [lines[:7], lines[7:]])
    assert late == 0
    same_rows(rows, reference(scripts, [lines]).rows)
    sums = {r.window_start: r.value for r in rows if r.stream == "h.S"}
    assert sums[10] == sums[5] == math.inf and sums[20] == 1e308
    assert sums[30] == sum(t / 4 for t in range(30, 40, 2)) and sums[50] == sum(t / 4 for t in range(50, 60, 2))
