"""The runtime engine, driven directly (no Spark), against the reference evaluator."""

import math
import random

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from sensorscript.codegen.program import programs, sensor_codes
from sensorscript.parser import load
from sensorscript.partition.plan import make_plan
from sensorscript.reference import ResultRow, evaluate
from sensorscript.runtime.engine import POS_INF, Engine
from sensorscript.runtime.records import Reading, parse_line
from tests.strategies import workflows_and_lines


def run_engine(scripts: dict[str, str], batches: list[list[str]], delay_ms: int = 0, partitions: int = 1):
    loaded = load([f"{n}.ss" for n in scripts], texts={f"{n}.ss": t for n, t in scripts.items()})
    plan = make_plan(loaded.workflows, None, partitions)
    codes = sensor_codes(plan)
    engines = [Engine(program) for program in programs(plan)]
    states = [e.new_state() for e in engines]
    placement = plan.partitions.node_partition
    rows, late, dbz = [], 0, {}
    max_ts = None
    for batch in [*batches, None]:
        readings = [] if batch is None else [r for r in map(parse_line, batch) if isinstance(r, Reading)]
        readings = [r for r in readings if r.sensor_id in codes]
        watermark = POS_INF if batch is None else (max_ts - delay_ms if max_ts is not None else -(2**63))
        for engine, state in zip(engines, states):
            program = engine.program
            mine = [r for r in readings if codes[r.sensor_id] in {n.code for n in program.nodes if hasattr(n, "code")}]
            result = engine.process(state, np.array([codes[r.sensor_id] for r in mine], np.int64),
                                    np.array([r.ts for r in mine], np.int64),
                                    np.array([r.value for r in mine], np.float64), watermark)
            late += result.late
            for node_id, count in result.division_by_zero.items():
                for name in program.outputs.get(node_id, ()) or [node_id]:
                    dbz[name] = dbz.get(name, 0) + count
            for node_id, tuples in result.outputs.items():
                for name in program.outputs[node_id]:
                    for i in range(len(tuples)):
                        rows.append(ResultRow(name, int(tuples.ts[i]),
                                              None if tuples.start is None else int(tuples.start[i]),
                                              None if tuples.end is None else int(tuples.end[i]),
                                              float(tuples.value[i])))
        if readings:
            batch_max = max(r.ts for r in readings)
            max_ts = batch_max if max_ts is None else max(max_ts, batch_max)
    rows.sort(key=lambda r: (r.stream, r.ts, r.window_start if r.window_start is not None else -1))
    return rows, late


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


def reference(scripts, batches, delay_ms=0):
    loaded = load([f"{n}.ss" for n in scripts], texts={f"{n}.ss": t for n, t in scripts.items()})
    return evaluate(loaded.workflows, batches, delay_ms)


def test_bridge_shape_in_one_batch():
    scripts = {"b": 'MD1Z = avg("A", 10, 5);\nUNI = union("B", "C");\nMD23 = avg(UNI, 10, 5);\n'
                    'MD4Z = avg("D", 10, 5);\nUNIF = union(MD1Z, MD23, MD4Z);\n'
                    'out_MZ = max(UNIF, 10, 5);\nout_AZ = avg(UNIF, 10, 5);'}
    rng = random.Random(1)
    lines = [f"{s},{t},{rng.randint(-50, 50) / 4}" for t in range(0, 60) for s in "ABCD"]
    rng.shuffle(lines)
    rows, _ = run_engine(scripts, [lines])
    same_rows(rows, reference(scripts, [lines]).rows)


def test_combine_latest_and_division_by_zero():
    scripts = {"c": "X = A / B;\nY = max(A, B, 0.5) - (A > B);"}
    lines = ["A,1,1", "B,2,0", "A,3,4", "B,3,2", "A,3,6", "B,7,0", "A,9,3"]
    rows, _ = run_engine(scripts, [lines])
    expected = reference(scripts, [lines])
    same_rows(rows, expected.rows)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(workflows_and_lines(), st.integers(1, 4), st.sampled_from([0, 500, 5000]), st.randoms(use_true_random=False))
def test_engine_matches_reference_on_random_workflows(example, batch_count, delay_ms, rng):
    scripts, lines = example
    cuts = sorted(rng.randint(0, len(lines)) for _ in range(batch_count - 1))
    batches = [lines[a:b] for a, b in zip([0, *cuts], [*cuts, len(lines)])]
    expected = reference(scripts, batches, delay_ms)
    rows, late = run_engine(scripts, batches, delay_ms)
    same_rows(rows, expected.rows)
    assert late == expected.late
