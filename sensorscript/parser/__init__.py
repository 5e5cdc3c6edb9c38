"""The front end: SensorScript text -> checked AST (`Workflow`).

    workflows = load(["bridge.ss", "pumps.ss"])     # raises SensorScriptError with every error found
"""

from __future__ import annotations

import os

from pathlib import Path
from typing import Collection, Iterable

from sensorscript.errors import Diagnostic, SensorScriptError, file_problem
from sensorscript.memory import paused_gc
from sensorscript import processes
from sensorscript.parser import ast
from sensorscript.parser.antlr import SeenStatements, parse_workflow
from sensorscript.parser.check import Context, check

__all__ = ["parse", "parse_file", "load", "Loaded", "SeenStatements", "ast"]


def parse(text: str, file: str = "<script>", name: str | None = None) -> ast.Workflow:
    """Parse one script; raises SensorScriptError on syntax errors (semantics are `check`'s)."""
    workflow, diagnostics = _parse(text, file, name)
    if any(d.is_error for d in diagnostics):
        raise SensorScriptError(diagnostics, {file: text})
    return workflow


def _parse(text: str, file: str, name: str | None,
           seen: SeenStatements | None = None) -> tuple[ast.Workflow, list[Diagnostic]]:
    """The workflow as far as it parsed (statements that did not are named in `broken`) and the
    diagnostics of parsing; `seen`: the statements parsed before, which are not parsed again."""
    parsed = parse_workflow(text, file, seen)
    return ast.Workflow(name or Path(file).stem, parsed.statements, file, parsed.broken), list(parsed.diagnostics)


def parse_file(path: str | Path) -> ast.Workflow:
    path = Path(path)
    return parse(path.read_text(encoding="utf-8-sig"), str(path), path.stem)


def _position(diagnostic: Diagnostic) -> tuple[int, int]:
    return (diagnostic.span.line, diagnostic.span.column) if diagnostic.span else (0, 0)


def _parse_and_check(item: tuple[str, str], context: Context,
                     seen: SeenStatements | None = None) -> tuple[ast.Workflow, list[Diagnostic]]:
    """One workflow's AST and all its diagnostics, in file order: the statements that parsed are
    checked even when others did not."""
    path, text = item
    workflow, found = _parse(text, path, Path(path).stem, seen)
    return workflow, sorted([*found, *check(workflow, context)], key=_position)


def _parse_and_check_chunk(items: list[tuple[str, str]], context: Context):
    seen = SeenStatements()  # a statement written in several of these workflows is parsed once
    with paused_gc():
        return [_parse_and_check(item, context, seen) for item in items]


# Below this many workflows one process is as fast: starting workers and pickling their results
# costs about what they save.
PARALLEL_FROM = 128
WARM_UP = 8
# What a worker's pickling of its results costs, against parsing and checking them (measured at
# 10,240 workflows: 0.63 s of CPU against 2.96 s for 5,120 of them; the parent, which parses with
# the cyclic collector off and its parse trees freed as it goes, parses as fast as a worker).
PICKLING = 0.2


def _parse_and_check_all(items: list[tuple[str, str]], context: Context):
    """Each workflow parses and checks on its own, in order; many of them in parallel processes.

    The parent parses the first share itself while forked workers parse the rest (where
    `processes.may_fork`: a process that runs Spark's gateway threads parses in one process).
    """
    workers = min(processes.cores(), 8)
    if len(items) < PARALLEL_FROM or not processes.may_fork():
        return _parse_and_check_chunk(items, context)
    # A few workflows first, so that the workers inherit ANTLR's DFA caches warm instead of each
    # building them again. Then the parent parses a larger share than each worker, which also
    # pickles its results: all should end together (the parent then unpickles the workers' results).
    results = _parse_and_check_chunk(items[:WARM_UP], context)
    own = int(len(items) * (1 + PICKLING) / (workers + PICKLING))
    rest = items[max(own, WARM_UP):]
    size = -(-len(rest) // (workers - 1))
    chunks = [rest[i:i + size] for i in range(0, len(rest), size)]
    with processes.pool(len(chunks)) as pool:
        futures = [pool.submit(_parse_and_check_chunk, chunk, context) for chunk in chunks]
        results += _parse_and_check_chunk(items[WARM_UP:own], context)
        with paused_gc():
            for future, chunk in zip(futures, chunks):
                try:
                    results.extend(future.result())
                except Exception:  # a worker that died (out of memory, killed): its share is parsed here
                    results.extend(_parse_and_check_chunk(chunk, context))
    return results


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
    given: set[str] = set()
    for path in paths:
        path = str(path)
        # A file named twice (`workflows/*.ss workflows/bridge.ss`, `./a.ss a.ss`) is one workflow.
        same = path if texts is not None and path in texts else os.path.realpath(path)
        if same in given:
            continue
        given.add(same)
        if texts is not None and path in texts:
            text = texts[path]
        else:
            try:
                # utf-8-sig: a byte-order mark at the start (Notepad writes one) is not part of the text.
                with open(path, encoding="utf-8-sig") as file:  # (Path(path).read_text: 60 % longer at 10,000 files)
                    text = file.read()
            except (OSError, UnicodeDecodeError) as exc:
                diagnostics.append(Diagnostic("error", f"{path}: cannot read the workflow: {file_problem(exc)}"))
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
