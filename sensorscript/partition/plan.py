"""The plan the generated job follows: shared graph, slices, placement and cost, as one object.

`make_plan` runs the planning passes in order; `plan_json` renders the plan as
stable, diff-friendly JSON (sorted keys, no timestamps, no absolute paths).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii as _json_string  # C, as json.dumps uses it
from pathlib import Path

from sensorscript.errors import Diagnostic, warning
from sensorscript.cep.plan import DEFAULT_LIMIT, Options, PatternPlan, plan_pattern
from sensorscript.graph.build import build_graph
from sensorscript.memory import paused_gc
from sensorscript.graph.graph import Graph
from sensorscript.graph.nodes import COMBINE, PATTERN, SENSOR, UNION, WINDOW, Node, Origin, with_inputs
from sensorscript.graph.slicing import SlicePlan, plan_slices
from sensorscript.parser import ast
from sensorscript.partition.cost import CommunicationCost, communication_cost, forwarded
from sensorscript.partition.stages import summed
from sensorscript.partition.greedy import PartitionPlan, node_rates, partition
from sensorscript.partition.pieces import placement_graph
from sensorscript.partition.partials import with_partials
from sensorscript.partition.refine import choose
from sensorscript.registry import DEFAULT_FREQUENCY_HZ, SensorRegistry
from sensorscript.runtime.plan.program import derived_code
from sensorscript.runtime.output.alarms import is_flag

PLAN_FORMAT = 1
_INFINITY = float("inf")


@dataclass(frozen=True)
class Plan:
    graph: Graph
    frequencies: dict[str, float]  # every referenced sensor, Hz
    slices: dict[str, SlicePlan]
    partitions: PartitionPlan
    cost: CommunicationCost
    warnings: tuple[Diagnostic, ...]
    # What the partitioner placed: the graph with patterns partitioned by sensor as pieces
    # (partition/pieces.py), and those pieces per pattern (source -> piece id).
    placed: Graph | None = None
    pieces: dict[str, dict[str, str]] = field(default_factory=dict)
    patterns: dict[str, PatternPlan] = field(default_factory=dict)  # pattern node -> its operator tree
    # Per workflow: the names of the derived streams patterns read (their code -> name), for the
    # events of matches.
    stream_names: dict[str, dict[int, str]] = field(default_factory=dict)
    # Sensor id -> the small integer the job carries instead of the id.
    codes: dict[str, int] = field(default_factory=dict)
    # Node id -> estimated tuples per second (greedy.node_rates of the graph).
    rates: dict[str, float] = field(default_factory=dict)
    # Whether slice partials may cross instead of readings (partition/partials.py; compile --no-partials).
    partials: bool = True

    def partitions_of(self, node_id: str) -> tuple[int, ...]:
        """Where a node runs: one partition, or each partition holding a piece of it."""
        placement = self.partitions.node_partition
        if node_id in self.pieces:
            return tuple(sorted({placement[p] for p in self.pieces[node_id].values()}))
        return (placement[node_id],) if node_id in placement else ()


@dataclass(frozen=True)
class Previous:
    """What an update (`sscript update`) keeps of the plan a job runs: the codes of its sensors,
    where each computation runs (placed node id -> partition) and how each stream is sliced
    (stream node id -> period and cut offsets, ms). Read back from that plan's plan.json."""

    codes: dict[str, int]
    placement: dict[str, int]
    slices: dict[str, tuple[int, tuple[int, ...]]]

    @staticmethod
    def of(plan_json: dict) -> "Previous":
        return Previous(dict(plan_json["sensor_codes"]), dict(plan_json["partitions"]["placement"]),
                        {stream: (s["period_ms"], tuple(s["offsets_ms"])) for stream, s in plan_json["slices"].items()})


