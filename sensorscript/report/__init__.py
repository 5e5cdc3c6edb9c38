"""`sscript report`: what SensorScript saves, for people (a design review, the two tables of Zhou et al.).

1. Lines (`report/lines.py`): script lines against the lines of the generated job and of the same
   logic written the naive way in PySpark, for the given workflows and for 1, 16, 128 and 1,024
   generated bridge workflows.
2. Network (`report/network.py`): tuples per minute crossing a shuffle under our plan, the lower
   bound and the two naive placements (the model of `partition/cost.py`), for the given
   workflows and, as in the figures of Zhou et al., against the number of sensors n and the number of
   shared sensors n_s. With `measure_data` and `sweep_seconds` the jobs run on local Spark and
   Spark's own shuffle counters are read (`report/measured.py`, `report/shuffles.py`).
3. Output: REPORT/report.md and REPORT/report.html (`report/render.py` and the templates) with
   PNG plots beside them (`report/plots.py`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Sequence

from sensorscript.parser import load
from sensorscript.partition.plan import make_plan
from sensorscript.report.lines import GENERATED_SIZES, line_table, python_lines, script_lines
from sensorscript.report.measured import MeasuringFailed, measure, measure_quietly
from sensorscript.report.network import SWEEP_SENSORS, SWEEP_SHARED, MeasuredPoint, sweep
from sensorscript.report.plots import PLOTS, cost_plot, lines_plot
from sensorscript.report.render import Report, html_page, markdown

__all__ = ["Report", "build", "write", "markdown", "html_page", "measure", "MeasuredPoint", "MeasuringFailed",
           "script_lines", "python_lines", "PLOTS"]


def build(files: Sequence[str], sensors: str | None = None, partitions: int = 2, measure_data: str | None = None,
          work: Path | None = None, naive: bool = True, echo=print, sizes: Sequence[int] = GENERATED_SIZES,
          sweep_counts: Sequence[int] = SWEEP_SENSORS, sweep_seconds: int | None = None,
          sweep_shared_points: Sequence[int] = SWEEP_SHARED, epsilon: float = 0.1) -> Report:
    """The report of `files`. `measure_data`: also run the jobs over it; `sweep_seconds`: also run
    every point of both sweeps over that many seconds of generated readings; `epsilon`: the balance
    bound less 1 for `files` (the sweeps keep the default bound, 1.1)."""
    from sensorscript.compiler import open_registry

    registry = open_registry(sensors)
    echo("counting lines ...")
    lines = line_table(files, registry, partitions, sizes)
    loaded = load(files, registry.ids() if registry is not None else None)
    cost = make_plan(loaded.workflows, registry, partitions, epsilon).cost
    echo("modelling network cost against n and n_s ...")
    by_sensors, by_shared = sweep("sensors", sweep_counts), sweep("shared", sweep_shared_points)
    measured = None
    if measure_data or sweep_seconds:
        if measure_data:
            echo(f"running the job, the naive placements{' and the naive job' if naive else ''} "
                 f"over {measure_data} ...")
        if sweep_seconds:
            echo(f"running the sweeps' {len(by_sensors) + len(by_shared)} points over {sweep_seconds:g} s "
                 "of generated readings each ...")
        measured, sweeps = measure_quietly(files if measure_data else [], measure_data, sensors, partitions,
                                           Path(work), naive, echo, sweep_seconds, sweep_shared_points, sweep_counts,
                                           epsilon)
        for points, kind in ((by_sensors, "sensors"), (by_shared, "shared")):
            for i, point in enumerate(sweeps.get(kind, [])):
                points[i] = dataclasses.replace(points[i], measured=point)
    return Report("SensorScript report", lines, cost, partitions, by_sensors, by_shared, measured,
                  [str(f) for f in files])


def write(report: Report, folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    lines_plot(report.lines, folder / PLOTS["lines"])
    cost_plot(report.by_sensors, "sensors n", "Network cost against the number of sensors",
              folder / PLOTS["by_sensors"])
    cost_plot(report.by_shared, "shared sensors n_s (of 16)", "Network cost against shared sensors",
              folder / PLOTS["by_shared"])
    (folder / "report.md").write_text(markdown(report))
    (folder / "report.html").write_text(html_page(report))
    return folder / "report.md", folder / "report.html"
