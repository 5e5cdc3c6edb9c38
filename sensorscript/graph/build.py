"""Checked workflows -> one shared `Graph` (docs/ARCHITECTURE.md, "The compiler").

Each statement becomes a node whose key says what it computes with inputs named
by node id; equal keys across workflows are one node. Expressions are put in a
canonical form first: operands of commutative operators and arguments of the
cross-stream functions are sorted, and pattern variables are renamed by
position, so that the same computation written two ways is still shared. Only
exact rewrites are made: `a + b` = `b + a` bit for bit, but `(a + b) + c` is
not re-associated because floating-point addition is not associative.
"""

from __future__ import annotations

from typing import Iterable

from graphlib import TopologicalSorter

from sensorscript.graph import nodes
from sensorscript.graph.graph import Graph
from sensorscript.parser import ast

COMMUTATIVE = {"+", "*", "==", "!=", "and", "or"}


def build_graph(workflows: Iterable[ast.Workflow]) -> Graph:
    graph = Graph()
    for workflow in workflows:
        graph.workflows[workflow.name] = workflow.path
        references = [ast.references(s.value) for s in workflow.statements]
        ids = _add_workflow(graph, workflow, references)
        for name in _outputs(workflow, references):
            graph.add_output(workflow.name, name, ids[name])
    return graph


def _outputs(workflow: ast.Workflow, references: list[list[ast.Ref]]) -> tuple[str, ...]:
    """`workflow.outputs`, from the references already found."""
    read = {ref.name for refs in references for ref in refs}
    return tuple(s.name for s in workflow.statements if s.name not in read)


def _add_workflow(graph: Graph, workflow: ast.Workflow, references: list[list[ast.Ref]]) -> dict[str, str]:
    """Add every statement of one workflow; returns stream name -> node id."""
    statements: dict[str, ast.Statement] = {}
    reads: dict[str, list[str]] = {}
    for statement, refs in zip(workflow.statements, references):  # workflow.defined: first definitions
        if statement.name not in statements:
            statements[statement.name] = statement
            reads[statement.name] = refs  # type: ignore[assignment]
    dependencies = {name: [r.name for r in refs if r.name in statements] for name, refs in reads.items()}
    ids: dict[str, str] = {}

    def stream(ref: ast.Ref) -> str:
        if ref.name in ids:
            return ids[ref.name]
        sensor_id = nodes.node_id(nodes.SENSOR, (nodes.SENSOR, ref.name))
        if sensor_id in graph:
            return sensor_id
        return graph.add(nodes.sensor(ref.name))

    for name in _static_order(dependencies):  # deterministic: follows statement order where free
        statement = statements[name]
        origin = nodes.Origin(workflow.name, name, workflow.path, statement.span.line if statement.span else 0)
        if isinstance(statement.value, ast.Pattern):
            ids[name] = graph.add(_pattern(statement.value, stream, origin, graph, ids))
        else:
            ids[name] = graph.add(_node(statement.value, stream, origin))
    return ids


def _static_order(dependencies: dict[str, list[str]]) -> list[str]:
    """`graphlib.TopologicalSorter(dependencies).static_order()`, the same order, without its overhead.

    Ready nodes come out in waves: first all without inputs in the order they were first
    seen, then those each wave releases, in the order the wave releases them.
    """
    waiting: dict[str, int] = {}
    readers: dict[str, list[str]] = {}
    for name, inputs in dependencies.items():
        if name not in waiting:
            waiting[name] = 0
            readers[name] = []
        waiting[name] += len(inputs)
        for input_name in inputs:
            if input_name not in waiting:
                waiting[input_name] = 0
                readers[input_name] = []
            readers[input_name].append(name)
    ready = [name for name, count in waiting.items() if count == 0]
    order: list[str] = []
    while ready:
        order.extend(ready)
        released = []
        for name in ready:
            for reader in readers[name]:
                waiting[reader] -= 1
                if waiting[reader] == 0:
                    released.append(reader)
        ready = released
    if len(order) < len(waiting):  # a cycle: let graphlib raise its CycleError, naming it
        return list(TopologicalSorter(dependencies).static_order())
    return order


