"""`sscript report`: what SensorScript saves, for people (a design review, the paper's two tables).

1. Lines: script lines against the lines of the generated job and of the same logic
   written the naive way in PySpark (`codegen/naive.py`, the job the benchmarks run),
   for the given workflows and for 1, 16, 128 and 1,024 generated bridge workflows.
2. Network: tuples per minute crossing a shuffle under our plan, the lower bound and
   the two naive placements (the model of `partition/cost.py`), for the given workflows
   and, as in the paper's figures, against the number of sensors n and the number of
   shared sensors n_s (16 sensors of equal frequency). With `measure`, the job and the
   naive job run on local Spark over real input and Spark's own shuffle counters are read
   (with the readings in the compiled job's packets).
3. Output: REPORT/report.md and REPORT/report.html with PNG plots beside them.

Lines of code are counted the way people count them: non-blank lines that are not only
a comment; docstrings are comments.
"""

from __future__ import annotations

import dataclasses
import html
import io
import re
import time
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from sensorscript.codegen.job import render_job
from sensorscript.codegen.naive import NotExpressible, render_naive
from sensorscript.parser import load
from sensorscript.partition.cost import CommunicationCost
from sensorscript.partition.plan import make_plan
from sensorscript.registry import Sensor, SensorRegistry
from sensorscript.workload import bridge_workload

GENERATED_SIZES = (1, 16, 128, 1_024)
SWEEP_SENSORS = (16, 32, 64, 128, 256, 512, 1_000)
SWEEP_PARTITIONS = 4
SWEEP_SHARED = tuple(range(0, 17, 2))


# ----------------------------------------------------------------------------- lines

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
        return self.naive / self.script if self.naive else None


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


# --------------------------------------------------------------------------- network

@dataclass(frozen=True)
class MeasuredPoint:
    """Tuples per minute that crossed in real runs of one sweep point (`measure_sweeps`)."""

    ours: float  # the compiled job: the raw readings and the tuples on cut edges
    lower_bound: float  # the readings of referenced sensors
    by_sensor: float
    by_workflow: float
    same: bool  # both placements gave the compiled job's results, row for row


@dataclass(frozen=True)
class CostPoint:
    x: int
    cost: CommunicationCost
    measured: MeasuredPoint | None = None


def plan_cost(texts: dict[str, str], sensors: list[Sensor], partitions: int) -> CommunicationCost:
    registry = SensorRegistry.of(sensors)
    loaded = load(list(texts), registry.ids(), texts=texts)
    return make_plan(loaded.workflows, registry, partitions).cost


def sweep(kind: str, xs: Sequence[int], partitions: int = SWEEP_PARTITIONS) -> list[CostPoint]:
    """The model at every point of a sweep: "sensors" (128 generated bridge workflows over n
    sensors, popular sensors shared, Zipf) or "shared" (`shared_workflows`)."""
    return [CostPoint(x, plan_cost(texts, fleet, partitions)) for x, texts, fleet in sweep_workloads(kind, xs)]


def shared_workflows(shared: int, sensors: int = 16, workflows: int = 8) -> tuple[dict[str, str], list[Sensor]]:
    """`sensors` sensors at 20 Hz; every workflow reads the first `shared` of them, the rest are
    dealt out privately. Each workflow: the union of its sensors, two windows, their difference."""
    fleet = [Sensor(f"S{i:02d}", 20.0, "equal") for i in range(sensors)]
    common = [s.sensor_id for s in fleet[:shared]]
    private = [s.sensor_id for s in fleet[shared:]]
    texts = {}
    for w in range(workflows):
        mine = common + private[w::workflows]
        names = ", ".join(f'"{s}"' for s in mine)
        source = f"union({names})" if len(mine) > 1 else f'"{mine[0]}"'
        texts[f"w{w}.ss"] = (f"U = {source};\nA = avg(U, 10s, 5s);\nM = max(U, 10s, 5s);\nD = M - A;\n"
                             if len(mine) > 1 else
                             f"A = avg({source}, 10s, 5s);\nM = max({source}, 10s, 5s);\nD = M - A;\n")
    return texts, fleet


