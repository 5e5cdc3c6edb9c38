"""The dashboard's plots (Plotly figures) and the decisions behind them: how each output stream is
drawn, what the health plots show (which rows are alarms is runtime/output/alarms.py's rule). Times
are the wall clock of the page's time zone (sensorscript/times.py); the stored epoch milliseconds are
not changed."""

from __future__ import annotations

import json
from datetime import tzinfo

import pandas as pd
import plotly.graph_objects as go

from sensorscript.graph.nodes import PATTERN, WINDOW
from sensorscript.times import human_time, zone_name

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
POINTS_SHOWN = 5_000  # per stream: the newest, so that a long run stays quick to draw
DAG_NODES_DRAWN = 400  # a larger DAG is not legible as one picture; the plan's summary stays


def output_streams(plan: dict) -> dict[str, dict[str, str]]:
    """workflow -> {WORKFLOW.NAME: kind of the node computing it}, from plan.json."""
    kinds = {node["id"]: node["kind"] for node in plan["nodes"]}
    return {workflow: {f"{workflow}.{stream}": kinds[node_id] for stream, node_id in sorted(entry["outputs"].items())}
            for workflow, entry in sorted(plan["workflows"].items())}


def wall_clock(ms: pd.Series, tz: tzinfo) -> pd.Series:
    """Epoch milliseconds as the wall-clock times of `tz` (naive: Plotly draws them as they are), in
    milliseconds: pandas' nanoseconds end in 2262, and a reading may be of any year up to 9999."""
    moments = pd.Series(ms.to_numpy("int64").astype("datetime64[ms]"), index=ms.index)
    return moments.dt.tz_localize("UTC").dt.tz_convert(tz).dt.tz_localize(None)


def stream_figure(stream: str, kind: str, rows: pd.DataFrame, tz: tzinfo, color: str, flag: bool = False) -> go.Figure:
    """One output stream over time: window results as steps at their window's end, 0/1 flags
    (`flag`: runtime/output/alarms.py, `alarm_kinds_of_plan`) as bands, pattern matches as points
    (hover: the events they bound), other streams as lines."""
    rows = rows.sort_values("ts").tail(POINTS_SHOWN)
    figure = go.Figure()
    if kind == WINDOW:
        ends = rows["window_end"].where(rows["window_end"].notna(), rows["ts"] + 1)
        figure.add_scatter(x=wall_clock(ends, tz), y=rows["value"], mode="lines+markers", line_shape="hv",
                           line={"color": color}, marker={"size": 5}, name=stream,
                           hovertemplate="window ending %{x}<br>%{y:.6g}<extra></extra>")
    elif flag:
        figure.add_scatter(x=wall_clock(rows["ts"], tz), y=rows["value"], mode="lines", line_shape="hv",
                           fill="tozeroy", line={"color": color}, name=stream,
                           hovertemplate="%{x}<br>%{y:.0f}<extra></extra>")
        figure.update_yaxes(range=[-0.05, 1.1], tickvals=[0, 1], ticktext=["off", "on"])
    elif kind == PATTERN:
        bound = [describe_events(e, tz) for e in rows["events"]]
        figure.add_scatter(x=wall_clock(rows["ts"], tz), y=rows["value"], mode="markers", customdata=bound,
                           marker={"color": color, "size": 8, "symbol": "diamond"}, name=stream,
                           hovertemplate="%{x}<br>%{y:.6g}<br>%{customdata}<extra></extra>")
    else:
        figure.add_scatter(x=wall_clock(rows["ts"], tz), y=rows["value"], mode="lines+markers",
                           line={"color": color}, marker={"size": 4}, name=stream,
                           hovertemplate="%{x}<br>%{y:.6g}<extra></extra>")
    if len(rows) == 1:  # a lone point: a day around it rather than an axis of microseconds
        moment = wall_clock(rows["ts"], tz).iloc[0]
        figure.update_xaxes(range=[moment - pd.Timedelta(hours=12), moment + pd.Timedelta(hours=12)])
    figure.update_layout(margin={"l": 50, "r": 10, "t": 10, "b": 40}, showlegend=False,
                         uirevision=stream, template="plotly_white",
                         xaxis_title=f"time ({zone_name(tz)})")
    return figure


def describe_events(events: str | None, tz: tzinfo) -> str:
    """A match's bound events (its `events` JSON) for people: "a = 0.61 (TILT1, 00:12:00.000), ..."."""
    if not isinstance(events, str):
        return ""
    parts = []
    for event in json.loads(events):
        clock = human_time(event["ts"], tz).split(" ", 1)[1]
        parts.append(f"{event['var']} = {event['value']:.6g} ({event['sensor']}, {clock})")
    return ", ".join(parts)


def health_figure(metrics: pd.DataFrame, name: str, tz: tzinfo, per_partition: bool, scale: float = 1.0,
                  unit: str = "") -> go.Figure:
    """A measure of the metrics table over the batches' wall-clock times, per partition or summed;
    `readings` becomes readings per second (a batch's readings over the time since the one before)."""
    rows = metrics[metrics["name"] == name]
    figure = go.Figure()
    if name == "readings":
        batches = rows.groupby("batch_id").agg(time=("time", "max"), value=("value", "sum")).sort_index()
        seconds = batches["time"].diff()
        rate = (batches["value"] / seconds).where(seconds > 0)
        figure.add_scatter(x=wall_clock(batches["time"] * 1000, tz), y=rate, mode="lines+markers",
                           line={"color": COLORS[0]}, name="readings/s")
    elif per_partition:
        for index, (partition, group) in enumerate(rows[rows["partition"].notna()].groupby("partition")):
            group = group.sort_values("batch_id")
            figure.add_scatter(x=wall_clock(group["time"] * 1000, tz), y=group["value"] * scale,
                               mode="lines+markers", name=f"partition {int(partition)}",
                               line={"color": COLORS[index % len(COLORS)]})
    figure.update_layout(height=220, margin={"l": 50, "r": 10, "t": 10, "b": 40}, template="plotly_white",
                         uirevision=name, yaxis_title=unit, xaxis_title=f"time of the batch ({zone_name(tz)})",
                         legend={"orientation": "h", "y": 1.15})
    return figure


def loads_figure(loads: list[float]) -> go.Figure:
    """The planned load of each partition (readings per second of the sensors placed there)."""
    figure = go.Figure(go.Bar(x=[f"partition {i}" for i in range(len(loads))], y=loads,
                              marker={"color": COLORS[0]}, hovertemplate="%{x}: %{y:,.1f} readings/s<extra></extra>"))
    figure.update_layout(height=220, margin={"l": 50, "r": 10, "t": 10, "b": 40}, template="plotly_white",
                         yaxis_title="readings/s (planned)")
    return figure
