"""The plan: shared graph, slicing, partitioning and cost (docs/ARCHITECTURE.md, "The compiler")."""

import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sensorscript.graph.build import build_graph
from sensorscript.graph.slicing import slice_index, slice_stream, slice_start
from sensorscript.parser import load
from sensorscript.partition.cost import communication_cost
from sensorscript.partition.greedy import _two_hop_edges, node_rates, partition
from sensorscript.graph.draw import to_dot
from sensorscript.partition.plan import graph_of_plan_json, make_plan, plan_json, stable_json
from sensorscript.partition.refine import _Refiner, atoms, baselines, consumers_of, loads, refine, traffic
from sensorscript.registry import Sensor, SensorRegistry
from sensorscript.workload import bridge_workload
from tests.conftest import EXAMPLES, ROOT
from tests.strategies import workflows_and_lines


def workflows(scripts: dict[str, str]):
    return load([f"{n}.ss" for n in scripts], texts={f"{n}.ss": t for n, t in scripts.items()}).workflows


def example_plan(partitions=2):
    loaded = load([p for p in EXAMPLES if p.name != "pier_alarms.ss"] + [ROOT / "workflows" / "pier_alarms.ss"])
    return make_plan(loaded.workflows, SensorRegistry.open(ROOT / "workflows" / "sensors.csv"), partitions)


# ------------------------------------------------------------------- golden files, one per pass

@pytest.mark.parametrize("section", ["nodes", "shared", "slices", "partitions", "cost_tuples_per_minute"])
def test_golden_plan_of_the_examples(section, golden):
    document = plan_json(example_plan())
    golden(f"plan/examples.{section}.json", json.dumps(document[section], indent=2, sort_keys=True) + "\n")


def test_plan_json_is_deterministic():
    assert json.dumps(plan_json(example_plan()), sort_keys=True) == json.dumps(plan_json(example_plan()),
                                                                               sort_keys=True)


# ---------------------------------------------------------------------------------- sharing

def test_the_graph_read_back_from_plan_json_draws_as_the_scripts_do():
    """The dashboard draws the DAG of a compiled job from its plan.json (sscript graph, from scripts)."""
    plan = example_plan()
    document = json.loads(json.dumps(plan_json(plan)))
    assert to_dot(graph_of_plan_json(document)) == to_dot(plan.graph)


def test_identical_statements_in_two_workflows_are_one_node():
    graph = build_graph(workflows({
        "a": 'M = avg("S1", 10s, 5s);\nU = union(S2, S3);\nW = max(U, 10s, 5s);\nX = M + W;',
        "b": 'N = avg(S1, 10_000, 5000);\nV = union(S3, S2);\nZ = max(V, 10s, 5s);\nY = Z + N;',
    }))
    assert graph.outputs["a.X"] == graph.outputs["b.Y"]  # same computation: commutative + and union
    assert {n.label for n in graph.shared()} == {"M", "U", "W", "X"}  # labelled by their first definition
    assert len([n for n in graph.nodes() if n.kind == "window"]) == 2


def test_different_parameters_are_not_shared():
    graph = build_graph(workflows({"a": "M = avg(S, 10s, 5s);", "b": "M = avg(S, 10s, 2s);",
                                   "c": "M = max(S, 10s, 5s);", "d": "M = S - T;", "e": "M = T - S;"}))
    assert len(set(graph.outputs.values())) == 5


def test_patterns_share_up_to_variable_names():
    graph = build_graph(workflows({
        "a": "P = pattern(x: S -> y: T+) where x.value > 1 and count(y) > 2 within 1min;",
        "b": "Q = pattern(first: S -> rest: T+) where first.value > 1 and count(rest) > 2 within 60s;",
    }))
    assert graph.outputs["a.P"] == graph.outputs["b.Q"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workflows_and_lines())
