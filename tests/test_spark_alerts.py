"""Alarms delivered by a real job (issue #28, item 2): every bundled workflow on real Spark, late
policy correct, the job SIGKILLed mid-feed and its webhook receiver down meanwhile, then a `--once`
run that reads the rest. The receiver (deduplicating by id, as the README asks of one) ends up with
exactly the alarms the results store holds: every pattern match and every time a flag turned on,
in their newest versions, corrections' retractions applied; an MQTT subscriber gets the same."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest

from tests.brokers import need_broker, subscribe
from tests.receivers import Receiver
from tests.conftest import EXAMPLES
from tests.differential import reference_alarms, write_replay
from oracles.streams import evaluate
from sensorscript.parser import load
from tests.test_restart import Run, compile_examples, replay  # noqa: F401 (replay: the fixture of the replay)

pytestmark = pytest.mark.spark

FLAGS = ("bridge_limits.EXCEEDED", "deck_vibration.ALERT")  # the examples' combine streams of a comparison


def expected_alarms(out) -> set[tuple]:
    """From the results store, without the product's rule: the newest version of every row; every
    match row, and every row of a flag whose value is 1 after a row that is not (or none)."""
    db = sqlite3.connect(out / "results.db")
    rows = db.execute("SELECT stream, ts, IFNULL(start_ts, -1), IFNULL(end_ts, -1), value, version, events "
                      "FROM results r WHERE version = (SELECT MAX(version) FROM results s WHERE s.stream = r.stream "
                      "AND s.ts = r.ts AND IFNULL(s.start_ts, -1) = IFNULL(r.start_ts, -1) "
                      "AND IFNULL(s.end_ts, -1) = IFNULL(r.end_ts, -1)) ORDER BY stream, ts").fetchall()
    db.close()
    found = {(s, t, a, b, v) for s, t, a, b, value, v, events in rows if events is not None and value is not None}
    for flag in FLAGS:
        values = [(t, value, v) for s, t, _, _, value, v, _ in rows if s == flag and value is not None]
        assert values and all(value in (0.0, 1.0) for _, value, _ in values)
        found |= {(flag, t, -1, -1, v) for (t, value, v), before in zip(values, [0.0] + [x for _, x, _ in values])
                  if value == 1.0 and before != 1.0}
    return found


def standing(alarms: list[dict]) -> set[tuple]:
    """What a receiver holds once each alarm (in the order received, repeats dropped by id) replaces
    the one of its row before it, and a retraction takes it away."""
    rows: dict[tuple, dict] = {}
    seen = set()
    for alarm in alarms:
        if alarm["id"] in seen:
            continue
        seen.add(alarm["id"])
        key = (alarm["stream"], alarm["ts_ms"], alarm.get("start_ms", -1), alarm.get("end_ms", -1))
        rows[key] = alarm
    return {(*key, a["version"]) for key, a in rows.items() if not a["retracted"]}


def test_alarms_through_a_kill_and_a_receiver_outage(replay, tmp_path):  # noqa: F811
    need_broker()
    from tests.brokers import Broker

    _, batches = replay
    data = write_replay(tmp_path / "data", batches)
    out = tmp_path / "out"
    compile_examples(out, late="correct:2s")
    broker = Broker(tmp_path / "broker").start()
    subscriber, published = subscribe(broker, "bridge/alarms", "test-alarms-out")
    receiver = Receiver().start()
    receiver.fail_next = 3  # answers 500 to the first three
    alerts = ("--alerts", receiver.url, "--alerts", f"{broker.url}/bridge/alarms", "--alerts-timeout", "90s")
    runs = []
    try:
        first = Run(out, data, extra=alerts)
        runs.append(first)
        first.wait_for("batch 3:")
        first.kill()
        receiver.stop()  # down while the next run starts and goes on
        received_before = len(receiver.received)
        second = Run(out, data, extra=("--once", *alerts))
        runs.append(second)
        second.wait_for("batch 5:")
        time.sleep(2)
        receiver.start()  # back: what waited is delivered, and the run ends once all is
        assert second.finish() == 0, second.output()
    finally:
        for run in runs:
            run.cleanup()
        receiver.stop()
        subscriber.loop_stop()
        subscriber.disconnect()
        broker.stop()
    said = second.output()
    assert "correction:" in said and ", 0 wait in" in said, said
    expected = expected_alarms(out)
    assert len(expected) >= 10 and any(s in FLAGS for s, *_ in expected)
    # Those are the alarms the workflows make of every reading (late policy correct: the newest versions
    # of the rows are the reference's over all of them).
    reference = evaluate(load([str(f) for f in EXAMPLES]).workflows, [[line for batch in batches for line in batch]])
    assert sorted(alarm[:4] for alarm in expected) == sorted(set(reference_alarms(reference.rows, FLAGS)))
    assert standing([a for _, a in receiver.received]) == expected
    assert standing(published) == expected
    ids = [a["id"] for _, a in receiver.received]
    assert len(ids) - len(set(ids)) <= 1  # a repeat only for the alarm in flight at the kill
    assert any(a["retracted"] for _, a in receiver.received) or any(a["version"] > 1 for _, a in receiver.received)
    assert received_before < len(receiver.received) and receiver.refused >= 3
    status = json.loads((out / "status.json").read_text())["alerts"]
    assert status["waiting"] == 0 and status["failed"] >= 4 and not status["full"]