def make_plan(workflows: list[ast.Workflow], registry: SensorRegistry | None = None,
              partitions: int = 2, epsilon: float = 0.1, selectivity: dict | None = None,
              options: Options = Options(), limit: int = DEFAULT_LIMIT, previous: Previous | None = None,
              rebalance: bool = False, cuts: bool = True, partials: bool = True) -> Plan:
    """`selectivity`: pass counts of pattern conditions measured by an earlier run (OUT/selectivity.json);
    `options` and `limit`: the patterns' planning switches and default cap of partial matches;
    `previous`: the plan of the running job this one replaces (an update): its sensors keep their
    codes, its computations their partitions (unless `rebalance`) and its streams their slices where
    they can; `cuts`: whether the job may forward computations' tuples to other partitions (an update
    of a job without a second stage may not); `partials`: whether slice partials may cross instead of
    readings where fewer (partition/partials.py)."""
    # The whole plan is long-lived and acyclic: no cyclic-GC passes while it is built.
    with paused_gc():
        return _make_plan(workflows, registry, partitions, epsilon, selectivity or {}, options, limit, previous,
                          rebalance, cuts, partials)


def sensor_codes(sensors: list[str], previous: Previous | None = None) -> dict[str, int]:
    """Sensor id -> code: numbered in sorted order; in an update, the sensors the running job reads
    keep their codes (the state holds them) and new ones are numbered after the highest."""
    if previous is None:
        return {sensor_id: code for code, sensor_id in enumerate(sensors)}
    codes = {s: previous.codes[s] for s in sensors if s in previous.codes}
    following = max(previous.codes.values(), default=-1) + 1
    for sensor_id in sensors:
        if sensor_id not in codes:
            codes[sensor_id] = following
            following += 1
    return dict(sorted(codes.items()))


def _make_plan(workflows: list[ast.Workflow], registry: SensorRegistry | None, partitions: int,
               epsilon: float, selectivity: dict, options: Options, limit: int,
               previous: Previous | None = None, rebalance: bool = False, cuts: bool = True,
               partials: bool = True) -> Plan:
    graph = build_graph(workflows)
    known = registry.frequencies() if registry is not None else {}
    frequencies, warnings = {}, []
    for sensor_id in graph.sensors():
        if sensor_id in known:
            frequencies[sensor_id] = known[sensor_id]
        else:
            frequencies[sensor_id] = DEFAULT_FREQUENCY_HZ
            if registry is not None:
                warnings.append(warning(f"sensor '{sensor_id}' is not in the registry; planning with the "
                                        f"default {DEFAULT_FREQUENCY_HZ:g} Hz"))
    placed, pieces = placement_graph(graph)
    codes = sensor_codes(graph.sensors(), previous)
    rates = node_rates(graph, frequencies)
    placed_rates = rates if placed is graph else node_rates(placed, frequencies)
    placement = partition(placed, frequencies, partitions, epsilon,
                          pinned=previous.placement if previous is not None else None, rebalance=rebalance, cuts=cuts,
                          rates=placed_rates)
    slices = plan_slices(graph, previous.slices if previous is not None else None)
    outputs = set(graph.outputs.values())

    def crossing(crossings, node_partition):  # where slice partials cross instead of readings
        if not partials:
            return crossings
        return with_partials(crossings, placed, node_partition, slices, frequencies, outputs)

    if previous is None:  # a first plan: the cheapest placement under the bound (an update keeps what runs)
        placement = choose(placed, frequencies, placement, placed_rates, crossing)
    else:
        placement = dataclasses.replace(placement, crossings=crossing(placement.crossings, placement.node_partition))
    patterns = plan_patterns(graph, workflows, rates, pieces, selectivity, options, limit, codes)
    return with_stage_0(Plan(graph, frequencies, slices, placement,
                             communication_cost(graph, frequencies, placement, rates), tuple(warnings), placed, pieces,
                             patterns, stream_names(graph, patterns), codes, rates, partials))


def with_stage_0(plan: Plan) -> Plan:
    """The plan with its cost's `summed`: tuples/min crossing when stage 0 sends the slice partials of the
    sensors it may sum (partition/stages.py) instead of their readings, and the rest as before."""
    by_stage_0 = {(plan.placed or plan.graph).node(node_id).sensor_id: cuts for node_id, cuts in summed(plan).items()}
    ingest = sum(sum(c.rate(f) for c in by_stage_0[s]) if s in by_stage_0 else f for s, f in plan.frequencies.items())
    cost = dataclasses.replace(plan.cost, summed=(ingest + forwarded(plan.partitions.crossings)) * 60)
    return dataclasses.replace(plan, cost=cost)


