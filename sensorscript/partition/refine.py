"""Better placements than the greedy one under the same balance bound (issue #44).

The greedy partitioner (greedy.py) assigns whole pieces and splits once; it never looks back. Two
things here do:

- `refine`: moves that lower the traffic while every partition stays under the balance bound, in
  the manner of Fiduccia and Mattheyses. What moves is an atom: nodes joined by edges the job cannot
  carry across (into a stage-1 computation, not from a sensor), which must share a partition. First
  every atom next to a cut edge goes to the partition that lowers the traffic most, if one does and
  its load stays under the bound; then a pass moves the best atom not moved yet, even at a loss,
  and keeps the moves up to the best point it reached. A move that would make the job forward a
  tuple twice is undone. Rounds repeat until one gains nothing.
- `baselines`: the two naive placements (hash by workflow, hash by sensor id) as placements the
  job can run, each node on one partition: a node of several workflows goes with the first of them
  by name, and what another workflow needs of it is forwarded, which costs at most what the naive
  placement's duplicated readings cost; and workflows packed: the same pieces as hash by workflow,
  heaviest first onto the least loaded partition. They start refinement too, and the cheapest
  placement that keeps the bound is the one chosen (`choose`).

Traffic is counted as cost.py counts ours: a node's tuples cross once to each other partition that
reads them.
"""

from __future__ import annotations

import dataclasses
import heapq
from dataclasses import dataclass

from networkx.utils import UnionFind

from sensorscript.graph.graph import Graph
from sensorscript.graph.nodes import SENSOR, WINDOW
from sensorscript.partition.cost import forwarded, hash_partition, workflow_partition
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
    why: str = ""  # not kept: "over the bound" or "forwards twice"


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
    """`placement` improved by moves under `bound` x the average load; the moves kept. The start
    must forward no tuple twice (no path crosses two cut edges), and so does every move. `of` and
    `consumers`: the graph's atoms and consumers, when the caller has them.

    Each round first makes every move that lowers the traffic at once, then one pass in the manner
    of Fiduccia and Mattheyses: the best move of an atom not moved yet in the pass, even one that
    raises the traffic, until MAX_WORSE moves have not beaten the best seen; the moves after the
    best are undone. That climbs out of a placement no single move improves (a workflow's
    computations moving to its sensors' partition gain nothing until a second one follows)."""
    refiner = _Refiner(graph, frequencies, placement, count, rates, bound,
                       of if of is not None else atoms(graph), consumers if consumers is not None else consumers_of(graph))
    for _ in range(MAX_PASSES):
        improved = refiner.downhill()
        improved += refiner.pass_()
        if not improved:
            break
    return refiner.placement, len(refiner.log)


MAX_WORSE = 40  # moves a pass makes past its best before it stops


