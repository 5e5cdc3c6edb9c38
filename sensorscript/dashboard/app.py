"""The page: a Dash app over one job's folder. Every few seconds (a dcc.Interval in the browser)
one callback reads OUT again (reading.JobOutput) and, when something changed, renders the four
sections anew: results per workflow, alarms, the job's health, the plan. Dash keeps the figures'
zoom across refreshes (uirevision); its scripts and styles come from the installed packages."""

from __future__ import annotations

import base64
import tempfile
import threading
from datetime import tzinfo
from pathlib import Path

import dash
from dash import Dash, Input, Output, State, dcc, html

from sensorscript.dashboard import figures
from sensorscript.dashboard.reading import JobOutput, Snapshot
from sensorscript.runtime.output.status import GAUGES, describe_state, describe_version, gauge_text
from sensorscript.times import human_time, zone_name

REFRESH_MS = 3_000
DAG_NODES_DRAWN = 400  # a larger DAG is not legible as one picture; the plan's text stays
_SECTION = {"margin": "18px 0", "padding": "10px 16px", "background": "#ffffff", "border": "1px solid #dde1e6",
            "borderRadius": "6px"}
_TABLE = {"borderCollapse": "collapse", "fontSize": "13px", "width": "100%"}
_CELL = {"borderBottom": "1px solid #eceff3", "padding": "3px 8px", "textAlign": "left", "verticalAlign": "top"}


def create_app(out: Path, tz: tzinfo, refresh_ms: int = REFRESH_MS) -> Dash:
    output = JobOutput(out)
    dag = _DagPicture()
    app = Dash(__name__, title=f"SensorScript: {Path(out).name}", update_title=None, serve_locally=True)
    app.layout = html.Div(style={"fontFamily": "Helvetica, Arial, sans-serif", "background": "#f4f6f8",
                                 "padding": "8px 24px", "color": "#1d2733"}, children=[
        dcc.Interval(id="tick", interval=refresh_ms),
        dcc.Store(id="shown"),  # the version of the snapshot the page shows
        html.Div(id="header"),
        html.Nav([html.A(title, href=f"#{anchor}", style={"marginRight": "16px"}) for title, anchor in
                  (("Alarms", "alarms"), ("Results", "results"), ("Health", "health"), ("Plan", "plan"))]),
        html.Section(id="alarms", style=_SECTION, children=[
            html.H2("Alarms"),
            dcc.Dropdown(id="workflows", multi=True, placeholder="every workflow (choose some to filter)",
                         style={"maxWidth": "640px"}),
            html.Div(id="alarm-list")]),
        html.Section(id="results", style=_SECTION, children=[html.H2("Results"), html.Div(id="result-plots")]),
        html.Section(id="health", style=_SECTION, children=[html.H2("Health"), html.Div(id="health-body")]),
        html.Section(id="plan", style=_SECTION, children=[html.H2("Plan"), html.Div(id="plan-body")]),
    ])

    @app.callback(Output("header", "children"), Output("alarm-list", "children"), Output("result-plots", "children"),
                  Output("health-body", "children"), Output("plan-body", "children"), Output("workflows", "options"),
                  Output("shown", "data"),
                  Input("tick", "n_intervals"), Input("workflows", "value"), State("shown", "data"))
    def refresh(_, chosen, shown):
        snapshot = output.snapshot()
        version = [str(part) for part in snapshot.version()] + [",".join(chosen or [])]
        header = _header(snapshot, tz)
        if version == shown:  # nothing new: only the clock in the header moves
            return header, *(dash.no_update,) * 6
        streams = figures.output_streams(snapshot.plan)
        kinds = {stream: kind for workflow in streams.values() for stream, kind in workflow.items()}
        return (header, _alarms(snapshot, kinds, chosen, tz), _result_plots(snapshot, streams, tz),
                _health(snapshot, tz), _plan(snapshot, output, dag), sorted(streams), version)

    return app


def _header(snapshot: Snapshot, tz: tzinfo) -> list:
    status = snapshot.status
    name = status["job"] if status else Path(snapshot.sink.partition(":")[2]).parent.name
    state = describe_state(status, tz) if status else "not run yet: the page fills once the job writes its first batch"
    lines = [html.H1(f"SensorScript job {name}", style={"marginBottom": "4px"}),
             html.Div(state, id="state"),
             *([html.Div(describe_version(status, tz), id="plan-version")] if status else []),
             *([html.Div([html.Div(line) for line in snapshot.backfill.describe(snapshot.out, tz)], id="backfill")]
               if snapshot.backfill else []),
             html.Div(f"times in {zone_name(tz)}; refreshed every few seconds, last at "
                      f"{human_time(snapshot.read_at * 1000, tz)}", style={"color": "#5b6675", "fontSize": "13px"})]
    if snapshot.problem:
        lines.append(html.Div(snapshot.problem, style={"color": "#b3261e"}))
    return lines


