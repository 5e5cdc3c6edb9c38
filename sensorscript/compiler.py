"""`sscript compile`: workflows -> OUT/plan.json, OUT/plan.txt and OUT/job.py.

Compiling is a stage of its own, separate from running (as dbt separates compile
from run): it writes everything a run needs into one folder.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from sensorscript.cep.plan import DEFAULT_LIMIT
from sensorscript.codegen.job import render_job
from sensorscript.codegen.naive import NotExpressible, render_naive
from sensorscript.errors import Diagnostic, SensorScriptError, file_problem, warning
from sensorscript import processes
from sensorscript.memory import paused_gc
from sensorscript.parser import load
from sensorscript.partition.explain import explain
from sensorscript.partition.plan import Plan, Previous, make_plan, write_plan
from sensorscript.registry import DEFAULT_DB, SensorRegistry
from sensorscript.runtime.plan.program import SELECTIVITY
from sensorscript.runtime.plan import versions


class Timings:
    """How long each phase of one compile took, in order (`sscript compile --timings`)."""

    def __init__(self) -> None:
        self.phases: list[tuple[str, float]] = []
        self._last = time.perf_counter()

    def lap(self, phase: str) -> None:
        """`phase` ended now (it began when the one before ended)."""
        now = time.perf_counter()
        self.phases.append((phase, now - self._last))
        self._last = now

    def __str__(self) -> str:
        width = max((len(phase) for phase, _ in self.phases), default=0)
        lines = [f"  {phase:<{width}}  {seconds:6.2f} s" for phase, seconds in self.phases]
        return "\n".join([*lines, f"  {'in all':<{width}}  {sum(s for _, s in self.phases):6.2f} s"])


@dataclass(frozen=True)
class Compiled:
    plan: Plan
    out: Path
    warnings: tuple[Diagnostic, ...]
    sources: dict[str, str]
    timings: Timings | None = None


def open_registry(sensors: str | None) -> SensorRegistry | None:
    """The registry named, or ./sensors.db when it exists, or none (default frequencies)."""
    if sensors is not None:
        return SensorRegistry.open(sensors)
    if Path(DEFAULT_DB).exists():
        return SensorRegistry.open(DEFAULT_DB)
    return None


def plan_workflows(files: Sequence[str], sensors: str | None = None, partitions: int = 2,
                   epsilon: float = 0.1, operators: Sequence[str] = ()) -> tuple[Plan, tuple[Diagnostic, ...],
                                                                                 dict[str, str]]:
    plan, warnings, loaded = _plan(files, sensors, partitions, epsilon, operators)
    return plan, warnings, loaded.sources


def load_operator_files(operators: Sequence[str]) -> None:
    """Register the pattern operators the files define (sscript ... --operators FILE.py)."""
    from sensorscript.runtime.state.cep.operators import load_operators, registered

    for path in operators:
        before = registered()
        try:
            load_operators(path)
        except Exception as exc:  # the user's code: say which file and what, not a traceback
            raise SensorScriptError([Diagnostic("error", f"{path}: cannot load the operators: "
                                                         f"{type(exc).__name__}: {exc}")]) from None
        # Loading registers new instances (also of names registered before): none means a file that
        # forgot @register, or the wrong file.
        if all(before.get(name) is operator for name, operator in registered().items()):
            raise SensorScriptError([Diagnostic("error", f"{path}: registers no pattern operator; decorate a "
                                                         f"UnaryOperator or BinaryOperator subclass with "
                                                         f"@register(\"name\") (docs/OPERATORS.md)")])


def _plan(files: Sequence[str], sensors: str | None, partitions: int, epsilon: float,
          operators: Sequence[str] = (), selectivity: dict | None = None, pattern_limit: int = DEFAULT_LIMIT,
          previous: Previous | None = None, rebalance: bool = False, cuts: bool = True,
          timings: Timings | None = None, partials: bool = True):
    timings = timings or Timings()
    load_operator_files(operators)
    registry = open_registry(sensors)
    loaded = load(files, registry.ids() if registry is not None else None)
    timings.lap("read, parse and check")
    plan = make_plan(loaded.workflows, registry, partitions, epsilon, selectivity, limit=pattern_limit,
                     previous=previous, rebalance=rebalance, cuts=cuts, partials=partials)
    timings.lap("plan")
    return plan, (*loaded.warnings, *plan.warnings), loaded


def compile_workflows(files: Sequence[str], out: str | Path, sensors: str | None = None,
                      partitions: int = 2, epsilon: float = 0.1, watermark: str = "fixed:0",
                      naive: bool = False, operators: Sequence[str] = (),
                      pattern_limit: int = DEFAULT_LIMIT, late: str = "log",
                      retention: dict[str, str] | None = None, partials: bool = True) -> Compiled:
    """Write OUT/plan.json, OUT/plan.txt and OUT/job.py; with `naive`, also OUT/naive_job.py (the same
    workflows written the naive way in PySpark, for comparison; raises NotExpressible if it cannot be).
    `operators`: Python files registering pattern operators, copied to OUT/operators/ for the job;
    `pattern_limit`: partial matches a pattern keeps per key and operator, unless it says (`limit N`);
    `watermark`, `late`: the job's policies for out-of-order and late readings (docs/LANGUAGE.md);
    `retention`: store -> how long the job keeps it, where not the default (`--retain`);
    `partials`: whether slice partials may cross partitions instead of readings (`--no-partials`).
    The conditions of patterns are ordered by the pass rates an earlier run into OUT measured
    (OUT/selectivity.json), where it has them."""
    out = Path(out)
    timings = Timings()
    selectivity, unreadable = measured_pass_rates(out / SELECTIVITY)
    # What a compile makes (the ASTs, the plan, the files' text) lives to its end and holds no cycles:
    # no pass of the cyclic collector, each of which would walk all of it again.
    with paused_gc():
        plan, warnings, loaded = _plan(files, sensors, partitions, epsilon, operators, selectivity, pattern_limit,
                                       timings=timings, partials=partials)
        try:
            out.mkdir(mode=0o700, parents=True, exist_ok=True)
            copied = write_plan_files(out, plan, operators,
                                      lambda copied: render_job(plan, loaded.sources, str(out), watermark, copied, late,
                                                                         retention=retention),
                                      timings)
            versions.keep_first(out)  # version 1 of the plan (sscript update makes the next ones)
            timings.lap("versions/1")
            if naive:
                (out / "naive_job.py").write_text(
                    render_naive(loaded.workflows, loaded.sources, delay_ms(watermark), partitions))
                timings.lap("naive_job.py")
        except OSError as exc:  # a folder under a file, a read-only disk, a full one
            raise SensorScriptError([Diagnostic("error", f"{exc.filename or out}: cannot write the compiled job "
                                                         f"there: {file_problem(exc)}")]) from None
    return Compiled(plan, out, (*unreadable, *warnings), loaded.sources, timings)


# From this many nodes, plan.json and plan.txt are written in a forked process beside job.py (at
# 52,000 nodes, 10,240 workflows: 1.7 s and 2.7 s); below, forking costs about what it saves.
BESIDE_FROM = 2_000


def write_plan_files(folder: Path, plan: Plan, operators: Sequence[str], job_text,
                     timings: Timings | None = None) -> tuple[str, ...]:
    """A plan's files in `folder`: the operator files copied to operators/, plan.json, plan.txt, and
    job.py as `job_text(copied operator files)` renders it. Returns the copied files' paths."""
    timings = timings or Timings()
    copied = []
    for path in operators:
        (folder / "operators").mkdir(exist_ok=True)
        shutil.copyfile(path, folder / "operators" / Path(path).name)
        copied.append(f"operators/{Path(path).name}")

    def plan_files() -> None:
        write_plan(plan, folder / "plan.json")
        (folder / "plan.txt").write_text(explain(plan))

    def job_file() -> None:
        (folder / "job.py").write_text(job_text(tuple(copied)))
        timings.lap("job.py")

    if len(plan.graph) < BESIDE_FROM:
        plan_files()
        timings.lap("plan.json, plan.txt")
        job_file()
    else:  # plan.json in a forked process while job.py is rendered here: neither needs the other
        processes.beside(plan_files, job_file)
        timings.lap("plan.json, plan.txt (waited for)")
    return tuple(copied)