class _Refiner:
    """A placement under change: moves of atoms, their gains, and undo."""

    def __init__(self, graph, frequencies, placement, count, rates, bound, of, consumers):
        self.placement = dict(placement)
        self.count, self.rates, self.of, self.consumers = count, rates, of, consumers
        self.members: dict[str, list[str]] = {}
        for node_id, atom in of.items():
            self.members.setdefault(atom, []).append(node_id)
        self.weight = dict.fromkeys(self.members, 0.0)
        for node in graph.nodes():
            if node.kind == SENSOR:
                self.weight[of[node.id]] += frequencies[node.sensor_id]
        self.load = loads(graph, frequencies, self.placement, count)
        self.limit = bound * sum(self.load) / count + 1e-9
        self.order = {n.id: i for i, n in enumerate(graph.nodes())}
        self.inputs = {n.id: n.inputs for n in graph.nodes()}
        self.crossed = {}  # node -> the most cut edges on a path into it (the job allows 1)
        for node in graph.nodes():
            self.crossed[node.id] = max((self.crossed[i] + (self.placement[i] != self.placement[node.id])
                                         for i in node.inputs), default=0)
        self.near: dict[str, list[str]] = {}  # `around`, as worked out
        # Per node, how many of its consumers each partition holds (kept as atoms move): a node's
        # crossing tuples in O(partitions), however many computations read it (a shared sensor).
        self.feeds: dict[str, list[str]] = {n: [] for n in self.placement}
        self.held: dict[str, list[int]] = {}
        for node_id, readers in consumers.items():
            held = self.held[node_id] = [0] * count
            for c in readers:
                held[self.placement[c]] += 1
                self.feeds[c].append(node_id)
        self.log: list[tuple[str, int, int, dict[str, int]]] = []  # (atom, from, to, crossed before) kept

    def share(self, node_id: str) -> float:
        """A node's crossing tuples/s under the current placement."""
        where = self.placement[node_id]
        return self.rates[node_id] * sum(1 for q, k in enumerate(self.held[node_id]) if k and q != where)

    def place(self, atom: str, where: int) -> None:
        for n in self.members[atom]:
            before = self.placement[n]
            if before != where:
                self.placement[n] = where
                for i in self.feeds[n]:
                    self.held[i][before] -= 1
                    self.held[i][where] += 1

    def around(self, atom: str) -> list[str]:
        """An atom's nodes and the nodes they read: whose crossing tuples a move of it changes."""
        found = self.near.get(atom)
        if found is None:
            nodes = self.members[atom]
            found = self.near[atom] = list(set(nodes).union(*(self.inputs[n] for n in nodes)))
        return found

    def options(self, atom: str) -> list[tuple[float, int]]:
        """(gain in tuples/s, partition) of each move of `atom` that keeps the bound, best first."""
        here = self.placement[self.members[atom][0]]
        around = self.around(atom)
        before = sum(self.share(n) for n in around)
        found = []
        for there in range(self.count):
            if there != here and self.load[there] + self.weight[atom] <= self.limit:
                self.place(atom, there)
                found.append((before - sum(self.share(n) for n in around), there))
                self.place(atom, here)
        return sorted(found, key=lambda o: (-o[0], o[1]))

    def move(self, atom: str, there: int) -> bool:
        """Move `atom` unless the job would then forward a tuple twice."""
        here = self.placement[self.members[atom][0]]
        self.place(atom, there)
        changed = self.recrossed(atom)
        if changed is None:
            self.place(atom, here)
            return False
        self.log.append((atom, here, there, {n: self.crossed[n] for n in changed}))
        self.crossed.update(changed)
        self.load[here] -= self.weight[atom]
        self.load[there] += self.weight[atom]
        return True

    def undo(self) -> None:
        atom, here, there, crossed = self.log.pop()
        self.place(atom, here)
        self.crossed.update(crossed)
        self.load[there] -= self.weight[atom]
        self.load[here] += self.weight[atom]

    def recrossed(self, atom: str) -> dict[str, int] | None:
        """The new counts of cut edges above the nodes a move changes, or None if one passes 1."""
        members, crossed, placement = self.members[atom], self.crossed, self.placement
        found: dict[str, int] = {}
        waiting = sorted(members, key=self.order.__getitem__)
        queued = set(waiting)
        while waiting:
            node_id = waiting.pop(0)
            value = max((found.get(i, crossed[i]) + (placement[i] != placement[node_id])
                         for i in self.inputs[node_id]), default=0)
            if value > 1:
                return None
            if value != crossed[node_id] or node_id in members:
                found[node_id] = value
                for c in self.consumers[node_id]:
                    if c not in queued:
                        queued.add(c)
                        waiting.append(c)
                waiting.sort(key=self.order.__getitem__)
        return found

    def boundary(self) -> list[str]:
        """Atoms with a node next to a cut edge."""
        placement, consumers, inputs = self.placement, self.consumers, self.inputs
        return sorted({self.of[u] for u in placement if any(placement[c] != placement[u] for c in consumers[u])
                       or any(placement[i] != placement[u] for i in inputs[u])})

    def downhill(self) -> float:
        """Every move that lowers the traffic, boundary atom by atom, until none does; the tuples/s saved."""
        saved = 0.0
        while True:
            gained = 0.0
            for atom in self.boundary():
                for gain, there in self.options(atom):
                    if gain <= 1e-9:
                        break
                    if self.move(atom, there):
                        gained += gain
                        break
            saved += gained
            if gained <= 1e-9:
                return saved

    def pass_(self) -> float:
        """One Fiduccia-Mattheyses pass (refine's text); the tuples/s it saved (0: it kept nothing)."""
        kept_before = len(self.log)
        locked: set[str] = set()
        heap = []
        for atom in self.boundary():
            for gain, there in self.options(atom)[:1]:
                heapq.heappush(heap, (-gain, self.order[self.members[atom][0]], atom, there))
        total = best = 0.0
        best_at = len(self.log)
        while heap and len(self.log) - best_at < MAX_WORSE:
            _, _, atom, there = heapq.heappop(heap)
            if atom in locked:
                continue
            options = self.options(atom)  # the gains may have changed since it was queued
            if not options:
                continue
            gain, there = options[0]
            if heap and gain < -heap[0][0] - 1e-9:  # no longer the best: queue it at its gain
                heapq.heappush(heap, (-gain, self.order[self.members[atom][0]], atom, there))
                continue
            locked.add(atom)
            made = next((g for g, t in options if self.move(atom, t)), None)  # the best move allowed
            if made is None:
                continue
            total += made
            if total > best + 1e-9:
                best, best_at = total, len(self.log)
            for n in self.members[atom]:  # the neighbours' gains changed: queue them anew
                for other in {self.of[x] for x in (*self.inputs[n], *self.consumers[n])} - locked:
                    for g, t in self.options(other)[:1]:
                        heapq.heappush(heap, (-g, self.order[self.members[other][0]], other, t))
        while len(self.log) > best_at:
            self.undo()
        return best if best_at > kept_before else 0.0


