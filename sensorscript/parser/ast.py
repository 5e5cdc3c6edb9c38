"""The SensorScript abstract syntax tree.

Every node is an immutable, hashable dataclass. Source spans ride along for
error messages but take no part in equality or hashing, so two statements that
say the same thing in different files compare equal: this is what lets the
graph stage share computations across workflows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from sensorscript.errors import Span  # noqa: F401 (part of the AST: every node carries one)


def _span() -> Span | None:
    return field(default=None, compare=False, hash=False, repr=False)


# ---------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Number:
    """A numeric literal; `text` keeps how it was written (an integer literal may be a duration)."""

    value: float
    text: str = field(default="", compare=False, hash=False)
    span: Span | None = _span()


@dataclass(frozen=True)
class Duration:
    """A duration literal, normalised to milliseconds; `text` keeps how it was written."""

    ms: int
    text: str = field(default="", compare=False, hash=False)
    span: Span | None = _span()


@dataclass(frozen=True)
class Ref:
    """A stream reference: a stream defined in the workflow, or else a raw sensor id."""

    name: str
    quoted: bool = field(default=False, compare=False, hash=False)
    span: Span | None = _span()


@dataclass(frozen=True)
class String:
    """A string literal; only meaningful in pattern predicates (`a.sensor == "S1"`)."""

    value: str
    span: Span | None = _span()


@dataclass(frozen=True)
class Attribute:
    """`var.attr` inside a pattern: attr is one of value, ts, sensor."""

    var: str
    attr: str
    span: Span | None = _span()


@dataclass(frozen=True)
class Unary:
    op: str  # "-" or "not"
    operand: Expr
    span: Span | None = _span()


@dataclass(frozen=True)
class Binary:
    op: str  # + - * / > >= < <= == != and or
    left: Expr
    right: Expr
    span: Span | None = _span()


@dataclass(frozen=True)
class Call:
    """A function call as written; the checker decides what it means.

    After checking, a `Call` in a workflow expression is a cross-stream
    function (avg/max/min/sum of two or more arguments); in a pattern
    predicate it is an aggregate over a Kleene variable (count(c), avg(c.value)).
    """

    func: str
    args: tuple[Expr, ...]
    span: Span | None = _span()


Expr = Union[Number, Duration, Ref, String, Attribute, Unary, Binary, Call]

# Binding strength of operators, tighter is higher (the grammar's table). Binary
# operators are left-associative; "neg" is unary minus, "not" is logical not.
PRECEDENCE = {
    "neg": 7,
    "*": 6, "/": 6,
    "+": 5, "-": 5,
    ">": 4, ">=": 4, "<": 4, "<=": 4, "==": 4, "!=": 4,
    "not": 3,
    "and": 2,
    "or": 1,
}


# ------------------------------------------------------------------ statements


@dataclass(frozen=True)
class Window:
    """`agg(stream, length, slide)`: a sliding-window aggregation."""

    func: str  # avg max min sum count
    stream: Ref
    length: Duration
    slide: Duration
    span: Span | None = _span()


@dataclass(frozen=True)
class Union_:
    """`union(a, b, ...)`: the multiset union of two or more streams."""

    streams: tuple[Ref, ...]
    span: Span | None = _span()


@dataclass(frozen=True)
class PatternElement:
    """One position of a pattern: `v: S`, `v: S+` (Kleene), `!v: S` (negation), or `v: op(S)`: the
    events a registered unary operator `op` makes of S."""

    var: str
    stream: Ref
    kleene: bool = False
    negated: bool = False
    span: Span | None = _span()
    operator: str | None = None


@dataclass(frozen=True)
class Pattern:
    """`pattern(...) where ... within ... strategy ... emit ... partition by ... yield ...`."""

    elements: tuple[PatternElement, ...]
    within: Duration
    where: Expr | None = None
    strategy: str = "any"
    emit: str = "all"
    partition_by: str | None = None
    yield_: Expr | None = None
    span: Span | None = _span()
    # Between elements i and i+1: None for the built-in `->`, or a registered binary operator's name.
    links: tuple[str | None, ...] = ()
    limit: int | None = None  # at most this many partial matches per key (None: the job's setting)


Definition = Union[Window, Union_, Pattern, Expr]


@dataclass(frozen=True)
class Statement:
    """`name = definition;`"""

    name: str
    value: Definition
    span: Span | None = _span()
    name_span: Span | None = _span()


@dataclass(frozen=True)
class Workflow:
    """One `.ss` file. `name` is the file's stem; outputs are named `name.STREAM`."""

    name: str
    statements: tuple[Statement, ...]
    path: str = field(default="", compare=False, hash=False)
    # Names of statements that did not parse: their syntax errors are reported, and reading
    # them is no error of its own (the checks raise no follow-on errors for them).
    broken: tuple[str, ...] = field(default=(), compare=False, hash=False)

    @property
    def defined(self) -> dict[str, Statement]:
        """Stream name -> its (first) defining statement."""
        names: dict[str, Statement] = {}
        for statement in self.statements:
            names.setdefault(statement.name, statement)
        return names

    @property
    def outputs(self) -> tuple[str, ...]:
        """The streams that no other statement of this workflow reads, in statement order."""
        read = {ref.name for statement in self.statements for ref in references(statement.value)}
        return tuple(s.name for s in self.statements if s.name not in read)


