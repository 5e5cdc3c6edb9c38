"""The page: a Dash app over one job's folder, for a wall screen as much as for a person at a desk.

At the top, at once: the job's title and state, its health and the newest alarms (with a filter);
then the results of the workflows a person picks (a searchable list, the workflows with alarms
first; none named in the address, every workflow of a job of a few, else those of the newest
alarms), never every plot of a large job; then the health in detail and a summary of the plan. `?workflow=NAME` (again for more)
opens the page on those workflows, and a pick shows in the address, so a wall screen can be set to
one. Every few seconds (a dcc.Interval in the browser) each section asks reading.JobOutput for what
is new, in a callback of its own, so that a slow section holds up no other; a section whose data
did not change sends nothing. Dash keeps the figures' zoom across refreshes (uirevision); its
scripts and styles come from the installed packages."""

from __future__ import annotations

import base64
import json
import tempfile
import threading
import time
from datetime import tzinfo
from pathlib import Path
from urllib.parse import parse_qs, urlencode

import dash
from dash import Dash, Input, Output, State, ctx, dcc, html

from sensorscript.dashboard import figures
from sensorscript.dashboard.metrics import serve_metrics
from sensorscript.dashboard.plan_summary import PlanSummary
from sensorscript.dashboard.reading import JobOutput
from sensorscript.runtime.output.alarms import FLAG, Alarm
from sensorscript.runtime.output.status import GAUGES, describe_feed, describe_state, describe_version, gauge_text
from sensorscript.times import human_time, zone_name

REFRESH_MS = 3_000
ALARMS_SHOWN = 200  # the newest; the count says how many there are
WORKFLOWS_SHOWN = 8  # at most this many workflows' plots at once (a pick of more says so)
WORKFLOWS_BY_DEFAULT = 3  # none in the address, a larger job shows the workflows of the newest alarms, so many
OPTIONS_LISTED = 100  # the picker lists this many workflows; typing searches them all
PLAN_TEXT_LINES = 80  # of plan.txt, on the page; the file has the rest
_SECTION = {"margin": "14px 0", "padding": "10px 16px", "background": "#ffffff", "border": "1px solid #dde1e6",
            "borderRadius": "6px", "minWidth": "0"}
_TABLE = {"borderCollapse": "collapse", "fontSize": "13px", "width": "100%"}
_CELL = {"borderBottom": "1px solid #eceff3", "padding": "3px 8px", "textAlign": "left", "verticalAlign": "top"}
_GRID = {"display": "grid", "gap": "8px 24px", "gridTemplateColumns": "repeat(auto-fill, minmax(440px, 1fr))"}
_QUIET = {"color": "#5b6675", "fontSize": "13px"}


