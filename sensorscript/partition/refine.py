"""Better placements than the greedy one under the same balance bound (issue #44).

The greedy partitioner (greedy.py) assigns whole pieces and splits once; it never looks back. Two
things here do:

- `refine`: moves that lower the traffic while every partition stays under the balance bound, in
  the manner of Fiduccia and Mattheyses. What moves is an atom: nodes joined by edges the job cannot
  carry across (into a stage-1 computation, not from a sensor), which must share a partition. An
  atom next to a cut edge goes to the partition that lowers the traffic most, if one does and its
  load stays under the bound; a move that would make the job forward a tuple twice is undone.
  Passes repeat until one moves nothing.
- `baselines`: the two naive placements (hash by workflow, hash by sensor id) as placements the
  job can run, each node on one partition: a node of several workflows goes with the first of them
  by name, and what another workflow needs of it is forwarded, which costs at most what the naive
  placement's duplicated readings cost. They start refinement too, and the cheapest placement that
  keeps the bound is the one chosen (`choose`).

Traffic is counted as cost.py counts ours: a node's tuples cross once to each other partition that
reads them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from networkx.utils import UnionFind

from sensorscript.graph.graph import Graph
from sensorscript.graph.nodes import SENSOR, WINDOW
from sensorscript.partition.cost import hash_partition, workflow_partition
from sensorscript.partition.greedy import PartitionPlan, _two_hop_edges, crossings_of, stages

MAX_PASSES = 12


@dataclass(frozen=True)
class Candidate:
    name: str  # "greedy", "hash by workflow", "hash by sensor id"
    placement: dict[str, int]
    traffic: float  # tuples/s crossing, beyond each raw tuple's one crossing (inf: not kept, not counted)
    peak: float  # the most loaded partition over the average
    moves: int  # refinement moves made
    kept: bool  # it keeps the balance bound and forwards no tuple twice (else as it started)


def atoms(graph: Graph) -> dict[str, str]:
    """Node -> its atom's representative: nodes joined by edges that cannot be cut."""
    stage = stages(graph)
    sensors = {n.id for n in graph.nodes() if n.kind == SENSOR}
    joined = UnionFind(n.id for n in graph.nodes())
    for u, v in graph.edges():
        if u not in sensors and stage[v] != 2:
            joined.union(u, v)
    return {n: first for group in joined.to_sets() for first in (min(group),) for n in group}


def consumers_of(graph: Graph) -> dict[str, list[str]]:
    return {n.id: graph.consumers(n.id) for n in graph.nodes()}


def traffic(graph: Graph, placement: dict[str, int], rates: dict[str, float],
            consumers: dict[str, list[str]] | None = None) -> float:
    """Tuples per second crossing on cut edges: each node's once to every other partition reading it."""
    consumers = consumers if consumers is not None else consumers_of(graph)
    total = 0.0
    for node_id, readers in consumers.items():
        where = placement[node_id]
        elsewhere = {placement[c] for c in readers if placement[c] != where}
        if elsewhere:
            total += rates[node_id] * len(elsewhere)
    return total


def loads(graph: Graph, frequencies: dict[str, float], placement: dict[str, int], count: int) -> list[float]:
    found = [0.0] * count
    for node in graph.nodes():
        if node.kind == SENSOR:
            found[placement[node.id]] += frequencies[node.sensor_id]
    return found


def refine(graph: Graph, frequencies: dict[str, float], placement: dict[str, int], count: int,
           rates: dict[str, float], bound: float, of: dict[str, str] | None = None,
           consumers: dict[str, list[str]] | None = None) -> tuple[dict[str, int], int]:
    """`placement` improved by moves under `bound` x the average load; the moves made. The start
    must forward no tuple twice (no path crosses two cut edges), and so does every move. `of` and
    `consumers`: the graph's atoms and consumers, when the caller has them."""
    placement = dict(placement)
    of = of if of is not None else atoms(graph)
    members: dict[str, list[str]] = {}
    for node_id, atom in of.items():
        members.setdefault(atom, []).append(node_id)
    weight = dict.fromkeys(members, 0.0)
    for node in graph.nodes():
        if node.kind == SENSOR:
            weight[of[node.id]] += frequencies[node.sensor_id]
    load = loads(graph, frequencies, placement, count)
    limit = bound * sum(load) / count + 1e-9
    order = {n.id: i for i, n in enumerate(graph.nodes())}
    consumers = consumers if consumers is not None else consumers_of(graph)
    inputs = {n.id: n.inputs for n in graph.nodes()}
    crossed = {}  # node -> the most cut edges on a path into it (the job allows 1)
    for node in graph.nodes():
        crossed[node.id] = max((crossed[i] + (placement[i] != placement[node.id]) for i in node.inputs), default=0)

    def share(node_id: str) -> float:  # a node's crossing tuples/s under the current placement
        readers = {placement[c] for c in consumers[node_id]}
        readers.discard(placement[node_id])
        return rates[node_id] * len(readers)

    def recrossed(atom: str) -> dict[str, int] | None:
        """The new counts of cut edges above the nodes a move changes, or None if one passes 1."""
        found: dict[str, int] = {}
        waiting = sorted(members[atom], key=order.__getitem__)
        queued = set(waiting)
        while waiting:
            node_id = waiting.pop(0)
            value = max((found.get(i, crossed[i]) + (placement[i] != placement[node_id]) for i in inputs[node_id]),
                        default=0)
            if value > 1:
                return None
            if value != crossed[node_id] or node_id in members[atom]:
                found[node_id] = value
                for c in consumers[node_id]:
                    if c not in queued:
                        queued.add(c)
                        waiting.append(c)
                waiting.sort(key=order.__getitem__)
        return found

    def place(atom: str, where: int) -> None:
        for n in members[atom]:
            placement[n] = where

    moves = 0
    for _ in range(MAX_PASSES):
        moved = 0
        boundary = sorted({of[u] for u in placement if any(placement[c] != placement[u] for c in consumers[u])
                           or any(placement[i] != placement[u] for i in inputs[u])})
        for atom in boundary:
            here = placement[members[atom][0]]
            around = set(members[atom]).union(*(inputs[n] for n in members[atom]))
            before = sum(share(n) for n in around)
            options = []
            for there in range(count):
                if there != here and load[there] + weight[atom] <= limit:
                    place(atom, there)
                    options.append((before - sum(share(n) for n in around), -there))
                    place(atom, here)
            for gain, there in sorted(options, reverse=True):
                if gain <= 1e-9:
                    break
                place(atom, -there)
                changed = recrossed(atom)
                if changed is None:  # the job would forward a tuple twice
                    place(atom, here)
                    continue
                crossed.update(changed)
                load[here] -= weight[atom]
                load[-there] += weight[atom]
                moved += 1
                break
        moves += moved
        if not moved:
            break
    return placement, moves


