"""Reading-to-receipt latency of alarms (issue #40): soak.py's live job (its file feed paced by the wall
clock, its 1,029 workflows over 1,000 sensors) with one more workflow whose pattern fires many times a
second, run with `--alerts` to a local webhook receiver (scripts/alarm_receiver.py); per alarm, the
seconds from the wall time its triggering reading was written by the feed to the receiver's receipt.

    .venv/bin/python scripts/bench_alarm_latency.py [--jump 2.5] [--group-wait 2s] [--fail-every N] [--json PATH]
                                                    -- [soak.py's options: --rate 40000 --minutes 3 --out DIR ...]

The extra workflow (bench_alarms.ss, beside the bundled examples in a copy of workflows/):

    S     = union(the 12 example sensors);
    JUMP  = pattern(p: S -> q: S) where q.value - p.value > JUMP within 1s strategy strict partition by sensor
            yield q.value - p.value;
    M_i   = avg(SENSOR_i, 1s, 1s);
    HOT_i = M_i > 0;      (four flags, on and off around the sine's zero crossings)

The soak feeds each sensor at rate / sensors Hz (40 Hz at 40,000 readings/s over 1,000 sensors), a
slow sine plus N(0, 1) noise: consecutive readings differ by N(0, 2), so `--jump 2.5` matches about
3.9 % of the 12 sensors' readings (about 19 matches a second at 40 Hz).

Latency: a match's triggering reading is its last event (`end_ms`); a flag's is the first reading at or
after its window's end (`window_end_ms`), as soak.py's reading-to-result latency takes it. Its arrival is
the wall time at which the feed wrote (renamed into place) the first chunk whose newest reading is at or
after that time (soaking.feed: a chunk holds the readings of one second); its receipt, the first
receipt of its id by the receiver. p50/p99/max over the alarms whose reading came after soak's warm-up
(--warmup, 60 s), and over all. soak.py's own report (reading-to-result latency of window results, lag)
is printed too, for the same run.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))

import soaking.workload  # noqa: E402  (scripts/soaking: EXAMPLES is where prepare() takes the examples)
from alarm_receiver import Receiver  # noqa: E402
from bench_alarm_storm import code_version  # noqa: E402
from soak import arguments  # noqa: E402
from soaking.report import report  # noqa: E402
from soaking.run import run  # noqa: E402
from soaking.sink import job_sink, reading_of  # noqa: E402
from soaking.workload import prepare  # noqa: E402

FLAGGED = ("8MD1-AZ", "8AC1-Z", "8ST1-N", "8TL3-N")


def examples_with_alarms(folder: Path, jump: float) -> Path:
    """A copy of workflows/ (scripts and sensors.csv) with bench_alarms.ss added."""
    shutil.copytree(soaking.workload.EXAMPLES, folder)
    sensors = [line.split(",")[0] for line in (folder / "sensors.csv").read_text().splitlines()[1:] if line.strip()]
    names = ", ".join(f'"{s}"' for s in sensors)
    flags = "".join(f'M{i} = avg("{s}", 1s, 1s);\nHOT{i} = M{i} > 0;\n' for i, s in enumerate(FLAGGED))
    (folder / "bench_alarms.ss").write_text(
        f"// issue #40: alarms many times a second, for their reading-to-receipt latency\nS = union({names});\n"
        f"JUMP = pattern(p: S -> q: S) where q.value - p.value > {jump} within 1s strategy strict partition by sensor\n"
        f"    yield q.value - p.value;\n{flags}")
    return folder


def stats(values: np.ndarray) -> dict:
    if not len(values):
        return {"count": 0}
    return {"count": int(len(values)), "p50_s": round(float(np.percentile(values, 50)), 3),
            "p99_s": round(float(np.percentile(values, 99)), 3), "max_s": round(float(values.max()), 3),
            "min_s": round(float(values.min()), 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jump", type=float, default=2.5, help="the JUMP pattern's threshold")
    parser.add_argument("--group-wait", default=None, help="--alerts-group-wait for the job (default: its own, 2s)")
    parser.add_argument("--fail-every", type=int, default=0, help="the receiver answers every Nth request 503")
    parser.add_argument("--json", help="also write the figures here")
    ours, rest = parser.parse_known_args()
    if rest[:1] == ["--"]:
        rest = rest[1:]
    code = code_version(SCRIPTS.parent)  # before the job starts: what it runs
    receiver = Receiver().start()
    receiver.fail_every = ours.fail_every
    job_args = ["--job-arg=--alerts", f"--job-arg={receiver.url}"]
    if ours.group_wait:
        job_args += ["--job-arg=--alerts-group-wait", f"--job-arg={ours.group_wait}"]
    sys.argv = ["soak.py", *rest, *job_args]
    args = arguments()
    if args.sink != "sqlite":
        raise SystemExit("bench_alarm_latency.py measures the job with its SQLite sink: leave --sink out")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    out = Path(args.out or tempfile.mkdtemp(prefix="sscript-alarm-latency-"))
    for stale in ("job", "input", "workflows", "examples"):
        shutil.rmtree(out / stale, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    soaking.workload.EXAMPLES = examples_with_alarms(out / "examples", ours.jump)
    started = time.time()
    workload = prepare(args, out)
    print(f"alarm latency: {workload.workflows} workflows, compiled in {time.time() - started:.1f} s into "
          f"{out / 'job'}; alarms to {receiver.url}; load average {os.getloadavg()}", flush=True)
    soak = run(args, out, workload, reading_of(job_sink("sqlite", out / "job")),
               lambda line: print(line, flush=True))
    load = os.getloadavg()
    time.sleep(1.0)
    lines, document = report(args, out, workload, soak)
    print("\n".join(lines), flush=True)
    (out / "report.txt").write_text("\n".join(lines) + "\n")

    with receiver.lock:
        received = list(receiver.received)
        requests, refused = receiver.requests, receiver.refused
    receiver.stop()
    first: dict[str, tuple[float, dict]] = {}
    for at, alarm in received:
        first.setdefault(alarm["id"], (at, alarm))
    chunks = soak.feed.chunks
    newest = [c.newest_ts for c in chunks]  # grows with the chunks
    feed_start = soak.feed.started_at
    rows = []  # (kind, arrival s since feed start, latency s)
    unmatched = 0
    for at, alarm in first.values():
        reading = alarm.get("end_ms") if alarm.get("kind") == "match" else alarm.get("window_end_ms", alarm["ts_ms"])
        index = bisect.bisect_left(newest, reading)
        if index >= len(chunks):
            unmatched += 1
            continue
        written = chunks[index].written
        rows.append((alarm.get("kind"), written - feed_start, at - written))
    kinds = np.array([r[0] for r in rows])
    arrival = np.array([r[1] for r in rows])
    latency = np.array([r[2] for r in rows])
    after = arrival >= args.warmup
    receipts = sorted(at for at, _ in first.values())
    span = (receipts[-1] - receipts[0]) if len(receipts) > 1 else 0
    figures = {
        "rate": args.rate, "minutes": args.minutes, "warmup_s": args.warmup, "jump": ours.jump,
        "group_wait": ours.group_wait or "2s (default)", "fail_every": ours.fail_every,
        "alarms_received_unique": len(first), "repeats": len(received) - len(first),
        "requests": requests, "failed_requests": refused,
        "alarms_per_s": round(len(first) / span, 1) if span else None,
        "alarms_without_chunk": unmatched,
        "reading_to_receipt_after_warmup": stats(latency[after]),
        "reading_to_receipt_after_warmup_match": stats(latency[after & (kinds == "match")]),
        "reading_to_receipt_after_warmup_flag": stats(latency[after & (kinds == "flag")]),
        "reading_to_receipt_all": stats(latency),
        "reading_to_result_after_warmup": stats(np.array(document["latency_from_write_s"])),
        "soak_verdict": {k: v for k, v in document["verdict"].items() if not isinstance(v, (list, dict))},
        "load_average_at_end": [round(x, 2) for x in load],
        "soak_failure": soak.failure,
        "out": str(out),
        "code": code,
    }
    text = json.dumps(figures, indent=1, default=float)
    print(text, flush=True)
    (out / "alarm_latency.json").write_text(text + "\n")
    if ours.json:
        Path(ours.json).write_text(text + "\n")
    return 1 if soak.failure else 0


if __name__ == "__main__":
    raise SystemExit(main())
