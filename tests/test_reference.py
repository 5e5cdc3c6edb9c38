"""The reference evaluator (docs/LANGUAGE.md, "Semantics") on hand-computed cases: every expected value below is
worked out in the comments next to it, from the language's rules, not from the evaluator."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from sensorscript.parser import load
from sensorscript.runtime.state.cep import operators as registry
from oracles.records import Rejected, read_line
from oracles.streams import Evaluation, evaluate
from tests.conftest import EXAMPLES
from tests.strategies import workflows_and_lines


def run(scripts: dict[str, str], *batches: list[str], delay_ms: int = 0) -> Evaluation:
    paths = [f"{name}.ss" for name in scripts]
    workflows = load(paths, texts={f"{name}.ss": text for name, text in scripts.items()}).workflows
    return evaluate(workflows, list(batches), delay_ms)


def rows(evaluation: Evaluation, stream: str) -> list[tuple]:
    """(ts, window_start, window_end, value) of one output stream, in result order."""
    return [(r.ts, r.window_start, r.window_end, r.value) for r in evaluation.rows if r.stream == stream]


def streams(evaluation: Evaluation) -> set[str]:
    return {r.stream for r in evaluation.rows}


# -------------------------------------------------------------------- windows


def test_tumbling_window_emits_only_windows_holding_a_tuple():
    result = run({"w": "X = avg(S, 10, 10);"},
                 ["S,0,1", "S,5,3", "S,9,5", "S,10,7", "S,25,2", "S,45,4", "T,3,100"])
    # [0,10): 1 3 5 -> 3.0; [10,20): 7; [20,30): 2; [30,40) is empty; [40,50): 4.
    assert rows(result, "w.X") == [(9, 0, 10, 3.0), (19, 10, 20, 7.0), (29, 20, 30, 2.0), (49, 40, 50, 4.0)]
    assert all(r.version == 1 for r in result.rows)


def test_sliding_window_puts_a_tuple_in_every_window_that_covers_it():
    result = run({"w": "X = max(S, 10, 5);"}, ["S,3,1", "S,7,4", "S,12,2"])
    # Windows [5k, 5k+10): ts 3 is in k=-1 and k=0, ts 7 in k=0 and 1, ts 12 in k=1 and 2.
    assert rows(result, "w.X") == [
        (4, -5, 5, 1.0),   # [-5,5): 1
        (9, 0, 10, 4.0),   # [0,10): 1 4
        (14, 5, 15, 4.0),  # [5,15): 4 2
        (19, 10, 20, 2.0),  # [10,20): 2
    ]


def test_sampling_window_ignores_tuples_between_windows():
    result = run({"w": "X = sum(S, 2, 5);"}, ["S,0,1", "S,1,2", "S,3,10", "S,6,4", "S,8,100", "S,12,1000"])
    # Windows [5k, 5k+2): [0,2) holds 1 2; [5,7) holds 4; 3, 8 and 12 fall in the gaps,
    # so [10,12) is empty and emits nothing.
    assert rows(result, "w.X") == [(1, 0, 2, 3.0), (6, 5, 7, 4.0)]


def test_every_window_aggregate():
    script = """
        A = avg(S, 5, 5);
        MX = max(S, 5, 5);
        MN = min(S, 5, 5);
        SM = sum(S, 5, 5);
        N = count(S, 5, 5);
    """
    result = run({"w": script}, ["S,1,2", "S,2,-1", "S,4,5", "S,7,3"])
    # [0,5): 2 -1 5; [5,10): 3.
    assert rows(result, "w.A") == [(4, 0, 5, 2.0), (9, 5, 10, 3.0)]  # 6/3
    assert rows(result, "w.MX") == [(4, 0, 5, 5.0), (9, 5, 10, 3.0)]
    assert rows(result, "w.MN") == [(4, 0, 5, -1.0), (9, 5, 10, 3.0)]
    assert rows(result, "w.SM") == [(4, 0, 5, 6.0), (9, 5, 10, 3.0)]
    assert rows(result, "w.N") == [(4, 0, 5, 3.0), (9, 5, 10, 1.0)]


def test_avg_is_sum_over_count():
    result = run({"w": "A = avg(S, 10, 10);"}, ["S,1,1", "S,2,1", "S,3,2"])
    assert rows(result, "w.A") == [(9, 0, 10, 4 / 3)]


# --------------------------------------------------------------------- unions


def test_union_of_raw_sensors_into_a_window():
    result = run({"w": "U = union(A, B);\nW = avg(U, 10, 10);"},
                 ["A,1,1", "B,2,3", "B,5,5", "A,11,5", "B,12,2", "C,3,1000"])
    # [0,10): 1 3 5 -> 3.0; [10,20): 5 2 -> 3.5. C is read by no workflow.
    assert rows(result, "w.W") == [(9, 0, 10, 3.0), (19, 10, 20, 3.5)]
    assert streams(result) == {"w.W"}


def test_union_output_passes_every_tuple_through():
    result = run({"w": "U = union(A, B);"}, ["B,2,3", "A,1,1", "A,2,7", "B,1,1"])
    # A multiset: the two tuples at ts 1 (both 1.0) both stay; no window columns.
    assert sorted(rows(result, "w.U")) == [(1, None, None, 1.0), (1, None, None, 1.0),
                                           (2, None, None, 3.0), (2, None, None, 7.0)]
    assert [r.ts for r in result.rows] == [1, 1, 2, 2]


def test_union_of_window_outputs_has_no_window_columns():
    result = run({"w": "H = max(S, 10, 10);\nU = union(H, T);"}, ["S,1,2", "S,3,4", "T,5,7"])
    assert rows(result, "w.U") == [(5, None, None, 7.0), (9, None, None, 4.0)]


def test_bridge_shape_on_a_small_input():
    # bridge.ss with 10 ms windows every 5 ms instead of 10 min every 5 min.
    script = """
        MD1Z   = avg("8MD1-AZ", 10, 5);
        UNI    = union("8MD2-A", "8MD3-A");
        MD23   = avg(UNI, 10, 5);
        MD4Z   = avg("8MD4-AZ", 10, 5);
        UNIF   = union(MD1Z, MD23, MD4Z);
        out_MZ = max(UNIF, 10, 5);
        out_AZ = avg(UNIF, 10, 5);
    """
    lines = ["8MD1-AZ,102,1.0", "8MD1-AZ,107,3.0", "8MD2-A,103,2.0", "8MD3-A,103,4.0", "8MD3-A,108,6.0",
             "8MD4-AZ,106,5.0"]
    result = run({"bridge": script}, lines)
    # Windows [5k, 5k+10), ts = end - 1:
    #   MD1Z: [95,105): 1 -> 1 @104; [100,110): 1 3 -> 2 @109; [105,115): 3 -> 3 @114
    #   MD23: [95,105): 2 4 -> 3 @104; [100,110): 2 4 6 -> 4 @109; [105,115): 6 -> 6 @114
    #   MD4Z: [100,110): 5 @109; [105,115): 5 @114
    #   UNIF: @104: 1 3; @109: 2 4 5; @114: 3 6 5
    # Windows over UNIF: [95,105): 1 3; [100,110): 1 3 2 4 5; [105,115): 2 4 5 3 6 5; [110,120): 3 6 5
    assert rows(result, "bridge.out_MZ") == [(104, 95, 105, 3.0), (109, 100, 110, 5.0),
                                             (114, 105, 115, 6.0), (119, 110, 120, 6.0)]
    assert rows(result, "bridge.out_AZ") == [(104, 95, 105, 2.0), (109, 100, 110, 3.0),
                                             (114, 105, 115, 25 / 6), (119, 110, 120, 14 / 3)]
    assert streams(result) == {"bridge.out_MZ", "bridge.out_AZ"}


def test_a_stream_may_be_read_before_the_line_that_defines_it():
    result = run({"w": "W = sum(U, 10, 10);\nU = union(A, B);"}, ["A,1,1", "B,2,2"])
    assert rows(result, "w.W") == [(9, 0, 10, 3.0)]


def test_each_workflow_reads_names_its_own_way():
    # X is a stream in workflow a and a raw sensor in workflow b.
    result = run({"a": "X = sum(S, 10, 10);", "b": "Y = sum(X, 10, 10);"}, ["S,1,1", "X,1,5"])
    assert rows(result, "a.X") == [(9, 0, 10, 1.0)]
    assert rows(result, "b.Y") == [(9, 0, 10, 5.0)]


# ------------------------------------------------------------- combine-latest


def test_combine_latest_waits_for_every_input_and_averages_equal_timestamps():
    result = run({"w": "U = union(B1, B2);\nD = A - U;"},
                 ["A,1,10", "B1,2,1", "A,3,20", "B1,5,2", "A,5,30", "B2,5,4", "A,7,40"])
    # ts 1: U has had no tuple yet -> nothing.
    # ts 2: 10 - 1 = 9; ts 3: 20 - 1 = 19;
    # ts 5: U has two tuples, their mean is (2 + 4) / 2 = 3 -> 30 - 3 = 27;
    # ts 7: only A is new, U's latest value is still 3 -> 40 - 3 = 37.
    assert rows(result, "w.D") == [(2, None, None, 9.0), (3, None, None, 19.0), (5, None, None, 27.0),
                                   (7, None, None, 37.0)]


def test_combine_latest_over_window_outputs():
    # deck_vibration's SPAN: the windows of both inputs end together, so one tuple per window.
    result = run({"w": "HI = max(S, 10, 10);\nLO = min(S, 10, 10);\nSPAN = HI - LO;"},
                 ["S,1,2", "S,4,-1", "S,12,5"])
    assert rows(result, "w.SPAN") == [(9, None, None, 3.0), (19, None, None, 0.0)]


def test_cross_stream_functions_and_a_stream_read_twice():
    script = """
        SM = sum(A, B, 1.0);
        MN = min(A, B);
        AV = avg(A, B, A);
        WORST = max(A, -A, 0);
    """
    result = run({"w": script}, ["A,1,4", "B,1,1", "A,2,-0.5"])
    assert rows(result, "w.SM") == [(1, None, None, 6.0), (2, None, None, 1.5)]
    assert rows(result, "w.MN") == [(1, None, None, 1.0), (2, None, None, -0.5)]
    assert rows(result, "w.AV") == [(1, None, None, 3.0), (2, None, None, 0.0)]  # (4+1+4)/3; (-0.5+1-0.5)/3
    # WORST reads only A: it starts at ts 1 without waiting for B.
    assert rows(result, "w.WORST") == [(1, None, None, 4.0), (2, None, None, 0.5)]


def test_comparisons_and_logic_give_one_or_zero():
    script = """
        GT = A > B;  GE = A >= B;  LT = A < B;  LE = A <= B;  EQ = A == B;  NE = A != B;
        BOTH = A and B;  EITHER = A or B;  NOT_A = not A;
        FLAG = A > B or not B;
    """
    result = run({"w": script}, ["A,1,2", "B,1,2", "A,2,0", "B,2,3", "A,3,-1", "B,3,0", "A,4,5"])
    # ts 1: A=2 B=2;  ts 2: A=0 B=3;  ts 3: A=-1 B=0;  ts 4: A=5 B=0 (B's latest).
    expected = {
        "GT": [0, 0, 0, 1], "GE": [1, 0, 0, 1], "LT": [0, 1, 1, 0], "LE": [1, 1, 1, 0],
        "EQ": [1, 0, 0, 0], "NE": [0, 1, 1, 1],
        "BOTH": [1, 0, 0, 0], "EITHER": [1, 1, 1, 1], "NOT_A": [0, 1, 0, 0],
        "FLAG": [0, 0, 1, 1],  # (2>2 or not 2), (0>3 or not 3), (-1>0 or not 0), (5>0 or not 0)
    }
    for name, values in expected.items():
        assert rows(result, f"w.{name}") == [(ts, None, None, float(v)) for ts, v in zip((1, 2, 3, 4), values)], name


def test_division_by_zero_skips_the_timestamp_and_is_counted():
    result = run({"w": "R = A / B;\nQ = A > 0 or 1 / B;\nP = A + B;"},
                 ["A,1,6", "B,1,2", "B,2,0", "A,3,9", "B,4,3"])
    # R: ts 1: 6/2 = 3; ts 2 and 3: B is 0 -> skipped; ts 4: 9/3 = 3.
    assert rows(result, "w.R") == [(1, None, None, 3.0), (4, None, None, 3.0)]
    # Q: `A > 0` is true throughout, yet the division is computed, so ts 2 and 3 are skipped too.
    assert rows(result, "w.Q") == [(1, None, None, 1.0), (4, None, None, 1.0)]
    assert result.division_by_zero == {"w.R": 2, "w.Q": 2}


# ------------------------------------------------------- input and lateness


def test_bad_lines_are_quarantined_with_their_reason_in_input_order():
    first = ["sensor_id,ts,value", "", "A,1,2.0", "A,x,1", "A,1", ",1,1"]
    second = ["A,2,abc", "{bad json", '{"sensor_id": "A", "ts": 3, "value": true}', "Z,oops,1"]
    result = run({"w": "X = sum(A, 10, 10);"}, first, second)
    # The reasons are docs/LANGUAGE.md's ("Input records").
    assert result.quarantine == [
        ("A,x,1", "ts is not an integer (epoch milliseconds)"),
        ("A,1", "expected 3 comma-separated fields: sensor_id,ts,value"),
        (",1,1", "empty sensor_id"),
        ("A,2,abc", "value is not a number"),
        ("{bad json", "not a JSON object with sensor_id, ts and value"),
        ("Z,oops,1", "ts is not an integer (epoch milliseconds)"),  # quarantined before any sensor filter
    ]
    assert rows(result, "w.X") == [(9, 0, 10, 3.0)]  # 2.0 + true


def test_late_readings_across_batches_are_dropped_and_counted():
    script = {"w": "X = sum(A, 100, 100);"}
    batches = (["A,10,1", "A,20,2"], ["A,5,100", "A,15,3", "Z,0,1"], ["A,12,1000"])
    # delay 5: the watermark is 20 - 5 = 15 before batches 2 and 3. A,5 and A,12 are late;
    # A,15 is not (late means strictly below); Z is read by no workflow, so never counted.
    result = run(script, *batches, delay_ms=5)
    assert result.late == 2
    assert rows(result, "w.X") == [(99, 0, 100, 6.0)]
    # No delay: the watermark is 20, and A,15 is late as well.
    result = run(script, *batches, delay_ms=0)
    assert result.late == 3
    assert rows(result, "w.X") == [(99, 0, 100, 3.0)]


def test_nothing_is_late_within_one_batch():
    result = run({"w": "X = sum(A, 100, 100);"}, ["A,50,1", "A,10,2", "A,0,3"])
    assert result.late == 0
    assert rows(result, "w.X") == [(99, 0, 100, 6.0)]


def test_readings_no_workflow_reads_do_not_move_the_watermark():
    result = run({"w": "X = sum(A, 100, 100);"}, ["Z,1000,1", "A,10,1"], ["A,5,2"])
    # Only A counts: the watermark is 10 before batch 2, so A,5 is late; Z,1000 does not matter.
    assert result.late == 1
    result = run({"w": "X = sum(A, 100, 100);"}, ["Z,1000,1"], ["A,5,2"])
    assert result.late == 0
    assert rows(result, "w.X") == [(99, 0, 100, 2.0)]


# ------------------------------------------------------------------ patterns


def test_the_pier_workflows_match_their_patterns():
    """The bundled pattern workflows through the reference: one surge, its count, a flood alarm."""
    pier = next(path for path in EXAMPLES if path.stem == "pier_alarms")
    lines = [f"8TL3-N,{m * 60_000 + 30_000},{v}" for m, v in enumerate([0, 2, 3, 4, 0.05, 0, 0, 0, 0, 0])]
    lines += [f"8WL3,{m * 60_000},{10 if m == 1 else 0}" for m in range(10)] + ["8TL3-S,125000,9.5"]
    rows = evaluate(load([pier]).workflows, [lines]).rows
    surge = [r for r in rows if r.stream == "pier_alarms.SURGE"]
    assert [(r.start_ts, r.ts) for r in surge] == [(119_999, 239_999)]  # a = minute 1, c = minutes 2 and 3
    assert surge[0].value == 4.0 - 2.0  # yield last(c.value) - a.value
    flood = [r for r in rows if r.stream == "pier_alarms.FLOOD"]
    assert [(r.start_ts, r.ts) for r in flood] == [(119_999, 125_000)]


class SoonAfter(registry.BinaryOperator):
    """docs/OPERATORS.md's binary operator, in milliseconds: b at most 5 ms after a."""

    def Q(self, left, right):  # noqa: N802 (the operator model's names)
        return left.end < right.start <= left.end + 5