def _table(head: list[str], rows: list[list], row_id: str = "") -> html.Table:
    return html.Table(style=_TABLE, children=[
        html.Thead(html.Tr([html.Th(h, style=_CELL) for h in head])),
        html.Tbody([html.Tr([html.Td(c, style=_CELL) for c in row], className=row_id) for row in rows])])


def _alarms(snapshot: Snapshot, kinds: dict[str, str], chosen: list[str] | None, tz: tzinfo, shown: int = 200):
    found = figures.alarms(snapshot.results, kinds)
    if chosen:
        found = found[found["stream"].str.rsplit(".", n=1).str[0].isin(chosen)]
    if not len(found):
        return html.P("no alarms" + (" in these workflows" if chosen else "") + " yet")
    rows = [[human_time(row.ts, tz), row.stream, f"{row.value:.6g}",
             figures.describe_events(row.events, tz) if isinstance(row.events, str) else "turned on"]
            for row in found.head(shown).itertuples(index=False)]
    more = f", the newest {shown}" if len(found) > shown else ""
    return [html.P(f"{len(found):,} alarms{more}, newest first"),
            html.Div(_table(["time", "stream", "value", "events bound"], rows, "alarm"),
                     style={"maxHeight": "380px", "overflowY": "auto"})]


def _result_plots(snapshot: Snapshot, streams: dict[str, dict[str, str]], tz: tzinfo) -> list:
    by_stream = dict(tuple(snapshot.results.groupby("stream")))
    sections = []
    for index, (workflow, outputs) in enumerate(streams.items()):
        color = figures.COLORS[index % len(figures.COLORS)]
        cards = []
        for stream, kind in outputs.items():
            rows = by_stream.get(stream)
            if rows is None or not len(rows):
                caption, plot = "no results yet", html.Div()
            else:
                last = rows.loc[rows["ts"].idxmax()]
                caption = f"{len(rows):,} result{'s' if len(rows) != 1 else ''}, the last {last['value']:.6g} at {human_time(last['ts'], tz)}"
                plot = dcc.Graph(figure=figures.stream_figure(stream, kind, rows, tz, color),
                                 config={"displaylogo": False, "responsive": True}, style={"height": "230px"})
            cards.append(html.Div(className="stream", id=f"stream-{stream}", style={"minWidth": "0"}, children=[
                html.H4(stream, style={"margin": "8px 0 0 0"}),
                html.Div(caption, className="caption", style={"fontSize": "12px", "color": "#5b6675"}), plot]))
        sections.append(html.Div([html.H3(workflow, style={"color": color, "marginBottom": "0"}),
                                  html.Div(cards, style={"display": "grid", "gap": "8px 24px",
                                                         "gridTemplateColumns": "repeat(auto-fill, minmax(440px, 1fr))"})]))
    return sections


