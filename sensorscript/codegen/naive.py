"""Workflows -> the same logic written the naive way in PySpark (OUT/naive_job.py).

This is the job an engineer would write by hand without SensorScript, and the
baseline of the benchmarks and of the line-count report (issue #4 item 9, #5):

- every workflow on its own, nothing shared between workflows;
- one native `window()` aggregation per window statement (no slicing: Spark keeps
  every overlapping window of every tuple in state);
- unions as DataFrame unions, chained windows through `window_time`;
- arithmetic as Spark needs it: Spark has no combine-latest operator, so each
  workflow's arithmetic statements run in one `transformWithStateInPandas`
  processor that holds rows until the watermark passes them;
- Spark's own watermark (one per query, late rows dropped silently) and no quarantine.

It runs (`python OUT/naive_job.py --input DATA --once`) and gives the same results
as the compiled job on in-order input; the differential tests check that. What it
cannot express in one Spark query is refused with the script line: a window over an
arithmetic result (Spark rejects rows a stateful processor emits behind the watermark),
or arithmetic over a union that contains one. Pattern streams are left out: Spark has no
pattern operator, and the stateful matcher an engineer would write instead is not a line
count to guess (the line counts of `sscript report` say so).
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass
from pathlib import Path

from sensorscript.codegen.job import comment_text, string_literal, template_environment
from sensorscript.graph.nodes import ScriptLines
from sensorscript.errors import Diagnostic, SensorScriptError
from sensorscript.parser import ast

TEMPLATE = "naive_job.py.j2"
END_TS = 250_000_000_000_000  # a year-9892 timestamp: later than any reading, still a Spark timestamp


class NotExpressible(SensorScriptError):
    """A workflow uses something the naive PySpark job cannot express in one query."""


@dataclass(frozen=True)
class _Stream:
    variable: str
    arithmetic: bool  # an arithmetic result, or a union holding one


def _q(text: str) -> str:
    return string_literal(text)


def _expression(node) -> str:
    """Python code for an expression over the latest values `v` (as reference.compute)."""
    if isinstance(node, ast.Number):
        return repr(float(node.value))
    if isinstance(node, ast.Ref):
        return f"v[{_q(node.name)}]"
    if isinstance(node, ast.Unary):
        operand = _expression(node.operand)
        return f"-{operand}" if node.op == "-" else f"truth({operand} == 0)"
    if isinstance(node, ast.Binary):
        left, right = _expression(node.left), _expression(node.right)
        if node.op in "+-*/":
            return f"({left} {node.op} {right})"
        if node.op == "and":
            return f"both({left}, {right})"
        if node.op == "or":
            return f"either({left}, {right})"
        return f"truth({left} {node.op} {right})"
    if isinstance(node, ast.Call):
        args = ", ".join(_expression(a) for a in node.args)
        return {"avg": f"mean_of({args})", "sum": f"sum_of({args})"}.get(node.func, f"{node.func}({args})")
    raise TypeError(f"not a stream expression: {node!r}")


def _pattern_dependent(workflow: ast.Workflow) -> set[str]:
    """Pattern streams and every stream that reads one: left out (Spark has no pattern operator)."""
    defined = workflow.defined
    tainted = {name for name, s in defined.items() if isinstance(s.value, ast.Pattern)}
    changed = True
    while changed:
        changed = False
        for name, statement in defined.items():
            if name not in tainted and any(r.name in tainted for r in ast.references(statement.value)):
                tainted.add(name)
                changed = True
    return tainted


def _needed(workflow: ast.Workflow, outputs: list[str]) -> set[str]:
    """The outputs and every stream they read, directly or not."""
    defined = workflow.defined
    needed: set[str] = set()
    todo = list(outputs)
    while todo:
        name = todo.pop()
        if name in needed or name not in defined:
            continue
        needed.add(name)
        todo.extend(r.name for r in ast.references(defined[name].value))
    return needed


# Names the job's code uses: a stream called like one of them gets a trailing underscore.
_RESERVED = {"readings", "arithmetic", "sensors", "union_of", "concat", "window_agg", "combine_latest", "named",
             "truth", "both", "either", "sum_of", "mean_of", "max", "min", "F", "pd", "v", "DataFrame"}


def _variable(name: str) -> str:
    return f"{name}_" if keyword.iskeyword(name) or name in _RESERVED or not name.isidentifier() else name


def _tuple(names) -> str:
    items = [_q(n) for n in names]
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def _order(workflow: ast.Workflow, names: set[str]) -> list[ast.Statement]:
    """The statements named, each after the streams it reads (a workflow may define them in any order)."""
    defined = workflow.defined
    done: set[str] = set()
    ordered: list[ast.Statement] = []

    def visit(name: str) -> None:
        if name in done or name not in names:
            return
        done.add(name)
        for ref in ast.references(defined[name].value):
            if ref.name in defined:
                visit(ref.name)
        ordered.append(defined[name])

    for statement in workflow.statements:
        visit(statement.name)
    return ordered


def _not_expressible(statement: ast.Statement, workflow: ast.Workflow, why: str) -> NotExpressible:
    return NotExpressible([Diagnostic("error", f"the naive PySpark job cannot express {workflow.name}."
                                               f"{statement.name}: {why}", statement.span)])


def workflow_block(workflow: ast.Workflow, lines: ScriptLines) -> dict:
    """The code of one workflow: a function from the readings to its output DataFrames, and the
    sensors it reads.

    Windows and unions come first, in dependency order; then one processor for all the
    workflow's arithmetic; then the unions that read arithmetic results.
    """
    left_out = _pattern_dependent(workflow)
    kept = _needed(workflow, [name for name in workflow.outputs if name not in left_out])
    statements = _order(workflow, kept)
    variables = {s.name: _variable(s.name) for s in statements}
    streams: dict[str, _Stream] = {}
    before: list[str] = []
    after: list[str] = []
    arithmetic: list[ast.Statement] = []

    def comment(statement: ast.Statement) -> str:
        line = statement.span.line if statement.span else 0
        text = lines.statement(statement.span.file, line) if statement.span else ""
        return f"# line {line}: {comment_text(text or statement.name)}"

    def read(ref: ast.Ref) -> str:
        if ref.name in streams:
            return streams[ref.name].variable
        return f"sensors(readings, {_q(ref.name)})"

    for statement in statements:
        value = statement.value
        var = variables[statement.name]
        if isinstance(value, ast.Window):
            source = streams.get(value.stream.name)
            if source is not None and source.arithmetic:
                raise _not_expressible(statement, workflow, "a window over an arithmetic result (Spark refuses "
                                                            "rows a stateful processor emits behind the watermark)")
            before += [f"    {comment(statement)}",
                       f"    {var} = window_agg({read(value.stream)}, {_q(value.func)}, "
                       f"{value.length.ms}, {value.slide.ms})"]
            streams[statement.name] = _Stream(var, False)
        elif isinstance(value, ast.Union_):
            raw = [r.name for r in value.streams if r.name not in streams]
            unique = list(dict.fromkeys(raw))
            # A multiset union: a sensor named twice contributes each reading twice.
            parts = ([f"sensors(readings, {', '.join(_q(r) for r in unique)})"] if raw else [])
            parts += [f"sensors(readings, {_q(r)})" for r in _extra(raw)]
            parts += [read(r) for r in value.streams if r.name in streams]
            code = f"union_of({', '.join(parts)})" if len(parts) > 1 else parts[0]
            holds_arithmetic = any(streams[r.name].arithmetic for r in value.streams if r.name in streams)
            (after if holds_arithmetic else before).extend([f"    {comment(statement)}", f"    {var} = {code}"])
            streams[statement.name] = _Stream(var, holds_arithmetic)
        else:
            for ref in ast.references(value):
                s = streams.get(ref.name)
                if s is not None and s.arithmetic and isinstance(workflow.defined[ref.name].value, ast.Union_):
                    raise _not_expressible(statement, workflow, "arithmetic over a union that holds an "
                                                                "arithmetic result")
            arithmetic.append(statement)
            streams[statement.name] = _Stream(f"named(arithmetic, {_q(statement.name)})", True)

    outputs = [name for name in workflow.outputs if name in kept]
    middle: list[str] = []
    if arithmetic:
        names = {s.name for s in arithmetic}
        leaves = {r.name: read(r) for s in arithmetic for r in ast.references(s.value) if r.name not in names}
        read_later = {r.name for s in statements if s.name not in names for r in ast.references(s.value)}
        emit = [s.name for s in arithmetic if s.name in outputs or s.name in read_later]
        middle.append(f"    arithmetic = combine_latest({_q(workflow.name)}, {{")
        middle += [f"        {_q(name)}: {code}," for name, code in leaves.items()]
        middle.append("    }, [")
        for statement in arithmetic:
            inputs = tuple(dict.fromkeys(r.name for r in ast.references(statement.value)))
            middle.append(f"        {comment(statement)}")
            middle.append(f"        ({_q(statement.name)}, {_tuple(inputs)}, "
                          f"lambda v: {_expression(statement.value)}),")
        middle.append(f"    ], emit={_tuple(emit)})")
    returns = [f"        {_q(f'{workflow.name}.{name}')}: {streams[name].variable}," for name in outputs]
    return {"name": workflow.name, "function": f"workflow_{_identifier(workflow.name)}",
            "file": Path(workflow.path).name if workflow.path else f"{workflow.name}.ss",
            "statements": len(workflow.statements), "body": before + middle + after, "returns": returns,
            "left_out": sorted(left_out),
            "sensors": {r.name for s in statements for r in ast.references(s.value) if r.name not in workflow.defined}}


def _extra(items: list[str]) -> list[str]:
    """The repeated items of a list: each occurrence after an item's first."""
    seen: set[str] = set()
    extra = []
    for item in items:
        if item in seen:
            extra.append(item)
        seen.add(item)
    return extra


def _identifier(name: str) -> str:
    return "".join(c if c.isascii() and c.isalnum() or c == "_" else "_" for c in name)


def render_naive(workflows: list[ast.Workflow], sources: dict[str, str], delay_ms: int = 0,
                 partitions: int = 2) -> str:
    """OUT/naive_job.py for the workflows; raises NotExpressible with the script line if it cannot."""
    lines = ScriptLines(sources)
    try:
        blocks = [workflow_block(w, lines) for w in sorted(workflows, key=lambda w: w.name)]
    except NotExpressible as exc:
        raise NotExpressible(exc.diagnostics, sources) from None
    if not any(b["returns"] for b in blocks):  # the job would union no stream at all (an IndexError at run time)
        raise NotExpressible([Diagnostic("error", "the naive PySpark job would compute nothing: these workflows "
                                                  "have no output but patterns and what reads them (Spark has no "
                                                  "pattern operator)")])
    sensors = sorted(set().union(*(b["sensors"] for b in blocks)))
    template = template_environment().get_template(TEMPLATE)
    return template.render(workflows=blocks, sensors=[_q(s) for s in sensors],
                           delay_ms=delay_ms, partitions=partitions, end_ts=f"{END_TS:_}")