class Rising(registry.UnaryOperator):
    """docs/OPERATORS.md's unary operator: the events whose value is above the one before."""

    def Q(self, state, event):  # noqa: N802
        return state is not None and event.value > state

    def Z(self, state, event):  # noqa: N802
        return event.value


def test_the_reference_calls_the_users_operators_it_is_handed(monkeypatch):
    """User code (docs/OPERATORS.md): registered for the checker, handed to the reference."""
    operators = {"rising": Rising(), "soon_after": SoonAfter()}
    monkeypatch.setattr(registry, "_registered", {})  # registered for this test only
    for name, operator in operators.items():
        registry.register(name, operator)
    workflows = load(["w.ss"], texts={"w.ss": "P = pattern(a: rising(T) ->[soon_after] b: W) within 100;"}).workflows
    lines = ["T,1,1", "T,2,3", "T,3,2", "T,4,5", "W,6,0", "W,12,0"]
    # rising keeps T at 2 (3 > 1) and at 4 (5 > 2); soon_after takes W at 6 after both (6 <= 2 + 5,
    # 6 <= 4 + 5), W at 12 after neither.
    rows = evaluate(workflows, [lines], operators=operators).rows
    assert [(r.start_ts, r.ts) for r in rows] == [(2, 6), (4, 6)]
    with pytest.raises(KeyError, match="neither built in nor handed to the oracle"):
        evaluate(workflows, [lines])