def _health(snapshot: Snapshot, tz: tzinfo) -> list:
    status = snapshot.status
    if not status:
        return [html.P("the job has not run yet")]
    totals = status.get("totals", {})
    last = human_time(status["updated"] * 1000, tz) if status.get("updated") else "-"
    seconds = (status.get("updated") or 0) - status["started"]
    summary = [["batches", f"{status.get('batches', 0):,} (the last, #{status.get('last_batch')}, at {last})"],
               ["readings", f"{totals.get('readings', 0):,.0f}"
                + (f" ({totals.get('readings', 0) / seconds:,.0f} per second since this run started)"
                   if seconds > 0 and status.get("batches", 0) > 1 else "")],
               ["results", f"{totals.get('results', 0):,.0f}"],
               ["late readings", f"{totals.get('late', 0):,.0f} (policy {status['late_policy']})"],
               ["quarantined lines", f"{totals.get('quarantined', 0):,.0f}"],
               ["held ahead of the watermark", f"{totals.get('ahead', 0):,.0f}"],
               ["ignored, counted", f"{totals.get('unread', 0):,.0f} readings of sensors no workflow reads, "
                                    f"{totals.get('skipped', 0):,.0f} blank or header lines"],
               ["watermark policy", status["watermark"]], ["results in", status["sink"]]]
    partitions = sorted(status.get("partitions", {}).items(), key=lambda item: int(item[0]))
    shown = [name for name in GAUGES if any(name in gauges for _, gauges in partitions)]
    gauges = _table(["partition", *(GAUGES[name][0] for name in shown)],
                    [[p, *(gauge_text(g[name], GAUGES[name][1], tz) if name in g else "-" for name in shown)]
                     for p, g in partitions])
    late = sorted(status.get("late_by_stream", {}).items(), key=lambda item: (-item[1], item[0]))
    metrics = snapshot.metrics
    plots = [("readings per second", figures.health_figure(metrics, "readings", tz, False, unit="readings/s")),
             ("lag behind the newest reading", figures.health_figure(metrics, "lag_ms", tz, True, 1 / 1000, "s")),
             ("state size", figures.health_figure(metrics, "state_bytes", tz, True, 1 / 1024, "KiB"))]
    return [
        _table(["", ""], summary),
        html.H4("per partition"), gauges,
        html.H4("quarantined lines by reason"),
        _table(["reason", "lines"], [[reason, f"{count:,}"] for reason, count in snapshot.quarantine])
        if snapshot.quarantine else html.P("none"),
        html.H4("late readings by the result stream they missed"),
        _table(["stream", "readings"], [[s, f"{c:,.0f}"] for s, c in late]) if late else html.P("none"),
        html.Div([html.Div([html.H4(title), dcc.Graph(figure=figure, config={"displaylogo": False})])
                  for title, figure in plots],
                 style={"display": "grid", "gap": "8px 24px", "gridTemplateColumns": "repeat(auto-fill, minmax(440px, 1fr))"}),
    ]


def _plan(snapshot: Snapshot, output: JobOutput, dag: "_DagPicture") -> list:
    plan = snapshot.plan
    partitions = plan["partitions"]
    sensors: dict[int, list[str]] = {}
    for sensor, partition in partitions["sensors"].items():
        sensors.setdefault(partition, []).append(sensor)
    rows = [[str(i), f"{load:,.1f}", ", ".join(sorted(sensors.get(i, [])))] for i, load in enumerate(partitions["loads_hz"])]
    crossings = [[f"{c['from']} (partition {c['from_partition']})", f"{c['to']} (partition {c['to_partition']})",
                  f"{c['rate_per_s']:,.1f}/s", c["kind"]] for c in partitions["crossings"]]
    cost = plan["cost_tuples_per_minute"]
    return [
        html.H4("the shared DAG (red border: computed once for several workflows)"), dag.element(snapshot),
        html.H4(f"{partitions['count']} partitions, most loaded / average = {partitions['balance']:.3f}"),
        html.Div([_table(["partition", "readings/s (planned)", "sensors"], rows),
                  dcc.Graph(figure=figures.loads_figure(plan), config={"displaylogo": False})],
                 style={"display": "grid", "gap": "8px 24px", "gridTemplateColumns": "repeat(auto-fill, minmax(440px, 1fr))"}),
        html.P(f"{cost['ours']:,.0f} tuples/min cross the network (lower bound {cost['lower_bound']:,.0f}; hashing by "
               f"sensor id {cost['naive_sensor_hash']:,.0f}, by workflow {cost['naive_workflow_hash']:,.0f})"),
        _table(["from", "to", "rate", "kind"], crossings) if crossings else html.P("no edge crosses partitions"),
        html.Details([html.Summary("the plan in words (plan.txt)"),
                      html.Pre(output.plan_text(), style={"fontSize": "12px", "overflowX": "auto"})]),
    ]


class _DagPicture:
    """The DAG as `sscript graph` draws it (graph/draw.py), from plan.json; drawn again only when
    the job is compiled again."""

    def __init__(self):
        self._lock = threading.Lock()
        self._drawn: tuple[float | None, object] = (None, None)

    def element(self, snapshot: Snapshot):
        from sensorscript.graph.draw import draw
        from sensorscript.partition.plan import graph_of_plan_json

        plan = snapshot.plan
        with self._lock:
            if self._drawn[0] != plan["_mtime"]:
                nodes = len(plan["nodes"])
                if nodes > DAG_NODES_DRAWN:
                    picture = html.P(f"{nodes:,} computations: too many to draw legibly as one picture")
                else:
                    with tempfile.TemporaryDirectory() as folder:
                        path = Path(folder) / "dag.svg"
                        draw(graph_of_plan_json(plan), path)
                        svg = base64.b64encode(path.read_bytes()).decode()
                    picture = html.Img(src=f"data:image/svg+xml;base64,{svg}", alt="the shared DAG",
                                       style={"maxWidth": "100%"})
                self._drawn = (plan["_mtime"], picture)
            return self._drawn[1]

