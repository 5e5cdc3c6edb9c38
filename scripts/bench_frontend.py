"""Front-end speed: parse and check 1,024 generated workflows of seven statements each.

    .venv/bin/python scripts/bench_frontend.py [--workflows 1024] [--repeat 3] [--profile]

Prints the wall time for the whole set (target: under 2 s) as `sscript compile` parses it (in
parallel processes from 128 workflows on), and in one process for comparison. `--profile` adds
the functions that take most of the one-process time. The workflows come from the seeded bridge
workload (sensorscript.workload).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import sensorscript.parser as front_end
from sensorscript.parser import load
from sensorscript.workload import bridge_workload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflows", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    workload = bridge_workload(args.workflows)
    texts = {f"{name}.ss": text for name, text in workload.workflows.items()}
    known = {s.sensor_id for s in workload.sensors}

    def timed(parallel_from: int) -> list[float]:
        front_end.PARALLEL_FROM = parallel_from
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            loaded = load(list(texts), known, texts=texts)
            times.append(time.perf_counter() - start)
        timed.statements = sum(len(w.statements) for w in loaded.workflows)
        return times

    default = front_end.PARALLEL_FROM
    serial = timed(10**9)  # first: it pays for ANTLR's cold DFA caches
    parallel = timed(default)
    statements = timed.statements
    print(f"workflows: {len(texts)}  statements: {statements}")
    for label, times in (("one process", serial), ("as compile runs it", parallel)):
        print(f"{label}: first {times[0]:.3f} s, best of {args.repeat} {min(times):.3f} s "
              f"({statements / min(times):,.0f} statements/s)")
    print(f"target: all {len(texts)} in under 2 s -> {'met' if max(parallel) < 2 else 'MISSED'}")
    if args.profile:
        front_end.PARALLEL_FROM = 10**9
        profile = cProfile.Profile()
        profile.runcall(load, list(texts), known, texts=texts)
        pstats.Stats(profile).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
