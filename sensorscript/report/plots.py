"""The report's plots (PNG, matplotlib): lines of code, and network cost against n and n_s with the
measured runs as markers beside the model."""

from __future__ import annotations

from pathlib import Path

from sensorscript.report.lines import LineCount
from sensorscript.report.network import CostPoint

PLOTS = {"lines": "lines.png", "by_sensors": "cost_by_sensors.png", "by_shared": "cost_by_shared.png"}


def cost_plot(points: list[CostPoint], xlabel: str, title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure, axes = plt.subplots(figsize=(8.6, 4.0), dpi=110)
    xs = [p.x for p in points]
    for label, values, style, measured in (
            ("hash by workflow", [p.cost.naive_workflow_hash for p in points], "s--", "by_workflow"),
            ("hash by sensor id", [p.cost.naive_sensor_hash for p in points], "^--", "by_sensor"),
            ("greedy of Zhou et al., unrefined", [p.cost.greedy for p in points], "d:", None),
            ("ours", [p.cost.ours for p in points], "o-", "ours"),
            ("lower bound", [p.cost.lower_bound for p in points], ":", None)):
        line, = axes.plot(xs, values, style, label=f"{label} (model)" if measured and any(
            p.measured for p in points) else label)
        runs = [(p.x, getattr(p.measured, measured)) for p in points if measured and p.measured]
        if runs:
            axes.plot(*zip(*runs), "x", color=line.get_color(), markersize=9, label=f"{label} (measured)")
    axes.set_xlabel(xlabel)
    axes.set_ylabel("tuples per minute crossing the network")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))  # beside, not over, the lines
    figure.tight_layout()
    figure.savefig(path, metadata={"Software": None})
    plt.close(figure)


def lines_plot(rows: list[LineCount], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure, axes = plt.subplots(figsize=(6.4, 4.0), dpi=110)
    labels = [r.label.replace(" generated", "") for r in rows]
    width = 0.27
    for i, (name, values) in enumerate((("script", [r.script for r in rows]),
                                        ("generated job", [r.job for r in rows]),
                                        ("naive PySpark", [r.naive or 0 for r in rows]))):
        axes.bar([x + (i - 1) * width for x in range(len(rows))], values, width, label=name)
    axes.set_xticks(range(len(rows)), labels)
    axes.set_yscale("log")
    axes.set_xlabel("workflows (given, then generated)")
    axes.set_ylabel("lines of code")
    axes.set_title("Lines of code: the script, the generated job, naive PySpark")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, metadata={"Software": None})
    plt.close(figure)


