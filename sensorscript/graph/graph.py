"""The shared computation graph of all workflows: a small domain class over networkx.

Origins merged into a shared node are collected and applied when the node is next
read: a node that 500 workflows wrote is rebuilt once, not at every merge.
"""

from __future__ import annotations

from typing import Iterator

import networkx as nx

from sensorscript.graph.nodes import SENSOR, Node, Origin, with_origins


class Graph:
    """Nodes are computations (keyed by what they compute); edges run from input to consumer.

    `outputs` maps every workflow output `WORKFLOW.NAME` to the node that computes it;
    several outputs may name one node when workflows share a computation.
    """

    def __init__(self) -> None:
        self._dag = nx.DiGraph()
        self._merged: dict[str, dict[Origin, None]] = {}  # node id -> its origins, merged ones included
        self.outputs: dict[str, str] = {}
        self.workflows: dict[str, str] = {}  # workflow name -> file
        self._order: list[str] | None = None
        self._edges: list[tuple[str, str]] | None = None

    # building -----------------------------------------------------------------
    def add(self, node: Node) -> str:
        """Add a node, or merge it into the equal one already there; returns its id."""
        node_id = node.id
        if node_id in self._dag:
            if node.origins:  # (a sensor has none: nothing to merge)
                merged = self._merged.get(node_id)
                if merged is None:
                    merged = self._merged[node_id] = dict.fromkeys(self._dag.nodes[node_id]["node"].origins)
                merged.update(dict.fromkeys(node.origins))
        else:
            self._order = self._edges = None
            self._dag.add_node(node_id, node=node)
            for input_id in node.inputs:
                self._dag.add_edge(input_id, node_id)
        return node_id

    def add_output(self, workflow: str, stream: str, node_id: str) -> None:
        self.outputs[f"{workflow}.{stream}"] = node_id

    # reading ------------------------------------------------------------------
    def __contains__(self, node_id: str) -> bool:
        return node_id in self._dag

    def __len__(self) -> int:
        return self._dag.number_of_nodes()

    def node(self, node_id: str) -> Node:
        if self._merged:
            self._settle()
        return self._dag.nodes[node_id]["node"]

    def _settle(self) -> None:
        """Give the nodes the origins merged into them (first seen first, each once)."""
        for node_id, merged in self._merged.items():
            data = self._dag.nodes[node_id]
            if len(merged) != len(data["node"].origins):
                data["node"] = with_origins(data["node"], tuple(merged))
        self._merged = {}

    def nodes(self) -> Iterator[Node]:
        """Every node in a deterministic dependency order (inputs before consumers)."""
        if self._order is None:
            self._order = list(nx.lexicographical_topological_sort(self._dag))
        if self._merged:
            self._settle()
        data = self._dag.nodes
        return (data[node_id]["node"] for node_id in self._order)

    def sensors(self) -> list[str]:
        return sorted(n.sensor_id for n in self.nodes() if n.kind == SENSOR)

    def upstream_sensors(self) -> dict[str, frozenset[str]]:
        """For every node, the sensor node ids it reads, directly or through other nodes."""
        upstream: dict[str, frozenset[str]] = {}
        for node in self.nodes():
            if node.kind == SENSOR:
                upstream[node.id] = frozenset((node.id,))
            elif len(node.inputs) == 1:
                upstream[node.id] = upstream[node.inputs[0]]
            else:
                upstream[node.id] = frozenset().union(*(upstream[i] for i in node.inputs))
        return upstream

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
        return sorted(self._dag.successors(node_id))

    def shared(self) -> list[Node]:
        """Computations (not sensors) that more than one workflow wrote."""
        return [n for n in self.nodes() if n.kind != SENSOR and len({o.workflow for o in n.origins}) > 1]

    def components(self) -> list[set[str]]:
        """Weakly connected subgraphs, each a set of node ids, in a deterministic order."""
        return sorted((set(c) for c in nx.weakly_connected_components(self._dag)), key=lambda c: min(c))

    def edges(self) -> list[tuple[str, str]]:
        if self._edges is None:
            self._edges = sorted(self._dag.edges())
        return self._edges

    def restricted_to_outputs(self, outputs: dict[str, str]) -> "Graph":
        """A new graph with only these outputs and the nodes they need."""
        keep: set[str] = set()
        for node_id in outputs.values():
            keep |= nx.ancestors(self._dag, node_id) | {node_id}
        graph = Graph()
        graph.workflows = {w: f for w, f in self.workflows.items()
                           if any(o.rsplit(".", 1)[0] == w for o in outputs)}
        for node in self.nodes():
            if node.id in keep:
                graph.add(node)
        graph.outputs = dict(outputs)
        return graph

