"""The plan -> the runtime's programs: for each partition a stage 1 and, if needed, a stage 2.

Stage 1 of a partition runs every computation that reads only what lands there:
its sensors' readings and what is computed from them. Where the plan cut an edge
to keep the balance, the tuples on it are forwarded: stage 1 of the source
partition sends them to stage 2 of the destination, which runs the computations
that depend on them (and whatever they need from the same partition, forwarded
too). Without cut edges there is no stage 2, and the job shuffles once.
"""

from __future__ import annotations

import dataclasses

from sensorscript.graph.nodes import COMBINE, PATTERN, SENSOR, UNION, WINDOW
from sensorscript.partition.partials import sliced_for
from sensorscript.partition.plan import Plan
from sensorscript.partition.stages import forwarded_partials, forwards, second_stage, summed
from sensorscript.runtime.plan import program as rt


def programs(plan: Plan) -> tuple[tuple[rt.Program, ...], tuple[rt.Program | None, ...]]:
    """(stage-1 programs, stage-2 programs or None), one of each per partition."""
    graph, placed, placement = plan.graph, plan.placed or plan.graph, plan.partitions.node_partition
    codes = plan.codes
    stage2 = second_stage(plan)
    runtime_id = {piece: pattern_id for pattern_id, pieces in plan.pieces.items() for piece in pieces.values()}
    source_of = {piece: source for pieces in plan.pieces.values() for source, piece in pieces.items()}

    def rid(node_id: str) -> str:
        return runtime_id.get(node_id, node_id)

    outputs: dict[str, list[str]] = {}
    for name, node_id in sorted(graph.outputs.items()):
        outputs.setdefault(node_id, []).append(name)
    # Every edge into a stage-2 node from a stage-1 node is a forward (across partitions or not).
    forwarded: dict[int, list[str]] = {}  # destination partition -> forwarded (runtime) node ids, in order
    sends: set[tuple[int, int, str]] = set()  # (from partition, to partition, runtime node id)
    for i, reader in forwards(plan, stage2):
        dest = placement[reader]
        if rid(i) not in forwarded.setdefault(dest, []):
            forwarded[dest].append(rid(i))
        sends.add((placement[i], dest, rid(i)))
    forward_code = {(dest, node_id): code for dest, ids in forwarded.items() for code, node_id in enumerate(ids)}
    # A sensor whose forwarded readings only windows read there: its slice partials go instead, where
    # fewer (partition/partials.py); the receiving stage adds them to the slices they were cut for.
    merged = forwarded_partials(plan, stage2)  # (destination, sensor) -> its cuts
    by_stage_0 = summed(plan)  # sensor -> its cuts, stage 0's and its forwards' (subsets of them)
    here: dict[str, tuple[str, ...]] = {}  # such a sensor -> the streams its own stage 1 cuts
    for node_id in by_stage_0:
        readers = [r for r in placed.consumers(node_id) if r not in stage2 and placement[r] == placement[node_id]]
        here[node_id] = sliced_for(placed, node_id, readers, plan.slices, set(graph.outputs.values())) if readers else ()
    placed_on: list[list] = [[] for _ in range(plan.partitions.count)]
    for node in placed.nodes():
        placed_on[placement[node.id]].append(node)
    sliced = sorted(plan.slices.items())
    firsts, seconds = [], []
    for partition in range(plan.partitions.count):
        mine = placed_on[partition]
        first = _runtime_nodes(plan, [n for n in mine if n.id not in stage2], codes, rid, source_of)
        firsts.append(rt.Program(
            partition=partition, stage=1,
            nodes=first,
            slices=_slices(sliced, {n.id for n in first}, {n.id for n in first}),
            outputs={n.id: tuple(outputs[n.id]) for n in first if n.id in outputs},
            forwards=tuple(rt.Forward(node_id, dest, forward_code[dest, node_id],
                                      partials=tuple(_cut_plan(c) for c in merged.get((dest, node_id), ())))
                           for dest, ids in sorted(forwarded.items()) for node_id in ids
                           if (partition, dest, node_id) in sends),
            merged={node_id: into for node_id, cuts in sorted(by_stage_0.items()) if placement[node_id] == partition
                    and (into := _merged(cuts, here[node_id]))},
            summed={node_id: tuple(_cut_plan(c) for c in cuts)
                    for node_id, cuts in sorted(by_stage_0.items()) if placement[node_id] == partition},
        ))
        second = _runtime_nodes(plan, [n for n in mine if n.id in stage2], codes, rid, source_of)
        if not second:
            seconds.append(None)
            continue
        sources = [rt.Sensor(node_id, graph.node(node_id).label, forward_code[partition, node_id])
                   for node_id in forwarded.get(partition, [])]
        cut_here = _slices(sliced, {n.id for n in second} | {s.id for s in sources}, {n.id for n in second})
        seconds.append(rt.Program(
            partition=partition, stage=2,
            nodes=(*sources, *second),
            slices=cut_here,
            outputs={n.id: tuple(outputs[n.id]) for n in second if n.id in outputs},
            senders=tuple(sorted({sender for sender, dest, _ in sends if dest == partition})),
            merged={node_id: _merged(cuts, {s.stream for s in cut_here})
                    for (dest, node_id), cuts in sorted(merged.items()) if dest == partition},
        ))
    return tuple(firsts), tuple(seconds)