def measured_pass_rates(path: Path) -> tuple[dict | None, tuple[Diagnostic, ...]]:
    """OUT/selectivity.json as earlier runs wrote it (pattern node -> condition -> [tested, passed]).
    One that cannot be read (a run killed while writing it, a file edited by hand) is left aside
    with a warning: the conditions are then ordered by their estimates."""
    if not path.exists():
        return None, ()
    try:
        measured = json.loads(path.read_text())
    except (OSError, ValueError):
        measured = None
    if isinstance(measured, dict) and all(
            isinstance(conditions, dict) and all(
                isinstance(counts, list) and len(counts) == 2 and all(type(n) in (int, float) for n in counts)
                for counts in conditions.values())
            for conditions in measured.values()):
        return measured, ()
    return None, (warning(f"{path}: not a record of measured pass rates; the patterns' conditions are "
                          f"ordered by their estimates (delete the file to silence this)"),)


def delay_ms(watermark: str) -> int:
    """The delay of a `fixed:D` watermark policy (the naive job has Spark's fixed watermark only)."""
    from sensorscript.runtime.state.watermark import FixedDelay, parse_policy

    policy = parse_policy(watermark)
    if not isinstance(policy, FixedDelay):
        raise NotExpressible([Diagnostic("error", f"the naive job has Spark's fixed watermark only, not "
                                                  f"'{watermark}': compile it with --watermark fixed:DELAY")])
    return policy.delay_ms
