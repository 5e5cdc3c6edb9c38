"""The plan -> the runtime's per-partition programs (sensorscript.runtime.program)."""

from __future__ import annotations

from sensorscript.graph.nodes import COMBINE, PATTERN, SENSOR, UNION, WINDOW
from sensorscript.partition.plan import Plan
from sensorscript.runtime import program as rt


def sensor_codes(plan: Plan) -> dict[str, int]:
    """Sensor id -> the small integer the job carries instead of the id (sorted, so stable)."""
    return {sensor_id: code for code, sensor_id in enumerate(plan.graph.sensors())}


def runtime_node(plan: Plan, node_id: str, codes: dict[str, int]) -> rt.Node:
    node = plan.graph.node(node_id)
    if node.kind == SENSOR:
        return rt.Sensor(node.id, node.sensor_id, codes[node.sensor_id])
    if node.kind == WINDOW:
        return rt.Window(node.id, node.func, node.inputs[0], node.length, node.slide)
    if node.kind == UNION:
        return rt.Union(node.id, node.inputs)
    if node.kind == COMBINE:
        return rt.Combine(node.id, node.inputs, node.key[1])
    raise NotImplementedError(
        f"{', '.join(str(o) for o in node.origins)}: pattern streams run in the CEP stage, "
        f"which is not built yet")


def partition_nodes(plan: Plan, partition: int) -> list[str]:
    """Node ids computed on a partition, in dependency order, with the sensors they read."""
    placement = plan.partitions.node_partition
    graph = plan.graph
    needed: set[str] = set()
    for node in graph.nodes():
        if placement[node.id] == partition:
            needed.add(node.id)
            needed.update(i for i in node.inputs if graph.node(i).kind == SENSOR)  # raw crossings: replicas
    return [n.id for n in graph.nodes() if n.id in needed]


def programs(plan: Plan) -> list[rt.Program]:
    codes = sensor_codes(plan)
    graph = plan.graph
    if any(n.kind == PATTERN for n in graph.nodes()):
        pattern = next(n for n in graph.nodes() if n.kind == PATTERN)
        raise NotImplementedError(
            f"{', '.join(str(o) for o in pattern.origins)}: pattern streams run in the CEP stage, "
            f"which is not built yet")
    derived = [c for c in plan.partitions.crossings if c.kind != "raw"]
    if derived:
        raise NotImplementedError("derived crossings need the forwarding stage")
    outputs: dict[str, list[str]] = {}
    for name, node_id in sorted(plan.graph.outputs.items()):
        outputs.setdefault(node_id, []).append(name)
    result = []
    for partition in range(plan.partitions.count):
        ids = partition_nodes(plan, partition)
        home = frozenset(codes[graph.node(i).sensor_id] for i in ids
                         if graph.node(i).kind == SENSOR and plan.partitions.node_partition[i] == partition)
        result.append(rt.Program(
            partition=partition,
            nodes=tuple(runtime_node(plan, i, codes) for i in ids),
            slices=tuple(rt.Slices(s.stream, s.period_ms, s.offsets_ms, s.partials)
                         for stream, s in sorted(plan.slices.items()) if stream in ids),
            outputs={i: tuple(outputs[i]) for i in ids if i in outputs},
            home_sensors=home,
        ))
    return result