def create_app(out: Path, tz: tzinfo, refresh_ms: int = REFRESH_MS) -> Dash:
    output = JobOutput(out)
    dag = _DagPicture()
    app = Dash(__name__, title=f"SensorScript: {Path(out).name}", update_title=None, serve_locally=True)
    serve_metrics(app.server, output)  # /metrics for Prometheus, beside the page
    sections = [("Health", "health"), ("Alarms", "alarms"), ("Results", "results"), ("Health in detail", "detail"),
                ("Plan", "plan")]

    def layout():  # per page load: the header is there before any callback runs
        return html.Div(style={"fontFamily": "Helvetica, Arial, sans-serif", "background": "#f4f6f8",
                               "padding": "8px 24px", "color": "#1d2733"}, children=[
            dcc.Location(id="url", refresh=False),
            dcc.Interval(id="tick", interval=refresh_ms),
            *(dcc.Store(id=f"{name}-shown") for name in ("summary", "health", "alarms", "results", "plan")),
            html.Div(id="header", children=_header(output, tz)),
            html.Nav([html.A(title, href=f"#{anchor}", style={"marginRight": "16px"}) for title, anchor in sections]),
            html.Div(style={"display": "grid", "gap": "0 16px",
                            "gridTemplateColumns": "repeat(auto-fit, minmax(min(100%, 520px), 1fr))"}, children=[
                html.Section(id="health", style=_SECTION, children=[html.H2("Health"), html.Div(id="health-summary")]),
                html.Section(id="alarms", style=_SECTION, children=[
                    html.H2("Alarms"),
                    dcc.Input(id="alarm-filter", type="search", debounce=True, style={"width": "320px"},
                              placeholder="filter by workflow or stream"),
                    html.Div(id="alarm-list")])]),
            html.Section(id="results", style=_SECTION, children=[
                html.H2("Results"),
                dcc.Dropdown(id="workflows", multi=True, style={"maxWidth": "760px"},
                             placeholder="choose workflows: type to search them all"),
                html.Div(id="result-plots")]),
            html.Section(id="detail", style=_SECTION, children=[html.H2("Health in detail"),
                                                                html.Div(id="health-body")]),
            html.Section(id="plan", style=_SECTION, children=[html.H2("Plan"), html.Div(id="plan-body")]),
        ])

    app.layout = layout

    @app.callback(Output("header", "children"), Input("tick", "n_intervals"))
    def header(_):
        return _header(output, tz)

    @app.callback(Output("health-summary", "children"), Output("summary-shown", "data"),
                  Input("tick", "n_intervals"), State("summary-shown", "data"))
    def health(_, shown):
        status = output.status()
        version = _version(_status_version(status))
        if version == shown:
            return dash.no_update, dash.no_update
        return _health_summary(status, tz), version

    @app.callback(Output("health-body", "children"), Output("health-shown", "data"),
                  Input("tick", "n_intervals"), State("health-shown", "data"))
    def health_detail(_, shown):
        status, found = output.status(), output.health()
        version = _version(_status_version(status), found.version)
        if version == shown:
            return dash.no_update, dash.no_update
        return _health_detail(status, found, tz), version

    @app.callback(Output("alarm-list", "children"), Output("alarms-shown", "data"),
                  Input("tick", "n_intervals"), Input("alarm-filter", "value"), State("alarms-shown", "data"))
    def alarms(_, text, shown):
        view = output.alarms()
        version = _version(view.version, text)
        if version == shown:
            return dash.no_update, dash.no_update
        return _alarms(view.newest_first, text, tz), version

    @app.callback(Output("workflows", "value"), Output("workflows", "options"), Output("url", "search"),
                  Input("url", "search"), Input("workflows", "value"), State("workflows", "search_value"))
    def pick(search, chosen, typed):
        """The address names the workflows shown (a link, a wall screen set to some); a pick goes
        into the address; neither, the workflows of the newest alarms. The list to pick from comes
        with the value (the picker drops a value its list does not hold). Only the address and the
        value ask this: Dash drops the answer to a callback asked again before it returned, and a
        pick's address must not be dropped because the typed name was cleared meanwhile."""
        alarmed = output.alarms().by_workflow
        address = value = dash.no_update
        if "workflows.value" in ctx.triggered_prop_ids:
            address = _address(chosen or [])
        else:  # the page opened, or its address changed
            chosen = value = _named(search) or shown_by_default(output.plan(), alarmed)
        return value, _options(output.plan(), alarmed, typed or "", chosen or []), address

    @app.callback(Output("workflows", "options", allow_duplicate=True),
                  Input("workflows", "search_value"), Input("alarms-shown", "data"), State("workflows", "value"),
                  State("url", "search"), prevent_initial_call=True)
    def listed(typed, _, chosen, search):
        """The list to pick from, as a name is typed or new alarms come. It holds what the address names
        too, and before the page has a value what `pick` is setting: an answer of this callback may land
        after pick's, and a list without the value would make the picker drop it."""
        plan, alarmed, named = output.plan(), output.alarms().by_workflow, _named(search)
        if chosen is None:
            chosen = named or shown_by_default(plan, alarmed)
        return _options(plan, alarmed, typed or "", [*chosen, *named])

    @app.callback(Output("result-plots", "children"), Output("results-shown", "data"),
                  Input("tick", "n_intervals"), Input("workflows", "value"), State("results-shown", "data"))
    def results(_, chosen, shown):
        plan = output.plan()
        chosen = chosen or []
        workflows = [w for w in chosen if w in plan.workflows][:WORKFLOWS_SHOWN]
        streams = [s for w in workflows for s in plan.workflows[w]]
        rows = output.stream_rows(streams)
        alarmed = output.alarms().by_workflow
        version = _version(plan.mtime, chosen, [(len(r), int(r["_rowid"].max()) if len(r) else 0) for r in rows.values()],
                           [alarmed.get(w) for w in workflows])
        if version == shown:
            return dash.no_update, dash.no_update
        return _result_plots(plan, chosen, workflows, rows, alarmed, tz), version

    @app.callback(Output("plan-body", "children"), Output("plan-shown", "data"),
                  Input("tick", "n_intervals"), State("plan-shown", "data"))
    def plan(_, shown):
        summary = output.plan()
        if summary.mtime == shown:
            return dash.no_update, dash.no_update
        return _plan(summary, output, dag), summary.mtime

    return app


