"""Nodes of the computation graph.

A node is identified by what it computes, never by who wrote it: its `key` is a
canonical, hashable description (function, inputs by node id, parameters).
Two statements in different workflows with equal keys are one node; this is
the whole of computation sharing (as ibis shares equal expressions).
Inputs of unions and commutative functions are sorted, so `union(A, B)` and
`union(B, A)` are one node, and so are `A + B` and `B + A`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

SENSOR, WINDOW, UNION, COMBINE, PATTERN = "sensor", "window", "union", "combine", "pattern"


@dataclass(frozen=True)
class Origin:
    """Where a node was written: for comments in the generated job and for `explain`."""

    workflow: str
    stream: str
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.workflow}.{self.stream} ({self.file}:{self.line})"


class ScriptLines:
    """Script lines by file: what an origin says, for the comments above each computation in
    job.py and for `sscript explain --workflow`."""

    def __init__(self, sources: dict[str, str]):
        self._names: dict[str, str] = {}
        self.lines = {self.name(f): text.splitlines() for f, text in sources.items()}

    def name(self, file: str) -> str:
        """A workflow's file name (kept: a Path per statement cost a second at 70,000 statements)."""
        name = self._names.get(file)
        if name is None:
            name = self._names[file] = Path(file).name
        return name

    def statement(self, file: str, line: int) -> str:
        lines = self.lines.get(self.name(file), [])
        text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
        # One line per statement in the comment; a statement that spans lines shows its first.
        return text.split("//")[0].rstrip()


class _Id:
    """`Node.id`, computed on first use and then kept in the instance (as functools.cached_property,
    without its lock: ids are read in every hot loop of planning)."""

    def __get__(self, node: "Node | None", owner: type) -> str:
        if node is None:
            return self  # type: ignore[return-value]
        value = node.__dict__["id"] = node_id(node.kind, node.key)
        return value


@dataclass(frozen=True)
class Node:
    kind: str
    key: tuple  # canonical description; equal keys = the same computation
    inputs: tuple[str, ...]  # node ids, in the order the computation reads them
    origins: tuple[Origin, ...] = field(default=(), compare=False)

    id = _Id()

    # Parameters by kind, for readable code --------------------------------
    @property
    def sensor_id(self) -> str:
        return self.key[1]

    @property
    def func(self) -> str:  # window aggregate
        return self.key[1]

    @property
    def length(self) -> int:
        return self.key[3]

    @property
    def slide(self) -> int:
        return self.key[4]

    @property
    def label(self) -> str:
        """A short human name: the sensor id, or the first stream name that defines it."""
        if self.kind == SENSOR:
            return self.sensor_id
        return self.origins[0].stream if self.origins else self.id


def with_origins(node: Node, origins: tuple[Origin, ...]) -> Node:
    """The same computation with other origins (its id is kept, not computed again)."""
    other = Node(node.kind, node.key, node.inputs, origins)
    if "id" in node.__dict__:
        other.__dict__["id"] = node.__dict__["id"]
    return other


def with_inputs(node: Node, inputs: tuple[str, ...], node_id: str | None = None) -> Node:
    """The same computation reading other nodes (placement stands pieces in for a node), under its
    own id or the one given."""
    other = Node(node.kind, node.key, tuple(inputs), node.origins)
    other.__dict__["id"] = node_id or node.id
    return other


def node_id(kind: str, key: tuple) -> str:
    if kind == SENSOR:
        return f"sensor:{key[1]}"
    digest = hashlib.sha1(repr(key).encode()).hexdigest()[:10]
    return f"{kind}:{digest}"


def sensor(sensor_id: str) -> Node:
    return Node(SENSOR, (SENSOR, sensor_id), ())


def window(func: str, input_id: str, length: int, slide: int, origin: Origin) -> Node:
    return Node(WINDOW, (WINDOW, func, input_id, length, slide), (input_id,), (origin,))


def union(input_ids: list[str], origin: Origin) -> Node:
    ordered = tuple(sorted(input_ids))  # a multiset: order does not matter, repeats do
    return Node(UNION, (UNION, ordered), ordered, (origin,))


def combine(expression: tuple, input_ids: list[str], origin: Origin) -> Node:
    """An event-triggered (combine-latest) computation; `expression` reads inputs by node id."""
    return Node(COMBINE, (COMBINE, expression), tuple(sorted(set(input_ids))), (origin,))


def pattern(description: tuple, input_ids: list[str], origin: Origin) -> Node:
    return Node(PATTERN, (PATTERN, description), tuple(dict.fromkeys(input_ids)), (origin,))
