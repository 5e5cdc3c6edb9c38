"""The plan in words, for people: what is shared, how streams are sliced, where things run.

`explain` is the whole plan in a summary whose length does not grow with the number of workflows
(plan.txt); `explain_workflow` is one workflow's part of it, computation by computation
(`sscript explain --workflow NAME`): at 10,000 workflows, what a reviewer reads.
"""

from __future__ import annotations

import difflib

from sensorscript.cep.plan import describe as pattern_lines
from sensorscript.errors import SensorScriptError, error
from sensorscript.graph.nodes import COMBINE, PATTERN, SENSOR, UNION, WINDOW, Node, ScriptLines
from sensorscript.parser.printer import format_ms
from sensorscript.partition.partials import cut_text, cuts_for
from sensorscript.partition.plan import Plan

# How many of a summary's items are shown, and how many of the workflows sharing a computation.
SHOWN = 50
NAMED = 8


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


def named(names: list[str], limit: int = NAMED) -> str:
    """The first names and how many more: a line that stays short however many there are."""
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _slice_text(slices) -> str:
    cuts = (f"every {format_ms(slices.period_ms)}" if slices.offsets_ms == (0,)
            else f"at {', '.join(format_ms(o) for o in slices.offsets_ms)} of every {format_ms(slices.period_ms)}")
    return (f"{len(slices.windows)} window(s), slices {cuts} ({slices.mode}; {slices.slices_per_minute:g}/min), "
            f"partials {', '.join(slices.partials)}")


def _stream_name(placed, node_id: str) -> str:
    """A stream as plan.txt names it: a sensor by its id, a computation by the first workflow that
    wrote it (`wf0003.SHU`: statement names repeat across workflows)."""
    node = placed.node(node_id)
    if node.kind == SENSOR:
        return node.sensor_id
    origins = getattr(node, "origins", ())
    return f"{origins[0].workflow}.{origins[0].stream}" if origins else node.label


def forwarded_streams(crossings) -> list[list]:
    """The cut edges as the job forwards them: one group per stream and destination partition (the
    job sends a stream to a partition once, however many computations there read it), the most
    tuples first (among equals, in the order of their first edge)."""
    groups: dict[tuple[str, int], list] = {}
    for c in crossings:
        groups.setdefault((c.source, c.to_partition), []).append(c)
    return sorted(groups.values(), key=lambda edges: -edges[0].rate_per_s)


def _forward_text(plan: Plan, edges: list) -> str:
    """One forwarded stream: where it goes, its tuples/min, what crosses and how many read it there."""
    placed = plan.placed or plan.graph
    first = edges[0]
    what = {"raw": "readings", "derived": "derived tuples"}.get(first.kind, first.kind)
    if first.into:  # slice partials instead of the readings (partition/partials.py)
        frequency = plan.frequencies[placed.node(first.source).sensor_id]
        of = "; ".join(f"{', '.join(cut.partials)} per {cut_text(cut.period_ms, cut.offsets_ms)} for "
                       + named(['the sensor' if s == first.source else _stream_name(placed, s) for s in cut.streams], 4)
                       for cut in cuts_for(first.into, plan.slices, frequency))
        what = f"slice partials instead of {frequency * 60:,g} readings ({of})"
    return (f"{_stream_name(placed, first.source)}, partition {first.from_partition} -> {first.to_partition}: "
            f"{first.rate_per_s * 60:,g} tuples/min of {what}; read there by {len(edges)} computation(s)")


