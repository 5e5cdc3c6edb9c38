"""The plan in words, for people: what is shared, how streams are sliced, where things run."""

from __future__ import annotations

from sensorscript.cep.plan import describe as pattern_lines
from sensorscript.graph.nodes import COMBINE, PATTERN, SENSOR, UNION, WINDOW, Node
from sensorscript.parser.printer import format_ms
from sensorscript.partition.plan import Plan


def describe(node: Node, plan: Plan) -> str:
    graph = plan.graph

    def name(node_id: str) -> str:
        other = graph.node(node_id)
        return f"sensor {other.sensor_id}" if other.kind == SENSOR else other.label

    if node.kind == SENSOR:
        return f"sensor {node.sensor_id} ({plan.frequencies[node.sensor_id]:g} Hz)"
    if node.kind == WINDOW:
        return f"{node.func} of {name(node.inputs[0])} over {format_ms(node.length)} every {format_ms(node.slide)}"
    if node.kind == UNION:
        return "union of " + ", ".join(name(i) for i in node.inputs)
    if node.kind == COMBINE:
        return "combine-latest of " + ", ".join(name(i) for i in node.inputs)
    if node.kind == PATTERN:
        return "pattern over " + ", ".join(name(i) for i in node.inputs)
    return node.kind


def explain(plan: Plan) -> str:
    graph, placement, cost = plan.graph, plan.partitions, plan.cost
    nodes = list(graph.nodes())
    computations = [n for n in nodes if n.kind != SENSOR]
    written = sum(len(n.origins) for n in computations)
    lines = [
        f"{len(graph.workflows)} workflow(s), {written} statements -> {len(computations)} computations "
        f"over {len(graph.sensors())} sensors ({written - len(computations)} computed once instead of "
        f"several times)",
        "",
        "Shared computations:",
    ]
    shared = graph.shared()
    for node in shared[:50]:
        users = sorted({o.workflow for o in node.origins})
        lines.append(f"  {node.label:<14} {describe(node, plan)}  <- {', '.join(users)}")
    if len(shared) > 50:
        lines.append(f"  ... and {len(shared) - 50} more")
    if not shared:
        lines.append("  none")
    lines += ["", "Window slices (each tuple is added to one slice; windows are composed from slices):"]
    for stream, slices in list(plan.slices.items())[:50]:
        cuts = (f"every {format_ms(slices.period_ms)}" if slices.offsets_ms == (0,)
                else f"at {', '.join(format_ms(o) for o in slices.offsets_ms)} of every {format_ms(slices.period_ms)}")
        lines.append(f"  {graph.node(stream).label:<14} {len(slices.windows)} window(s), slices {cuts} "
                     f"({slices.mode}; {slices.slices_per_minute:g}/min), partials {', '.join(slices.partials)}")
    if len(plan.slices) > 50:
        lines.append(f"  ... and {len(plan.slices) - 50} more streams")
    if plan.patterns:
        lines += ["", "Patterns (operator trees: where each condition is tested, the shapes compared):"]
        for node_id, planned in plan.patterns.items():
            node = graph.node(node_id)
            where = plan.partitions_of(node_id)
            runs = (f"on partitions {', '.join(map(str, where))}, each for its own sensors" if node_id in plan.pieces
                    else f"on partition {where[0]}")
            lines.append(f"  {', '.join(f'{o.workflow}.{o.stream}' for o in node.origins)} ({runs}):")
            lines += [f"    {line}" for line in pattern_lines(planned)]
    lines += ["", f"Partitions ({placement.count}, balance {placement.balance:.3f} = most loaded / average; "
                  f"bound {1 + placement.epsilon:.2f}):"]
    by_partition: dict[int, list[str]] = {}
    for sensor_id, p in placement.sensor_partition.items():
        by_partition.setdefault(p, []).append(sensor_id)
    for p in range(placement.count):
        sensors = sorted(by_partition.get(p, []))
        shown = ", ".join(sensors[:8]) + (f", ... ({len(sensors)} sensors)" if len(sensors) > 8 else "")
        lines.append(f"  partition {p}: {placement.loads[p]:g} Hz  {shown}")
    if placement.crossings:
        lines.append(f"  {len(placement.crossings)} edge(s) cross partitions to keep the balance "
                     f"({placement.split_subgraphs} subgraph(s) split):")
        placed = plan.placed or graph
        for c in placement.crossings[:20]:
            lines.append(f"    {placed.node(c.source).label} -> {placed.node(c.target).label}: "
                         f"{c.rate_per_s * 60:g} tuples/min ({c.kind}, partition {c.from_partition} -> "
                         f"{c.to_partition})")
    lines += ["", "Communication cost (tuples per minute crossing a shuffle):",
              f"  ours                       {cost.ours:>14,.0f}",
              f"  lower bound                {cost.lower_bound:>14,.0f}   (each raw tuple crosses once)",
              f"  naive, hash by sensor id   {cost.naive_sensor_hash:>14,.0f}   "
              f"(ours saves {cost.saving(cost.naive_sensor_hash):.1%})",
              f"  naive, hash by workflow    {cost.naive_workflow_hash:>14,.0f}   "
              f"(ours saves {cost.saving(cost.naive_workflow_hash):.1%})"]
    return "\n".join(lines) + "\n"