def _version(*parts) -> str:
    """What a section shows, as a Store keeps it (its data must be JSON)."""
    return json.dumps(parts, default=str)


def _status_version(status: dict | None) -> tuple:
    status = status or {}
    return status.get("started"), status.get("updated"), status.get("state"), status.get("stopped")


def _named(search: str | None) -> list[str]:
    """?workflow=a&workflow=b (or ?workflow=a,b): the workflows in the address."""
    values = parse_qs((search or "").lstrip("?")).get("workflow", [])
    return list(dict.fromkeys(name for value in values for name in value.split(",") if name))


def shown_by_default(plan: PlanSummary, alarmed: dict[str, tuple[int, int]]) -> list[str]:
    """A job of a few workflows: all of them; else those of the newest alarms."""
    if len(plan.workflows) <= WORKFLOWS_SHOWN:
        return list(plan.workflows)
    return list(alarmed)[:WORKFLOWS_BY_DEFAULT]


def _address(chosen: list[str]) -> str:
    return f"?{urlencode([('workflow', name) for name in chosen])}" if chosen else ""


def _table(head: list[str], rows: list[list], row_class: str = "") -> html.Table:
    return html.Table(style=_TABLE, children=[
        html.Thead(html.Tr([html.Th(h, style=_CELL) for h in head])),
        html.Tbody([html.Tr([html.Td(c, style=_CELL) for c in row], className=row_class) for row in rows])])


def _header(output: JobOutput, tz: tzinfo) -> list:
    status = output.status()
    state = describe_state(status, tz) if status else "not run yet: the page fills once the job writes its first batch"
    backfill = output.backfill()
    lines = [html.H1(f"SensorScript job {output.job_name()}", id="title", style={"marginBottom": "4px"}),
             html.Div(state, id="state"),
             *([html.Div(describe_version(status, tz), id="plan-version")] if status else []),
             *([html.Div([html.Div(line) for line in backfill.describe(output.out, tz)], id="backfill")]
               if backfill else []),
             html.Div(f"times in {zone_name(tz)}; refreshed every few seconds, last at "
                      f"{human_time(time.time() * 1000, tz)}", style=_QUIET)]
    if output.problem:
        lines.append(html.Div(output.problem, id="problem", style={"color": "#b3261e"}))
    return lines


def _health_summary(status: dict | None, tz: tzinfo):
    if not status:
        return html.P("the job has not run yet")
    totals = status.get("totals", {})
    last = human_time(status["updated"] * 1000, tz) if status.get("updated") else "-"
    seconds = (status.get("updated") or 0) - status["started"]
    return _table(["", ""], [
        ["batches", f"{status.get('batches', 0):,} (the last, #{status.get('last_batch')}, at {last})"],
        ["readings", f"{totals.get('readings', 0):,.0f}"
         + (f" ({totals.get('readings', 0) / seconds:,.0f} per second since this run started)"
            if seconds > 0 and status.get("batches", 0) > 1 else "")],
        ["results", f"{totals.get('results', 0):,.0f}"],
        ["late readings", f"{totals.get('late', 0):,.0f} (policy {status['late_policy']})"],
        ["quarantined lines", f"{totals.get('quarantined', 0):,.0f}"],
        ["held ahead of the watermark", f"{totals.get('ahead', 0):,.0f}"],
        ["ignored, counted", f"{totals.get('unread', 0):,.0f} readings of sensors no workflow reads, "
                             f"{totals.get('skipped', 0):,.0f} blank or header lines"],
        ["watermark policy", status["watermark"]], ["results in", status["sink"]],
        *(["Kafka", line.removeprefix("Kafka: ")] for line in describe_feed(status, tz))], "health")