def _cut_plan(cut) -> rt.Slices:
    """A cut of partials (partition/partials.py) as the runtime declares it: named by its first stream."""
    return rt.Slices(cut.streams[0], cut.period_ms, cut.offsets_ms, cut.partials)


def _merged(cuts, streams) -> tuple[tuple[str, int], ...]:
    """(stream, k): each of `streams` a cut serves, from the k-th of `cuts`."""
    return tuple((stream, k) for k, cut in enumerate(cuts) for stream in cut.streams if stream in streams)


def _runtime_nodes(plan: Plan, placed_nodes: list, codes: dict[str, int], rid, source_of) -> tuple[rt.Node, ...]:
    """The runtime's declarations of these placed nodes, in order; the pieces of a pattern become
    one pattern reading their sources, where its last piece stands."""
    last_piece: dict[str, int] = {}
    for index, node in enumerate(placed_nodes):
        if node.id in source_of:
            last_piece[rid(node.id)] = index
    out = []
    for index, node in enumerate(placed_nodes):
        if node.id not in source_of:  # as the graph has it: reading a pattern, not its pieces
            out.append(runtime_node(plan.graph.node(node.id), codes, plan))
        elif last_piece[rid(node.id)] == index:
            pattern_id = rid(node.id)
            sources = [source_of[n.id] for n in placed_nodes if n.id in source_of and rid(n.id) == pattern_id]
            out.append(pattern_node(plan, pattern_id, sources))
    return tuple(out)


def pattern_node(plan: Plan, pattern_id: str, sources: list[str] | None = None) -> rt.Pattern:
    """A pattern's declaration reading its elements' streams, or (partitioned by sensor) the sources
    given: each source feeds the elements of every stream it reaches through unions, as often as
    it reaches it."""
    declared = plan.patterns[pattern_id].pattern
    if sources is None:
        return declared
    feeds = tuple(dataclasses.replace(feed, stream=source, copies=copies)
                  for source in sorted(sources) for feed in declared.feeds
                  for copies in [plan.graph.sources(feed.stream).get(source, 0)] if copies)
    return dataclasses.replace(declared, feeds=feeds)


def runtime_node(node, codes: dict[str, int], plan: Plan | None = None) -> rt.Node:
    """A graph node as the runtime's declaration of it (sensors by their codes)."""
    if node.kind == SENSOR:
        return rt.Sensor(node.id, node.sensor_id, codes[node.sensor_id])
    if node.kind == WINDOW:
        return rt.Window(node.id, node.func, node.inputs[0], node.length, node.slide)
    if node.kind == UNION:
        return rt.Union(node.id, node.inputs)
    if node.kind == COMBINE:
        return rt.Combine(node.id, node.inputs, node.key[1])
    if node.kind == PATTERN:
        return pattern_node(plan, node.id)
    raise ValueError(node.kind)


def _slices(sliced: list, streams: set[str], computed: set[str]) -> tuple[rt.Slices, ...]:
    """The slice plans (`sliced`: the plan's, by stream) of the streams present here (computed or
    received) that feed a window computed here."""
    return tuple(_slice_plan(s) for stream, s in sliced if stream in streams and any(w in computed for w in s.windows))


def _slice_plan(s) -> rt.Slices:
    """A stream's slice plan as the runtime declares it."""
    return rt.Slices(s.stream, s.period_ms, s.offsets_ms, s.partials)
