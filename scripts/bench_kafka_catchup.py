"""Catch-up after an outage (issue #41): how long a job that was away for `--minutes` takes to read
the backlog a Kafka broker kept, in batches of what size, and whether the driver's memory stays flat.

    .venv/bin/python scripts/bench_kafka_catchup.py [--minutes 30] [--rate 20000] [--sensors 1000]
                                                    [--workflows 1024] [--partitions 2]
                                                    [--lines-per-message 100] [--max-readings-per-batch N]
                                                    [--out DIR]

The soak's workload (scripts/soaking/workload.py: the example workflows and `--workflows` generated
bridge workflows over `--sensors` sensors) is compiled; a broker of its own (scripts/kafka_broker.py)
gets a topic of `--partitions` partitions holding `--minutes` of the fleet's readings at `--rate`
readings/s of event time (scripts/soaking/feed.py's readings, in messages of `--lines-per-message`
lines, as a gateway sends them), produced as fast as the broker takes them: the backlog of an
outage. Then the job starts on the topic as a live job does (`job.py --input kafka://...`, no
--once; `--max-readings-per-batch` passed on when given, else the job's default) and is watched
until it has read every reading: the time from its start (and from its first batch), the readings
of each batch, the batches' durations, and the resident memory of its driver (Python) and JVM
every second: the peak, and, from the first batch on, the mean of the last third against the first
third (flat: within 10 %).
Not part of the test suite (tests/test_scripts.py smoke-runs it at a tiny size). The machine should
be otherwise idle while it runs.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kafka_broker import Gateway, KafkaBroker  # noqa: E402
from soaking.feed import Readings  # noqa: E402
from soaking.job import JobProcess  # noqa: E402
from soaking.workload import prepare  # noqa: E402

BATCH = re.compile(r"^batch (\d+): ([\d,]+) readings, ([\d,]+) quarantined, (?:([\d,]+) readings of sensors no "
                   r"workflow reads ignored, )?.*\(([\d.]+) s to write\)")
TIMEOUT_S = 3600


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30, help="the outage: minutes of readings kept by the broker")
    parser.add_argument("--rate", type=float, default=20_000, help="the fleet's readings per second of event time")
    parser.add_argument("--sensors", type=int, default=1000)
    parser.add_argument("--workflows", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=2, help="the job's partitions and the topic's")
    parser.add_argument("--lines-per-message", type=int, default=100)
    parser.add_argument("--max-readings-per-batch", type=int, help="passed on to the job (default: the job's own)")
    parser.add_argument("--out", help="work folder (default: a new one under /tmp); emptied first")
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="sscript-kafka-catchup-"))
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    workload = prepare(args, out)
    broker = KafkaBroker(out / "broker", heap="1g").start()
    try:
        url, fed, fill_s = backlog(args, broker, workload)
        print(f"backlog: {fed:,} readings ({args.minutes:g} min at {args.rate:,.0f}/s of {len(workload.sensors):,} "
              f"sensors) in {fed / args.lines_per_message:,.0f} messages on {args.partitions} partitions, produced "
              f"in {fill_s:.0f} s; {workload.workflows:,} workflows", flush=True)
        catch_up(args, out, url, fed)
    finally:
        broker.stop(kill=True)


def backlog(args, broker: KafkaBroker, workload) -> tuple[str, int, float]:
    """The topic filled with the outage's readings, a minute of event time at a time: (its address,
    the readings in it, seconds it took)."""
    started = time.monotonic()
    url = broker.topic("readings", args.partitions)
    gateway = Gateway(broker.bootstrap, "readings", args.lines_per_message)
    readings = Readings(workload.sensors, workload.referenced, args.rate)
    end = int(time.time() * 1000)
    start = end - int(args.minutes * 60_000)
    fed = 0
    for at in range(start, end, 60_000):
        text, count, _, _ = readings.between(at, min(at + 60_000, end))
        gateway.send(text.decode().splitlines())
        fed += count
    gateway.flush()
    return url, fed, time.monotonic() - started


def catch_up(args, out: Path, url: str, fed: int) -> None:
    """Start the job on the backlog, watch it until it has read all of it, stop it; print the figures."""
    options = ("--max-readings-per-batch", str(args.max_readings_per_batch)) if args.max_readings_per_batch else ()
    started = time.time()
    job = JobProcess(out / "job", url, out / "job.log", options)
    memory: list[tuple[float, float, float]] = []  # (seconds since the start, driver MiB, JVM MiB)
    read, first_batch = 0, None
    try:
        while read < fed:
            if not job.alive():
                raise SystemExit(f"the job stopped: {job.error()}\n" + "\n".join(job.tail[-10:]))
            if time.time() - started > TIMEOUT_S:
                raise SystemExit(f"the job had read {read:,} of {fed:,} readings after {TIMEOUT_S} s")
            processes = job.processes()
            memory.append((time.time() - started, _mib(processes["driver"]), _mib(processes["jvm"])))
            read = _read_so_far(out / "job" / "status.json", started)
            if first_batch is None and job.lines_at:
                first_batch = min(job.lines_at.values()) - started
            time.sleep(1.0)
        caught_up = time.time() - started
    finally:
        job.stop(print)
    batches = [BATCH.match(line.split(" ", 1)[1]) for line in (out / "job.log").read_text().splitlines()]
    sizes = [int(b.group(2).replace(",", "")) + int((b.group(4) or "0").replace(",", "")) for b in batches if b]
    seconds = [float(b.group(5)) for b in batches if b]
    batching = [m for m in memory if m[0] >= (first_batch or 0)] or memory  # from the first batch on: not the start-up
    third = max(len(batching) // 3, 1)
    first, last = (batching[:third], batching[-third:])
    report = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]), "readings": fed, "caught_up_s": round(caught_up, 1),
        "first_batch_s": round(first_batch or 0, 1), "readings_per_s": round(fed / caught_up),
        "batches": len(sizes), "batch_readings_max": max(sizes, default=0),
        "batch_readings_median": sorted(sizes)[len(sizes) // 2] if sizes else 0,
        "batch_s_max": max(seconds, default=0), "driver_mib_peak": round(max(m[1] for m in memory)),
        "jvm_mib_peak": round(max(m[2] for m in memory)),
        "driver_mib_first_third": round(_mean([m[1] for m in first])), "driver_mib_last_third": round(_mean([m[1] for m in last])),
        "jvm_mib_first_third": round(_mean([m[2] for m in first])), "jvm_mib_last_third": round(_mean([m[2] for m in last])),
    }
    (out / "catchup.json").write_text(json.dumps(report, indent=1) + "\n")
    flat = all(report[f"{k}_mib_last_third"] <= 1.1 * report[f"{k}_mib_first_third"] for k in ("driver", "jvm"))
    print(f"caught up {fed:,} readings in {caught_up:.0f} s from the job's start ({fed / caught_up:,.0f} readings/s; "
          f"first batch after {first_batch or 0:.0f} s): {'met' if caught_up < 300 else 'NOT met'} (target: < 5 min)")
    print(f"batches: {len(sizes)}, readings each: median {report['batch_readings_median']:,}, largest "
          f"{report['batch_readings_max']:,}; longest batch {report['batch_s_max']:.1f} s")
    print(f"driver memory (RSS): Python peak {report['driver_mib_peak']:,} MiB (first third {report['driver_mib_first_third']:,}"
          f", last third {report['driver_mib_last_third']:,}), JVM peak {report['jvm_mib_peak']:,} MiB (first third "
          f"{report['jvm_mib_first_third']:,}, last third {report['jvm_mib_last_third']:,}): "
          f"{'flat' if flat else 'NOT flat'} (the last third within 10 % of the first)")
    print(f"everything in {out / 'catchup.json'}; the job's log in {out / 'job.log'}")


def _read_so_far(status: Path, started: float) -> int:
    """Every reading the job has taken (read by a workflow or not), from its status once it wrote one."""
    try:
        found = json.loads(status.read_text())
    except (OSError, ValueError):
        return 0
    if found.get("started", 0) < started - 5:
        return 0
    totals = found.get("totals", {})
    return int(sum(totals.get(k, 0) for k in ("readings", "unread", "quarantined")))


def _mib(processes) -> float:
    total = 0.0
    for process in processes:
        try:
            total += process.memory_info().rss / 2**20
        except Exception:  # noqa: BLE001 (psutil: gone while looked at)
            continue
    return total


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


if __name__ == "__main__":
    main()
