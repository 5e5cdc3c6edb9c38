"""Patterns partitioned by sensor, placed in pieces (`partition by sensor`, issue #13).

A pattern with `partition by sensor` matches each sensor's events apart (a derived stream's
events are one key of their own), so it need not pull its inputs onto one partition: it runs on
every partition for the sensors placed there. For placement it stands as one piece per source
(a sensor, or a derived stream, reached from its elements' streams through unions), each reading
only its source, so the partitioner places each piece with its source; what reads the pattern
reads all its pieces (their matches are forwarded, as any cut edge). A union read only by such
patterns is never formed: the pieces read its sources directly.
"""

from __future__ import annotations

from sensorscript.graph.graph import Graph
from sensorscript.graph.nodes import PATTERN, UNION, Node, with_inputs


def by_sensor(node: Node) -> bool:
    return node.kind == PATTERN and node.key[1][5] == "sensor"


def piece_id(pattern_id: str, source: str) -> str:
    return f"{pattern_id}@{source}"


def placement_graph(graph: Graph) -> tuple[Graph, dict[str, dict[str, str]]]:
    """The graph the partitioner places, and per pattern partitioned by sensor its pieces
    (source -> piece id). Other nodes keep their ids; a node reading such a pattern reads its pieces."""
    distributed = {n.id for n in graph.nodes() if by_sensor(n)}
    if not distributed:
        return graph, {}
    outputs = set(graph.outputs.values())
    needed: dict[str, bool] = {}

    def formed(union_id: str) -> bool:
        """Whether a union is formed: something other than a pattern partitioned by sensor reads it."""
        if union_id not in needed:
            needed[union_id] = union_id in outputs or any(
                c not in distributed and (graph.node(c).kind != UNION or formed(c)) for c in graph.consumers(union_id))
        return needed[union_id]

    placed = Graph()
    placed.workflows = dict(graph.workflows)
    placed.outputs = dict(graph.outputs)
    pieces: dict[str, dict[str, str]] = {}

    def standing_for(node_id: str) -> list[str]:
        return sorted(pieces[node_id].values()) if node_id in pieces else [node_id]

    for node in graph.nodes():
        if node.kind == UNION and not formed(node.id):
            continue
        if node.id in distributed:
            # One piece per source: a source that is itself placed in pieces is one key of events
            # (its own stream), so its piece reads all of them.
            sources = sorted({s for i in node.inputs for s in graph.sources(i)})
            pieces[node.id] = {}
            for source in sources:
                piece = piece_id(node.id, source)
                pieces[node.id][source] = piece
                placed.add(with_inputs(node, tuple(standing_for(source)), piece))
            continue
        inputs = tuple(i for original in node.inputs for i in standing_for(original))
        placed.add(with_inputs(node, inputs) if inputs != node.inputs else node)
    return placed, pieces
