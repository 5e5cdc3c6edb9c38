"""Placement of sensors and computations on n partitions (Algorithm 1 of Zhou et al., docs/REFERENCES.md).

1. Each connected subgraph of the DAG is weighted by the summed frequency of its
   sensors.
2. Subgraphs go, heaviest first, to the least-loaded partition, whose load is then
   updated (their pseudo-code forgets this update, which would send every
   subgraph to partition 0).
3. When that leaves a partition above (1 + epsilon) x the average load, subgraphs
   heavier than a cap are split: edges are taken from the highest tuple rate down
   and their ends merged while the merged piece stays under the cap (a maximum
   spanning forest with a size bound), so the edges left cut are those of the
   lowest rate: typically window outputs, one tuple per slide, rather than raw
   readings at 20 Hz. If the balance still fails, the cap drops to epsilon x the
   average, which the heaviest-first greedy is guaranteed to meet (it ends within
   one piece of the average) unless a single sensor is heavier than that.

Every node of a piece runs on the piece's partition; a raw tuple crosses the
network once, to the partition of its sensor, and only the cut edges carry
tuples across: the plan lists them as crossings, with their rates.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from sensorscript.graph.graph import Graph
from sensorscript.graph.nodes import COMBINE, PATTERN, SENSOR, UNION, WINDOW


RAW, DERIVED, PARTIALS = "raw", "derived", "partials"


@dataclass(frozen=True)
class Crossing:
    """An edge whose ends run on different partitions.

    `raw`: a sensor read on another partition; the job sends its readings to both.
    `derived`: a window output (or what is computed from window outputs only)
    forwarded to the partition of a stage-2 computation.
    `partials`: a sensor read on another partition by windows only, which receives the slice
    partials of its readings cut for the streams `into` (partition/partials.py).
    """

    source: str  # node id
    target: str
    from_partition: int
    to_partition: int
    rate_per_s: float
    kind: str
    into: tuple[str, ...] = ()


@dataclass(frozen=True)
class PartitionPlan:
    count: int
    epsilon: float
    node_partition: dict[str, int]
    loads: tuple[float, ...]  # summed sensor frequency (Hz) per partition
    crossings: tuple[Crossing, ...]
    split_subgraphs: int  # how many connected subgraphs had to be split
    # An update: nodes of the running plan that this one places on another partition (their state
    # starts anew there), and why (empty: every node of the running plan stays where it was).
    moved: tuple[str, ...] = ()
    moved_because: str = ""
    # Which placement this is (refine.py): "greedy" or a baseline's name, refined by `refined` moves;
    # and each placement considered: (name, tuples/s on cut edges or None where it is no alternative,
    # most loaded partition / average, why it is none: "over the bound", "forwards twice" or "").
    chosen: str = "greedy"
    refined: int = 0
    considered: tuple[tuple[str, float | None, float, str], ...] = ()
    # The greedy placement of Zhou et al., before any refinement or choice: tuples/s on its cut edges (None:
    # this plan is that placement, or an update's).
    greedy: float | None = None

    @property
    def sensor_partition(self) -> dict[str, int]:
        return {node_id.split(":", 1)[1]: p for node_id, p in self.node_partition.items()
                if node_id.startswith("sensor:")}

    @property
    def average_load(self) -> float:
        return sum(self.loads) / self.count

    @property
    def balance(self) -> float:
        """The most loaded partition over the average (1.0 is perfect)."""
        return max(self.loads) / self.average_load if self.average_load else 1.0


def node_rates(graph: Graph, frequencies: dict[str, float]) -> dict[str, float]:
    """Estimated tuples per second each node emits (upper bounds)."""
    rates: dict[str, float] = {}
    for node in graph.nodes():
        kind = node.kind
        if kind == SENSOR:
            rates[node.id] = frequencies[node.sensor_id]
        elif kind == WINDOW:
            rates[node.id] = min(rates[node.inputs[0]], 1000.0 / node.slide)  # at most one tuple per slide
        elif kind in (UNION, COMBINE):
            # a union passes all; combine-latest emits at most as often
            rates[node.id] = sum([rates[i] for i in node.inputs])
        elif kind == PATTERN:
            # Matches are rarer than the events they are made of: an estimate, a tenth of the input's.
            rates[node.id] = 0.1 * min(rates[i] for i in node.inputs)
    return rates


def stages(graph: Graph) -> dict[str, int]:
    """Stage 1 reads raw-rate streams; stage 2 reads only window outputs and stage-2 streams.

    A raw-rate stream is a sensor, or a union or combine with a raw-rate input. Stage 1
    holds those and the windows and patterns over them; everything else reads low-rate
    derived tuples only (window outputs, matches) and may run on another partition than
    its inputs.
    """
    raw_rate: set[str] = set()
    stage: dict[str, int] = {}
    for node in graph.nodes():
        # A window's and a pattern's outputs are low-rate: one tuple per window, the matches.
        if node.kind == SENSOR or (node.kind not in (WINDOW, PATTERN) and any(i in raw_rate for i in node.inputs)):
            raw_rate.add(node.id)
        stage[node.id] = 1 if node.id in raw_rate or any(i in raw_rate for i in node.inputs) else 2
    return stage


def partition(graph: Graph, frequencies: dict[str, float], count: int, epsilon: float = 0.1,
              pinned: dict[str, int] | None = None, rebalance: bool = False, cuts: bool = True,
              rates: dict[str, float] | None = None) -> PartitionPlan:
    """`pinned` (an update): the running plan's placement (placed node id -> partition). Its nodes
    stay where they are and the new ones are placed around them (`_around`; without `cuts`, no
    computation's tuples may be forwarded to another partition); where that cannot be done, or with
    `rebalance`, everything is placed anew and the nodes that move are listed. `rates`: the
    graph's node rates (node_rates), when the caller has them."""
    if count < 1:
        raise ValueError("the number of partitions must be at least 1")
    if pinned:
        around, why = ((None, "rebalanced (--rebalance)") if rebalance
                       else _around(graph, frequencies, count, epsilon, pinned, cuts, rates))
        if around is not None:
            return around
        fresh = partition(graph, frequencies, count, epsilon, rates=rates)
        moved = tuple(sorted(n for n, p in fresh.node_partition.items() if n in pinned and pinned[n] != p))
        return dataclasses.replace(fresh, moved=moved, moved_because=why)
    rates = rates if rates is not None else node_rates(graph, frequencies)
    stage = stages(graph)
    weight = {n.id: frequencies[n.sensor_id] if n.kind == SENSOR else 0.0 for n in graph.nodes()}
    components = graph.components()
    total = sum(weight.values())
    average = total / count
    # First try pieces up to the balance bound itself (fewest cuts). If the greedy
    # assignment then overshoots, use pieces of at most epsilon x average: the
    # heaviest-first greedy ends within one piece of the average, so this bound holds.
    kept: set[tuple[str, str]] = set()
    while True:
        for cap in ((1 + epsilon) * average, epsilon * average):
            pieces: list[set[str]] = []
            split = 0
            for component in components:
                if sum(weight[n] for n in component) <= cap:
                    pieces.append(component)
                else:
                    split += 1
                    pieces.extend(_split(graph, component, weight, rates, stage, cap, kept))
            placement, loads = _assign(pieces, weight, count)
            if max(loads) <= (1 + epsilon) * average + 1e-9:
                break
        # The job forwards a cut edge's tuples once, from the first stage of one partition to the
        # second stage of another. A cut edge whose source already reads forwarded tuples would
        # need a third hop: keep such edges whole and place again (rare: it takes a raw-rate
        # computation downstream of a cut).
        two_hops = _two_hop_edges(graph, placement)
        if not two_hops:
            break
        kept |= two_hops
    crossings = crossings_of(graph, placement, rates)
    return PartitionPlan(count, epsilon, dict(sorted(placement.items())), tuple(loads), crossings, split)


def _around(graph: Graph, frequencies: dict[str, float], count: int, epsilon: float,
            pinned: dict[str, int], cuts: bool = True,
            rates: dict[str, float] | None = None) -> tuple[PartitionPlan | None, str]:
    """Place the nodes that are not pinned around those that are, without moving any.

    The new nodes form pieces (connected through new nodes only), heaviest first. A piece goes where
    it must (an edge from a pinned node that the job cannot carry across: into a stage-1
    computation, not from a sensor), else where the pinned nodes it reads send it the most tuples,
    else to the least-loaded partition. Returns None and the reason when a piece must go to two
    partitions at once, or a cut would need a second hop."""
    rates = rates if rates is not None else node_rates(graph, frequencies)
    stage = stages(graph)
    weight = {n.id: frequencies[n.sensor_id] if n.kind == SENSOR else 0.0 for n in graph.nodes()}
    placement = {n.id: pinned[n.id] for n in graph.nodes() if n.id in pinned and pinned[n.id] < count}
    loads = [0.0] * count
    for node_id, where in placement.items():
        loads[where] += weight[node_id]
    new = [n.id for n in graph.nodes() if n.id not in placement]
    parent = {n: n for n in new}

    def find(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for u, v in graph.edges():
        if u in parent and v in parent:
            parent[find(v)] = find(u)
    pieces: dict[str, list[str]] = {}
    for n in new:
        pieces.setdefault(find(n), []).append(n)
    for piece in sorted(pieces.values(), key=lambda p: (-sum(weight[n] for n in p), min(p))):
        members = set(piece)
        required, votes = set(), [0.0] * count
        for u, v in graph.edges():
            if v in members and u in placement:
                votes[placement[u]] += rates[u]
                if graph.node(u).kind != SENSOR and (stage[v] != 2 or not cuts):
                    required.add(placement[u])
        if len(required) > 1:
            label = graph.node(min(piece)).label
            return None, (f"'{label}' reads computations that run on partitions "
                          f"{', '.join(str(p) for p in sorted(required))}, which only one partition can hold")
        if required:
            target = required.pop()
        elif any(votes):
            target = max(range(count), key=lambda p: (votes[p], -loads[p], -p))
        else:
            target = min(range(count), key=lambda p: (loads[p], p))
        for n in piece:
            placement[n] = target
            loads[target] += weight[n]
    if _two_hop_edges(graph, placement):
        return None, "placing the new computations beside the running ones would forward some tuples twice"
    crossings = crossings_of(graph, placement, rates)
    return PartitionPlan(count, epsilon, dict(sorted(placement.items())), tuple(loads), crossings, 0), ""


def crossings_of(graph: Graph, placement: dict[str, int], rates: dict[str, float]) -> tuple[Crossing, ...]:
    """The edges a placement cuts, with the rates they carry."""
    return tuple(
        Crossing(u, v, placement[u], placement[v], rates[u], RAW if graph.node(u).kind == SENSOR else DERIVED)
        for u, v in graph.edges() if placement[u] != placement[v])


def _two_hop_edges(graph: Graph, placement: dict[str, int]) -> set[tuple[str, str]]:
    forwarded: set[str] = set()  # nodes that read a cut edge, directly or through others
    hops = set()
    for node in graph.nodes():
        for i in node.inputs:
            if placement[i] != placement[node.id] or i in forwarded:
                forwarded.add(node.id)
            if placement[i] != placement[node.id] and i in forwarded:
                hops.add((i, node.id))
    return hops


def _split(graph: Graph, component: set[str], weight, rates, stage, cap: float,
           kept: set[tuple[str, str]]) -> list[set[str]]:
    """Cut a subgraph into pieces under `cap`, leaving the lowest-rate edges cut.

    Only edges the job can carry across may be cut: from a sensor (its readings are
    sent to both partitions) or into a stage-2 computation (forwarded). Every other
    edge is contracted first, whatever the cap.
    """
    parent = {n: n for n in component}
    size = {n: weight[n] for n in component}

    def find(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    def merge(a: str, b: str) -> None:
        parent[b] = a
        size[a] += size[b]

    # By rate, highest first; edges of one rate in their order (graph.edges() is sorted).
    edges = sorted((e for e in graph.edges() if e[0] in component), key=lambda e: -rates[e[0]])
    cuttable = []
    for edge in edges:
        u, v = edge
        if stage[v] == 2 or graph.node(u).kind == SENSOR:
            cuttable.append(edge)
            if edge not in kept:
                continue
        a, b = find(u), find(v)
        if a != b:
            merge(a, b)
    for u, v in cuttable:
        a, b = find(u), find(v)
        if a != b and size[a] + size[b] <= cap:
            merge(a, b)
    groups: dict[str, set[str]] = {}
    for n in component:
        groups.setdefault(find(n), set()).add(n)
    return list(groups.values())


def _assign(pieces: list[set[str]], weight, count: int) -> tuple[dict[str, int], list[float]]:
    """Heaviest piece first, onto the least-loaded partition; the load is updated each time."""
    loads = [0.0] * count
    placement: dict[str, int] = {}
    for piece in sorted(pieces, key=lambda p: (-sum(weight[n] for n in p), min(p))):
        target = min(range(count), key=lambda p: (loads[p], p))
        loads[target] += sum(weight[n] for n in piece)
        for n in piece:
            placement[n] = target
    return placement, loads