def baselines(graph: Graph, frequencies: dict[str, float], count: int,
              of: dict[str, str] | None = None) -> dict[str, dict[str, int]]:
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
    # Workflows packed: each workflow's nodes (as by_workflow assigns them) as one piece, the heaviest
    # first onto the least loaded partition (Graham's rule), which keeps what a workflow reads together
    # as hashing by workflow does, at a balance hashing cannot promise.
    weight: dict[str, float] = {}
    for node in nodes:
        if node.kind == SENSOR:
            weight[readers.get(node.id, "")] = weight.get(readers.get(node.id, ""), 0.0) + frequencies[node.sensor_id]
    packed_load, packed_at = [0.0] * count, {}
    for workflow in sorted(set(readers.values()) | {""}, key=lambda w: (-weight.get(w, 0.0), w)):
        packed_at[workflow] = min(range(count), key=lambda q: (packed_load[q], q))
        packed_load[packed_at[workflow]] += weight.get(workflow, 0.0)
    packed = {n.id: packed_at[readers.get(n.id, "")] for n in nodes}
    found = {}
    for name, placement in (("hash by workflow", by_workflow), ("hash by sensor id", by_sensor),
                            ("workflows packed", packed)):
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
    for name, start in (("greedy", greedy), *baselines(graph, frequencies, count, of).items()):
        start_load = loads(graph, frequencies, start, count)
        average = sum(start_load) / count
        peak = max(start_load) / average if average else 1.0
        why = "over the bound" if peak > bound + 1e-9 else "forwards twice" if _two_hop_edges(graph, start) else ""
        if why:
            found.append(Candidate(name, start, float("inf"), peak, 0, False, why))
            continue
        placement, moves = refine(graph, frequencies, start, count, rates, bound, of, consumers)
        load = loads(graph, frequencies, placement, count)
        found.append(Candidate(name, placement, traffic(graph, placement, rates, consumers),
                               max(load) / average if average else 1.0, moves, True))
    return sorted(found, key=lambda c: (not c.kept, c.traffic if c.kept else 0.0))


def choose(graph: Graph, frequencies: dict[str, float], plan: PartitionPlan, rates: dict[str, float],
           crossing=None) -> PartitionPlan:
    """The cheapest placement under the plan's bound among the greedy plan and the baselines, each
    refined (the module's text). `crossing(crossings, placement)`: what really crosses a placement's
    cut edges (partials.with_partials), by which the refined placements are compared; refinement
    itself counts the readings."""
    crossing = crossing or (lambda crossings, placement: crossings)
    found = candidates(graph, frequencies, plan.node_partition, plan.count, rates, 1 + plan.epsilon)
    crossed = {c.name: crossing(crossings_of(graph, c.placement, rates), c.placement) for c in found if c.kept}
    found = sorted((dataclasses.replace(c, traffic=forwarded(crossed[c.name])) if c.kept else c for c in found),
                   key=lambda c: (not c.kept, c.traffic if c.kept else 0.0))
    best = found[0] if found[0].kept else next(c for c in found if c.name == "greedy")  # none does: greedy
    placement = best.placement
    crossings = crossed[best.name] if best.kept else crossing(crossings_of(graph, placement, rates), placement)
    return dataclasses.replace(plan, greedy=forwarded(plan.crossings), node_partition=dict(sorted(placement.items())),
                               loads=tuple(loads(graph, frequencies, placement, plan.count)), crossings=crossings,
                               chosen=best.name, refined=best.moves,
                               considered=tuple((c.name, c.traffic if c.kept else None, c.peak, c.why) for c in found))