def test_merging_never_changes_what_an_output_denotes(example):
    scripts, _ = example
    merged = build_graph(workflows(scripts))
    for name, text in scripts.items():
        alone = build_graph(workflows({name: text}))
        for output, node_id in alone.outputs.items():
            assert merged.outputs[output] == node_id
            assert merged.node(node_id).key == alone.node(node_id).key


# ---------------------------------------------------------------------------------- slicing

def test_gcd_slices_for_the_bridge():
    plan = slice_stream("s", [("w1", "avg", 600_000, 300_000), ("w2", "max", 600_000, 300_000)])
    assert (plan.mode, plan.period_ms, plan.offsets_ms, plan.partials) == ("gcd", 300_000, (0,), ("count", "max", "sum"))


def test_gcd_of_lengths_and_slides():
    plan = slice_stream("s", [("w1", "sum", 30_000, 10_000), ("w2", "sum", 20_000, 10_000)])
    assert (plan.mode, plan.period_ms, plan.slices_per_minute) == ("gcd", 10_000, 6)


def test_edges_win_when_fewer_cuts_repeat():
    # gcd 5 s gives 12 slices a minute; the windows only start or end at 0, 10, 15, 20 s
    # of every 30 s, 8 slices a minute.
    plan = slice_stream("s", [("w1", "sum", 30_000, 10_000), ("w2", "sum", 60_000, 15_000)])
    assert (plan.mode, plan.period_ms, plan.offsets_ms) == ("edges", 30_000, (0, 10_000, 15_000, 20_000))
    assert (plan.gcd_slices_per_minute, plan.slices_per_minute) == (12, 8)


def test_edges_win_for_sampling_windows():
    plan = slice_stream("s", [("w", "avg", 7_000, 10_000)])  # gcd 1 s: 10 slices per 10 s; edges: 2
    assert (plan.mode, plan.period_ms, plan.offsets_ms) == ("edges", 10_000, (0, 7_000))
    assert plan.gcd_slices_per_minute == 60 and plan.slices_per_minute == 12


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1, 2, 3, 5, 6, 7, 10, 12]), st.sampled_from([1, 2, 3, 4, 5, 10])),
                min_size=1, max_size=4), st.integers(-50, 200))
def test_every_window_is_a_whole_number_of_slices(windows, ts):
    plan = slice_stream("s", [(f"w{i}", "sum", length, slide) for i, (length, slide) in enumerate(windows)])
    index = slice_index(plan, ts)
    assert slice_start(plan, index) <= ts < slice_start(plan, index + 1)
    for length, slide in windows:
        for k in range(-2, 5):
            start, end = k * slide, k * slide + length
            assert slice_start(plan, slice_index(plan, start)) == start
            assert slice_start(plan, slice_index(plan, end)) == end


# ----------------------------------------------------------------------------- partitioning

def test_partitioner_updates_the_load_after_each_assignment():
    # Four independent workflows of equal weight on two partitions: two on each
    # (the pseudo-code of Zhou et al., without the update, would put all four on partition 0).
    scripts = {f"w{i}": f"X = avg(S{i}, 1s, 1s);" for i in range(4)}
    graph = build_graph(workflows(scripts))
    plan = partition(graph, {f"S{i}": 20.0 for i in range(4)}, 2)
    assert sorted(plan.loads) == [40.0, 40.0]
    assert plan.crossings == ()


def test_heaviest_first():
    graph = build_graph(workflows({"a": "X = avg(A, 1s, 1s);", "b": "X = avg(B, 1s, 1s);",
                                   "c": "X = avg(C, 1s, 1s);"}))
    plan = partition(graph, {"A": 50.0, "B": 30.0, "C": 20.0}, 2)
    assert plan.sensor_partition == {"A": 0, "B": 1, "C": 1}


