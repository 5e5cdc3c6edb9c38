"""The compiled job against the same workflows written the naive way in PySpark, in one run on one input.

    .venv/bin/python scripts/bench_naive.py [--workflows 16,128,1024] [--sensors 1000] [--seconds 120]
        [--timeout 1200] [--keep DIR]

Generates the seeded bridge workload (1,000 sensors of 21 types) and `--seconds` of readings of
the whole fleet, then for each number of workflows compiles both jobs (`sscript compile --naive`)
and runs each with --once on local[2] as its own process (`python OUT/job.py` and
`python OUT/naive_job.py`, so both pay the same start-up), over the same files. Prints the
readings per second of both, their ratio, and whether their results agree (same rows, values to
1e-9). A naive job that does not finish within `--timeout` seconds is stopped and reported as such
(the ratio is then a lower bound).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sensorscript.compiler import compile_workflows
from sensorscript.registry import SensorRegistry
from sensorscript.runtime.output.sinks import same_results, sqlite_results
from sensorscript.workload import bridge_workload, write_readings


def timed(command: list[str], timeout: float, log: Path) -> float | None:
    started = time.perf_counter()
    with open(log, "w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()
            return None
    if code != 0:
        raise SystemExit(f"{command[1]} failed (exit {code}); see {log}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflows", default="16,128,1024")
    parser.add_argument("--sensors", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=1200)
    parser.add_argument("--keep", help="work in this folder and keep it")
    args = parser.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="sscript-naive-"))
    work.mkdir(parents=True, exist_ok=True)
    sizes = [int(n) for n in args.workflows.split(",")]
    fleet = bridge_workload(1, args.sensors).sensors
    data = work / "data"
    shutil.rmtree(data, ignore_errors=True)
    readings = write_readings(fleet, data, args.seconds, files=args.files)
    registry = work / "sensors.db"
    registry.unlink(missing_ok=True)
    SensorRegistry.create(registry).put(fleet)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    os.environ.update(env)
    print(f"input: {readings:,} readings of {len(fleet):,} sensors ({args.seconds:g} s) in {args.files} files")
    print(f"{'workflows':>9}  {'ours readings/s':>16}  {'naive readings/s':>17}  {'ours / naive':>12}  same results")
    for size in sizes:
        workload = bridge_workload(size, args.sensors)
        scripts = work / f"w{size}"
        shutil.rmtree(scripts, ignore_errors=True)
        scripts.mkdir()
        for name, text in workload.workflows.items():
            (scripts / f"{name}.ss").write_text(text)
        out = work / f"out{size}"
        shutil.rmtree(out, ignore_errors=True)
        compile_workflows(sorted(str(p) for p in scripts.glob("*.ss")), out, str(registry), 2, naive=True)
        ours = timed([sys.executable, str(out / "job.py"), "--input", str(data), "--once"], args.timeout * 4,
                     out / "job.log")
        naive = timed([sys.executable, str(out / "naive_job.py"), "--input", str(data), "--once"], args.timeout,
                      out / "naive.log")
        ours_rate = readings / ours
        if naive is None:
            print(f"{size:>9,}  {ours_rate:>16,.0f}  {'> ' + format(args.timeout, '.0f') + ' s':>17}  "
                  f"{'> ' + format(args.timeout / ours, '.1f'):>12}  (naive job stopped)", flush=True)
            continue
        same = same_results(sqlite_results(out / "results.db"), sqlite_results(out / "naive_results.db"))
        print(f"{size:>9,}  {ours_rate:>16,.0f}  {readings / naive:>17,.0f}  {naive / ours:>12.1f}  "
              f"{'yes' if same else 'NO'}  ({ours:.1f} s vs {naive:.1f} s)", flush=True)
    print(f"(each time includes starting Spark, about 10 s; work folder {work})")


if __name__ == "__main__":
    main()
