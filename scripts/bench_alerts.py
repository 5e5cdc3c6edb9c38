"""Alarm delivery (issues #28, #40): from the batch that wrote an alarm's row (its insert into the
outbox, `Outbox.take`, which the run loop calls right after the sink's write) to a local webhook
receiver's receipt, p50/p99/max; and how long the batch path spends inserting (what delivery could
cost a batch: it never waits for a receiver).

    .venv/bin/python scripts/bench_alerts.py [--rate 100] [--batch-seconds 1] [--seconds 60]
                                             [--outage 0] [--mqtt] [--group-wait 2]
    .venv/bin/python scripts/bench_alerts.py --storm 10000 [--group-wait 2]

`--storm N`: N alarms of one batch (20 workflows, as every pier of a bridge at once), delivered in
turn to a healthy receiver, to one that answers 503 to every 4th request, to one that answers each
request after 2 s and to one down for the first 30 s: for each, seconds from the insert to the last
alarm's receipt, and p50/p99 per alarm.

A batch of `--rate` x `--batch-seconds` alarms is taken every `--batch-seconds` for `--seconds`, as
the run loop takes a batch's; the delivery thread (runtime/output/alerts/delivery.py, `Deliverer`) sends them
to an HTTP receiver on 127.0.0.1 (and, with --mqtt, a mosquitto started on a free port, with a
subscriber); `--outage S` takes the receiver down for S seconds in the middle (the latency then
includes the wait: its p99 shows the backoff's). Spark is not involved: the job's own part, from a
reading to the batch's write, is soak.py's reading-to-result latency; an alarm's reading-to-receipt
latency is the two added. The machine should be otherwise idle.

`receipt_latencies(outbox, receipts)` is the hook for a soak: given OUT's outbox and the receiver's
(id, receipt time) pairs, the latencies in seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sensorscript.runtime.output.alarms import MATCH  # noqa: E402
from sensorscript.runtime.output.alerts import Deliverer, Outbox, Target, batch_alarms  # noqa: E402
from alarm_receiver import Receiver  # noqa: E402  (scripts/: fails every Nth request, slow, down)


def receipt_latencies(outbox: Outbox, receipts: list[tuple[str, float]]) -> np.ndarray:
    """Seconds from each alarm's insert into the outbox to its first receipt."""
    enqueued = {ident: at for ident, at, _ in outbox.latencies()}
    first: dict[str, float] = {}
    for ident, at in receipts:
        first.setdefault(ident, at)
    return np.array([at - enqueued[i] for i, at in first.items() if i in enqueued])


def storm_rows(count: int) -> pd.DataFrame:
    """`count` matches of 20 workflows in one batch."""
    ts = 1_767_225_600_000 + np.arange(count)
    return pd.DataFrame({"stream": [f"pier{i % 20:02d}.M" for i in range(count)], "ts": ts, "value": 1.0,
                         "version": 1, "start_ts": ts - 100, "end_ts": ts, "plan_version": 1,
                         "events": '[{"var": "a", "ts": 0, "value": 1.0, "sensor": "S"}]'})