def sweep_workloads(kind: str, xs: Sequence[int]) -> list[tuple[int, dict[str, str], list[Sensor]]]:
    """The workflows and sensors of each point of a sweep: (x, {file name: text}, sensors)."""
    if kind == "shared":
        return [(x, *shared_workflows(x)) for x in xs]
    points = []
    for n in xs:
        workload = bridge_workload(128, n)
        points.append((n, {f"{name}.ss": text for name, text in workload.workflows.items()}, workload.sensors))
    return points


# -------------------------------------------------------------------------- measured

@dataclass
class Measured:
    readings: int
    referenced: int
    ours_raw_tuples: int  # readings (and quarantined lines) that crossed the shuffle of raw readings, once each
    ours_raw_records: int  # the Spark records that carried them: packets of readings
    ours_raw_bytes: int
    ours_tuples: int  # with the tuples forwarded over cut edges and the results passing the second operator
    ours_crossing: int  # tuples between partitions: the raw readings and what crossed cut edges
    ours_bytes: int
    ours_seconds: float
    naive_records: int | None = None
    naive_bytes: int | None = None
    naive_seconds: float | None = None
    naive_note: str = ""
    # Our runtime under the naive placement "hash by workflow" (codegen/placements.py).
    by_workflow_tuples: int | None = None
    by_workflow_records: int | None = None
    by_workflow_bytes: int | None = None
    by_workflow_seconds: float | None = None
    by_workflow_same: bool | None = None  # its results equal the compiled job's, row for row
    # ... and under "hash by sensor id": a stage per level of the graph, every edge a shuffle.
    by_sensor_tuples: int | None = None  # the raw readings and the tuples forwarded over every edge
    by_sensor_crossing: int | None = None  # of those, the ones that went to another partition
    by_sensor_records: int | None = None  # all its Spark shuffle records (relayed rows too)
    by_sensor_bytes: int | None = None
    by_sensor_seconds: float | None = None
    by_sensor_same: bool | None = None
    by_sensor_stages: int | None = None


def measure(files: Sequence[str], data: str, sensors: str | None, partitions: int, work: Path,
            naive: bool = True, echo=print, warm_up: bool = True) -> Measured:
    """Run the compiled job, our runtime under the naive placements hash by workflow and hash by
    sensor id (and the naive job) with --once on local Spark over `data`, and read the tuples that
    crossed their shuffles from Spark's status store."""
    from sensorscript.compiler import compile_workflows, open_registry
    from sensorscript.measure import shuffled, streaming_jobs
    from sensorscript.running import load_job
    from sensorscript.runtime.job import run, spark_session

    compiled = compile_workflows(files, work / "job", sensors, partitions)
    registry = open_registry(sensors)
    loaded = load(files, registry.ids() if registry is not None else None)
    module = load_job(work / "job")
    spark = spark_session(module.JOB, "local[2]")
    # A first run, not measured, so that no measured run pays for the JVM compiling Spark's code
    # (the runs below would otherwise be timed cold, warm and warm).
    if warm_up:
        run(module.JOB, module.build_query, data, work / "warm-up", once=True, spark=spark, echo=lambda *_: None)
    before = streaming_jobs(spark)
    started = time.monotonic()
    summary = run(module.JOB, module.build_query, data, work / "job", once=True, spark=spark, echo=lambda *_: None)
    ours_seconds = time.monotonic() - started
    ours_jobs = streaming_jobs(spark) - before
    ours = shuffled(spark, ours_jobs)
    referenced = set(compiled.plan.frequencies)
    readings = referenced_count = 0
    for path in sorted(Path(data).rglob("*")):
        if path.is_file():
            for line in path.read_text().splitlines():
                if not line.strip() or line.startswith("sensor_id,"):
                    continue
                readings += 1
                referenced_count += line.split(",", 1)[0] in referenced
    raw_tuples = _packed_tuples(summary, module.JOB)
    # The second shuffle: tuples forwarded over cut edges (packed per edge and batch, as the job
    # counts them), the first operators' results, counters and heartbeats (a record each).
    second = ours.records - ours.from_input - summary.forward_packets + summary.forwarded
    echo(f"measured the job: {raw_tuples:,} readings crossed its shuffle in {ours.from_input:,} packets, "
         f"{second:,} tuples its second shuffle")
    result = Measured(readings, referenced_count, raw_tuples, ours.from_input, ours.from_input_bytes,
                      raw_tuples + second, raw_tuples + summary.forwarded_remote, ours.bytes, ours_seconds)
    _measure_by_workflow(result, loaded.workflows, registry, data, module, spark, work, echo)
    _measure_by_sensor(result, compiled.plan, data, module, spark, work, echo)
    if naive:
        try:
            text = render_naive(loaded.workflows, loaded.sources)
        except NotExpressible as exc:
            result.naive_note = exc.diagnostics[0].message
            return result
        folder = work / "naive"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "naive_job.py").write_text(text)
        naive_module = load_job(folder, "naive_job.py")
        naive_module.print = lambda *a, **k: None
        before = streaming_jobs(spark)
        started = time.monotonic()
        naive_module.run(spark, data, folder, once=True)
        result.naive_seconds = time.monotonic() - started
        naive_shuffled = shuffled(spark, streaming_jobs(spark) - before)
        result.naive_records, result.naive_bytes = naive_shuffled.records, naive_shuffled.bytes
        echo(f"measured the naive job: {result.naive_records:,} tuples crossed its shuffles")
    return result