# ------------------------------------------------------------------- walking


def _pattern_children(node: Pattern) -> tuple[object, ...]:
    rest = tuple(x for x in (node.where, node.within, node.yield_) if x is not None)
    return (*node.elements, *rest)


# The direct sub-nodes by node type (a dispatch table: `walk` runs over every AST many times).
_CHILDREN = {
    Unary: lambda node: (node.operand,),
    Binary: lambda node: (node.left, node.right),
    Call: lambda node: node.args,
    Window: lambda node: (node.stream, node.length, node.slide),
    Union_: lambda node: node.streams,
    PatternElement: lambda node: (node.stream,),
    Pattern: _pattern_children,
    Statement: lambda node: (node.value,),
}
_LEAVES = frozenset((Number, Duration, Ref, String, Attribute))


def children(node: object) -> tuple[object, ...]:
    """The direct sub-nodes of an AST node, in source order."""
    get = _CHILDREN.get(type(node))
    if get is not None:
        return get(node)
    if type(node) not in _LEAVES:
        for cls, get in _CHILDREN.items():  # a subclass of a node type
            if isinstance(node, cls):
                return get(node)
    return ()


def walk(node: object):
    """Yield `node` and all its descendants, depth first, in source order."""
    stack = [node]
    pop, push = stack.pop, stack.extend
    table = _CHILDREN
    while stack:
        node = pop()
        yield node
        get = table.get(type(node))
        if get is not None:
            below = get(node)
        elif type(node) in _LEAVES:
            continue
        else:
            below = children(node)
        if below:
            push(reversed(below))


def moved(node, file: str, lines: int):
    """An AST node (or a tuple of them) as it would be written in `file`, `lines` lines further
    down: the same node with every span moved there (a statement written again elsewhere)."""
    kind = type(node)
    if kind is Span:
        copy = _new(Span)
        copy.__dict__.update(file=file, line=node.line + lines, column=node.column,
                             end_line=node.end_line + lines, end_column=node.end_column)
        return copy
    if kind is tuple:
        return tuple(moved(item, file, lines) for item in node)
    if kind in _NODES:
        copy = _new(kind)
        copy.__dict__.update({name: value if type(value) in _PLAIN else moved(value, file, lines)
                              for name, value in node.__dict__.items()})
        return copy
    return node


_new = object.__new__
_NODES = frozenset((*_CHILDREN, *_LEAVES))
_PLAIN = frozenset((str, int, float, bool, type(None)))


def references(definition: object) -> list[Ref]:
    """The stream references a definition reads, in source order.

    Inside a pattern only the streams its elements bind are references:
    predicates speak of pattern variables, not streams.
    """
    if isinstance(definition, Pattern):
        return [element.stream for element in definition.elements]
    kind = type(definition)  # shortcuts for the common shapes, same answer as the walk
    if kind is Ref:
        return [definition]
    if kind is Window and type(definition.stream) is Ref:
        return [definition.stream]
    if kind is Union_ and all(type(s) is Ref for s in definition.streams):
        return list(definition.streams)
    return [n for n in walk(definition) if isinstance(n, Ref)]