def test_a_heavy_subgraph_is_split_along_its_lowest_rate_edges():
    # One workflow over 20 sensors joined only by their window outputs: splitting it
    # should cut window outputs (one tuple a second), never raw readings.
    sensors = [f"S{i}" for i in range(20)]
    text = "".join(f"W{i} = avg({s}, 1s, 1s);\n" for i, s in enumerate(sensors))
    text += "ALL = union(" + ", ".join(f"W{i}" for i in range(20)) + ");\nOUT = max(ALL, 10s, 10s);\n"
    graph = build_graph(workflows({"wide": text}))
    plan = partition(graph, {s: 20.0 for s in sensors}, 4)
    assert plan.balance <= 1.1
    assert plan.split_subgraphs == 1
    assert plan.crossings and all(c.kind == "derived" and c.rate_per_s == 1.0 for c in plan.crossings)


def test_cost_of_the_examples():
    plan = example_plan()
    cost = plan.cost
    assert cost.lower_bound == 60 * sum(plan.frequencies.values())
    assert cost.lower_bound <= cost.ours
    assert cost.ours == pytest.approx(cost.lower_bound + 60 * sum(c.rate_per_s for c in plan.partitions.crossings))
    # The one cut edge: 8AC3-Z (50 Hz) into the union ACC on the other partition, which only windows
    # over 10 s slices of count, max, min and sum read: 4 partials per 10 s cross, not 500 readings.
    (crossing,) = plan.partitions.crossings
    assert (crossing.kind, crossing.into, crossing.rate_per_s) == ("partials", (crossing.target,), 0.4)
    assert cost.ours == pytest.approx(15_660 + 24)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.sampled_from([2, 3, 4, 8]), st.sampled_from([32, 64, 128]))
def test_placement_properties_on_bridge_workloads(seed, count, size):
    workload = bridge_workload(size, 300, seed)
    registry = SensorRegistry.of(workload.sensors + [Sensor("UNUSED-1", 20.0), Sensor("UNUSED-2", 50.0)])
    loaded = load([f"{n}.ss" for n in workload.workflows],
                  texts={f"{n}.ss": t for n, t in workload.workflows.items()})
    plan = make_plan(loaded.workflows, registry, count)
    placement = plan.partitions.sensor_partition
    referenced = set(plan.graph.sensors())
    assert set(placement) == referenced  # every referenced sensor on exactly one partition; no others
    assert all(0 <= p < count for p in placement.values())
    assert set(plan.partitions.node_partition) == {n.id for n in plan.graph.nodes()}
    assert plan.partitions.balance <= 1.1 + 1e-9
    assert plan.cost.ours >= plan.cost.lower_bound
    assert not _two_hop_edges(plan.graph, plan.partitions.node_partition)  # the job forwards once
    # Never worse than a naive placement that keeps the bound (issue #44): the chosen placement
    # costs no more than either baseline does, as Zhou et al. count it, when that baseline's most
    # loaded partition is within the bound; and no more than the greedy plan it may start from.
    cost = plan.cost
    for tuples, peak in ((cost.naive_workflow_hash, cost.naive_workflow_peak),
                         (cost.naive_sensor_hash, cost.naive_sensor_peak)):
        if peak <= 1.1 + 1e-9:
            assert cost.ours <= tuples + 1e-6, (cost, plan.partitions.considered)
    greedy = partition(plan.placed, plan.frequencies, count)
    assert cost.ours <= communication_cost(plan.graph, plan.frequencies, greedy).ours + 1e-6
    assert "-" not in "".join(cost.versus(b) for b in ("sensor", "workflow"))  # no negative saving said


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.sampled_from([2, 3, 4]), st.sampled_from([16, 32]), st.sampled_from([1.1, 1.5, 2.0]))
def test_refinement_lowers_the_traffic_keeps_the_bound_and_forwards_once(seed, count, size, bound):
    """refine.py from any start that keeps the bound and forwards once (the greedy plan, the
    baselines): never more traffic, never over the bound, never a tuple forwarded twice."""
    workload = bridge_workload(size, 60, seed)
    registry = SensorRegistry.of(workload.sensors)
    loaded = load([f"{n}.ss" for n in workload.workflows],
                  texts={f"{n}.ss": t for n, t in workload.workflows.items()})
    plan = make_plan(loaded.workflows, registry, count, epsilon=bound - 1)
    graph, frequencies = plan.placed, plan.frequencies
    rates = node_rates(graph, frequencies)
    starts = {"greedy": partition(graph, frequencies, count, bound - 1).node_partition, **baselines(graph, frequencies, count)}
    for name, start in starts.items():
        load_before = loads(graph, frequencies, start, count)
        if max(load_before) > bound * sum(load_before) / count + 1e-9 or _two_hop_edges(graph, start):
            continue
        refined, moves = refine(graph, frequencies, start, count, rates, bound)
        load_after = loads(graph, frequencies, refined, count)
        assert max(load_after) <= bound * sum(load_after) / count + 1e-9, name
        assert not _two_hop_edges(graph, refined), name
        assert traffic(graph, refined, rates) <= traffic(graph, start, rates) + 1e-9, name
        assert (moves == 0) == (refined == start), name
        of = atoms(graph)
        assert all(refined[n] == refined[of[n]] for n in refined)  # an atom on one partition