def _packed_tuples(summary, job) -> int:
    """The tuples in the packets of a job's raw shuffle (Spark counts the packets): the job's own
    count of each reading it received (a copied one once per partition), each quarantined line,
    and one end-of-input marker per partition."""
    return summary.readings + summary.quarantined + job.partitions


@dataclass(frozen=True)
class _PlacedRun:
    summary: object  # the job's RunSummary
    shuffled: object  # measure.Shuffled
    seconds: float
    same: bool  # its results equal the compiled job's, row for row


def _run_placed(placed, module, data: str, spark, work: Path, folder: str) -> _PlacedRun:
    """Run the compiled job's query with another placement (`placed`), over `data` with --once, and
    read its shuffles; compare its results with the compiled job's (in WORK/job)."""
    from sensorscript.measure import shuffled, streaming_jobs
    from sensorscript.runtime.job import run
    from sensorscript.runtime.sinks import same_results, sqlite_results

    before = streaming_jobs(spark)
    started = time.monotonic()
    summary = run(placed, module.build_query, data, work / folder, once=True, spark=spark, echo=lambda *_: None)
    seconds = time.monotonic() - started
    return _PlacedRun(summary, shuffled(spark, streaming_jobs(spark) - before), seconds,
                      same_results(sqlite_results(work / "job" / "results.db"),
                                   sqlite_results(work / folder / "results.db")))


def _measure_by_workflow(result: Measured, workflows: list, registry, data: str, module, spark, work: Path,
                         echo) -> None:
    """Our runtime under the placement "hash by workflow" (every workflow whole on the partition of
    its name's hash, readings copied to each partition that reads them)."""
    from sensorscript.codegen.placements import by_workflow

    placed = by_workflow(module.JOB, workflows, registry)
    done = _run_placed(placed, module, data, spark, work, "by-workflow")
    # One shuffle, no second operator: everything that crossed is in its packets.
    result.by_workflow_tuples = _packed_tuples(done.summary, placed)
    result.by_workflow_records, result.by_workflow_bytes = done.shuffled.from_input, done.shuffled.from_input_bytes
    result.by_workflow_seconds, result.by_workflow_same = done.seconds, done.same
    echo(f"measured hash by workflow: {result.by_workflow_tuples:,} readings crossed its shuffle")


def _measure_by_sensor(result: Measured, plan, data: str, module, spark, work: Path, echo) -> None:
    """Our runtime under the placement "hash by sensor id" (codegen/placements.by_sensor): a reading
    goes to its sensor's hash, every other edge of the graph is a shuffle of its own."""
    from sensorscript.codegen.placements import by_sensor

    placed = by_sensor(module.JOB, plan)
    done = _run_placed(placed, module, data, spark, work, "by-sensor")
    # Every forward is an edge's shuffle (to another partition or not: Spark writes it either way).
    result.by_sensor_tuples = _packed_tuples(done.summary, placed) + done.summary.forwarded
    result.by_sensor_crossing = _packed_tuples(done.summary, placed) + done.summary.forwarded_remote
    result.by_sensor_records, result.by_sensor_bytes = done.shuffled.records, done.shuffled.bytes
    result.by_sensor_stages = 1 + len(placed.stages_after_first())
    result.by_sensor_seconds, result.by_sensor_same = done.seconds, done.same
    echo(f"measured hash by sensor id: {result.by_sensor_tuples:,} tuples crossed its "
         f"{result.by_sensor_stages} stages' shuffles")