# ---------------------------------------------------------------- ordering


def test_rows_are_sorted_by_stream_then_ts_then_window_start():
    result = run({"b": "Y = count(S, 4, 2);", "a": "X = S * 2;"}, ["S,5,1", "S,1,2"])
    # Y: windows [2k, 2k+4): ts 1 in k=-1, 0; ts 5 in k=1, 2.
    assert [(r.stream, r.ts, r.window_start, r.value) for r in result.rows] == [
        ("a.X", 1, None, 4.0), ("a.X", 5, None, 2.0),
        ("b.Y", 1, -2, 1.0), ("b.Y", 3, 0, 1.0), ("b.Y", 5, 2, 1.0), ("b.Y", 7, 4, 1.0),
    ]


# --------------------------------------------------------- random workflows


@settings(max_examples=50, deadline=None)
@given(workflows_and_lines(), st.integers(1, 3), st.sampled_from((0, 1000, 5000)))
def test_random_workflows_evaluate(example, batch_count, delay_ms):
    scripts, lines = example
    size = len(lines) // batch_count + 1
    batches = [lines[i * size:(i + 1) * size] for i in range(batch_count)]
    loaded = load([f"{name}.ss" for name in scripts], texts={f"{name}.ss": t for name, t in scripts.items()})
    result = evaluate(loaded.workflows, batches, delay_ms)
    outputs = {f"{w.name}.{name}" for w in loaded.workflows for name in w.outputs}
    assert streams(result) <= outputs
    keys = [(r.stream, r.ts, r.window_start if r.window_start is not None else -1) for r in result.rows]
    assert keys == sorted(keys)
    assert len(result.quarantine) == sum(isinstance(read_line(line), Rejected) for line in lines)
    if batch_count == 1:
        assert result.late == 0
