"""Lines of code: the scripts against the generated job and the same logic written the naive way in
PySpark (`codegen/naive.py`), for the given workflows and for generated bridge workloads.

Lines are counted the way people count them: non-blank lines that are not only a comment;
docstrings are comments.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from sensorscript.codegen.job import render_job
from sensorscript.codegen.naive import NotExpressible, render_naive
from sensorscript.parser import load
from sensorscript.partition.plan import make_plan
from sensorscript.registry import SensorRegistry
from sensorscript.workload import bridge_workload

GENERATED_SIZES = (1, 16, 128, 1_024)

def script_lines(text: str) -> int:
    """Lines of a SensorScript file holding something other than comments."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group().count("\n"), text, flags=re.S)
    return sum(1 for line in text.splitlines() if line.split("//")[0].strip())


def python_lines(text: str) -> int:
    """Lines of Python holding code: comments, blank lines and docstrings do not count."""
    code: set[int] = set()
    previous = tokenize.NEWLINE
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        kind = token.type
        if kind in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                    tokenize.ENDMARKER):
            if kind == tokenize.NEWLINE:
                previous = kind
            continue
        # A string that starts a statement on its own is a docstring (or a comment in disguise).
        is_docstring = kind == tokenize.STRING and previous in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
        if not is_docstring:
            code.update(range(token.start[0], token.end[0] + 1))
        previous = kind
    return len(code)


@dataclass(frozen=True)
class LineCount:
    label: str
    workflows: int
    script: int
    job: int
    naive: int | None  # None: the naive job cannot express these workflows
    naive_note: str = ""

    @property
    def naive_per_script(self) -> float | None:
        return self.naive / self.script if self.naive and self.script else None  # a file of comments: 0 lines


def count_lines(label: str, texts: dict[str, str], registry: SensorRegistry | None, partitions: int) -> LineCount:
    loaded = load(list(texts), registry.ids() if registry is not None else None, texts=texts)
    plan = make_plan(loaded.workflows, registry, partitions)
    job = render_job(plan, loaded.sources, "OUT")
    try:
        naive, note = python_lines(render_naive(loaded.workflows, loaded.sources)), ""
    except NotExpressible as exc:
        naive, note = None, exc.diagnostics[0].message
    return LineCount(label, len(loaded.workflows), sum(script_lines(t) for t in texts.values()),
                     python_lines(job), naive, note)


def line_table(files: Sequence[str], registry: SensorRegistry | None, partitions: int,
               sizes: Sequence[int] = GENERATED_SIZES) -> list[LineCount]:
    texts = {str(f): Path(f).read_text() for f in files}
    rows = [count_lines("the given workflows", texts, registry, partitions)]
    for size in sizes:
        workload = bridge_workload(size, 1_000)
        generated = {f"{name}.ss": text for name, text in workload.workflows.items()}
        rows.append(count_lines(f"{size:,} generated", generated, SensorRegistry.of(workload.sensors), partitions))
    return rows

