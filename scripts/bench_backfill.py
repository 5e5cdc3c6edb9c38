"""A backfill beside a running job: how fast it reads the archive, and what it costs the job.

    .venv/bin/python scripts/bench_backfill.py [--workflows 1024] [--sensors 1000] [--archive-minutes 60]
                                               [--live-seconds 60] [--partitions 2]

Compiles the seeded bridge workload of scripts/bench_job.py (late policy correct, so the job keeps
its archive) and fills OUT/archive with `--archive-minutes` of the fleet's readings, as stage 1
writes it (a file per partition and 10-second micro-batch, by hour). An update then adds one
workflow (`sscript update`, mode clear): the first workflow's streams (shared with it) with the two
aggregates it does not take of them, and its backfill runs from the start of the archive to the switch
(runtime/control/backfill.py `run`, as `sscript backfill` runs it, at nice 10):
  backfill alone: archived readings it read and computed per second;
  live job: the updated job (--once, local[2], SQLite sink) over `--live-seconds` of the fleet's
            readings after the archive, alone and while backfills run beside it in another
            process, one after the other for as long as it runs (alternated, `--pairs` times:
            the best of each), and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from sensorscript.compiler import compile_workflows
from sensorscript.registry import SensorRegistry
from sensorscript.runtime.control import backfill as backfills
from sensorscript.runtime.control.run_loop import run
from sensorscript.runtime.control.run_options import RunSettings
from sensorscript.runtime.control.session import spark_session
from sensorscript.runtime.ingest import archive
from sensorscript.runtime.plan import versions
from sensorscript.runtime.plan.loading import load_job
from sensorscript.update import update_workflows
from sensorscript.workload import bridge_workload, write_readings

START_MS = 1_767_225_600_000
BATCH_MS = 10_000


def fill_archive(job, frequencies: dict[str, float], folder: Path, minutes: float, seed: int = 7) -> int:
    """`minutes` of readings of every sensor the job reads, at its frequency, archived as stage 1
    archives them; returns how many."""
    rng = np.random.default_rng(seed)
    sensors = sorted(job.sensors.items())
    total = 0
    for batch, t0 in enumerate(range(START_MS, START_MS + int(minutes * 60_000), BATCH_MS)):
        for partition in range(job.partitions):
            codes, stamps = [], []
            for sensor_id, (code, where) in sensors:
                if where != partition:
                    continue
                hz = frequencies[sensor_id]
                step = 1000.0 / hz
                t = t0 + (np.arange(int(BATCH_MS / step)) * step).astype(np.int64)
                codes.append(np.full(len(t), code, np.int64))
                stamps.append(t)
            if not codes:
                continue
            code, ts = np.concatenate(codes), np.concatenate(stamps)
            value = 10 * np.sin(ts / 600_000.0) + rng.normal(0, 1, len(ts))
            archive.write(str(folder), partition, batch, code, ts, value)
            total += len(ts)
    return total


def backfill_once(out: Path) -> dict:
    """The backfill of the newest version, over the whole archive, in this process (local[1])."""
    number = versions.numbers(out)[-1]
    job, _ = versions.load(out, number)
    switch_at = versions.applied(out, number)["switch_at"]
    ends = {name: switch_at for name in backfills.streams_of(out, number, job)}
    backfills.yield_to_the_job()
    folder = out / archive.FOLDER
    start = time.perf_counter()
    done = backfills.run(out, backfills.request(out, number, None), job, f"sqlite:{out / 'results.db'}", ends,
                         lambda sensors, lo, hi: archive.read(folder, sensors, lo, hi), archive.earliest(folder),
                         echo=lambda line: None)
    seconds = time.perf_counter() - start
    return {"readings": done.readings, "rows": done.rows, "seconds": seconds, "streams": sorted(ends)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflows", type=int, default=1024)
    parser.add_argument("--sensors", type=int, default=1000)
    parser.add_argument("--archive-minutes", type=float, default=60)
    parser.add_argument("--live-seconds", type=float, default=60)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=2, help="live runs alone and beside a backfill, in turn")
    parser.add_argument("--keep", help="work in this folder and keep it")
    parser.add_argument("--no-warm-up", dest="warm_up", action="store_false",
                        help="leave out the live job's warm-up run (a smoke run; its rates are then a cold job's)")
    parser.add_argument("--backfill-only", metavar="OUT", help=argparse.SUPPRESS)  # the process beside the job
    parser.add_argument("--until-file", help=argparse.SUPPRESS)  # ... backfilling again until this file exists
    args = parser.parse_args()
    if args.backfill_only:
        done = [backfill_once(Path(args.backfill_only))]
        while args.until_file and not Path(args.until_file).exists():
            done.append(backfill_once(Path(args.backfill_only)))
        print(json.dumps({"runs": len(done), "readings": sum(d["readings"] for d in done),
                          "seconds": sum(d["seconds"] for d in done)}))
        return
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(args.keep or tempfile.mkdtemp(prefix="sscript-bench-backfill-"))
    shutil.rmtree(work, ignore_errors=True)
    (work / "workflows").mkdir(parents=True)
    workload = bridge_workload(args.workflows, args.sensors)
    for name, text in workload.workflows.items():
        (work / "workflows" / f"{name}.ss").write_text(text)
    registry = work / "sensors.db"
    SensorRegistry.create(registry).put(workload.sensors)
    files = sorted(str(p) for p in (work / "workflows").glob("*.ss"))
    out = work / "out"
    compile_workflows(files, out, str(registry), args.partitions, late="correct")
    job = load_job(out).JOB

    t0 = time.perf_counter()
    archived = fill_archive(job, workload.frequencies, out / archive.FOLDER, args.archive_minutes)
    size = sum(f.stat().st_size for f in (out / archive.FOLDER).rglob("*.parquet"))
    print(f"archive: {archived:,} readings of {len(job.sensors)} sensors over {args.archive_minutes:g} min "
          f"({size / 2**20:,.0f} MiB, written in {time.perf_counter() - t0:.0f} s)")

    # The update: one more workflow over the first one's streams (shared, with their state and
    # slices) with the two aggregates it does not take of them: its history needs all four sensors.
    lines = workload.workflows["wf0000"].splitlines()
    taken = {line.split(" = ")[1].split("(")[0] for line in lines if line.startswith("out_")}
    outer = next(line for line in lines if line.startswith("out_")).split("(", 1)[1]
    lines = [line for line in lines if not line.startswith("out_")]
    lines += [f"out_{f} = {f}({outer}" for f in ("avg", "max", "min", "sum") if f not in taken]
    added = work / "added.ss"
    added.write_text("\n".join(lines) + "\n")
    updated = update_workflows([*files, str(added)], out, str(registry))
    switch_at = START_MS + int(args.archive_minutes * 60_000)
    versions.record_applied(out, updated.version, None, switch_at)
    print(f"update: plan version {updated.version} adds {', '.join(updated.changes.outputs_added)} "
          f"({len(updated.changes.added)} computations)")

    alone = backfill_once(out)
    print(f"backfill alone: {alone['readings']:,} archived readings in {alone['seconds']:.1f} s: "
          f"{alone['readings'] / alone['seconds']:,.0f} readings/s, {alone['rows']:,} rows written "
          f"({', '.join(alone['streams'])})")

    live = work / "live"
    readings = write_readings(workload.sensors, live, args.live_seconds, start_ms=switch_at, files=4)
    print(f"live input: {readings:,} readings of the fleet's {len(workload.sensors):,} sensors over "
          f"{args.live_seconds:g} s")
    module = load_job(out)
    spark = spark_session(module.JOB, "local[2]")
    warm = work / "warm"
    warm.mkdir()
    shutil.copy(sorted(live.iterdir())[0], warm / "part.csv")
    if args.warm_up:
        run(module.JOB, module.build_query, RunSettings(out=work / "warm-out", input=str(warm), once=True),
            spark, echo=lambda _: None)
    rates: dict[str, float] = {}
    for attempt, beside in enumerate((False, True) * args.pairs):
        process = None
        stop = work / f"stop-{attempt}"
        if beside:  # backfilling, again and again, for as long as the job runs
            process = subprocess.Popen([sys.executable, __file__, "--backfill-only", str(out), "--until-file", str(stop)],
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            record = versions.folder(out, updated.version) / versions.BACKFILL
            while process.poll() is None and json.loads(record.read_text()).get("hours_done", 0) == 0:
                time.sleep(0.05)  # until it reads the archive (its Spark has started)
        settings = RunSettings(out=work / f"live-out-{attempt}", input=str(live), once=True)
        summary = run(module.JOB, module.build_query, settings, spark,
                      echo=lambda _: None)
        overlap = ""
        if process is not None:
            stop.touch()
            result = json.loads(process.communicate()[0].strip().splitlines()[-1])
            overlap = (f"; beside it {result['runs']} backfills, {result['readings'] / result['seconds']:,.0f} "
                       f"readings/s")
        key = "beside" if beside else "alone"
        rates[key] = max(rates.get(key, 0.0), readings / summary.seconds)
        print(f"live job {'with a backfill beside it' if beside else 'alone':<27} {readings / summary.seconds:>10,.0f} "
              f"readings/s ({summary.seconds:.1f} s){overlap}")
    print(f"live job with a backfill / alone: {rates['beside'] / rates['alone']:.2f} (best of {args.pairs} each)")
    spark.stop()
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
