"""AST -> SensorScript text. Printing then parsing gives back an equal AST.

The printer writes the canonical form: one statement per line, durations as
written, quoted names only where a bare one would not parse, and parentheses
only where precedence needs them.
"""

from __future__ import annotations

import re

from sensorscript.parser import ast
from sensorscript.parser.antlr import KEYWORDS

_PRECEDENCE = ast.PRECEDENCE



def print_workflow(workflow: ast.Workflow) -> str:
    return "".join(print_statement(s) + "\n" for s in workflow.statements)


def print_statement(statement: ast.Statement) -> str:
    return f"{statement.name} = {print_definition(statement.value)};"


def print_definition(node: object) -> str:
    if isinstance(node, ast.Window):
        return f"{node.func}({name(node.stream)}, {duration(node.length)}, {duration(node.slide)})"
    if isinstance(node, ast.Union_):
        return "union(" + ", ".join(name(s) for s in node.streams) + ")"
    if isinstance(node, ast.Pattern):
        return print_pattern(node)
    return expr(node)


def print_pattern(p: ast.Pattern) -> str:
    def element(e: ast.PatternElement) -> str:
        stream = f"{e.operator}({name(e.stream)})" if e.operator else name(e.stream)
        return f"{'!' if e.negated else ''}{e.var}: {stream}{'+' if e.kleene else ''}"

    elements = element(p.elements[0])
    for link, e in zip(p.links or (None,) * (len(p.elements) - 1), p.elements[1:]):
        elements += f" ->[{link}] " if link else " -> "
        elements += element(e)
    parts = [f"pattern({elements})"]
    if p.where is not None:
        parts.append(f"where {expr(p.where)}")
    parts.append(f"within {duration(p.within)}")
    if p.strategy != "any":
        parts.append(f"strategy {p.strategy}")
    if p.emit != "all":
        parts.append(f"emit {p.emit}")
    if p.partition_by is not None:
        parts.append(f"partition by {p.partition_by}")
    if p.yield_ is not None:
        parts.append(f"yield {expr(p.yield_)}")
    if p.limit is not None:
        parts.append(f"limit {p.limit}")
    return "\n    ".join(parts)


def name(ref: ast.Ref) -> str:
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", ref.name) and ref.name not in KEYWORDS:
        return ref.name
    return quote(ref.name)


def quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def duration(d: ast.Duration) -> str:
    return d.text or str(d.ms)


def number(n: ast.Number) -> str:
    if n.text:
        return n.text
    return str(int(n.value)) + ".0" if n.value.is_integer() else repr(n.value)


def expr(node: object, parent: int = 0) -> str:
    if isinstance(node, ast.Number):
        return number(node)
    if isinstance(node, ast.Duration):
        return duration(node)
    if isinstance(node, ast.Ref):
        return name(node)
    if isinstance(node, ast.String):
        return quote(node.value)
    if isinstance(node, ast.Attribute):
        return f"{node.var}.{node.attr}"
    if isinstance(node, (ast.Window, ast.Union_)):
        return print_definition(node)
    if isinstance(node, ast.Call):
        return f"{node.func}(" + ", ".join(expr(a) for a in node.args) + ")"
    if isinstance(node, ast.Unary):
        level = _PRECEDENCE["neg" if node.op == "-" else "not"]
        text = ("-" if node.op == "-" else "not ") + expr(node.operand, level)
        return f"({text})" if level < parent else text
    if isinstance(node, ast.Binary):
        level = _PRECEDENCE[node.op]
        # Left-associative: the right operand of an equal level needs parentheses.
        text = f"{expr(node.left, level)} {node.op} {expr(node.right, level + 1)}"
        return f"({text})" if level < parent else text
    raise TypeError(f"not an expression: {node!r}")


def format_ms(ms: int) -> str:
    """600000 -> '10min', 1500 -> '1500ms': the largest unit that divides exactly."""
    for unit, size in (("h", 3_600_000), ("min", 60_000), ("s", 1_000)):
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def describe(statement: ast.Statement, defined: set[str]) -> str:
    """One line in plain words: what a statement computes."""

    def stream(ref: ast.Ref) -> str:
        return ref.name if ref.name in defined else f"sensor {ref.name}"

    value = statement.value
    if isinstance(value, ast.Window):
        return (f"{value.func} of {stream(value.stream)} over {format_ms(value.length.ms)} windows "
                f"every {format_ms(value.slide.ms)}")
    if isinstance(value, ast.Union_):
        return "union of " + ", ".join(stream(s) for s in value.streams)
    if isinstance(value, ast.Pattern):
        elements = " then ".join(
            f"{'no ' if e.negated else ''}{'one or more ' if e.kleene else ''}{stream(e.stream)} event"
            f"{'s' if e.kleene else ''} ({e.var})" for e in value.elements)
        return (f"pattern: {elements}, within {format_ms(value.within.ms)}, strategy {value.strategy}, "
                f"emit {value.emit}")
    inputs = sorted({stream(r) for r in ast.references(value)})
    return f"{expr(value)}  (on every new value of {', '.join(inputs)})"
