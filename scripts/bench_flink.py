"""The compiled job against Flink SQL on the 8-window workload, in one run on one input.

    bash scripts/flink_env.sh     # once: .venv-flink with the pinned apache-flink (not a project dependency)
    .venv/bin/python scripts/bench_flink.py [--sensors 1000] [--rows 10000000] [--windows 8] [--keep DIR]
    .venv/bin/python scripts/bench_flink.py --without-flink ...   # ours only, where Flink is not installed

Generates the seeded bridge fleet (`--sensors` sensors of 21 types, most at 20 Hz or more) and
enough seconds of readings for about `--rows` readings, in `--files` CSV files, once. Every sensor
gets the same `--windows` sliding windows (the (length, slide) pairs of the generator, 10 s to
10 min, with mixed aggregates), as one SensorScript workflow per sensor and as Flink SQL HOP
window queries, and both read the same files with 2 cores:
  ours:  the compiled job on local[2] with --once (all windows emitted), SQLite sink, run as
         scripts/bench_job.py runs it, warm (a first run on the input's first 200,000 lines);
         timed from the start of the query to its end (the Spark session is already up);
  Flink: a streaming-mode Flink SQL job (`.venv-flink/bin/python`, a separate process) over the
         bounded files, parallelism 2, HOP window TVFs grouped by sensor, filesystem CSV sink;
         timed from the submission of the INSERT (planning, the local mini-cluster's start and the
         job) to its end; the JVM's and PyFlink's start are left out but reported.
The Flink watermark lags the event time by the input's whole span (`--flink-delay`, default),
because Flink's file source reads the files in no fixed order and a shorter delay would drop
readings as late; so Flink, like ours with --once, fires its windows when the input ends.
Then both results are compared window by window (same windows, values within 1e-9), and
readings per second of both and their ratio are printed. `--without-flink` runs everything but
Flink (no .venv-flink needed: tests/test_scripts.py smoke-runs it so) and says that Flink was not run.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from sensorscript.compiler import compile_workflows
from sensorscript.registry import SensorRegistry
from sensorscript.runtime.plan.loading import load_job
from sensorscript.runtime.control.run_loop import run
from sensorscript.runtime.control.run_options import RunSettings
from sensorscript.runtime.control.session import spark_session
from sensorscript.workload import WINDOWS_MS, bridge_sensors, write_readings

ROOT = Path(__file__).resolve().parent.parent
FLINK_PYTHON = ROOT / ".venv-flink" / "bin" / "python"
AGGREGATES = ("avg", "max", "min", "sum", "count")
FLINK_AGGREGATES = {"avg": "AVG(`value`)", "max": "MAX(`value`)", "min": "MIN(`value`)", "sum": "SUM(`value`)",
                    "count": "CAST(COUNT(*) AS DOUBLE)"}

# The Flink program, run by .venv-flink/bin/python with one JSON argument; prints one JSON line.
FLINK_PROGRAM = r'''
import json, sys, time
started = time.perf_counter()
config = json.loads(sys.argv[1])
from pyflink.table import EnvironmentSettings, TableEnvironment

env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
conf = env.get_config()
conf.set("parallelism.default", str(config["parallelism"]))
conf.set("table.exec.resource.default-parallelism", str(config["parallelism"]))
conf.set("table.local-time-zone", "UTC")
conf.set("pipeline.name", "bench_flink")
ready = time.perf_counter()


def interval(ms):  # Flink SQL has no MILLISECOND interval, and 'N' SECOND allows at most 99
    seconds, ms = divmod(ms, 1000)
    return (f"INTERVAL '{seconds // 86400} {seconds // 3600 % 24:02}:{seconds // 60 % 60:02}:{seconds % 60:02}"
            f".{ms:03}' DAY TO SECOND(3)")


# The header line `sensor_id,ts,value` parses to nulls with ignore-parse-errors: its rowtime is
# the epoch (a null rowtime stops the job; the epoch never moves the watermark), and `good` drops it.
env.execute_sql(f"""
    CREATE TABLE readings (
        sensor_id STRING, ts BIGINT, `value` DOUBLE,
        rowtime AS TO_TIMESTAMP_LTZ(COALESCE(ts, 0), 3),
        WATERMARK FOR rowtime AS rowtime - {interval(config["delay_ms"])}
    ) WITH ('connector' = 'filesystem', 'path' = 'file://{config["data"]}', 'format' = 'csv',
            'csv.ignore-parse-errors' = 'true')""")
env.execute_sql(f"""
    CREATE TABLE results (win STRING, sensor_id STRING, window_start TIMESTAMP(3), window_end TIMESTAMP(3),
                          `value` DOUBLE)
    WITH ('connector' = 'filesystem', 'path' = 'file://{config["out"]}', 'format' = 'csv')""")
env.execute_sql("CREATE TEMPORARY VIEW good AS SELECT * FROM readings WHERE ts IS NOT NULL AND `value` IS NOT NULL")
selects = [f"""
    SELECT '{name}', sensor_id, window_start, window_end, {aggregate}
    FROM TABLE(HOP(TABLE good, DESCRIPTOR(rowtime), {interval(slide)}, {interval(length)}))
    GROUP BY sensor_id, window_start, window_end""" for name, length, slide, aggregate in config["windows"]]
submitted = time.perf_counter()
result = env.execute_sql("INSERT INTO results " + " UNION ALL ".join(selects))
result.wait()
finished = time.perf_counter()
try:
    net_ms = result.get_job_client().get_job_execution_result().result().get_net_runtime()
except Exception:  # the net runtime is a bonus; the wall time above is what is compared
    net_ms = None
print("BENCH " + json.dumps({"startup_seconds": ready - started, "job_seconds": finished - submitted,
                             "net_seconds": net_ms / 1000 if net_ms is not None else None}))
'''


def window_specs(count: int) -> list[tuple[str, int, int, str]]:
    """`count` windows (name, length ms, slide ms, aggregate): the generator's pairs, aggregates in turn."""
    pairs = sorted(WINDOWS_MS)
    return [(f"W{i + 1}", *pairs[i % len(pairs)], AGGREGATES[i % len(AGGREGATES)]) for i in range(count)]