def _health_detail(status: dict | None, found, tz: tzinfo) -> list:
    if not status:
        return [html.P("the job has not run yet")]
    partitions = sorted(status.get("partitions", {}).items(), key=lambda item: int(item[0]))
    shown = [name for name in GAUGES if any(name in gauges for _, gauges in partitions)]
    gauges = _table(["partition", *(GAUGES[name][0] for name in shown)],
                    [[p, *(gauge_text(g[name], GAUGES[name][1], tz) if name in g else "-" for name in shown)]
                     for p, g in partitions])
    late = sorted(status.get("late_by_stream", {}).items(), key=lambda item: (-item[1], item[0]))
    metrics = found.metrics
    plots = [("readings per second", figures.health_figure(metrics, "readings", tz, False, unit="readings/s")),
             ("lag behind the newest reading", figures.health_figure(metrics, "lag_ms", tz, True, 1 / 1000, "s")),
             ("state size", figures.health_figure(metrics, "state_bytes", tz, True, 1 / 1024, "KiB"))]
    return [
        html.H4("per partition"), gauges,
        html.H4("quarantined lines by reason"),
        _table(["reason", "lines"], [[reason, f"{count:,}"] for reason, count in found.quarantine])
        if found.quarantine else html.P("none"),
        html.H4("late readings by the result stream they missed"),
        _table(["stream", "readings"], [[s, f"{c:,.0f}"] for s, c in late]) if late else html.P("none"),
        html.Div([html.Div([html.H4(title), dcc.Graph(figure=figure, config={"displaylogo": False})])
                  for title, figure in plots], style=_GRID),
    ]


def _alarms(found: list[Alarm], text: str | None, tz: tzinfo):
    text = (text or "").strip().lower()
    if text:
        found = [a for a in found if text in a.stream.lower()]
    if not found:
        return html.P("no alarms" + (" that match the filter" if text else "") + " yet")
    rows = [[human_time(a.ts, tz),
             dcc.Link(a.stream, href=_address([a.stream.rsplit(".", 1)[0]]), title="show this workflow's results"),
             f"{a.value:.6g}", figures.describe_events(a.events, tz) if a.events is not None else "turned on"]
            for a in found[:ALARMS_SHOWN]]
    more = f", the newest {ALARMS_SHOWN}" if len(found) > ALARMS_SHOWN else ""
    return [html.P(f"{len(found):,} alarms{' that match the filter' if text else ''}{more}, newest first "
                   f"(a stream's name shows its workflow's results)", style=_QUIET),
            html.Div(_table(["time", "stream", "value", "events bound"], rows, "alarm"),
                     style={"maxHeight": "420px", "overflowY": "auto"})]


def _options(plan: PlanSummary, alarmed: dict[str, tuple[int, int]], typed: str, chosen: list[str]) -> list[dict]:
    """The picker's list: the chosen, whatever is typed (the picker drops a value its list does not
    hold), then the workflows with alarms (newest first), then the rest by name, those whose name holds
    what is typed. OPTIONS_LISTED at most besides the chosen: typing finds the others."""
    typed = typed.strip().lower()
    kept = [w for w in dict.fromkeys(chosen) if w in plan.workflows]
    taken = set(kept)
    found = [w for w in dict.fromkeys((*alarmed, *plan.workflows))
             if w not in taken and w in plan.workflows and typed in w.lower()]
    options = [{"label": _label(w, alarmed), "value": w} for w in kept + found[:OPTIONS_LISTED]]
    if len(found) > OPTIONS_LISTED:
        options.append({"label": f"... and {len(found) - OPTIONS_LISTED:,} more: type to find them", "value": "",
                        "disabled": True})
    return options


def _label(workflow: str, alarmed: dict[str, tuple[int, int]]) -> str:
    if workflow not in alarmed:
        return workflow
    count = alarmed[workflow][0]
    return f"{workflow} ({count:,} alarm{'s' if count != 1 else ''})"


def _result_plots(plan: PlanSummary, chosen: list[str], workflows: list[str], rows: dict, alarmed: dict,
                  tz: tzinfo) -> list:
    unknown = [w for w in chosen if w not in plan.workflows]
    notes = [html.P(f"no workflow named {', '.join(unknown)} in this job", style={"color": "#b3261e"})] if unknown else []
    if not workflows:
        return notes + [html.P(f"Choose workflows above to see their results: type to search all "
                               f"{len(plan.workflows):,}; those with alarms are listed first. A stream's name "
                               f"among the alarms shows its workflow; ?workflow=NAME in the address opens the "
                               f"page on one.", id="choose-prompt", style=_QUIET)]
    known = [w for w in chosen if w in plan.workflows]
    if len(known) > len(workflows):
        notes.append(html.P(f"{len(known)} workflows chosen: the first {len(workflows)} are shown", style=_QUIET))
    sections = []
    for index, workflow in enumerate(workflows):
        color = figures.COLORS[index % len(figures.COLORS)]
        cards = []
        for stream, kind in plan.workflows[workflow].items():
            found = rows[stream]
            if not len(found):
                caption, plot = "no results yet", html.Div()
            else:
                last = found.iloc[-1]
                caption = (f"{len(found):,} result{'s' if len(found) != 1 else ''}, the last {last['value']:.6g} "
                           f"at {human_time(last['ts'], tz)}")
                plot = dcc.Graph(figure=figures.stream_figure(stream, kind, found, tz, color,
                                                                 flag=plan.alarm_kinds.get(stream) == FLAG),
                                 config={"displaylogo": False, "responsive": True}, style={"height": "230px"})
            cards.append(html.Div(className="stream", id=f"stream-{stream}", style={"minWidth": "0"}, children=[
                html.H4(stream, style={"margin": "8px 0 0 0"}),
                html.Div(caption, className="caption", style={"fontSize": "12px", "color": "#5b6675"}), plot]))
        sections.append(html.Div(className="workflow", id=f"workflow-{workflow}", children=[
            html.H3(_label(workflow, alarmed), style={"color": color, "marginBottom": "0"}),
            html.Div(cards, style=_GRID)]))
    return notes + sections


