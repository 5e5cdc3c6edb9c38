"""`sscript compile`: workflows -> OUT/plan.json, OUT/plan.txt and OUT/job.py.

Compiling is a stage of its own, separate from running (as dbt separates compile
from run): it writes everything a run needs into one folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from sensorscript.codegen.job import render_job
from sensorscript.codegen.naive import render_naive
from sensorscript.errors import Diagnostic
from sensorscript.parser import load
from sensorscript.partition.explain import explain
from sensorscript.partition.plan import Plan, make_plan, write_plan
from sensorscript.registry import DEFAULT_DB, SensorRegistry


@dataclass(frozen=True)
class Compiled:
    plan: Plan
    out: Path
    warnings: tuple[Diagnostic, ...]
    sources: dict[str, str]


def open_registry(sensors: str | None) -> SensorRegistry | None:
    """The registry named, or ./sensors.db when it exists, or none (default frequencies)."""
    if sensors is not None:
        return SensorRegistry.open(sensors)
    if Path(DEFAULT_DB).exists():
        return SensorRegistry.open(DEFAULT_DB)
    return None


def plan_workflows(files: Sequence[str], sensors: str | None = None, partitions: int = 2,
                   epsilon: float = 0.1) -> tuple[Plan, tuple[Diagnostic, ...], dict[str, str]]:
    plan, warnings, loaded = _plan(files, sensors, partitions, epsilon)
    return plan, warnings, loaded.sources


def _plan(files: Sequence[str], sensors: str | None, partitions: int, epsilon: float):
    registry = open_registry(sensors)
    loaded = load(files, registry.ids() if registry is not None else None)
    plan = make_plan(loaded.workflows, registry, partitions, epsilon)
    return plan, (*loaded.warnings, *plan.warnings), loaded


def compile_workflows(files: Sequence[str], out: str | Path, sensors: str | None = None,
                      partitions: int = 2, epsilon: float = 0.1, watermark: str = "fixed:0",
                      naive: bool = False) -> Compiled:
    """Write OUT/plan.json, OUT/plan.txt and OUT/job.py; with `naive`, also OUT/naive_job.py (the same
    workflows written the naive way in PySpark, for comparison; raises NotExpressible if it cannot be)."""
    plan, warnings, loaded = _plan(files, sensors, partitions, epsilon)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_plan(plan, out / "plan.json")
    (out / "plan.txt").write_text(explain(plan))
    (out / "job.py").write_text(render_job(plan, loaded.sources, str(out), watermark))
    if naive:
        (out / "naive_job.py").write_text(
            render_naive(loaded.workflows, loaded.sources, delay_ms(watermark), partitions))
    return Compiled(plan, out, warnings, loaded.sources)


def delay_ms(watermark: str) -> int:
    """The delay of a `fixed:D` watermark policy (the naive job has Spark's fixed watermark only)."""
    from sensorscript.runtime.watermark import parse_policy

    return parse_policy(watermark).delay_ms