def write_workflows(folder: Path, sensors, windows) -> list[str]:
    """One workflow per sensor: s0000.ss holds `W1 = avg("SENSOR", 10000, 5000);` and the rest."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for index, sensor in enumerate(sensors):
        (folder / f"s{index:04d}.ss").write_text("".join(
            f'{name} = {aggregate}("{sensor.sensor_id}", {length}, {slide});\n'
            for name, length, slide, aggregate in windows))
    return sorted(str(p) for p in folder.glob("*.ss"))


def fleet(count: int, rows: int, keep: str | None, prefix: str, need_flink: bool):
    """The set-up both Flink comparisons share: the work folder (KEEP, or a new temporary one), the
    seeded bridge fleet of `count` sensors, the seconds of readings that make about `rows`, and the
    fleet's registry in the work folder: (work, sensors, seconds, registry)."""
    if need_flink and not FLINK_PYTHON.exists():
        sys.exit(f"{FLINK_PYTHON} not found: run 'bash scripts/flink_env.sh' first")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(keep or tempfile.mkdtemp(prefix=prefix)).resolve()
    work.mkdir(parents=True, exist_ok=True)
    sensors = bridge_sensors(count)
    registry = work / "sensors.db"
    registry.unlink(missing_ok=True)
    SensorRegistry.create(registry).put(sensors)
    return work, sensors, rows / sum(s.frequency_hz for s in sensors), registry


def compile_and_run(work: Path, files: list[str], registry: Path, data: Path, partitions: int,
                    also: tuple[str, ...] = (), warm_up: bool = True):
    """Our side of a comparison: compile into WORK/out, run with --once on local[2] (SQLite sink);
    (the run's summary, seconds to compile, the compiled plan). The job runs once first on the first
    200,000 lines of the input (a warm-up, as bench_job.py does: a streaming job runs warm, and the
    measured run does not pay for the JVM compiling its code; Flink's JIT warms during its run; none
    without `warm_up`, for a smoke run).
    `also`: sinks the job then runs with again, one after the other (each after a warm-up with it),
    a line each: its time, its result rows a second, and the driver's time writing batches (what the
    run loop says of each: its "s to write")."""
    start = time.perf_counter()
    compiled = compile_workflows(files, work / "out", str(registry), partitions)
    compile_seconds = time.perf_counter() - start
    module = load_job(work / "out")
    spark = spark_session(module.JOB, "local[2]")
    warm = work / "warm-up"
    shutil.rmtree(warm, ignore_errors=True)
    warm.mkdir()
    with open(sorted(p for p in data.iterdir() if not p.name.startswith("."))[0], "rb") as first:
        (warm / "part.csv").write_bytes(b"".join(itertools.islice(first, 200_000)))
    if warm_up:
        run(module.JOB, module.build_query, RunSettings(out=work / "warm-out", input=str(warm), once=True),
            spark, echo=lambda _: None)
    summary = run(module.JOB, module.build_query, RunSettings(out=work / "out", input=str(data), once=True), spark,
                  echo=lambda line: print("  ours: " + line))
    for sink in also:
        out = work / "out-sinks"
        if warm_up:
            run(module.JOB, module.build_query, RunSettings(out=out, input=str(warm), once=True, sink=sink), spark,
                echo=lambda _: None)
        timed = run(module.JOB, module.build_query, RunSettings(out=out, input=str(data), once=True, sink=sink), spark,
                    echo=lambda _: None)
        kind = sink.partition(":")[0]
        print(f"ours, {kind} sink: {timed.seconds:.2f} s, {timed.results:,} result rows "
              f"({timed.results / timed.seconds:,.0f} a second of the run)")
    spark.stop()
    return summary, compile_seconds, compiled


