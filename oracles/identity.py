"""Which stream each name of a workflow is, written out for the oracles.

- A reference that names a stream defined anywhere in the same workflow is that stream; any other
  reference is a raw sensor id (docs/LANGUAGE.md, "Statements").
- Statements of one workflow that compute the same thing are one stream, whose events carry the
  name of the first of them (docs/LANGUAGE.md, "Events"). The same thing is the same function over
  the same inputs with the same parameters (docs/ARCHITECTURE.md, "The compiler"), whatever the
  order of what commutes (the inputs of a union, the operands of `+ * == != and or`, the arguments
  of `avg max min sum`) and whatever the pattern variables are called; a quoted name in a
  pattern's condition that names a stream the pattern reads means that stream (docs/LANGUAGE.md,
  "Conditions"; no event of the pattern carries the name of any other stream).
"""

from __future__ import annotations

from sensorscript.parser import ast

COMMUTATIVE = {"+", "*", "==", "!=", "and", "or"}


def computations(workflow: ast.Workflow) -> dict[str, tuple]:
    """Each stream of the workflow -> what it computes: equal descriptions, one stream."""
    defined = workflow.defined
    found: dict[str, tuple] = {}

    def stream(name: str) -> tuple:
        if name not in defined:
            return ("sensor", name)
        if name not in found:  # a workflow has no cycles (they are compile errors)
            found[name] = describe(defined[name].value, stream, defined)
        return found[name]

    for name in defined:
        stream(name)
    return found


def first_names(workflow: ast.Workflow) -> dict[str, str]:
    """Each stream of the workflow -> the name of the first statement that computes the same."""
    found = computations(workflow)
    first: dict[tuple, str] = {}
    for name in workflow.defined:  # in the file's order
        first.setdefault(found[name], name)
    return {name: first[computation] for name, computation in found.items()}


def describe(definition, stream, defined: dict[str, ast.Statement]) -> tuple:
    """What a statement computes; `stream(name)` describes a stream it reads."""
    if isinstance(definition, ast.Window):
        length, slide = definition.length.ms, definition.slide.ms
        return ("window", definition.func, stream(definition.stream.name), length, slide)
    if isinstance(definition, ast.Union_):
        return ("union", unordered(stream(ref.name) for ref in definition.streams))
    if isinstance(definition, ast.Pattern):
        return ("pattern", *pattern(definition, stream, set(defined) - upstream(definition, defined)))
    return ("combine", expression(definition, lambda ref: stream(ref.name)))


def upstream(definition, defined: dict[str, ast.Statement]) -> set[str]:
    """The streams of the workflow a definition reads, directly or through others."""
    found: set[str] = set()
    waiting = [ref.name for ref in ast.references(definition)]
    while waiting:
        name = waiting.pop()
        if name in defined and name not in found:
            found.add(name)
            waiting.extend(ref.name for ref in ast.references(defined[name].value))
    return found


def pattern(definition: ast.Pattern, stream, unread: set[str]) -> tuple:
    """A pattern's description; `unread`: the streams of the workflow it does not read."""
    position = {element.var: i for i, element in enumerate(definition.elements)}

    def leaf(node) -> tuple:
        if isinstance(node, ast.String):
            return ("name", node.value) if node.value in unread else stream(node.value)
        if isinstance(node, ast.Attribute):
            return ("variable", position[node.var], node.attr)
        return ("variable", position[node.name])  # count(c)

    def condition(expr) -> tuple | None:
        return None if expr is None else expression(expr, leaf)

    elements = tuple((e.negated, e.kleene, e.operator, stream(e.stream.name)) for e in definition.elements)
    links = definition.links or (None,) * (len(elements) - 1)
    return (elements, tuple(links), condition(definition.where), definition.within.ms, definition.strategy,
            definition.emit, definition.partition_by, condition(definition.yield_), definition.limit)


def expression(expr, leaf) -> tuple:
    """An expression with its leaves (references, pattern attributes, quoted names) described by
    `leaf`, the operands of what commutes in a fixed order."""
    if isinstance(expr, ast.Number):
        return ("number", expr.value)
    if isinstance(expr, ast.Unary):
        return (expr.op, expression(expr.operand, leaf))
    if isinstance(expr, ast.Binary):
        operands = (expression(expr.left, leaf), expression(expr.right, leaf))
        return (expr.op, *(unordered(operands) if expr.op in COMMUTATIVE else operands))
    if isinstance(expr, ast.Call):
        return (expr.func, *unordered(expression(arg, leaf) for arg in expr.args))
    return leaf(expr)


def unordered(descriptions) -> tuple:
    """A multiset of descriptions, in a fixed order."""
    return tuple(sorted(descriptions, key=repr))