def plan_patterns(graph: Graph, workflows: list[ast.Workflow], rates: dict[str, float],
                  pieces: dict[str, dict[str, str]], selectivity: dict, options: Options,
                  limit: int, codes: dict[str, int]) -> dict[str, PatternPlan]:
    """Every pattern node's operator tree (cep/plan.py), with the variable names each output's
    workflow wrote; `rates`: the graph's node rates."""
    if not any(node.kind == PATTERN for node in graph.nodes()):
        return {}
    statements = {(w.name, s.name): s for w in workflows for s in w.statements}
    outputs: dict[str, list[str]] = {}
    for name, node_id in sorted(graph.outputs.items()):
        outputs.setdefault(node_id, []).append(name)
    plans = {}
    for node in graph.nodes():
        if node.kind != PATTERN:
            continue
        origin = node.origins[0]
        variables = _variables(statements[(origin.workflow, origin.stream)])
        keys = len(pieces.get(node.id, {})) or 1
        planned = plan_pattern(node.id, node.key, variables, rates, codes, keys, selectivity.get(node.id),
                               options, limit)
        names = {name: _variables(statements[tuple(name.rsplit(".", 1))]) for name in outputs.get(node.id, [])}
        planned.pattern = dataclasses.replace(planned.pattern, names=names,
                                              order=_derived_order(graph, node, origin.workflow),
                                              sensor_order=_sensor_order(graph, node, codes))
        plans[node.id] = planned
    return plans


def _derived_order(graph: Graph, node: Node, workflow: str) -> tuple[tuple[int, int], ...]:
    """The derived streams a pattern reads events of, as (code, place) in the order of their names in
    `workflow` (the first statement of it that computes each, as the events' sensor names them)."""
    named = {}
    for input_id in node.inputs:
        for source in graph.sources(input_id):
            derived = graph.node(source)
            if derived.kind == SENSOR:
                continue
            origins = [o for o in derived.origins if o.workflow == workflow] or list(derived.origins)
            named[derived_code(source)] = min(origins, key=lambda o: o.line).stream
    return tuple((code, place) for place, (_, code) in enumerate(sorted((name, code) for code, name in named.items())))


def _sensor_order(graph: Graph, node: Node, codes: dict[str, int]) -> tuple[tuple[int, int], ...]:
    """The raw sensors a pattern reads events of, as (code, place) in the order of their ids, where
    their codes do not follow their ids (an update numbers the sensors it adds after the highest);
    else none: the codes order them."""
    ids = sorted({graph.node(source).key[1] for input_id in node.inputs for source in graph.sources(input_id)
                  if graph.node(source).kind == SENSOR})
    pairs = [(codes[sensor_id], place) for place, sensor_id in enumerate(ids)]
    if all(a < b for (a, _), (b, _) in zip(pairs, pairs[1:])):
        return ()
    return tuple(sorted(pairs))


def _variables(statement: ast.Statement) -> tuple[str, ...]:
    return tuple(e.var for e in statement.value.elements)


def stream_names(graph: Graph, patterns: dict[str, PatternPlan]) -> dict[str, dict[int, str]]:
    """Per workflow, the name of each derived stream a pattern reads events of: the first statement
    of that workflow that computes it."""
    names: dict[str, dict[int, str]] = {}
    for pattern_id in patterns:
        for input_id in graph.node(pattern_id).inputs:
            for source in graph.sources(input_id):
                node = graph.node(source)
                if node.kind == SENSOR:
                    continue
                for workflow in {o.workflow for o in node.origins}:
                    first = min((o for o in node.origins if o.workflow == workflow), key=lambda o: o.line)
                    names.setdefault(workflow, {})[derived_code(source)] = first.stream
    return {w: dict(sorted(n.items())) for w, n in sorted(names.items())}


def describe_node(node: Node) -> dict:
    """A node's parameters in plain JSON terms."""
    if node.kind == SENSOR:
        return {"sensor_id": node.sensor_id}
    if node.kind == WINDOW:
        return {"function": node.func, "length_ms": node.length, "slide_ms": node.slide}
    if node.kind == UNION:
        return {}
    if node.kind == COMBINE:
        # `flag`: its values are 0/1, and its turning on is an alarm (runtime/output/alarms.py).
        return {"expression": _expression_text(node.key[1]), "flag": is_flag(node.key[1])}
    if node.kind == PATTERN:
        elements, where, within, strategy, emit, partition_by, yield_, links, limit = node.key[1]
        return {"elements": [{"negated": n, "kleene": k, "input": i, **({"operator": o} if o else {})}
                             for n, k, i, o in elements],
                "links": [link or "->" for link in links],
                "where": None if where is None else _expression_text(where), "within_ms": within,
                "strategy": strategy, "emit": emit, "partition_by": partition_by,
                "yield": None if yield_ is None else _expression_text(yield_), "limit": limit}
    raise ValueError(node.kind)