def run_ours(work: Path, files: list[str], registry: Path, data: Path, partitions: int, warm_up: bool = True):
    summary, compile_seconds, compiled = compile_and_run(work, files, registry, data, partitions, warm_up=warm_up)
    with sqlite3.connect(work / "out" / "results.db") as db:
        results = pd.read_sql_query("SELECT stream, window_start, window_end, value FROM results", db)
    workflow, _, name = zip(*(s.partition(".") for s in results["stream"])) if len(results) else ((), (), ())
    results = pd.DataFrame({"win": list(name), "sensor": [int(w[1:]) for w in workflow],
                            "window_start": results["window_start"].astype(np.int64),
                            "window_end": results["window_end"].astype(np.int64), "value": results["value"]})
    return summary, compile_seconds, compiled, results


def run_flink(work: Path, data: Path, windows, parallelism: int, delay_ms: int, sensors):
    out = work / "flink-results"
    shutil.rmtree(out, ignore_errors=True)
    program = work / "flink_job.py"
    program.write_text(FLINK_PROGRAM)
    config = {"data": str(data.resolve()), "out": str(out.resolve()), "parallelism": parallelism,
              "delay_ms": delay_ms,
              "windows": [(name, length, slide, FLINK_AGGREGATES[aggregate])
                          for name, length, slide, aggregate in windows]}
    timings, parts = run_flink_program(program, config, out)
    frames = [pd.read_csv(p, header=None, names=["win", "sensor_id", "window_start", "window_end", "value"])
              for p in parts]
    results = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["win", "sensor_id", "window_start", "window_end", "value"])
    index = {s.sensor_id: i for i, s in enumerate(sensors)}

    def epoch_ms(column):
        return (pd.to_datetime(column, utc=True) - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(milliseconds=1)

    results = pd.DataFrame({"win": results["win"], "sensor": results["sensor_id"].map(index).astype(np.int64),
                            "window_start": epoch_ms(results["window_start"]).astype(np.int64),
                            "window_end": epoch_ms(results["window_end"]).astype(np.int64),
                            "value": results["value"].astype(float)})
    return timings, results


def compare(ours: pd.DataFrame, flink: pd.DataFrame, windows, sensors) -> bool:
    """Same windows on both sides, per window spec, and the same values within 1e-9 (relative)."""
    key = ["win", "sensor", "window_start", "window_end"]
    joined = ours.merge(flink, on=key, how="outer", suffixes=("_ours", "_flink"), indicator=True)
    same = True
    for name, length, slide, aggregate in windows:
        mine = joined[joined["win"] == name]
        both = mine[mine["_merge"] == "both"]
        close = np.isclose(both["value_ours"], both["value_flink"], rtol=1e-9, atol=1e-9)
        only_ours, only_flink = (mine["_merge"] == "left_only").sum(), (mine["_merge"] == "right_only").sum()
        print(f"  {name} = {aggregate}(S, {length:_}, {slide:_}): ours {len(mine) - only_flink:,}, "
              f"Flink {len(mine) - only_ours:,} windows; {only_ours:,} only ours, {only_flink:,} only Flink, "
              f"{(~close).sum():,} values differ")
        same &= not (only_ours or only_flink or (~close).any())
    for sensor in (0, len(sensors) // 2, len(sensors) - 1):  # a few windows to look at
        both = joined[(joined["sensor"] == sensor) & (joined["_merge"] == "both")].sort_values(key).head(2)
        for row in both.itertuples():
            print(f"  {sensors[sensor].sensor_id} {row.win} [{row.window_start}, {row.window_end}): "
                  f"ours {row.value_ours:.6f}, Flink {row.value_flink:.6f}")
    return same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sensors", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=10_000_000, help="about this many readings")
    parser.add_argument("--windows", type=int, default=8, help="windows per sensor")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--flink-parallelism", type=int, default=2)
    parser.add_argument("--flink-delay", type=int, help="Flink's watermark delay in ms (default: the input's span)")
    parser.add_argument("--skip-ours", action="store_true", help="run Flink only (no comparison)")
    parser.add_argument("--without-flink", action="store_true",
                        help="run ours only, without .venv-flink: no Flink figures and no comparison (said so)")
    parser.add_argument("--keep", help="work in this folder and keep it")
    parser.add_argument("--no-warm-up", dest="warm_up", action="store_false",
                        help="leave out the warm-up runs of our job (a smoke run; its rate is then a cold job's)")
    args = parser.parse_args()
    if args.skip_ours and args.without_flink:
        parser.error("--skip-ours with --without-flink leaves nothing to run")
    work, sensors, seconds, registry = fleet(args.sensors, args.rows, args.keep, "sscript-flink-",
                                             need_flink=not args.without_flink)
    windows = window_specs(args.windows)
    data = work / "data"
    shutil.rmtree(data, ignore_errors=True)
    start = time.perf_counter()
    readings = write_readings(sensors, data, seconds, files=args.files)
    print(f"input: {readings:,} readings of {len(sensors):,} sensors, {seconds:.1f} s of event time, "
          f"{args.files} files ({time.perf_counter() - start:.1f} s to write)")
    print("windows per sensor: " + ", ".join(f"{n} = {a}({length:_}, {slide:_})" for n, length, slide, a in windows))
    files = write_workflows(work / "workflows", sensors, windows)

    if not args.skip_ours:
        summary, compile_seconds, compiled, ours = run_ours(work, files, registry, data, args.partitions, args.warm_up)
    delay = args.flink_delay if args.flink_delay is not None else int(seconds * 1000) + 1000
    if not args.without_flink:
        flink, theirs = run_flink(work, data, windows, args.flink_parallelism, delay, sensors)

    print()
    if not args.skip_ours:
        print(f"ours:  {len(files):,} workflows, {len(compiled.plan.graph.sensors()):,} sensors, "
              f"{args.partitions} partitions, compile {compile_seconds:.1f} s")
    if not args.without_flink:
        print(f"Flink: apache-flink {flink_version()}, parallelism {args.flink_parallelism}, "
              f"watermark delay {delay:,} ms")
        print("results:")
    same = compare(ours, theirs, windows, sensors) if not (args.skip_ours or args.without_flink) else None
    print()
    if not args.skip_ours:
        ours_rate = readings / summary.seconds
        print(f"ours  (--once, SQLite sink):   {ours_rate:>12,.0f} readings/s  ({summary.seconds:.1f} s, "
              f"{summary.readings:,} readings, {summary.late:,} late, {summary.results:,} results)")
    if args.without_flink:
        flink_not_run(FLINK_PROGRAM, "--without-flink")
    else:
        flink_rate = readings / flink["job_seconds"]
        print(f"Flink (streaming, CSV sink):   {flink_rate:>12,.0f} readings/s  ({flink['job_seconds']:.1f} s from "
              f"submission; net job {flink['net_seconds'] or float('nan'):.1f} s; JVM + PyFlink start "
              f"{flink['startup_seconds']:.1f} s; process {flink['wall_seconds']:.1f} s; {len(theirs):,} results)")
        if not args.skip_ours:
            print(f"ours / Flink: {ours_rate / flink_rate:.2f}   same results: {'yes' if same else 'NO'}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


def run_flink_program(program: Path, config: dict, out: Path) -> tuple[dict, list[Path]]:
    """Run a PyFlink program in .venv-flink with its config: its timings (the line it prints that
    starts with BENCH, and the wall time) and every file its sink wrote under `out`, finished or
    still in progress (hidden part files)."""
    start = time.perf_counter()
    done = subprocess.run([str(FLINK_PYTHON), str(program), json.dumps(config)], capture_output=True, text=True)
    wall = time.perf_counter() - start
    line = next((line for line in done.stdout.splitlines() if line.startswith("BENCH ")), None)
    if done.returncode or line is None:
        sys.exit(f"the Flink job failed (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}")
    timings = json.loads(line[len("BENCH "):])
    timings["wall_seconds"] = wall
    return timings, [p for p in out.rglob("*") if p.is_file() and p.stat().st_size and not p.name.endswith(".crc")]


def flink_not_run(program: str, flag: str) -> None:
    """Say plainly that Flink was not run; the program it would have run is only compiled (its syntax checked)."""
    compile(program, "the Flink program", "exec")
    print(f"Flink: NOT RUN ({flag}): no Flink figures and no comparison; its program was only checked for syntax")


def flink_version() -> str:
    done = subprocess.run([str(FLINK_PYTHON), "-m", "pip", "show", "apache-flink"], capture_output=True, text=True)
    return next((line.split(":", 1)[1].strip() for line in done.stdout.splitlines() if line.startswith("Version:")),
                "?")


if __name__ == "__main__":
    main()
