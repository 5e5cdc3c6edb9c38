"""The front end: SensorScript text -> checked AST (`Workflow`).

    workflows = load(["bridge.ss", "pumps.ss"])     # raises SensorScriptError with every error found
"""

from __future__ import annotations

from pathlib import Path
from typing import Collection, Iterable

from sensorscript.errors import Diagnostic, SensorScriptError
from sensorscript.memory import paused_gc
from sensorscript.parser import ast
from sensorscript.parser.antlr import build_workflow, parse_tree
from sensorscript.parser.check import Context, check
from sensorscript.parser.descent import parse_statements

__all__ = ["parse", "parse_file", "load", "Loaded", "ast"]


def parse(text: str, file: str = "<script>", name: str | None = None) -> ast.Workflow:
    """Parse one script; raises SensorScriptError on syntax errors (semantics are `check`'s)."""
    workflow, diagnostics, _ = _parse(text, file, name)
    if any(d.is_error for d in diagnostics):
        raise SensorScriptError(diagnostics, {file: text})
    return workflow


def _parse(text: str, file: str, name: str | None) -> tuple[ast.Workflow, list[Diagnostic], bool]:
    """The workflow, the diagnostics of parsing, and whether the AST is whole (no syntax error)."""
    statements = parse_statements(text, file)  # the fast path: well-formed scripts only
    if statements is not None:
        return ast.Workflow(name or Path(file).stem, statements, file), [], True
    tree, _, syntax = parse_tree(text, file)
    if syntax:
        return ast.Workflow(name or Path(file).stem, (), file), syntax, False
    statements, lexical = build_workflow(tree, file)
    return ast.Workflow(name or Path(file).stem, statements, file), lexical, True


def parse_file(path: str | Path) -> ast.Workflow:
    path = Path(path)
    return parse(path.read_text(encoding="utf-8"), str(path), path.stem)


def _parse_and_check(item: tuple[str, str], context: Context) -> tuple[ast.Workflow, list[Diagnostic]]:
    path, text = item
    workflow, found, whole = _parse(text, path, Path(path).stem)
    if whole:
        found = sorted([*found, *check(workflow, context)],
                       key=lambda d: (d.span.line, d.span.column) if d.span else (0, 0))
    return workflow, found


def _parse_and_check_all(items: list[tuple[str, str]], context: Context):
    """Each workflow parses and checks on its own, in order.

    In one process: with the recursive-descent fast path, sending the ASTs back from
    worker processes (pickling) would cost more than parsing them.
    """
    return [_parse_and_check(item, context) for item in items]


class Loaded:
    """Checked workflows with their warnings and sources (for rendering messages later)."""

    def __init__(self, workflows: list[ast.Workflow], warnings: list[Diagnostic], sources: dict[str, str]):
        self.workflows = workflows
        self.warnings = warnings
        self.sources = sources


def load(paths: Iterable[str | Path], known_sensors: Collection[str] | None = None,
         texts: dict[str, str] | None = None) -> Loaded:
    """Parse and check every workflow; raise SensorScriptError carrying all errors and warnings.

    `texts` maps a path to its text for callers that hold scripts in memory.
    """
    context = Context(known_sensors)
    workflows: list[ast.Workflow] = []
    diagnostics: list[Diagnostic] = []
    sources: dict[str, str] = {}
    stems: dict[str, str] = {}
    for path in paths:
        path = str(path)
        if texts is not None and path in texts:
            text = texts[path]
        else:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                diagnostics.append(Diagnostic("error", f"{path}: cannot read the workflow: {exc}"))
                continue
        stem = Path(path).stem
        if stem in stems:
            diagnostics.append(Diagnostic("error", f"{path}: a workflow named '{stem}' is already given "
                                                   f"({stems[stem]}); output streams are named WORKFLOW.NAME, "
                                                   f"so workflow file names must differ"))
            continue
        stems[stem] = path
        sources[path] = text
    with paused_gc():
        results = _parse_and_check_all(list(sources.items()), context)
    for workflow, found in results:
        diagnostics.extend(found)
        workflows.append(workflow)
    errors = [d for d in diagnostics if d.is_error]
    if errors:
        raise SensorScriptError(diagnostics, sources)
    return Loaded(workflows, diagnostics, sources)