def baselines(graph: Graph, count: int, of: dict[str, str] | None = None) -> dict[str, dict[str, int]]:
    """The naive placements as node placements (atoms kept whole): hash by workflow, each node with
    the first workflow by name that reads it; hash by sensor id, each sensor on its hash, a window
    directly over one sensor beside it, anything else on the hash of its id."""
    of = of if of is not None else atoms(graph)
    nodes = list(graph.nodes())
    kind = {n.id: n.kind for n in nodes}
    readers: dict[str, str] = {}  # node -> the first workflow (by name) with an output downstream of it
    for output, node_id in sorted(graph.outputs.items()):
        workflow = output.rsplit(".", 1)[0]
        if node_id not in readers or workflow < readers[node_id]:
            readers[node_id] = workflow
    for node in reversed(nodes):
        if node.id in readers:
            for input_id in node.inputs:
                if input_id not in readers or readers[node.id] < readers[input_id]:
                    readers[input_id] = readers[node.id]
    of_workflow = {w: workflow_partition(w, count) for w in set(readers.values()) | {""}}
    by_workflow = {n.id: of_workflow[readers.get(n.id, "")] for n in nodes}
    by_sensor = {}
    for node in nodes:
        if node.kind == SENSOR:
            by_sensor[node.id] = hash_partition(node.sensor_id, count)
        elif node.kind == WINDOW and kind[node.inputs[0]] == SENSOR:
            by_sensor[node.id] = hash_partition(node.inputs[0].split(":", 1)[1], count)
        else:
            by_sensor[node.id] = hash_partition(node.id, count)
    found = {}
    for name, placement in (("hash by workflow", by_workflow), ("hash by sensor id", by_sensor)):
        # An atom runs where its first node (in the graph's order) would.
        first: dict[str, int] = {}
        for node in nodes:
            first.setdefault(of[node.id], placement[node.id])
        found[name] = {n.id: first[of[n.id]] for n in nodes}
    return found


def candidates(graph: Graph, frequencies: dict[str, float], greedy: dict[str, int], count: int,
               rates: dict[str, float], bound: float) -> list[Candidate]:
    """Each start (the greedy placement and the baselines): refined when it keeps the bound and
    forwards no tuple twice, else as it is and not kept. The kept first, cheapest first (ties: in
    that order)."""
    found = []
    of, consumers = atoms(graph), consumers_of(graph)
    for name, start in (("greedy", greedy), *baselines(graph, count, of).items()):
        start_load = loads(graph, frequencies, start, count)
        average = sum(start_load) / count
        peak = max(start_load) / average if average else 1.0
        if peak > bound + 1e-9 or _two_hop_edges(graph, start):
            found.append(Candidate(name, start, float("inf"), peak, 0, False))
            continue
        placement, moves = refine(graph, frequencies, start, count, rates, bound, of, consumers)
        load = loads(graph, frequencies, placement, count)
        found.append(Candidate(name, placement, traffic(graph, placement, rates, consumers),
                               max(load) / average if average else 1.0, moves, True))
    return sorted(found, key=lambda c: (not c.kept, c.traffic if c.kept else 0.0))


def choose(graph: Graph, frequencies: dict[str, float], plan: PartitionPlan, rates: dict[str, float]) -> PartitionPlan:
    """The cheapest placement under the plan's bound among the greedy plan and the baselines, each
    refined (the module's text)."""
    found = candidates(graph, frequencies, plan.node_partition, plan.count, rates, 1 + plan.epsilon)
    best = found[0] if found[0].kept else next(c for c in found if c.name == "greedy")  # none does: greedy
    placement = best.placement
    crossings = crossings_of(graph, placement, rates)
    return dataclasses.replace(plan, node_partition=dict(sorted(placement.items())),
                               loads=tuple(loads(graph, frequencies, placement, plan.count)), crossings=crossings,
                               chosen=best.name, refined=best.moves,
                               considered=tuple((c.name, c.traffic if c.kept else None, c.peak) for c in found))