def _plan(plan: PlanSummary, output: JobOutput, dag: "_DagPicture") -> list:
    cost = plan.cost
    text, lines = output.plan_text(PLAN_TEXT_LINES)
    crossings = [[f"{c['from']} (partition {c['from_partition']})", f"{c['to']} (partition {c['to_partition']})",
                  f"{c['rate_per_s']:,.1f}/s", c["kind"]] for c in plan.busiest_crossings]
    return [
        html.P(f"{len(plan.workflows):,} workflows, {sum(map(len, plan.workflows.values())):,} result streams, "
               f"{plan.nodes:,} computations ({plan.shared:,} shared by several workflows) over {plan.sensors:,} "
               f"sensors", id="plan-summary"),
        html.H4("the shared DAG (red border: computed once for several workflows)"), dag.element(plan),
        html.H4(f"{plan.partitions} partitions, most loaded / average = {plan.balance:.3f}"),
        html.Div([_table(["partition", "readings/s (planned)", "sensors"],
                         [[str(i), f"{load:,.1f}", f"{placed:,}"]
                          for i, (load, placed) in enumerate(zip(plan.loads_hz, plan.sensors_placed))]),
                  dcc.Graph(figure=figures.loads_figure(plan.loads_hz), config={"displaylogo": False})], style=_GRID),
        html.P(f"{cost['ours']:,.0f} tuples/min cross the network (lower bound {cost['lower_bound']:,.0f}; hashing by "
               f"sensor id {cost['naive_sensor_hash']:,.0f}, by workflow {cost['naive_workflow_hash']:,.0f})"),
        html.P(f"{plan.crossings:,} edges cross partitions, {plan.crossing_rate:,.1f} tuples/s planned"
               + (f"; the busiest {len(crossings)}:" if plan.crossings > len(crossings) else ":")
               if plan.crossings else "no edge crosses partitions"),
        *([_table(["from", "to", "rate", "kind"], crossings)] if crossings else []),
        html.Details([html.Summary("the plan in words (plan.txt)"),
                      html.Pre("\n".join(text), style={"fontSize": "12px", "overflowX": "auto"}),
                      *([html.P(f"... {lines - len(text):,} more lines in {output.out / 'plan.txt'}", style=_QUIET)]
                        if lines > len(text) else [])]),
    ]


class _DagPicture:
    """The DAG as `sscript graph` draws it (graph/draw.py), from plan.json; drawn again only when
    the job is compiled again."""

    def __init__(self):
        self._lock = threading.Lock()
        self._drawn: tuple[float | None, object] = (None, None)

    def element(self, plan: PlanSummary):
        from sensorscript.graph.draw import draw
        from sensorscript.partition.plan import graph_of_plan_json

        with self._lock:
            if self._drawn[0] != plan.mtime:
                if plan.drawable is None:
                    picture = html.P(f"{plan.nodes:,} computations: too many to draw legibly as one picture")
                else:
                    with tempfile.TemporaryDirectory() as folder:
                        path = Path(folder) / "dag.svg"
                        draw(graph_of_plan_json(plan.drawable), path)
                        svg = base64.b64encode(path.read_bytes()).decode()
                    picture = html.Img(src=f"data:image/svg+xml;base64,{svg}", alt="the shared DAG",
                                       style={"maxWidth": "100%"})
                self._drawn = (plan.mtime, picture)
            return self._drawn[1]
