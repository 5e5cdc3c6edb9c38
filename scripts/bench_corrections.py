"""What a correction's comparison costs (runtime/control/correction.py `changes`): the time and the
peak memory of comparing N recomputed rows with N stored ones (issue #42, the compressed month).

    .venv/bin/python scripts/bench_corrections.py [--rows 200000,1000000,2000000] [--streams 1000]
                                                  [--changed 0.01]

For each N: STREAMS window streams, a row per stream every second (N rows in all, a version 1 of each
stored), the recomputed rows the same but for a CHANGED fraction of the values. Each size runs in a
process of its own, so that its peak RSS (ru_maxrss) is its own; printed with the process's RSS
before the comparison (the two frames) and the rows written (the changed keys' rows).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def one(rows: int, streams: int, changed: float) -> dict:
    import numpy as np
    import pandas as pd

    from sensorscript.runtime.control.correction import changes

    rng = np.random.default_rng(1)
    names = np.array([f"wf{i:04d}.avg" for i in range(streams)])
    ts = (np.arange(rows) // streams) * 1000 + 10_000
    stream = names[np.arange(rows) % streams]
    value = rng.random(rows)
    stored = pd.DataFrame({"stream": stream, "ts": ts, "window_start": ts - 10_000, "window_end": ts,
                           "value": value, "version": 1})
    fresh = value.copy()
    fresh[rng.random(rows) < changed] += 1.0
    recomputed = stored.drop(columns="version").assign(value=fresh)
    lowest, until = dict.fromkeys(names.tolist(), 0), dict.fromkeys(names.tolist(), 2**62)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.perf_counter()
    written = changes(recomputed, stored, lowest, until)
    return {"rows": rows, "written": len(written), "seconds": time.perf_counter() - started,
            "before_mib": before, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="200000,1000000,2000000", help="sizes, comma-separated")
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--changed", type=float, default=0.01, help="the fraction of values the recompute changes")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a size, in this process
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.streams, args.changed)))
        return
    print(f"a correction's comparison: {args.streams:,} window streams, {args.changed:.1%} of values changed")
    print(f"{'rows a side':>12} {'written':>9} {'seconds':>8} {'RSS before MiB':>15} {'peak RSS MiB':>13}")
    for rows in (int(r) for r in args.rows.split(",")):
        done = subprocess.run([sys.executable, __file__, "--one", str(rows), "--streams", str(args.streams),
                               "--changed", str(args.changed)], capture_output=True, text=True, cwd=ROOT)
        if done.returncode:
            sys.exit(f"{rows:,} rows: exit {done.returncode}\n{done.stderr[-3000:]}")
        found = json.loads(done.stdout.splitlines()[-1])
        print(f"{rows:>12,} {found['written']:>9,} {found['seconds']:>8.1f} {found['before_mib']:>15,.0f} "
              f"{found['peak_mib']:>13,.0f}")


if __name__ == "__main__":
    main()
