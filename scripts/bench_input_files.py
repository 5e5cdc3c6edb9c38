"""What grows with the number of input files a live job has read (issue #27, item 3).

    .venv/bin/python scripts/bench_input_files.py [--files 1000,10000,50000] [--per-batch 20]
                                                  [--cleanup delete] [--runtime CHECKOUT] [--keep DIR]

A live job (workflows/bridge.ss, local[2], trigger as fast as it goes, `--input-cleanup`) reads a
folder into which a feeder writes `--per-batch` small files (10 readings each, event time moving
on) each time the job has taken a batch, so every micro-batch takes that many files. At each count of files read in
`--files` it records: the checkpoint's size (all, and Spark's file source log
checkpoint/state/sources/0, offsets, commits, state), the newest compacted source log's entries,
the files left in the input folder, and the median time between two batches over the last 30
(the batch's whole cycle: listing the folder, the source log, the batch itself, the commit).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BATCH_LINE = re.compile(r"^batch (\d+):")
SENSORS = ("8MD1-AZ", "8MD2-A", "8MD3-A", "8MD4-AZ")


def size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def compacted_entries(log: Path) -> int:
    """Entries of the newest compacted file of Spark's file source log (one per file ever read)."""
    compacted = sorted(log.glob("*.compact"), key=lambda p: int(p.name.split(".")[0]))
    return max(0, len(compacted[-1].read_text().splitlines()) - 1) if compacted else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", default="1000,10000,50000", help="counts of files read to measure at")
    parser.add_argument("--per-batch", type=int, default=20, help="files the feeder keeps ahead of the job")
    parser.add_argument("--cleanup", default="delete", help="the job's --input-cleanup")
    parser.add_argument("--runtime", default=str(ROOT),
                        help="the sensorscript checkout that compiles and runs the job (default this one, where a "
                             "live folder is read by the drop-folder source; one from before it, e.g. main at "
                             "5d30dac, reads it with Spark's file source)")
    parser.add_argument("--keep", help="work in this folder and keep it (default: a temporary one)")
    args = parser.parse_args()
    marks = sorted(int(n) for n in args.files.split(","))
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-input-files-"))
    shutil.rmtree(work / "job", ignore_errors=True)
    shutil.rmtree(work / "in", ignore_errors=True)
    (work / "in").mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": args.runtime, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONUNBUFFERED": "1"}
    subprocess.run([sys.executable, "-m", "sensorscript.cli", "compile", str(ROOT / "workflows" / "bridge.ss"),
                    "--sensors", str(ROOT / "workflows" / "sensors.csv"), "-o", str(work / "job")],
                   check=True, env=env, capture_output=True)
    command = [sys.executable, str(work / "job" / "job.py"), "--input", str(work / "in"), "--out", str(work / "job"),
               "--trigger-seconds", "0", "--input-cleanup", args.cleanup]
    job = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           start_new_session=True)
    batch_at: list[float] = []
    tail: list[str] = []

    def read() -> None:
        for line in job.stdout:
            if BATCH_LINE.match(line):
                batch_at.append(time.monotonic())
            tail[:] = (tail + [line.rstrip()])[-20:]

    threading.Thread(target=read, daemon=True).start()
    written, rounds, ts = 0, 0, 1_767_225_600_000
    rows = []
    state = work / "job" / "checkpoint" / "state"
    started = time.monotonic()
    try:
        for mark in marks:
            while len(batch_at) * args.per_batch < mark:
                if job.poll() is not None:
                    raise SystemExit("the job ended:\n" + "\n".join(tail))
                if rounds <= len(batch_at):  # a batch's worth of new files for each batch taken
                    for _ in range(args.per_batch):
                        lines = [f"{SENSORS[k % 4]},{ts + k * 50},{k % 7}.5" for k in range(10)]
                        ts += 500
                        path = work / "in" / f"r-{written:07d}.csv"
                        # Whole files only, written under a hidden name (the source skips names
                        # starting with '.'; a visible r-N.tmp could be listed, then gone when read).
                        hidden = path.with_name(f".{path.name}.tmp")
                        hidden.write_text("\n".join(lines) + "\n")
                        hidden.rename(path)
                        written += 1
                    rounds += 1
                time.sleep(0.02)
            recent = [b - a for a, b in zip(batch_at[-31:], batch_at[-30:])]
            row = {"files_read": mark, "batches": len(batch_at), "minutes": round((time.monotonic() - started) / 60, 1),
                   "checkpoint_bytes": size(work / "job" / "checkpoint"),
                   "source_log_bytes": size(state / "sources" / "0"),
                   "source_log_entries": compacted_entries(state / "sources" / "0"),
                   "offsets_bytes": size(state / "offsets"), "commits_bytes": size(state / "commits"),
                   "state_bytes": size(state / "state"), "input_files_left": sum(1 for _ in (work / "in").iterdir()),
                   "batch_seconds_median": round(statistics.median(recent), 3) if recent else None}
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        try:
            os.killpg(job.pid, signal.SIGINT)
            job.wait(timeout=120)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(job.pid, signal.SIGKILL)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{'files read':>10} {'batches':>8} {'checkpoint':>11} {'source log':>11} {'entries':>8} "
          f"{'offsets':>8} {'commits':>8} {'state':>9} {'left':>5} {'s/batch':>8}")
    for r in rows:
        print(f"{r['files_read']:>10,} {r['batches']:>8,} {r['checkpoint_bytes'] / 2**20:>9.2f}Mi "
              f"{r['source_log_bytes'] / 2**20:>9.2f}Mi {r['source_log_entries']:>8,} {r['offsets_bytes'] / 2**10:>6.0f}Ki "
              f"{r['commits_bytes'] / 2**10:>6.0f}Ki {r['state_bytes'] / 2**20:>7.2f}Mi {r['input_files_left']:>5} "
              f"{r['batch_seconds_median'] or 0:>8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