def storm(count: int, group_wait: float) -> int:
    """Each receiver in turn, with an outbox of its own: the storm's delivery."""
    kinds = {f"pier{i:02d}.M": MATCH for i in range(20)}
    report, ok = {"alarms": count, "group_wait_s": group_wait}, True
    for name in ("healthy", "failing_every_4th", "slow_2s", "down_30s"):
        folder = Path(tempfile.mkdtemp(prefix="bench-storm-"))
        receiver = Receiver()
        if name != "down_30s":
            receiver.start()
        receiver.fail_every = 4 if name == "failing_every_4th" else 0
        receiver.delay_s = 2.0 if name == "slow_2s" else 0.0
        outbox = Outbox(folder)
        found, last = batch_alarms(storm_rows(count), kinds, {})
        started = time.time()
        outbox.take(0, found, last, [receiver.url])
        deliverer = Deliverer(folder, [Target.parse(receiver.url)], group_wait_s=group_wait).start()
        while outbox.counts()["waiting"] and time.time() - started < 300:
            if name == "down_30s" and receiver.server is None and time.time() - started >= 30:
                receiver.start()
            time.sleep(0.02)
        deliverer.stop()
        receipts = [(alarm["id"], at) for at, alarm in receiver.received]
        latency = receipt_latencies(outbox, receipts)
        ids = [i for i, _ in receipts]
        report[name] = {"delivered": len(set(ids)), "repeats": len(ids) - len(set(ids)),
                        "requests": receiver.requests, "failed_requests": outbox.counts()["failed"],
                        "seconds_to_last": round(float(latency.max()), 3) if len(latency) else None,
                        "p50_s": round(float(np.percentile(latency, 50)), 3) if len(latency) else None,
                        "p99_s": round(float(np.percentile(latency, 99)), 3) if len(latency) else None}
        ok &= len(set(ids)) == count
        receiver.stop()
        outbox.close()
    print(json.dumps(report, indent=1))
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=100.0, help="alarms per second")
    parser.add_argument("--batch-seconds", type=float, default=1.0, help="a batch every this many seconds")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--outage", type=float, default=0.0, help="seconds the receiver is down, mid-way")
    parser.add_argument("--mqtt", action="store_true", help="also publish to a local mosquitto")
    parser.add_argument("--group-wait", type=float, default=2.0, help="--alerts-group-wait, seconds")
    parser.add_argument("--storm", type=int, default=0, help="N alarms at once to four receivers in turn")
    args = parser.parse_args()
    if args.storm:
        return storm(args.storm, args.group_wait)

    folder = Path(tempfile.mkdtemp(prefix="bench-alerts-"))
    receiver = Receiver().start()
    targets = [Target.parse(f"http://127.0.0.1:{receiver.port}/hook")]
    broker = subscriber = None
    mqtt_receipts: list[tuple[str, float]] = []
    if args.mqtt:
        import paho.mqtt.client as paho
        from mosquitto import Broker  # scripts/mosquitto.py
        from paho.mqtt.enums import CallbackAPIVersion

        broker = Broker(folder / "broker").start()
        subscriber = paho.Client(CallbackAPIVersion.VERSION2, client_id="bench-alarms", clean_session=False)
        subscriber.on_connect = lambda c, *_: c.subscribe("alarms", qos=1)
        subscriber.on_message = lambda c, u, m: mqtt_receipts.append((json.loads(m.payload)["id"], time.time()))
        subscriber.connect("127.0.0.1", broker.port)
        subscriber.loop_start()
        targets.append(Target.parse(f"mqtt://127.0.0.1:{broker.port}/alarms"))
    outbox = Outbox(folder)
    deliverer = Deliverer(folder, targets, group_wait_s=args.group_wait).start()
    per_batch = max(1, int(args.rate * args.batch_seconds))
    inserts = []
    t0 = time.monotonic()
    batch, down = 0, False
    while time.monotonic() - t0 < args.seconds:
        ts = 1_767_225_600_000 + batch * 1_000
        rows = pd.DataFrame({"stream": "bench.M", "ts": ts + np.arange(per_batch), "value": 1.0, "version": 1,
                             "start_ts": ts, "end_ts": ts + np.arange(per_batch), "plan_version": 1,
                             "events": '[{"var": "a", "ts": 0, "value": 1.0, "sensor": "S"}]'})
        started = time.perf_counter()
        found, last = batch_alarms(rows, {"bench.M": MATCH}, {})
        outbox.take(batch, found, last, [t.key for t in targets])
        deliverer.wake()
        inserts.append(time.perf_counter() - started)
        batch += 1
        elapsed = time.monotonic() - t0
        if args.outage and not down and elapsed >= (args.seconds - args.outage) / 2:
            receiver.stop()
            down, came_down = True, time.monotonic()
        if down and receiver.server is None and time.monotonic() - came_down >= args.outage:
            receiver.start()
        time.sleep(max(0.0, t0 + batch * args.batch_seconds - time.monotonic()))
    if receiver.server is None:
        receiver.start()
    deadline = time.monotonic() + 120
    while outbox.counts()["waiting"] and time.monotonic() < deadline:
        time.sleep(0.1)
    deliverer.stop()
    counts = outbox.counts()
    report = {"alarms": batch * per_batch, "batches": batch, "per_batch": per_batch, "outage_s": args.outage,
              "waiting_at_end": counts["waiting"], "failed_attempts": counts["failed"],
              "insert_ms_p50": float(np.percentile(inserts, 50) * 1000),
              "insert_ms_p99": float(np.percentile(inserts, 99) * 1000)}
    http_receipts = [(alarm["id"], at) for at, alarm in receiver.received]
    for name, receipts in (("http", http_receipts), ("mqtt", mqtt_receipts)):
        if receipts:
            latency = receipt_latencies(outbox, receipts)
            report.update({f"{name}_received": len(latency), f"{name}_p50_ms": float(np.percentile(latency, 50) * 1000),
                           f"{name}_p99_ms": float(np.percentile(latency, 99) * 1000),
                           f"{name}_max_ms": float(latency.max() * 1000)})
    if subscriber is not None:
        subscriber.loop_stop()
        subscriber.disconnect()
        broker.stop()
    print(json.dumps(report, indent=1))
    return 0 if counts["waiting"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
