"""Which stage of its partition each computation runs in, and what stage 0 may sum.

Stage 1 of a partition runs every computation that reads only what lands there: its sensors'
readings and what is computed from them. A computation that reads a tuple forwarded from another
partition, directly or through others, runs in stage 2 (`second_stage`); every edge into stage 2
from stage 1 is a forward (`forwards`), across partitions or not.

A sensor whose readers, wherever they run, are all windows (or unions only windows read), and
whose partials come to fewer tuples than its readings, may go from stage 0 as the slice partials
of those windows' slices instead of readings (`summed`; the job does so where the readings are on
time: runtime/state/summaries.py). The compiler's programs and the cost model both take it from
here. (`plan` is a partition/plan.py `Plan`, which imports this.)
"""

from __future__ import annotations

from sensorscript.graph.nodes import SENSOR
from sensorscript.partition.partials import Cut, all_cuts, cheaper, cuts_for, serving, sliced_for


def second_stage(plan) -> set[str]:
    """Nodes (of the placed graph) that read a tuple forwarded from another partition, directly or
    through others. The pieces of one pattern on one partition go to one stage together."""
    graph, placement = plan.placed or plan.graph, plan.partitions.node_partition
    together: dict[tuple[str, int], list[str]] = {}
    for pattern_id, pieces in plan.pieces.items():
        for piece in pieces.values():
            together.setdefault((pattern_id, placement[piece]), []).append(piece)
    of_piece = {piece: key for key, pieces in together.items() for piece in pieces}
    nodes = list(graph.nodes())
    stage2: set[str] = set()
    changed = True
    while changed:
        changed = False
        for node in nodes:
            if node.id in stage2:
                continue
            here = placement[node.id]
            if any(placement[i] != here or i in stage2 for i in node.inputs) or \
                    (node.id in of_piece and any(p in stage2 for p in together[of_piece[node.id]])):
                stage2.add(node.id)
                changed = True
        # Inputs come before their readers: one pass is enough unless a piece can pull in one before it.
        changed = changed and bool(of_piece)
    return stage2


def forwards(plan, stage2: set[str]) -> list[tuple[str, str]]:
    """(input, reader) for every edge into a stage-2 node from a stage-1 node, in the placed graph's order."""
    placed = plan.placed or plan.graph
    return [(i, node.id) for node in placed.nodes() if node.id in stage2 for i in node.inputs if i not in stage2]


def forwarded_partials(plan, stage2: set[str]) -> dict[tuple[int, str], tuple[Cut, ...]]:
    """(destination, sensor node) -> the cuts its forward sends as slice partials instead of readings:
    where only windows read it there (directly, or through unions only windows read) and the partials
    are fewer (partition/partials.py); the receiving stage adds them to the slices they were cut for.
    A sensor every reader of which takes partials is cut once for all of them (`summed`): a forward
    sends those of its cuts that serve the destination's streams."""
    if not plan.partials:
        return {}
    placed, placement = plan.placed or plan.graph, plan.partitions.node_partition
    outputs = set(plan.graph.outputs.values())
    dests: dict[str, set[int]] = {}
    for i, reader in forwards(plan, stage2):
        dests.setdefault(i, set()).add(placement[reader])
    by_stage_0 = summed(plan)
    found = {}
    for node_id, where in dests.items():
        node = placed.node(node_id)
        if node.kind != SENSOR:
            continue
        frequency = plan.frequencies[node.sensor_id]
        for dest in sorted(where):
            readers = [c for c in placed.consumers(node_id) if c in stage2 and placement[c] == dest]
            if node_id in by_stage_0:  # every reader takes partials: those of its cuts that serve these
                found[dest, node_id] = serving(by_stage_0[node_id],
                                               sliced_for(placed, node_id, readers, plan.slices, outputs))
            elif into := cheaper(placed, node_id, readers, plan.slices, outputs, frequency):
                found[dest, node_id] = cuts_for(into, plan.slices, frequency)
    return found


def summed(plan) -> dict[str, tuple[Cut, ...]]:
    """Sensor node -> the cuts stage 0 may send its readings as: a sensor, no output, every reader of
    which takes slice partials wherever it runs, whose partials come to fewer tuples than its readings
    (partials.all_cuts). Its stage 1 adds them to the slices of the streams its own stage 1 cuts, and
    passes on to each forward those of them that serve the destination. None with `--no-partials`."""
    if not plan.partials:
        return {}
    placed = plan.placed or plan.graph
    outputs = set(plan.graph.outputs.values())
    found = {}
    for node in placed.nodes():
        if node.kind == SENSOR and node.id not in outputs:
            cuts = all_cuts(placed, node.id, plan.slices, outputs, plan.frequencies[node.sensor_id])
            if cuts:
                found[node.id] = cuts
    return found
