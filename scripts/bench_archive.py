"""The archive at the fleet's rate (issue #27): what an hour of it takes on disk before and after the
merge, how long the merge takes and how much memory, and what a correction's read of it costs.

    .venv/bin/python scripts/bench_archive.py [--rate 20000] [--sensors 1000] [--partitions 2]
                                              [--hours 1] [--batch-seconds 1] [--dir DIR]

Writes the archive as stage 1 does (archive.write: one file per partition, micro-batch and hour;
readings of a 1,000-sensor fleet at 20 Hz, values as a sensor's: a slow signal plus noise), then
merges each hour (archive.compact, as the housekeeping pass does), timing each step; reads four
sensors over the hours before and after the merge (archive.read, what a correction does). Prints
bytes per reading and the disk a day and a year take at this rate with the default horizon (7 days).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sensorscript.runtime.ingest import archive  # noqa: E402

H = archive.HOUR_MS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=20_000, help="readings per second, all sensors")
    parser.add_argument("--sensors", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--batch-seconds", type=float, default=1.0)
    parser.add_argument("--dir", help="work folder (default: a new one under /tmp, removed after)")
    args = parser.parse_args()
    work = Path(args.dir or tempfile.mkdtemp(prefix="bench-archive-"))
    folder = work / "archive"
    shutil.rmtree(folder, ignore_errors=True)
    rng = np.random.default_rng(1)
    t0 = 472_223 * H
    per_batch = int(args.rate * args.batch_seconds)
    batches = int(args.hours * 3600 / args.batch_seconds)
    sensors = np.arange(args.sensors)
    level = rng.normal(20, 5, args.sensors)
    started = time.perf_counter()
    readings = 0
    for batch in range(batches):
        ts = t0 + int(batch * args.batch_seconds * 1000) + np.sort(rng.integers(0, int(args.batch_seconds * 1000),
                                                                                 per_batch))
        code = rng.choice(sensors, per_batch)
        value = np.round(level[code] + np.sin(ts / 600_000.0) + rng.normal(0, 0.05, per_batch), 3)
        for partition in range(args.partitions):
            mine = code % args.partitions == partition
            archive.write(str(folder), partition, batch, code[mine], ts[mine], value[mine])
        readings += per_batch
    write_s = time.perf_counter() - started
    before, files_before = archive.size(folder)
    wanted = {int(c): f"S{c}" for c in sensors[:4]}
    read_before = _timed(lambda: archive.read(folder, wanted, t0, t0 + int(args.hours * H)))
    rss_before = _rss_mib()
    started = time.perf_counter()
    merged = archive.compact(folder, t0 + int(np.ceil(args.hours)) * H, batches - 1)
    merge_s = time.perf_counter() - started
    rss_merge = _rss_mib()
    after, files_after = archive.size(folder)
    read_after = _timed(lambda: archive.read(folder, wanted, t0, t0 + int(args.hours * H)))
    per_day = after / readings * args.rate * 86_400
    print(f"{readings:,} readings ({args.rate:,.0f}/s for {args.hours:g} h, {args.partitions} partitions, "
          f"{args.batch_seconds:g} s batches), written in {write_s:,.1f} s")
    print(f"small files: {files_before:,} files, {before / 2**20:,.1f} MiB, {before / readings:.2f} bytes a reading")
    print(f"merged:      {files_after:,} files, {after / 2**20:,.1f} MiB, {after / readings:.2f} bytes a reading "
          f"({merged:,} files merged in {merge_s:,.1f} s; process peak {rss_merge:,.0f} MiB, before the merge "
          f"{rss_before:,.0f} MiB)")
    print(f"a correction's read of 4 sensors over the hours: {read_before:.2f} s from the small files, "
          f"{read_after:.2f} s merged ({read_before / read_after:.1f} x)")
    print(f"at {args.rate:,.0f} readings/s: {per_day / 2**30:,.2f} GiB a day; with the default horizon of 7 days the "
          f"archive stays at {7 * per_day / 2**30:,.1f} GiB (a year without retention: "
          f"{365 * per_day / 2**40:,.2f} TiB)")
    if not args.dir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _timed(action) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - started)
    return best


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


if __name__ == "__main__":
    raise SystemExit(main())