def measure_sweeps(seconds: int, work: Path, shared: Sequence[int] = SWEEP_SHARED,
                   sensors: Sequence[int] = SWEEP_SENSORS, echo=print) -> dict[str, list[MeasuredPoint]]:
    """Run every point of both sweeps for real: `seconds` (whole: a sensor then has exactly
    seconds x its frequency readings) of generated readings of the point's sensors; the
    compiled job and our runtime under both naive placements, one after the other in one
    Spark session. Returns tuples per minute per point, as the model gives them."""
    from sensorscript.workload import write_readings

    result: dict[str, list[MeasuredPoint]] = {}
    first = True
    for kind, xs in (("shared", shared), ("sensors", sensors)):
        result[kind] = []
        for x, texts, fleet in sweep_workloads(kind, xs):
            folder = work / f"sweep-{kind}-{x}"
            (folder / "workflows").mkdir(parents=True, exist_ok=True)
            files = []
            for name, text in sorted(texts.items()):
                (folder / "workflows" / name).write_text(text)
                files.append(str(folder / "workflows" / name))
            registry = SensorRegistry.create(folder / "sensors.db")
            registry.put(fleet)
            registry.close()
            write_readings(fleet, folder / "data", seconds, files=1)
            m = measure(files, str(folder / "data"), str(folder / "sensors.db"), SWEEP_PARTITIONS, folder / "run",
                        naive=False, echo=lambda *_: None, warm_up=first)
            first = False
            per_minute = 60 / seconds
            # Per minute, as the model: without the end-of-input markers (one per partition).
            result[kind].append(MeasuredPoint(
                (m.ours_crossing - SWEEP_PARTITIONS) * per_minute, m.referenced * per_minute,
                (m.by_sensor_tuples - SWEEP_PARTITIONS) * per_minute,
                (m.by_workflow_tuples - SWEEP_PARTITIONS) * per_minute,
                bool(m.by_sensor_same and m.by_workflow_same)))
            echo(f"measured the sweep over {'shared sensors' if kind == 'shared' else 'sensors'}: "
                 f"{x} ({len(texts)} workflows, {m.referenced:,} readings)")
    return result


class MeasuringFailed(RuntimeError):
    """The child process that runs the measured jobs failed; its output was passed on."""


def measure_quietly(files: Sequence[str], data: str | None, sensors: str | None, partitions: int, work: Path,
                    naive: bool, echo, sweep_seconds: int | None = None, sweep_shared_points: Sequence[int] = (),
                    sweep_counts: Sequence[int] = ()) -> tuple[Measured | None, dict[str, list[MeasuredPoint]]]:
    """`measure` (over `data`) and `measure_sweeps` (with `sweep_seconds`) in one child process whose
    output passes through the filter of Spark's chatter (the JVM and its Python workers write to
    the terminal of the process that starts them)."""
    import json
    import sys

    from sensorscript.running import run_quietly

    work.mkdir(parents=True, exist_ok=True)
    answer = work / "measured.json"
    answer.unlink(missing_ok=True)
    command = [sys.executable, "-m", "sensorscript.report", "--partitions", str(partitions), "--work", str(work),
               *(["--data", data] if data else []), *(["--sensors", sensors] if sensors else []),
               *([] if naive else ["--no-naive"]), *files]
    if sweep_seconds:
        command += ["--sweep-seconds", str(sweep_seconds), "--sweep-shared", ",".join(map(str, sweep_shared_points)),
                    "--sweep-counts", ",".join(map(str, sweep_counts))]
    code = run_quietly(command, echo)
    if code != 0 or not answer.exists():
        raise MeasuringFailed(f"measuring on local Spark failed (exit {code}); see the lines above")
    fields = json.loads(answer.read_text())
    measured = fields["measured"]
    measured = Measured(**{f.name: measured[f.name] for f in dataclasses.fields(Measured)}) if measured else None
    return measured, {kind: [MeasuredPoint(**point) for point in points] for kind, points in fields["sweeps"].items()}


