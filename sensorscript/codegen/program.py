"""The plan -> the runtime's programs: for each partition a stage 1 and, if needed, a stage 2.

Stage 1 of a partition runs every computation that reads only what lands there:
its sensors' readings and what is computed from them. Where the plan cut an edge
to keep the balance, the tuples on it are forwarded: stage 1 of the source
partition sends them to stage 2 of the destination, which runs the computations
that depend on them (and whatever they need from the same partition, forwarded
too). Without cut edges there is no stage 2, and the job shuffles once.
"""

from __future__ import annotations

from sensorscript.graph.nodes import COMBINE, PATTERN, SENSOR, UNION, WINDOW
from sensorscript.partition.plan import Plan
from sensorscript.runtime import program as rt


def sensor_codes(plan: Plan) -> dict[str, int]:
    """Sensor id -> the small integer the job carries instead of the id (sorted, so stable)."""
    return {sensor_id: code for code, sensor_id in enumerate(plan.graph.sensors())}


def check_supported(plan: Plan) -> None:
    patterns = [n for n in plan.graph.nodes() if n.kind == PATTERN]
    if patterns:
        where = "; ".join(str(o) for n in patterns for o in n.origins)
        raise NotImplementedError(f"pattern streams run in the CEP stage, which is not built yet: {where}")


def second_stage(plan: Plan) -> set[str]:
    """Nodes that read a tuple forwarded from another partition, directly or through others."""
    placement = plan.partitions.node_partition
    stage2: set[str] = set()
    for node in plan.graph.nodes():
        here = placement[node.id]
        if any(placement[i] != here or i in stage2 for i in node.inputs):
            stage2.add(node.id)
    return stage2


def programs(plan: Plan) -> tuple[tuple[rt.Program, ...], tuple[rt.Program | None, ...]]:
    """(stage-1 programs, stage-2 programs or None), one of each per partition."""
    check_supported(plan)
    graph, placement = plan.graph, plan.partitions.node_partition
    codes = sensor_codes(plan)
    stage2 = second_stage(plan)
    outputs: dict[str, list[str]] = {}
    for name, node_id in sorted(graph.outputs.items()):
        outputs.setdefault(node_id, []).append(name)
    # Every edge into a stage-2 node from a stage-1 node is a forward (across partitions or not).
    forwarded: dict[int, list[str]] = {}  # destination partition -> forwarded node ids, in order
    for node in graph.nodes():
        if node.id in stage2:
            for i in node.inputs:
                if i not in stage2 and i not in forwarded.setdefault(placement[node.id], []):
                    forwarded[placement[node.id]].append(i)
    forward_code = {(dest, node_id): code for dest, ids in forwarded.items() for code, node_id in enumerate(ids)}
    firsts, seconds = [], []
    for partition in range(plan.partitions.count):
        mine = [n for n in graph.nodes() if placement[n.id] == partition]
        first = [n for n in mine if n.id not in stage2]
        firsts.append(rt.Program(
            partition=partition, stage=1,
            nodes=tuple(runtime_node(n, codes) for n in first),
            slices=_slices(plan, {n.id for n in first}, {n.id for n in first}),
            outputs={n.id: tuple(outputs[n.id]) for n in first if n.id in outputs},
            forwards=tuple(rt.Forward(node_id, dest, forward_code[dest, node_id])
                           for dest, ids in sorted(forwarded.items()) for node_id in ids
                           if placement[node_id] == partition),
        ))
        second = [n for n in mine if n.id in stage2]
        if not second:
            seconds.append(None)
            continue
        sources = [rt.Sensor(node_id, graph.node(node_id).label, forward_code[partition, node_id])
                   for node_id in forwarded.get(partition, [])]
        seconds.append(rt.Program(
            partition=partition, stage=2,
            nodes=(*sources, *(runtime_node(n, codes) for n in second)),
            slices=_slices(plan, {n.id for n in second} | {s.id for s in sources}, {n.id for n in second}),
            outputs={n.id: tuple(outputs[n.id]) for n in second if n.id in outputs},
            senders=tuple(sorted({placement[i] for i in forwarded.get(partition, [])})),
        ))
    return tuple(firsts), tuple(seconds)


def runtime_node(node, codes: dict[str, int]) -> rt.Node:
    """A graph node as the runtime's declaration of it (sensors by their codes)."""
    if node.kind == SENSOR:
        return rt.Sensor(node.id, node.sensor_id, codes[node.sensor_id])
    if node.kind == WINDOW:
        return rt.Window(node.id, node.func, node.inputs[0], node.length, node.slide)
    if node.kind == UNION:
        return rt.Union(node.id, node.inputs)
    if node.kind == COMBINE:
        return rt.Combine(node.id, node.inputs, node.key[1])
    raise ValueError(node.kind)


def _slices(plan: Plan, streams: set[str], computed: set[str]) -> tuple[rt.Slices, ...]:
    """The slice plans of the streams present here (computed or received) that feed a window computed here."""
    return tuple(rt.Slices(s.stream, s.period_ms, s.offsets_ms, s.partials)
                 for stream, s in sorted(plan.slices.items()) if stream in streams
                 and any(w in computed for w in s.windows))
