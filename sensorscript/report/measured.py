"""Measured network traffic: the compiled job, our runtime under the naive placements (hash by
workflow, hash by sensor id) and the naive PySpark job, run with --once on local Spark, with the
tuples that crossed their shuffles read from Spark's own counters (`report/shuffles.py`).

The runs happen in a child process (`measure_quietly`, `python -m sensorscript.report`)
whose output passes through the filter of Spark's chatter.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from sensorscript.codegen.naive import NotExpressible, render_naive
from sensorscript.parser import load
from sensorscript.registry import SensorRegistry
from sensorscript.report.network import SWEEP_PARTITIONS, SWEEP_SENSORS, SWEEP_SHARED, MeasuredPoint, sweep_workloads


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
            naive: bool = True, echo=print, warm_up: bool = True, epsilon: float = 0.1) -> Measured:
    """Run the compiled job, our runtime under the naive placements hash by workflow and hash by
    sensor id (and the naive job) with --once on local Spark over `data`, and read the tuples that
    crossed their shuffles from Spark's status store."""
    from sensorscript.compiler import compile_workflows, open_registry
    from sensorscript.report.shuffles import shuffled, streaming_jobs
    from sensorscript.runtime.plan.loading import load_job
    from sensorscript.runtime.control.run_loop import run
    from sensorscript.runtime.control.run_options import RunSettings
    from sensorscript.runtime.control.session import spark_session

    compiled = compile_workflows(files, work / "job", sensors, partitions, epsilon)
    registry = open_registry(sensors)
    loaded = load(files, registry.ids() if registry is not None else None)
    module = load_job(work / "job")
    spark = spark_session(module.JOB, "local[2]")
    # A first run, not measured, so that no measured run pays for the JVM compiling Spark's code
    # (the runs below would otherwise be timed cold, warm and warm).
    if warm_up:
        run(module.JOB, module.build_query, RunSettings(out=work / "warm-up", input=data, once=True),
            spark, echo=lambda *_: None)
    before = streaming_jobs(spark)
    started = time.monotonic()
    summary = run(module.JOB, module.build_query, RunSettings(out=work / "job", input=data, once=True),
                  spark, echo=lambda *_: None)
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
    from sensorscript.report.shuffles import shuffled, streaming_jobs
    from sensorscript.runtime.control.run_loop import run
    from sensorscript.runtime.control.run_options import RunSettings
    from sensorscript.runtime.output.sinks import same_results, sqlite_results

    before = streaming_jobs(spark)
    started = time.monotonic()
    summary = run(placed, module.build_query, RunSettings(out=work / folder, input=data, once=True),
                  spark, echo=lambda *_: None)
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
                    sweep_counts: Sequence[int] = (), epsilon: float = 0.1,
                    ) -> tuple[Measured | None, dict[str, list[MeasuredPoint]]]:
    """`measure` (over `data`) and `measure_sweeps` (with `sweep_seconds`) in one child process whose
    output passes through the filter of Spark's chatter (the JVM and its Python workers write to
    the terminal of the process that starts them)."""
    import json
    import sys

    from sensorscript.running import run_quietly

    work.mkdir(parents=True, exist_ok=True)
    answer = work / "measured.json"
    answer.unlink(missing_ok=True)
    command = [sys.executable, "-m", "sensorscript.report", "--partitions", str(partitions), "--epsilon", repr(epsilon),
               "--work", str(work),
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


def measure_main(argv: list[str] | None = None) -> None:
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
    parser.add_argument("--epsilon", type=float, default=0.1)
    parser.add_argument("--work", required=True)
    parser.add_argument("--no-naive", action="store_true")
    parser.add_argument("--sweep-seconds", type=int)
    parser.add_argument("--sweep-shared", type=numbers, default=[])
    parser.add_argument("--sweep-counts", type=numbers, default=[])
    args = parser.parse_args(argv)
    work = Path(args.work)
    measured = (measure(args.files, args.data, args.sensors, args.partitions, work, not args.no_naive,
                        epsilon=args.epsilon)
                if args.data else None)
    sweeps = (measure_sweeps(args.sweep_seconds, work, args.sweep_shared, args.sweep_counts)
              if args.sweep_seconds else {})
    (work / "measured.json").write_text(json.dumps({
        "measured": dataclasses.asdict(measured) if measured else None,
        "sweeps": {kind: [dataclasses.asdict(p) for p in points] for kind, points in sweeps.items()}}))