def _expression_text(expression: tuple) -> str:
    kind = expression[0]
    if kind == "in":
        return expression[1]
    if kind == "num":
        return repr(expression[1])
    if kind == "str":
        return json.dumps(expression[1])
    if kind == "attr":
        return f"${expression[1]}.{expression[2]}"
    if kind == "var":
        return f"${expression[1]}"
    if kind in ("stream", "sensor"):
        return f"{kind}({json.dumps(expression[1])})"
    if kind in ("neg", "not"):
        return f"{'-' if kind == 'neg' else 'not '}({_expression_text(expression[1])})"
    if kind == "call":
        return f"{expression[1]}(" + ", ".join(_expression_text(a) for a in expression[2:]) + ")"
    return f"({_expression_text(expression[1])} {kind} {_expression_text(expression[2])})"


def plan_json(plan: Plan) -> dict:
    graph, placement = plan.graph, plan.partitions
    rates = plan.rates or node_rates(graph, plan.frequencies)
    file_names: dict[str, str] = {}  # a workflow's path -> its file name (a Path per origin cost 0.6 s at 70,000)
    nodes = []
    for node in graph.nodes():
        entry = {
            "id": node.id,
            "kind": node.kind,
            "label": node.label,
            "inputs": list(node.inputs),
            "partition": _partition_entry(plan, node.id),
            "rate_per_s": round(rates[node.id], 6),
            "defined_in": [_defined_in(o, file_names) for o in node.origins],
            **describe_node(node),
        }
        if node.kind == SENSOR:
            entry["frequency_hz"] = plan.frequencies[node.sensor_id]
        nodes.append(entry)
    outputs_of: dict[str, dict[str, str]] = {}
    for output, node_id in graph.outputs.items():
        workflow, stream = output.rsplit(".", 1)
        outputs_of.setdefault(workflow, {})[stream] = node_id
    return {
        "format": PLAN_FORMAT,
        "sensor_codes": plan.codes,
        "workflows": {name: {"file": Path(path).name, "outputs": outputs_of.get(name, {})}
                      for name, path in sorted(graph.workflows.items())},
        "nodes": nodes,
        "shared": {n.id: sorted({o.workflow for o in n.origins}) for n in graph.shared()},
        "slices": {
            stream: {"mode": s.mode, "period_ms": s.period_ms, "offsets_ms": list(s.offsets_ms),
                     "windows": list(s.windows), "partials": list(s.partials),
                     "slices_per_minute": round(s.slices_per_minute, 6),
                     "gcd_slices_per_minute": round(s.gcd_slices_per_minute, 6),
                     "edge_slices_per_minute": None if s.edge_slices_per_minute is None
                     else round(s.edge_slices_per_minute, 6)}
            for stream, s in sorted(plan.slices.items())},
        "partitions": {
            "count": placement.count,
            "epsilon": placement.epsilon,
            "loads_hz": [round(x, 6) for x in placement.loads],
            "balance": round(placement.balance, 6),
            "split_subgraphs": placement.split_subgraphs,
            "chosen": placement.chosen,
            "refined_moves": placement.refined,
            "partials": plan.partials,
            "sensors": dict(sorted(placement.sensor_partition.items())),
            # Every placed node (patterns partitioned by sensor as their pieces): what an update keeps.
            "placement": placement.node_partition,
            "crossings": [{"from": c.source, "to": c.target, "from_partition": c.from_partition,
                           "to_partition": c.to_partition, "rate_per_s": round(c.rate_per_s, 6), "kind": c.kind,
                           **({"into": list(c.into)} if c.into else {})}
                          for c in placement.crossings],
        },
        "cost_tuples_per_minute": {
            "ours": round(plan.cost.ours, 3),
            "lower_bound": round(plan.cost.lower_bound, 3),
            "naive_sensor_hash": round(plan.cost.naive_sensor_hash, 3),
            "naive_workflow_hash": round(plan.cost.naive_workflow_hash, 3),
            "greedy_unrefined": round(plan.cost.greedy, 3),
            "ours_stage_0_partials": round(plan.cost.summed, 3),
        },
    }


