"""The report for people: its tables as text, then Markdown and an HTML page rendered from the
templates `templates/report.md.j2` and `templates/report.html.j2` (as the job is rendered: every
decision here, the templates only lay it out)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sensorscript.codegen.job import template_environment
from sensorscript.partition.cost import CommunicationCost
from sensorscript.report.lines import LineCount
from sensorscript.report.measured import Measured
from sensorscript.report.network import CostPoint, SWEEP_PARTITIONS
from sensorscript.report.plots import PLOTS


@dataclass
class Report:
    title: str
    lines: list[LineCount]
    cost: CommunicationCost
    partitions: int
    by_sensors: list[CostPoint]
    by_shared: list[CostPoint]
    measured: Measured | None = None
    files: list[str] = field(default_factory=list)


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.1f}×" if a and b else "–"


def _int(value) -> str:
    return "–" if value is None else f"{value:,.0f}"


def _bytes(value: int | None) -> str:
    if value is None:
        return "–"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= size:
            return f"{value / size:,.1f} {unit}"
    return f"{value:,} B"


def _saving(cost, baseline: str) -> str:
    """What ours saves against a baseline, or that the baseline breaks the balance bound (then
    it may cost less: ours keeps the bound, it does not)."""
    peak = cost.over_bound(baseline)
    return f"{cost.saving_of(baseline):.1%}" if peak is None else f"over the bound ({peak:.2f}x the average)"


def tables(report: Report) -> dict[str, tuple[list[str], list[list[str]]]]:
    """Every table of the report as (header, rows) of text: Markdown and HTML render the same."""
    lines = (["workflows", "script lines", "generated job lines", "naive PySpark lines", "naive / script",
              "naive / generated job"],
             [[row.label, _int(row.script), _int(row.job), _int(row.naive) if row.naive else "cannot be written",
               _ratio(row.naive, row.script), _ratio(row.naive, row.job)] for row in report.lines])
    c = report.cost
    cost = (["placement", "tuples/min crossing the network", "ours saves"],
            [["ours (the cheapest placement under the balance bound, refined)", _int(c.ours), "–"],
             ["lower bound (each referenced raw tuple once)", _int(c.lower_bound), "–"],
             ["ours, stage 0 sending slice partials of sensors only windows read (where on time)", _int(c.summed),
              f"{c.saving(c.summed):.1%}"],
             ["naive: hash by sensor id", _int(c.naive_sensor_hash), _saving(c, "sensor")],
             ["naive: hash by workflow", _int(c.naive_workflow_hash), _saving(c, "workflow")],
             ["the greedy placement of Zhou et al., unrefined (a start ours is chosen from)", _int(c.greedy),
              f"{c.saving(c.greedy):.1%}"]])

    def sweep_table(points: list[CostPoint], name: str):
        header = [name, "ours", "lower bound", "ours, stage 0 summing", "hash by sensor id", "hash by workflow",
                  "greedy of Zhou et al.", "saving vs sensor id", "saving vs workflow"]
        rows = [[str(p.x), _int(p.cost.ours), _int(p.cost.lower_bound), _int(p.cost.summed), _int(p.cost.naive_sensor_hash),
                 _int(p.cost.naive_workflow_hash), _int(p.cost.greedy), _saving(p.cost, "sensor"),
                 _saving(p.cost, "workflow")]
                for p in points]
        if any(p.measured for p in points):
            header += ["measured: ours", "lower bound", "hash by sensor id", "hash by workflow", "same results"]
            for row, p in zip(rows, points):
                m = p.measured
                row += ([_int(m.ours), _int(m.lower_bound), _int(m.by_sensor), _int(m.by_workflow),
                         "yes" if m.same else "NO"] if m else ["–"] * 5)
        return header, rows

    result = {"lines": lines, "cost": cost, "by_sensors": sweep_table(report.by_sensors, "sensors n"),
              "by_shared": sweep_table(report.by_shared, "shared sensors n_s")}
    m = report.measured
    if m is not None:
        rows = [["input readings", _int(m.readings), "", "", ""],
                ["readings of referenced sensors (lower bound: each crosses once)", _int(m.referenced), "", "", ""],
                ["the compiled job: raw readings (one shuffle, in packets)", _int(m.ours_raw_tuples),
                 _int(m.ours_raw_records), _bytes(m.ours_raw_bytes), ""],
                ["the compiled job: between partitions (the raw readings and the tuples on cut edges)",
                 _int(m.ours_crossing), "", "", ""],
                ["the compiled job: all shuffles (with tuples forwarded over cut edges and results passing "
                 "through the second operator)", _int(m.ours_tuples), "", _bytes(m.ours_bytes),
                 f"{m.ours_seconds:.1f} s"]]
        if m.by_workflow_tuples is not None:
            same = "same results" if m.by_workflow_same else "DIFFERENT results"
            rows.append([f"our runtime, naive placement: hash by workflow (readings copied; {same})",
                         _int(m.by_workflow_tuples), _int(m.by_workflow_records), _bytes(m.by_workflow_bytes),
                         f"{m.by_workflow_seconds:.1f} s"])
        if m.by_sensor_tuples is not None:
            same = "same results" if m.by_sensor_same else "DIFFERENT results"
            rows.append([f"our runtime, naive placement: hash by sensor id ({m.by_sensor_stages} stages, every "
                         f"edge a shuffle; {same})", _int(m.by_sensor_tuples), _int(m.by_sensor_records),
                         _bytes(m.by_sensor_bytes), f"{m.by_sensor_seconds:.1f} s"])
            rows.append(["our runtime, naive placement: hash by sensor id, between partitions (the readings and "
                         "the edges whose ends hash to different partitions)", _int(m.by_sensor_crossing), "", "", ""])
        if m.naive_records is not None:
            rows.append(["the naive PySpark job (partial aggregates)", _int(m.naive_records), _int(m.naive_records),
                         _bytes(m.naive_bytes), f"{m.naive_seconds:.1f} s"])
        elif m.naive_note:
            rows.append(["the naive PySpark job", "not run", "", "", m.naive_note])
        result["measured"] = (["measured on local Spark", "tuples", "Spark shuffle records", "shuffle bytes",
                               "run time"], rows)
    return result


SECTIONS = [
    ("lines", "Lines of code",
     "Script lines against the lines of the generated job and of the same logic written the naive way in "
     "PySpark (one native window() per window, nothing shared; the job `sscript compile --naive` writes and "
     "the benchmarks run). Non-blank lines that are not only comments."),
    ("cost", "Network: the given workflows",
     "Modelled tuples per minute crossing a shuffle ({partitions} partitions), from the sensors' frequencies "
     "(model: sensorscript/partition/cost.py)."),
    ("by_sensors", "Network against the number of sensors n",
     "128 generated bridge workflows over n sensors (popular sensors shared by many workflows), "
     f"{SWEEP_PARTITIONS} partitions. Tuples per minute; the measured columns (when run with --measure-sweeps) "
     "come from real runs on local Spark of the compiled job and of our runtime under both naive placements, "
     "over generated readings of the n sensors, scaled to a minute. Windows emit a last, partial time at the "
     "end of the input, so measured derived traffic can differ a little from the model's steady rate. Hash by "
     "sensor id counts every edge that is not sensor -> window, as the baseline of Zhou et al. does (each is a shuffle "
     "of its own), also where both ends hash to one partition; ours and hash by workflow count what goes to "
     "another partition. The greedy of Zhou et al. is the placement of their Algorithm 1 as it is, before refinement "
     "and the choice among placements that give ours."),
    ("by_shared", "Network against the number of shared sensors n_s",
     "16 sensors at 20 Hz and 8 workflows; every workflow reads the n_s shared sensors and its own share of "
     f"the others (union, two windows, their difference); {SWEEP_PARTITIONS} partitions. Our plan keeps the "
     "most loaded partition within 1.1 × the average; hashing by workflow keeps no such bound (8 workflows "
     "hashed onto 4 partitions), which is how it can cost less than our plan where few sensors are shared "
     "(the table says 'over the bound' there): balance forces our plan to cut the one connected group that "
     "shared sensors make of all workflows, and each partition then receives the shared sensors once. A "
     "baseline that keeps the bound is one of the placements ours is chosen from, with the greedy of Zhou et al. and "
     "workflows packed (each workflow's computations and sensors together, heaviest first onto the least "
     "loaded partition), each refined. Measured columns as above."),
    ("measured", "Measured on local Spark",
     "The jobs ran with --once on local[2] over the same input, one after the other in one Spark session, "
     "after a first run of the compiled job that is not measured (so that none pays for the JVM's warm-up). "
     "Spark's shuffle write records and bytes "
     "of the queries' stages come from the driver's status store; Spark counts every row written for a "
     "shuffle, whether the task that reads it runs on the same machine or not. The compiled job's first "
     "shuffle carries each referenced reading once, packed per partition (Spark's records are the packets; "
     "the tuples are the readings in them, as the job counts them); where the plan split a subgraph, the "
     "second operator receives every input of its computations (local ones too, packed per edge and "
     "batch) and the first operator's results, one record each. Under the naive placement hash by "
     "workflow the same runtime runs each workflow whole on the partition of its name's hash: a reading "
     "crosses once for every partition that hosts a workflow reading it, and nothing else crosses. Under "
     "hash by sensor id a reading goes to the partition of its sensor id's hash, where the windows directly "
     "over it run, and every other edge of the graph is a shuffle of its own (a stage per level of the "
     "graph): its tuples are the readings and what crossed each edge, as the job counts them (the baseline "
     "of Zhou et al., and the model, count every such edge; between partitions only, the edges whose ends hash to "
     "one partition drop out); its Spark records also count the rows each later stage passes on to the next. The "
     "naive job's window aggregations combine readings before their shuffles (partial aggregation), so it "
     "writes few shuffle records; what it pays instead is reading the input once per window statement and "
     "copying every reading into each window that holds it."),
]


@dataclass(frozen=True)
class Section:
    key: str
    title: str
    text: str
    header: list[str]
    rows: list[list[str]]
    plot: str | None  # the PNG beside the report, if the section has one


def sections(report: Report) -> list[Section]:
    """The report's sections in order, each with its table."""
    texts = {key: (title, text) for key, title, text in SECTIONS}
    return [Section(key, texts[key][0], texts[key][1].format(partitions=report.partitions), header, rows,
                    PLOTS.get(key)) for key, (header, rows) in tables(report).items()]


def _render(template: str, report: Report) -> str:
    return template_environment(autoescape=template.endswith(".html.j2")).get_template(template).render(
        title=report.title, files=[Path(f).name for f in report.files], sections=sections(report),
        notes=[f"Naive job for {row.label}: {row.naive_note}." for row in report.lines if row.naive is None])


def markdown(report: Report) -> str:
    return _render("report.md.j2", report)


def html_page(report: Report) -> str:
    return _render("report.html.j2", report)