def _measure_main(argv: list[str] | None = None) -> None:
    """The child process of `measure_quietly`: measure, then write WORK/measured.json."""
    import argparse
    import json

    def numbers(text: str) -> list[int]:
        return [int(x) for x in text.split(",") if x.strip()]

    parser = argparse.ArgumentParser()
    parser.add_argument("files", nargs="*")
    parser.add_argument("--data")
    parser.add_argument("--sensors")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--work", required=True)
    parser.add_argument("--no-naive", action="store_true")
    parser.add_argument("--sweep-seconds", type=int)
    parser.add_argument("--sweep-shared", type=numbers, default=[])
    parser.add_argument("--sweep-counts", type=numbers, default=[])
    args = parser.parse_args(argv)
    work = Path(args.work)
    measured = (measure(args.files, args.data, args.sensors, args.partitions, work, not args.no_naive)
                if args.data else None)
    sweeps = (measure_sweeps(args.sweep_seconds, work, args.sweep_shared, args.sweep_counts)
              if args.sweep_seconds else {})
    (work / "measured.json").write_text(json.dumps({
        "measured": dataclasses.asdict(measured) if measured else None,
        "sweeps": {kind: [dataclasses.asdict(p) for p in points] for kind, points in sweeps.items()}}))


# ---------------------------------------------------------------------------- output

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


def build(files: Sequence[str], sensors: str | None = None, partitions: int = 2, measure_data: str | None = None,
          work: Path | None = None, naive: bool = True, echo=print, sizes: Sequence[int] = GENERATED_SIZES,
          sweep_counts: Sequence[int] = SWEEP_SENSORS, sweep_seconds: int | None = None,
          sweep_shared_points: Sequence[int] = SWEEP_SHARED) -> Report:
    """The report of `files`. `measure_data`: also run the jobs over it; `sweep_seconds`: also run
    every point of both sweeps over that many seconds of generated readings."""
    from sensorscript.compiler import open_registry

    registry = open_registry(sensors)
    echo("counting lines ...")
    lines = line_table(files, registry, partitions, sizes)
    loaded = load(files, registry.ids() if registry is not None else None)
    cost = make_plan(loaded.workflows, registry, partitions).cost
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
                                           Path(work), naive, echo, sweep_seconds, sweep_shared_points, sweep_counts)
        for points, kind in ((by_sensors, "sensors"), (by_shared, "shared")):
            for i, point in enumerate(sweeps.get(kind, [])):
                points[i] = dataclasses.replace(points[i], measured=point)
    return Report("SensorScript report", lines, cost, partitions, by_sensors, by_shared, measured,
                  [str(f) for f in files])


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


def tables(report: Report) -> dict[str, tuple[list[str], list[list[str]]]]:
    """Every table of the report as (header, rows) of text: Markdown and HTML render the same."""
    lines = (["workflows", "script lines", "generated job lines", "naive PySpark lines", "naive / script",
              "naive / generated job"],
             [[row.label, _int(row.script), _int(row.job), _int(row.naive) if row.naive else "cannot be written",
               _ratio(row.naive, row.script), _ratio(row.naive, row.job)] for row in report.lines])
    c = report.cost
    cost = (["placement", "tuples/min crossing the network", "ours saves"],
            [["ours (frequency-weighted greedy)", _int(c.ours), "–"],
             ["lower bound (each referenced raw tuple once)", _int(c.lower_bound), "–"],
             ["naive: hash by sensor id", _int(c.naive_sensor_hash), f"{c.saving(c.naive_sensor_hash):.1%}"],
             ["naive: hash by workflow", _int(c.naive_workflow_hash), f"{c.saving(c.naive_workflow_hash):.1%}"]])

    def sweep_table(points: list[CostPoint], name: str):
        header = [name, "ours", "lower bound", "hash by sensor id", "hash by workflow", "saving vs sensor id",
                  "saving vs workflow"]
        rows = [[str(p.x), _int(p.cost.ours), _int(p.cost.lower_bound), _int(p.cost.naive_sensor_hash),
                 _int(p.cost.naive_workflow_hash), f"{p.cost.saving(p.cost.naive_sensor_hash):.1%}",
                 f"{p.cost.saving(p.cost.naive_workflow_hash):.1%}"] for p in points]
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


