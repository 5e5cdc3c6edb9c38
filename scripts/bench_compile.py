"""Compiling a city's worth of workflows: `sscript compile` from 1,024 to 10,240 workflows.

    .venv/bin/python scripts/bench_compile.py [--points 1024:1000 2048:2000 5120:5000 10240:10000]
        [--repeat 3] [--partitions 2] [--load] [--keep DIR]

For each point (WORKFLOWS:SENSORS of the seeded bridge workload, sensorscript/workload.py) the
scripts and their sensor registry are written to a folder, then `sscript compile ... --timings`
runs as a command of its own into a fresh OUT, `--repeat` times. Printed per point: the phases
compile reports (median of the runs), the command's wall time (median, and the spread), its CPU
time (the compile's process and the worker processes it forks) and its peak memory (the largest
of those processes, as /usr/bin/time's %M reports it). "other" is what the command took besides
the compile's phases: starting Python, the imports, the command line, and freeing the memory at
the end. The last columns compare the time per
workflow with the first point's: 1.00 or less is linear or better.

With `--load`, it also times what a run's driver does first at the largest point: import OUT/job.py
(`runtime.plan.loading.load_job`), once compiling its source and once from the byte code Python
cached in OUT/__pycache__ on the first import.

Targets (issue #25): 10,240 workflows over 10,000 sensors in under 10 s and under 1 GB; linear or
better from 1,024 on.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sensorscript.registry import SensorRegistry
from sensorscript.workload import bridge_workload

PHASES = (("read, parse and check", "parse"), ("plan", "plan"), ("job.py", "job.py"),
          ("plan.json, plan.txt (waited for)", "+json"), ("plan.json, plan.txt", "plan.json"),
          ("versions/1", "versions"))


def write_workload(folder: Path, workflows: int, sensors: int) -> list[str]:
    workload = bridge_workload(workflows, sensors)
    scripts = folder / "wf"
    scripts.mkdir(parents=True)
    for name, text in workload.workflows.items():
        (scripts / f"{name}.ss").write_text(text)
    SensorRegistry.create(folder / "sensors.db").put(workload.sensors)
    return sorted(str(p) for p in scripts.glob("*.ss"))


def run(command: list[str], env: dict | None = None) -> tuple[str, float, float, int]:
    """A command's output, wall time, CPU time (it and the processes it waited for) and peak memory
    (KB, the largest of those processes)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])} ... failed ({process.returncode}):\n{output}")
    return output, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def phases(output: str) -> dict[str, float]:
    """The phases `sscript compile --timings` printed, by their short names."""
    lines = output.split("timings:\n", 1)[1].splitlines()
    found = {}
    for line in lines:
        name, _, seconds = line.strip().rpartition("  ")
        found[name.strip()] = float(seconds.removesuffix(" s"))
    return {short: found[name] for name, short in PHASES if name in found} | {"in all": found["in all"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", nargs="+", default=["1024:1000", "2048:2000", "5120:5000", "10240:10000"],
                        help="WORKFLOWS:SENSORS of each point")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--load", action="store_true", help="also time importing the largest point's job.py")
    parser.add_argument("--keep", metavar="DIR", help="write the workloads and OUT folders here (kept)")
    args = parser.parse_args()
    points = [tuple(int(n) for n in point.split(":")) for point in args.points]
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_compile_"))
    print(f"sscript compile, {args.partitions} partitions, median of {args.repeat} run(s); python {sys.version.split()[0]}, "
          f"{len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()} core(s)")
    header = (f"{'workflows':>9} {'sensors':>7} {'other':>6} {'parse':>6} {'plan':>6} {'job.py':>6} {'+json':>6} "
              f"{'total':>6} {'(min-max)':>13} {'cpu':>6} {'peak MB':>7} {'ms/wf':>6} {'x first':>7}")
    print(header)
    first_per_workflow = None
    out = None
    try:
        for workflows, sensors in points:
            folder = base / f"w{workflows}"
            files = write_workload(folder, workflows, sensors)
            runs = []
            for _ in range(args.repeat):
                out = folder / "out"
                shutil.rmtree(out, ignore_errors=True)
                command = [sys.executable, "-m", "sensorscript.cli", "compile", *files, "-o", str(out),
                           "--sensors", str(folder / "sensors.db"), "-n", str(args.partitions), "--timings"]
                output, wall, cpu, peak = run(command)
                runs.append((phases(output), wall, cpu, peak))
            median = {key: statistics.median(r[0].get(key, 0.0) for r in runs) for key in runs[0][0]}
            walls = [r[1] for r in runs]
            wall = statistics.median(walls)
            per_workflow = wall / workflows * 1000
            first_per_workflow = first_per_workflow or per_workflow
            print(f"{workflows:>9,} {sensors:>7,} {wall - median['in all']:>6.2f} {median['parse']:>6.2f} "
                  f"{median['plan']:>6.2f} {median['job.py']:>6.2f} "
                  f"{median.get('+json', median.get('plan.json', 0.0)):>6.2f} {wall:>6.2f} "
                  f"{f'({min(walls):.2f}-{max(walls):.2f})':>13} {statistics.median(r[2] for r in runs):>6.2f} "
                  f"{max(r[3] for r in runs) / 1024:>7.0f} {per_workflow:>6.3f} {per_workflow / first_per_workflow:>7.2f}",
                  flush=True)
        print("other: Python's start, imports, the command line, freeing memory at the end; parse: read, parse and "
              "check; +json: what plan.json and plan.txt, written beside job.py, took longer than it")
        if args.load and out is not None:
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            shutil.rmtree(out / "__pycache__", ignore_errors=True)
            # What job.py imports (pyspark, the runtime) first, timed apart from job.py itself.
            load = [sys.executable, "-c", "import sys, time; from pathlib import Path; t = time.perf_counter(); "
                    "import sensorscript.runtime.job; from sensorscript.runtime.plan.loading import load_job; "
                    "t1 = time.perf_counter(); load_job(Path(sys.argv[1])); "
                    "print(f'{t1 - t:.2f} {time.perf_counter() - t1:.2f}')", str(out)]
            size = (out / "job.py").stat().st_size / 1e6
            for what in ("compiling its source", "from the byte code in OUT/__pycache__"):
                output, wall, cpu, peak = run(load, env)
                imports, job = (float(x) for x in output.split()[-2:])
                print(f"load_job: job.py of {size:.1f} MB, {what}: {job:.2f} s (and {imports:.2f} s importing "
                      f"pyspark and the runtime), peak {peak / 1024:.0f} MB")
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
