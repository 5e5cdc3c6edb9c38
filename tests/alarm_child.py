"""A process that writes results and delivers their alarms as a job does, for the kill test
(tests/test_alerts_kills.py): the same units in the same order at every start (`units`: batches,
and corrections that update, retract and restore matches and flip flag rows), through the product's
sink, outbox, staging and delivery threads (runtime/output/alerts/pipeline.py), from where the last
process left off: a batch the sink holds is not written again but its alarms are taken (as Spark
does a batch again that was not committed), a correction the sink holds is not done again (as a
correction run again finds nothing to change). Spark is not in it: what a kill can break here is
the alarm path, and tests/test_spark_alerts.py kills a real job.

    python -m tests.alarm_child OUT URL... [--crash POINT:UNIT]

`--crash after-write:3` kills the process (SIGKILL) right after the sink wrote unit 3; points:
before-write, after-stage, after-write. Prints `done` once every alarm was acknowledged.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import time
from pathlib import Path

import pandas as pd

from sensorscript.runtime.output.alarms import FLAG, MATCH
from sensorscript.runtime.output.alerts import AlertSettings, Alerts, Deliverer, Writes
from sensorscript.runtime.output.sinks import BatchRows, open_sink

T = 1_767_225_600_000
KINDS = {"w1.F": FLAG, "w2.F": FLAG, "w1.M": MATCH, "w2.M": MATCH}
COLUMNS = ["stream", "ts", "window_start", "window_end", "value", "version", "start_ts", "end_ts", "events",
           "plan_version"]
BATCHES, ROWS = 30, 40  # per batch and stream
EVENTS = '[{"var": "a", "ts": 0, "value": 1.0, "sensor": "S1"}]'


def _row(stream: str, ts: int, value, version: int, sensor: str = "S1") -> dict:
    match = stream.endswith(".M")
    events = f'[{{"var": "a", "ts": {ts}, "value": 1.0, "sensor": "{sensor}"}}]'
    return {"stream": stream, "ts": ts, "window_start": None, "window_end": None, "value": value, "version": version,
            "start_ts": ts - 50 if match else None, "end_ts": ts if match else None,
            "events": events if match and value is not None else None, "plan_version": 1}


def units(seed: int = 40) -> tuple[list[tuple[int, str, pd.DataFrame]], dict[tuple, list[dict]]]:
    """The units every start writes, in order, and the newest rows of every key after them all (a
    match key may hold two matches at the same instants, of sensors S1 and S2, as a pattern
    partitioned by sensor makes)."""
    rng = random.Random(seed)
    newest: dict[tuple, list[dict]] = {}
    found = []
    corrections = 0
    for batch in range(BATCHES):
        rows = []
        for stream in KINDS:
            for i in range(ROWS):
                ts = T + (batch * ROWS + i) * 100
                if stream.endswith(".M"):
                    if rng.random() < 0.5:
                        sensors = ["S1", "S2"] if rng.random() < 0.3 else ["S1"]
                        key = [_row(stream, ts, round(rng.uniform(0, 10), 3), 1, s) for s in sensors]
                        rows += key
                        newest[(stream, ts)] = key
                else:
                    rows.append(_row(stream, ts, float(rng.random() < 0.5), 1))
                    newest[(stream, ts)] = rows[-1:]
        found.append((batch, "batch", pd.DataFrame(rows, columns=COLUMNS)))
        if batch % 5 == 4:  # a correction of what is written so far: updates, retractions, restorations, flips
            corrections += 1
            changed = []
            for key in rng.sample(sorted(newest), 30):
                old = newest[key]
                stream, ts = key
                version = old[0]["version"] + 1
                if stream.endswith(".M"):  # a key's matches all rewritten at once, or its tombstone
                    living = old[0]["value"] is not None
                    if living and rng.random() < 0.4:
                        new = [_row(stream, ts, None, version)]
                    else:
                        sensors = rng.choice([["S1"], ["S2"], ["S1", "S2"]])
                        new = [_row(stream, ts, round(rng.uniform(0, 10), 3), version, s) for s in sensors]
                else:
                    new = [_row(stream, ts, 1.0 - old[0]["value"], version)]
                changed += new
                newest[key] = new
            found.append((-corrections, "correction", pd.DataFrame(changed, columns=COLUMNS)))
    return found, newest


class _Status:
    """What the run's status is told of the outbox (status.json, not kept here)."""

    def alerted(self, counts) -> None:
        pass


def crash(point: str, unit: int, asked: str | None) -> None:
    if asked == f"{point}:{unit}":
        os.kill(os.getpid(), signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("urls", nargs="+")
    parser.add_argument("--crash")
    args = parser.parse_args(argv)
    out = Path(args.out)
    sink_spec = f"sqlite:{out / 'results.db'}"
    sink = open_sink(sink_spec, matches=True)
    settings = AlertSettings.of(args.urls, group_wait="200ms")
    targets = settings.check()
    keys = [t.key for t in targets]
    writes = Writes(out, settings, keys, kinds=KINDS)
    writes.written(sink_spec)  # as Alerts.open: a correction's write a kill left untaken
    deliverer = Deliverer(out, targets, group_wait_s=settings.group_wait_s).start()
    alerts = Alerts(settings, out, _Status(), print, targets, writes, deliverer)
    for unit, kind, rows in units()[0]:
        if kind == "batch":
            crash("before-write", unit, args.crash)
            sink.write(unit, BatchRows(rows, pd.DataFrame(columns=["raw", "reason"])))
            crash("after-write", unit, args.crash)
            alerts.batch(unit, rows, None)
        elif not sink.wrote(unit):
            writes.stage(unit, rows, sink_spec, None)
            crash("after-stage", unit, args.crash)
            sink.write(unit, BatchRows(rows, pd.DataFrame(columns=["raw", "reason"])))
            crash("after-write", unit, args.crash)
            writes.written(sink_spec)
        time.sleep(0.05)
    deliverer.flush()
    while writes.outbox.waiting(keys):
        time.sleep(0.05)
    deliverer.stop()
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