def _defined_in(origin: Origin, file_names: dict[str, str]) -> str:
    name = file_names.get(origin.file)
    if name is None:
        name = file_names[origin.file] = Path(origin.file).name
    return f"{name}:{origin.line} {origin.workflow}.{origin.stream}"


def _origin(defined_in: str) -> Origin:
    """The inverse of _defined_in."""
    place, name = defined_in.split(" ", 1)
    file, line = place.rsplit(":", 1)
    workflow, stream = name.rsplit(".", 1)
    return Origin(workflow, stream, file, int(line))


def graph_of_plan_json(document: dict) -> Graph:
    """The shared graph again from a plan.json, as far as drawing it needs (kinds, window parameters,
    inputs, who wrote each node): the dashboard draws a compiled job's DAG without its scripts. What a
    union, combine or pattern computes is left out; nodes keep their ids."""
    graph = Graph()
    for entry in document["nodes"]:  # inputs before consumers, as plan_json lists them
        kind, inputs = entry["kind"], tuple(entry["inputs"])
        if kind == SENSOR:
            key = (SENSOR, entry["sensor_id"])
        elif kind == WINDOW:
            key = (WINDOW, entry["function"], inputs[0], entry["length_ms"], entry["slide_ms"])
        else:
            key = (kind, entry["id"])
        origins = tuple(_origin(text) for text in entry["defined_in"])
        graph.add(with_inputs(Node(kind, key, inputs, origins), inputs, entry["id"]))
    graph.workflows = {name: workflow["file"] for name, workflow in document["workflows"].items()}
    graph.outputs = {f"{name}.{stream}": node_id for name, workflow in document["workflows"].items()
                     for stream, node_id in workflow["outputs"].items()}
    return graph


def _partition_entry(plan: Plan, node_id: str):
    """A partition number; for a pattern partitioned by sensor the partitions of its pieces; None for
    a union its only readers (such patterns) never form."""
    where = plan.partitions_of(node_id)
    if node_id in plan.pieces:
        return list(where)
    return where[0] if where else None


def write_plan(plan: Plan, path: Path) -> None:
    path.write_text(stable_json(plan_json(plan)) + "\n")


def stable_json(value) -> str:
    """`json.dumps(value, indent=2, sort_keys=True)`, the same text, about four times faster.

    With an indent, the standard library encodes in pure Python, value by value through chains of
    generators (4 s for the 28 MB plan.json of 10,240 workflows); this writes into one list, with
    the standard library's C function for strings. tests/test_plan.py holds it to json.dumps."""
    out: list[str] = []
    _write_json(value, out, "\n")
    return "".join(out)


def _json_float(value: float) -> str:
    if value != value:
        return "NaN"
    if value in (_INFINITY, -_INFINITY):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)


def _json_key(key) -> str:
    """A key as json.dumps writes it: keys that are not strings become strings first."""
    if isinstance(key, str):
        return _json_string(key)
    if key is True or key is False or key is None:
        return _json_string(json.dumps(key))
    if isinstance(key, int):
        return _json_string(int.__repr__(key))
    if isinstance(key, float):
        return _json_string(_json_float(key))
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _write_json(value, out: list[str], newline: str) -> None:
    """Append `value` to `out`; `newline` starts a line at the value's own indent."""
    kind = type(value)
    if kind is str:
        out.append(_json_string(value))
    elif kind is dict or kind is list or kind is tuple or isinstance(value, (dict, list, tuple)):
        if not value:
            out.append("{}" if isinstance(value, dict) else "[]")
            return
        inner = newline + "  "
        if isinstance(value, dict):
            out.append("{")
            separator = inner
            for key in sorted(value):
                out.append(separator)
                out.append(_json_key(key))
                out.append(": ")
                _write_json(value[key], out, inner)
                separator = "," + inner
            out.append(newline + "}")
        else:
            out.append("[")
            separator = inner
            for item in value:
                out.append(separator)
                _write_json(item, out, inner)
                separator = "," + inner
            out.append(newline + "]")
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        out.append(_json_float(value))
    elif isinstance(value, str):
        out.append(_json_string(value))
    else:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