def _node(value, stream, origin: nodes.Origin) -> nodes.Node:
    if isinstance(value, ast.Window):
        return nodes.window(value.func, stream(value.stream), value.length.ms, value.slide.ms, origin)
    if isinstance(value, ast.Union_):
        return nodes.union([stream(s) for s in value.streams], origin)
    inputs: list[str] = []
    expression = canonical(value, lambda ref: ("in", _collect(inputs, stream(ref))))
    return nodes.combine(expression, inputs, origin)


def _collect(inputs: list[str], node_id: str) -> str:
    inputs.append(node_id)
    return node_id


def canonical(expr, leaf) -> tuple:
    """A hashable canonical form of an expression; `leaf(ref_or_var)` names its inputs."""
    if isinstance(expr, ast.Number):
        return ("num", expr.value)
    if isinstance(expr, ast.String):
        return ("str", expr.value)
    if isinstance(expr, (ast.Ref, ast.Attribute)):
        return leaf(expr)
    if isinstance(expr, ast.Unary):
        return ("neg" if expr.op == "-" else "not", canonical(expr.operand, leaf))
    if isinstance(expr, ast.Binary):
        left, right = canonical(expr.left, leaf), canonical(expr.right, leaf)
        if expr.op in COMMUTATIVE and repr(right) < repr(left):
            left, right = right, left
        return (expr.op, left, right)
    if isinstance(expr, ast.Call):
        # avg/max/min/sum over streams are symmetric in their arguments; so are the pattern
        # aggregates, which take one argument.
        return ("call", expr.func, *sorted((canonical(a, leaf) for a in expr.args), key=repr))
    raise TypeError(f"not an expression: {expr!r}")


def _pattern(pattern: ast.Pattern, stream, origin: nodes.Origin, graph: Graph, ids: dict[str, str]) -> nodes.Node:
    """A pattern's node: variables by position, and quoted names resolved to what they name among
    the pattern's sources (a stream of this workflow, by node id; otherwise a sensor id), so that the
    same pattern written in two workflows, with other names, is one node."""
    position = {e.var: i for i, e in enumerate(pattern.elements)}
    inputs = [stream(e.stream) for e in pattern.elements]
    sources = {source for i in set(inputs) for source in graph.sources(i)}
    derived = {name: node_id for name, node_id in ids.items() if node_id in sources}

    def leaf(node):
        if isinstance(node, ast.Attribute):
            return ("attr", position[node.var], node.attr)
        return ("var", position[node.name])  # count(c)

    def resolve(expression):
        if not isinstance(expression, tuple) or not expression:
            return expression
        if expression[0] == "str":
            name = expression[1]
            return ("stream", derived[name]) if name in derived else ("sensor", name)
        return tuple(resolve(e) for e in expression)

    def canonical_pattern(expr):
        return None if expr is None else resolve(canonical(expr, leaf))

    links = pattern.links or (None,) * (len(pattern.elements) - 1)
    description = (
        tuple((e.negated, e.kleene, input_id, e.operator) for e, input_id in zip(pattern.elements, inputs)),
        canonical_pattern(pattern.where),
        pattern.within.ms,
        pattern.strategy,
        pattern.emit,
        pattern.partition_by,
        canonical_pattern(pattern.yield_),
        tuple(links),
        pattern.limit,
    )
    return nodes.pattern(description, inputs, origin)


def stream_ids(workflow: ast.Workflow) -> dict[str, str]:
    """Each stream name of one workflow -> the node that computes it (two names of one computation
    give one node): what the reference evaluator identifies streams by."""
    graph = Graph()
    return _add_workflow(graph, workflow, [ast.references(s.value) for s in workflow.statements])