@pytest.mark.parametrize("seed, count, size", [(10, 4, 16), (26, 3, 32)])
def test_refinement_climbs_out_of_a_placement_no_single_move_improves(seed, count, size):
    """The Fiduccia-Mattheyses pass: from a placement where every single move keeping the bound
    raises the traffic, leaves it as it is or would forward a tuple twice (a local minimum of the
    moves that only lower it), a
    sequence of moves that starts at a loss still finds a cheaper placement, under the bound and
    forwarding once."""
    workload = bridge_workload(size, 60, seed)
    loaded = load([f"{n}.ss" for n in workload.workflows],
                  texts={f"{n}.ss": t for n, t in workload.workflows.items()})
    plan = make_plan(loaded.workflows, SensorRegistry.of(workload.sensors), count)
    graph, frequencies = plan.placed, plan.frequencies
    rates = node_rates(graph, frequencies)
    downhill = _Refiner(graph, frequencies, partition(graph, frequencies, count).node_partition, count, rates, 1.1,
                        atoms(graph), consumers_of(graph))
    downhill.downhill()
    local = downhill.placement
    for atom in sorted(set(downhill.of.values())):  # a move that lowers the traffic would forward twice
        assert not any(downhill.move(atom, there) for gain, there in downhill.options(atom) if gain > 1e-9)
    refined, moves = refine(graph, frequencies, local, count, rates, 1.1)
    assert moves and traffic(graph, refined, rates) < traffic(graph, local, rates) - 1e-6
    found = loads(graph, frequencies, refined, count)
    assert max(found) <= 1.1 * sum(found) / count + 1e-9
    assert not _two_hop_edges(graph, refined)


def test_balance_trades_balance_for_traffic(tmp_path):
    """`--balance B`: a looser bound never costs more tuples (the placements under the tighter one
    keep the looser one too) and the plan keeps it; the older `--epsilon E` is B = 1 + E, and both
    at once are refused."""
    from click.testing import CliRunner

    from sensorscript.cli import main

    workload = bridge_workload(32, 60, 3)
    loaded = load([f"{n}.ss" for n in workload.workflows],
                  texts={f"{n}.ss": t for n, t in workload.workflows.items()})
    registry = SensorRegistry.of(workload.sensors)
    costs = []
    for balance in (1.05, 1.1, 1.5, 2.0, 4.0):
        plan = make_plan(loaded.workflows, registry, 4, epsilon=balance - 1)
        assert plan.partitions.balance <= balance + 1e-9 or plan.partitions.chosen == "greedy"
        costs.append(plan.cost.ours)
    assert costs == sorted(costs, reverse=True) and costs[-1] < costs[0], costs
    script = tmp_path / "w.ss"
    script.write_text('A = avg("S1", 10s, 5s);\n')
    runner = CliRunner()
    older = runner.invoke(main, ["explain", str(script), "--epsilon", "0.5"])
    newer = runner.invoke(main, ["explain", str(script), "--balance", "1.5"])
    assert older.exit_code == newer.exit_code == 0 and "bound 1.50" in newer.output and older.output == newer.output
    both = runner.invoke(main, ["explain", str(script), "--balance", "1.2", "--epsilon", "0.5"])
    assert both.exit_code == 2 and "give --balance or the older --epsilon, not both" in both.output
    assert runner.invoke(main, ["explain", str(script), "--balance", "0.9"]).exit_code == 2