def _plot(points: list[CostPoint], xlabel: str, title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure, axes = plt.subplots(figsize=(8.6, 4.0), dpi=110)
    xs = [p.x for p in points]
    for label, values, style, measured in (
            ("hash by workflow", [p.cost.naive_workflow_hash for p in points], "s--", "by_workflow"),
            ("hash by sensor id", [p.cost.naive_sensor_hash for p in points], "^--", "by_sensor"),
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


def _lines_plot(rows: list[LineCount], path: Path) -> None:
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


PLOTS = {"lines": "lines.png", "by_sensors": "cost_by_sensors.png", "by_shared": "cost_by_shared.png"}

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
     "sensor id counts every edge that is not sensor -> window, as the paper's baseline does (each is a shuffle "
     "of its own), also where both ends hash to one partition; ours and hash by workflow count what goes to "
     "another partition."),
    ("by_shared", "Network against the number of shared sensors n_s",
     "16 sensors at 20 Hz and 8 workflows; every workflow reads the n_s shared sensors and its own share of "
     f"the others (union, two windows, their difference); {SWEEP_PARTITIONS} partitions. Our plan keeps the "
     "most loaded partition within 1.1 × the average; hashing by workflow keeps no such bound (8 workflows "
     "hashed onto 4 partitions), which is how it can beat our plan where few sensors are shared: balance "
     "forces our plan to cut the one connected group that shared sensors make of all workflows, and each "
     "partition then receives the shared sensors once. Measured columns as above."),
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
     "graph): its tuples are the readings and what crossed each edge, as the job counts them (the paper's "
     "baseline, and the model, count every such edge; between partitions only, the edges whose ends hash to "
     "one partition drop out); its Spark records also count the rows each later stage passes on to the next. The "
     "naive job's window aggregations combine readings before their shuffles (partial aggregation), so it "
     "writes few shuffle records; what it pays instead is reading the input once per window statement and "
     "copying every reading into each window that holds it."),
]


def markdown(report: Report) -> str:
    parts = [f"# {report.title}", "", f"Workflows: {len(report.files)} file(s): "
             + ", ".join(f"`{Path(f).name}`" for f in report.files), ""]
    for key, (header, rows) in tables(report).items():
        title, text = next((t, d) for k, t, d in SECTIONS if k == key)
        parts += [f"## {title}", "", text.format(partitions=report.partitions), "",
                  "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        parts += ["| " + " | ".join(row) + " |" for row in rows]
        if key in PLOTS:
            parts += ["", f"![{title}]({PLOTS[key]})"]
        parts.append("")
    for row in report.lines:
        if row.naive is None:
            parts.append(f"Naive job for {row.label}: {row.naive_note}.")
    return "\n".join(parts).rstrip() + "\n"


def html_page(report: Report) -> str:
    out = ["<!doctype html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
           f"<title>{html.escape(report.title)}</title>",
           "<style>body{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;padding:0 1em;color:#222}"
           "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em}"
           "td:not(:first-child){text-align:right}th{background:#f3f3f3}img{max-width:100%}</style>",
           "</head><body>", f"<h1>{html.escape(report.title)}</h1>",
           "<p>Workflows: " + ", ".join(f"<code>{html.escape(Path(f).name)}</code>" for f in report.files) + "</p>"]
    for key, (header, rows) in tables(report).items():
        title, text = next((t, d) for k, t, d in SECTIONS if k == key)
        out += [f"<h2>{html.escape(title)}</h2>", f"<p>{html.escape(text.format(partitions=report.partitions))}</p>",
                "<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"]
        out += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows]
        out.append("</table>")
        if key in PLOTS:
            out.append(f"<img src=\"{PLOTS[key]}\" alt=\"{html.escape(title)}\">")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def write(report: Report, folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    _lines_plot(report.lines, folder / PLOTS["lines"])
    _plot(report.by_sensors, "sensors n", "Network cost against the number of sensors", folder / PLOTS["by_sensors"])
    _plot(report.by_shared, "shared sensors n_s (of 16)", "Network cost against shared sensors",
          folder / PLOTS["by_shared"])
    (folder / "report.md").write_text(markdown(report))
    (folder / "report.html").write_text(html_page(report))
    return folder / "report.md", folder / "report.html"


if __name__ == "__main__":
    _measure_main()
