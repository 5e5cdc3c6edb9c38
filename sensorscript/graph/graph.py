"""The shared computation graph of all workflows: a small domain class over plain dictionaries.

Nodes are kept by id, with each node's consumers; the order (inputs before consumers, the
smallest id first among those ready) is computed once and kept until a node is added.
Plain dictionaries, not a networkx DiGraph: at 10,000 workflows (50,000 nodes) every pass
of planning reads each node several times, and networkx's views cost several times a dict
lookup there.

Origins merged into a shared node are collected and applied when the node is next
read: a node that 500 workflows wrote is rebuilt once, not at every merge.
"""

from __future__ import annotations

import heapq
from typing import Iterator

from sensorscript.graph.nodes import SENSOR, Node, Origin, with_origins


class Graph:
    """Nodes are computations (keyed by what they compute); edges run from input to consumer.

    `outputs` maps every workflow output `WORKFLOW.NAME` to the node that computes it;
    several outputs may name one node when workflows share a computation.
    """

    def __init__(self) -> None:
        self._nodes: dict[str, Node] = {}
        self._consumers: dict[str, list[str]] = {}  # node id -> the nodes reading it, each once
        self._merged: dict[str, dict[Origin, None]] = {}  # node id -> its origins, merged ones included
        self.outputs: dict[str, str] = {}
        self.workflows: dict[str, str] = {}  # workflow name -> file
        self._order: list[str] | None = None
        self._in_order: tuple[Node, ...] | None = None  # the nodes in that order, origins merged
        self._edges: list[tuple[str, str]] | None = None
        self._sensors: list[str] | None = None

    # building -----------------------------------------------------------------
    def add(self, node: Node) -> str:
        """Add a node, or merge it into the equal one already there; returns its id. Its inputs
        must be in the graph already."""
        node_id = node.id
        known = self._nodes.get(node_id)
        if known is not None:
            if node.origins:  # (a sensor has none: nothing to merge)
                merged = self._merged.get(node_id)
                if merged is None:
                    merged = self._merged[node_id] = dict.fromkeys(known.origins)
                merged.update(dict.fromkeys(node.origins))
        else:
            self._order = self._in_order = self._edges = self._sensors = None
            self._nodes[node_id] = node
            self._consumers[node_id] = []
            consumers = self._consumers
            for input_id in dict.fromkeys(node.inputs):  # a union may read one stream twice: one edge
                consumers[input_id].append(node_id)
        return node_id

    def add_output(self, workflow: str, stream: str, node_id: str) -> None:
        self.outputs[f"{workflow}.{stream}"] = node_id

    # reading ------------------------------------------------------------------
    def __contains__(self, node_id: str) -> bool:
        return node_id in self._nodes

    def __len__(self) -> int:
        return len(self._nodes)

    def node(self, node_id: str) -> Node:
        if self._merged:
            self._settle()
        return self._nodes[node_id]

    def _settle(self) -> None:
        """Give the nodes the origins merged into them (first seen first, each once)."""
        nodes = self._nodes
        for node_id, merged in self._merged.items():
            node = nodes[node_id]
            if len(merged) != len(node.origins):
                nodes[node_id] = with_origins(node, tuple(merged))
        self._merged = {}
        self._in_order = None

    def nodes(self) -> Iterator[Node]:
        """Every node in a deterministic dependency order (inputs before consumers; among the
        nodes whose inputs are all out, the smallest id first)."""
        if self._merged:
            self._settle()
        if self._in_order is None:
            if self._order is None:
                self._order = self._topological_order()
            nodes = self._nodes
            self._in_order = tuple(nodes[node_id] for node_id in self._order)
        return iter(self._in_order)

    def _topological_order(self) -> list[str]:
        waiting = {node_id: len(set(node.inputs)) for node_id, node in self._nodes.items()}
        ready = [node_id for node_id, count in waiting.items() if count == 0]
        heapq.heapify(ready)
        consumers, order = self._consumers, []
        while ready:
            node_id = heapq.heappop(ready)
            order.append(node_id)
            for consumer in consumers[node_id]:
                waiting[consumer] -= 1
                if waiting[consumer] == 0:
                    heapq.heappush(ready, consumer)
        return order

    def sensors(self) -> list[str]:
        """The sensor ids read, sorted."""
        if self._sensors is None:
            self._sensors = sorted(n.key[1] for n in self._nodes.values() if n.kind == SENSOR)
        return list(self._sensors)

    def sources(self, node_id: str) -> dict[str, int]:
        """What a stream's tuples come from: through unions, the sensors and the derived streams that
        make them, each with how many times it reaches the stream (a multiset union repeats)."""
        node = self.node(node_id)
        if node.kind != "union":
            return {node_id: 1}
        found: dict[str, int] = {}
        for i in node.inputs:
            for source, copies in self.sources(i).items():
                found[source] = found.get(source, 0) + copies
        return found

    def consumers(self, node_id: str) -> list[str]:
        return sorted(self._consumers[node_id])

    def shared(self) -> list[Node]:
        """Computations (not sensors) that more than one workflow wrote."""
        return [n for n in self.nodes() if n.kind != SENSOR and len(n.origins) > 1
                and any(o.workflow != n.origins[0].workflow for o in n.origins)]

    def components(self) -> list[set[str]]:
        """Weakly connected subgraphs, each a set of node ids, in a deterministic order."""
        parent = {node_id: node_id for node_id in self._nodes}

        def find(n: str) -> str:
            while parent[n] != n:
                parent[n] = parent[parent[n]]
                n = parent[n]
            return n

        for node_id, node in self._nodes.items():
            for input_id in node.inputs:
                a, b = find(input_id), find(node_id)
                if a != b:
                    parent[b] = a
        groups: dict[str, set[str]] = {}
        for node_id in self._nodes:
            groups.setdefault(find(node_id), set()).add(node_id)
        return sorted(groups.values(), key=min)

    def edges(self) -> list[tuple[str, str]]:
        if self._edges is None:
            self._edges = sorted((u, v) for u, readers in self._consumers.items() for v in readers)
        return self._edges