def test_plan_txt_lists_each_forwarded_stream_once_heaviest_first(tmp_path):
    """plan.txt lists what the job forwards as it forwards it: a stream once per partition that reads
    it (however many computations there do), its tuples/min as the cost counts them, the heaviest
    first, computations named by workflow (statement names repeat), and for slice partials the
    cuts each set serves."""
    import re

    from sensorscript.partition.explain import explain
    from sensorscript.registry import read_csv
    from sensorscript.workload import write_workflows

    write_workflows(tmp_path, 256, 300, shared=4)
    registry = SensorRegistry.of(read_csv(tmp_path / "sensors.csv"))
    plan = make_plan(load(sorted(str(f) for f in (tmp_path / "workflows").glob("*.ss")), registry.ids()).workflows,
                     registry, 2)
    groups: dict[tuple[str, int], list] = {}
    for c in plan.partitions.crossings:
        groups.setdefault((c.source, c.to_partition), []).append(c)
    text = explain(plan)
    assert f"the job forwards {len(groups)} stream(s), each once to each partition that reads it:" in text
    section = text.split("each once to each partition that reads it:\n")[1].split("\n\n")[0].splitlines()
    shown = section[:20]
    assert len(groups) > 20 and section[20] == f"    ... and {len(groups) - 20} more"
    found = [re.fullmatch(r"    (\S+), partition (\d) -> (\d): ([\d,.]+) tuples/min of (.*); read there by (\d+) "
                          r"computation\(s\)", line) for line in shown]
    assert all(found), shown
    named = {(plan.graph.node(s).sensor_id if plan.graph.node(s).kind == "sensor" else
              f"{plan.graph.node(s).origins[0].workflow}.{plan.graph.node(s).origins[0].stream}", d): edges
             for (s, d), edges in groups.items()}
    rates = []
    for m in found:
        edges = named[m[1], int(m[3])]
        assert int(m[2]) == edges[0].from_partition and int(m[6]) == len(edges)
        assert float(m[4].replace(",", "")) == pytest.approx(edges[0].rate_per_s * 60, abs=0.05)
        rates.append(edges[0].rate_per_s)
    assert rates == sorted(rates, reverse=True) and len({(m[1], m[3]) for m in found}) == len(found)
    assert max(rates) == max(edges[0].rate_per_s for edges in groups.values())
    assert any(re.search(r"slice partials instead of [\d,]+ readings \(.*per 10s slice for .*wf\d{4}\.SHU", m[5])
               for m in found), shown


_json_scalars = (st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats(allow_nan=True, allow_infinity=True)
                 | st.text())
_json_values = st.recursive(_json_scalars, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
                            | st.dictionaries(st.text(max_size=6), inner, max_size=4)
                            | st.dictionaries(st.integers(-5, 5), inner, max_size=3), max_leaves=30)


@given(_json_values)
@settings(max_examples=400, deadline=None)
def test_stable_json_is_json_dumps_with_indent_and_sorted_keys(value):
    """plan.json's writer is the standard library's `json.dumps(..., indent=2, sort_keys=True)`,
    only faster: the same text for any JSON value (non-ASCII and control characters, NaN and
    infinities, empty containers, tuples, integer keys)."""
    assert stable_json(value) == json.dumps(value, indent=2, sort_keys=True)


def test_plan_json_text_is_json_dumps_of_the_plan():
    document = plan_json(example_plan())
    assert stable_json(document) == json.dumps(document, indent=2, sort_keys=True)