def explain(plan: Plan) -> str:
    """The whole plan for people (plan.txt): counts, then the first SHOWN items of each list, the
    most shared computations first; each line names at most NAMED workflows."""
    graph, placement, cost = plan.graph, plan.partitions, plan.cost
    nodes = list(graph.nodes())
    computations = [n for n in nodes if n.kind != SENSOR]
    written = sum(len(n.origins) for n in computations)
    lines = [
        f"{len(graph.workflows)} workflow(s), {written} statements -> {len(computations)} computations "
        f"over {len(graph.sensors())} sensors ({written - len(computations)} computed once instead of "
        f"several times)",
        "One workflow's part of the plan: sscript explain FILES --workflow NAME",
        "",
        "Shared computations (the most shared first):",
    ]
    users = {n.id: sorted({o.workflow for o in n.origins}) for n in graph.shared()}
    shared = sorted(graph.shared(), key=lambda n: -len(users[n.id]))  # stable: graph order among equals
    for node in shared[:SHOWN]:
        who = users[node.id]
        lines.append(f"  {node.label:<14} {describe(node, plan)}  <- "
                     + (named(who) if len(who) <= NAMED else f"{len(who)} workflows: {named(who)}"))
    if len(shared) > SHOWN:
        lines.append(f"  ... and {len(shared) - SHOWN} more")
    if not shared:
        lines.append("  none")
    lines += ["", f"Window slices (each tuple is added to one slice; windows are composed from slices): "
                  f"{len(plan.slices)} stream(s), {sum(s.slices_per_minute for s in plan.slices.values()):g} "
                  f"slices/min"]
    for stream, slices in list(plan.slices.items())[:SHOWN]:
        lines.append(f"  {graph.node(stream).label:<14} {_slice_text(slices)}")
    if len(plan.slices) > SHOWN:
        lines.append(f"  ... and {len(plan.slices) - SHOWN} more streams")
    if plan.patterns:
        lines += ["", "Patterns (operator trees: where each condition is tested, the shapes compared):"]
        for node_id, planned in list(plan.patterns.items())[:SHOWN]:
            lines += _pattern_lines(plan, node_id, planned, "  ")
        if len(plan.patterns) > SHOWN:
            lines.append(f"  ... and {len(plan.patterns) - SHOWN} more patterns")
    lines += ["", f"Partitions ({placement.count}, balance {placement.balance:.3f} = most loaded / average; "
                  f"bound {1 + placement.epsilon:.2f}):"]
    lines += [f"  {line}" for line in _chosen_text(placement)]
    by_partition: dict[int, list[str]] = {}
    for sensor_id, p in placement.sensor_partition.items():
        by_partition.setdefault(p, []).append(sensor_id)
    for p in range(placement.count):
        sensors = sorted(by_partition.get(p, []))
        shown = ", ".join(sensors[:8]) + (f", ... ({len(sensors)} sensors)" if len(sensors) > 8 else "")
        lines.append(f"  partition {p}: {placement.loads[p]:g} Hz  {shown}")
    if placement.crossings:
        streams = forwarded_streams(placement.crossings)
        lines.append(f"  {len(placement.crossings)} edge(s) cross partitions to keep the balance "
                     f"({placement.split_subgraphs} subgraph(s) split); the job forwards {len(streams)} "
                     f"stream(s), each once to each partition that reads it:")
        for edges in streams[:20]:
            lines.append(f"    {_forward_text(plan, edges)}")
        if len(streams) > 20:
            lines.append(f"    ... and {len(streams) - 20} more")
    lines += ["", "Communication cost (tuples per minute crossing a shuffle):",
              f"  ours                       {cost.ours:>14,.0f}",
              f"  lower bound                {cost.lower_bound:>14,.0f}   (each raw tuple crosses once)",
              f"  ours, stage 0 summing      {cost.summed:>14,.0f}   (slice partials, not readings, of sensors only "
              f"windows read, where on time: {cost.summed / cost.lower_bound if cost.lower_bound else 1:.3f} x the bound)",
              f"  naive, hash by sensor id   {cost.naive_sensor_hash:>14,.0f}   ({cost.versus('sensor')})",
              f"  naive, hash by workflow    {cost.naive_workflow_hash:>14,.0f}   ({cost.versus('workflow')})"]
    return "\n".join(lines) + "\n"


def _chosen_text(placement) -> list[str]:
    """Which placement the plan runs, and why: the cheapest of those that keep the bound, and a line
    on each other one tried."""
    refined = f", refined by {placement.refined} move(s)" if placement.refined else ""
    if not placement.considered:  # an update: the running plan's placement, new nodes around it
        return [f"placement: {placement.chosen}{refined}"]
    others = []
    for name, per_s, peak, why in placement.considered:
        if name == placement.chosen:
            continue
        others.append(f"  {name}: {per_s * 60:,.0f} tuples/min on cut edges" if per_s is not None
                      else f"  {name}: over the bound ({peak:.2f} x the average)" if why == "over the bound"
                      else f"  {name}: would forward some tuples twice, which the job does not")
    return ([f"placement: {placement.chosen}{refined}, the cheapest that keeps the bound"
             + ("; also tried:" if others else "")] + others)


def _pattern_lines(plan: Plan, node_id: str, planned, indent: str) -> list[str]:
    node = plan.graph.node(node_id)
    where = plan.partitions_of(node_id)
    runs = (f"on partitions {', '.join(map(str, where))}, each for its own sensors" if node_id in plan.pieces
            else f"on partition {where[0]}")
    origins = [f"{o.workflow}.{o.stream}" for o in node.origins]
    return [f"{indent}{named(origins)} ({runs}):", *(f"{indent}  {line}" for line in pattern_lines(planned))]


def _where(plan: Plan, node_id: str) -> str:
    where = plan.partitions_of(node_id)
    if node_id in plan.pieces:
        return f"partitions {', '.join(map(str, where))}, each for its own sensors"
    if not where:
        return "not formed: the patterns reading it read its sources, each where it lands"
    return f"partition {where[0]}"


