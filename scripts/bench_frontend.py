"""Front-end speed: parse and check 1,024 generated workflows of seven statements each.

    .venv/bin/python scripts/bench_frontend.py [--workflows 1024] [--repeat 3]

Prints statements per second and the wall time for the whole set (target: under 2 s).
The workflows come from the seeded bridge workload (sensorscript.workload).
"""

from __future__ import annotations

import argparse
import time

from sensorscript.parser import load
from sensorscript.workload import bridge_workload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflows", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    workload = bridge_workload(args.workflows)
    texts = {f"{name}.ss": text for name, text in workload.workflows.items()}
    known = {s.sensor_id for s in workload.sensors}
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        loaded = load(list(texts), known, texts=texts)
        times.append(time.perf_counter() - start)
    statements = sum(len(w.statements) for w in loaded.workflows)
    best, first = min(times), times[0]
    print(f"workflows: {len(loaded.workflows)}  statements: {statements}")
    print(f"first run (cold ANTLR caches): {first:.3f} s  ({statements / first:,.0f} statements/s)")
    print(f"best of {args.repeat}: {best:.3f} s  ({statements / best:,.0f} statements/s)")
    print(f"target: all {len(loaded.workflows)} in under 2 s -> {'met' if first < 2 else 'MISSED'}")


if __name__ == "__main__":
    main()