def explain_workflow(plan: Plan, name: str, lines: ScriptLines | None = None) -> str:
    """One workflow's part of the plan: each statement (with its script line, from `lines`), the
    computation it is, where that runs and which other workflows share it; the sensors it reads,
    the slices its windows are composed from, the edges that cross partitions, its patterns.
    Raises SensorScriptError for a name that is not a workflow of the plan."""
    graph = plan.graph
    if name not in graph.workflows:
        closeness = {w: difflib.SequenceMatcher(None, name, w).ratio() for w in graph.workflows}
        near = [f"'{w}'" for w in sorted(closeness, key=lambda w: (-closeness[w], w))[:3] if closeness[w] >= 0.6]
        hint = ""
        if near:  # the three nearest, closest first
            hint = f"; did you mean {near[0] if len(near) == 1 else ', '.join(near[:-1]) + ' or ' + near[-1]}?"
        raise SensorScriptError([error(f"no workflow named '{name}' among the {len(graph.workflows)} given "
                                       f"(a workflow is named after its file, without .ss){hint}")])
    lines = lines or ScriptLines({})
    file = graph.workflows[name]
    written = sorted(((o, node) for node in graph.nodes() for o in node.origins if o.workflow == name),
                     key=lambda item: (item[0].line, item[0].stream))
    mine = {node.id: node for _, node in written}
    sharing = {node_id: sorted({o.workflow for o in node.origins} - {name}) for node_id, node in mine.items()}
    outputs = sorted(output for output in graph.outputs if output.rsplit(".", 1)[0] == name)
    partitions = sorted({p for node_id in mine for p in plan.partitions_of(node_id)})
    text = [f"Workflow {name} ({lines.name(file)}): {len(written)} statement(s), {len(mine)} computation(s), "
            f"{sum(1 for others in sharing.values() if others)} of them shared with other workflows",
            f"Outputs: {', '.join(outputs) or 'none'}",
            f"Runs on partition(s) {', '.join(map(str, partitions)) or 'none'}",
            "", "Statements (script line; the computation, where it runs; who else computes it):"]
    for origin, node in written:
        others = sharing[node.id]
        text += [f"  {lines.name(origin.file)}:{origin.line}  {lines.statement(origin.file, origin.line)}".rstrip(),
                 f"      {node.id}  {describe(node, plan)}; {_where(plan, node.id)}",
                 f"      shared with {len(others)} other workflow(s): {named(others)}" if others
                 else "      its own: no other workflow computes it"]
    sensors = sorted({i for node in mine.values() for i in node.inputs if graph.node(i).kind == SENSOR})
    text += ["", "Sensors it reads (their readings go to the partition shown):"]
    for sensor in sensors:
        sensor_id = graph.node(sensor).sensor_id
        readers = {o.workflow for consumer in graph.consumers(sensor) for o in graph.node(consumer).origins}
        text.append(f"  {sensor_id:<14} {plan.frequencies[sensor_id]:g} Hz, partition "
                    f"{plan.partitions.node_partition.get(sensor, '-')}, read by {len(readers)} workflow(s)")
    if not sensors:
        text.append("  none")
    streams = sorted({node.inputs[0] for node in mine.values() if node.kind == WINDOW})
    text += ["", "Window slices of the streams its windows read (the windows of every workflow over each):"]
    for stream in streams:
        text.append(f"  {graph.node(stream).label:<14} {_slice_text(plan.slices[stream])}")
    if not streams:
        text.append("  none")
    pieces = {piece: pattern for pattern, by_source in plan.pieces.items() for piece in by_source.values()}
    own_names = {node.id: origin.stream for origin, node in reversed(written)}  # its first name for each

    def called(placed_id: str) -> str:
        """A node as this workflow names it, else as the first workflow that wrote it does."""
        node = graph.node(pieces.get(placed_id, placed_id))
        if node.kind == SENSOR:
            return f"sensor {node.sensor_id}"
        return own_names.get(node.id) or f"{node.origins[0].workflow}.{node.origins[0].stream}"

    crossings = [c for c in plan.partitions.crossings
                 if pieces.get(c.source, c.source) in mine or pieces.get(c.target, c.target) in mine]
    text += ["", "Edges of its computations that cross partitions (a stream goes to a partition once, "
                 "however many computations there read it):"]
    for edges in forwarded_streams(crossings):
        first = edges[0]
        instead = ""
        if first.into:
            instead = f" instead of {plan.frequencies[graph.node(first.source).sensor_id] * 60:,g} readings"
        text.append(f"  {called(first.source)} -> {named([called(c.target) for c in edges], 4)}: "
                    f"{first.rate_per_s * 60:,g} tuples/min{instead} ({first.kind}, partition {first.from_partition} "
                    f"-> {first.to_partition})")
    if not crossings:
        text.append("  none: all its tuples stay where they land")
    patterns = [node_id for node_id in mine if node_id in plan.patterns]
    if patterns:
        text += ["", "Patterns (operator trees):"]
        for node_id in patterns:
            text += _pattern_lines(plan, node_id, plan.patterns[node_id], "  ")
    text += ["", f"In job.py each of its computations carries the comment '{lines.name(file)}:LINE  statement': "
                 f"grep -n '{lines.name(file)}:' OUT/job.py"]
    return "\n".join(text) + "\n"
