"""Alarms delivered by a real job (issues #28 and #40): every bundled workflow on real Spark, late
policy correct, the job SIGKILLed mid-feed and its webhook receiver down meanwhile, then a `--once`
run that reads the rest. The receiver (deduplicating by id, as docs/ALARMS.md asks of one) ends up with
every incident in the state the reference says, over all the readings: every pattern match open in
its newest version, every flag's run of 1s open or closed, what corrections retracted gone; an MQTT
subscriber gets the same."""

from __future__ import annotations

import json
import sqlite3
import time

import pandas as pd
import pytest

from tests.brokers import need_broker, subscribe
from tests.receivers import Receiver
from tests.conftest import EXAMPLES
from tests.differential import reference_incidents, write_replay
from oracles.streams import evaluate
from sensorscript.parser import load
from sensorscript.runtime.output.alerts import webhook
from sensorscript.runtime.plan.loading import load_job
from tests.cep_harness import reference_rows, same_rows
from tests.test_restart import Run, compile_examples, reading, replay, result_rows  # noqa: F401 (replay: a fixture)

pytestmark = pytest.mark.spark

FLAGS = ("bridge_limits.EXCEEDED", "deck_vibration.ALERT")  # the examples' combine streams of a comparison


def expected_matches(out) -> set[tuple]:
    """From the results store, without the product's rule: the newest version of every match row."""
    db = sqlite3.connect(out / "results.db")
    rows = db.execute("SELECT stream, ts, IFNULL(start_ts, -1), IFNULL(end_ts, -1), value, version, events "
                      "FROM results r WHERE version = (SELECT MAX(version) FROM results s WHERE s.stream = r.stream "
                      "AND s.ts = r.ts AND IFNULL(s.start_ts, -1) = IFNULL(r.start_ts, -1) "
                      "AND IFNULL(s.end_ts, -1) = IFNULL(r.end_ts, -1)) ORDER BY stream, ts").fetchall()
    db.close()
    return {(s, t, a, b, v) for s, t, a, b, value, v, events in rows if events is not None and value is not None}


def standing(alarms: list[dict]) -> dict[tuple, tuple]:
    """What a receiver holds once each alarm (repeats dropped by id) replaces the earlier revisions of
    its incident: per incident (stream, ts where it began, start or -1, end or -1) its state, open
    or closed, and a match's version; an incident retracted is gone."""
    last: dict[str, dict] = {}
    for alarm in alarms:
        if alarm["revision"] > last.get(alarm["incident"], {"revision": 0})["revision"]:
            last[alarm["incident"]] = alarm
    return {(a["stream"], a["started_ms"], a.get("start_ms", -1), a.get("end_ms", -1)):
            ("closed" if a["state"] == "resolved" else "open", a["version"] if a["kind"] == "match" else None)
            for a in last.values() if not a["retracted"]}


def test_alarms_and_corrections_through_a_kill_and_a_receiver_outage(replay, tmp_path):  # noqa: F811
    """Late policy `correct`, alarms to a webhook and to MQTT: SIGKILL after batch 3, the receiver
    down while the next run (--once) starts and goes on, back after batch 5. The newest version of
    every row equals the reference over all the data, no row is written twice in one version, and
    the archive holds every reading once, those of sensors no workflow reads too (by sensor id);
    each target ends with the incidents the reference's rows make, repeats only of the request in
    flight at the kill."""
    need_broker()
    from tests.brokers import Broker

    _, batches = replay
    # Readings of sensors no workflow reads, among the others: archived by sensor id for a backfill.
    batches = [b + [f"SPARE-{k % 2},{reading(b[k])[1]},{k}.5" for k in range(0, len(b), 40)] for b in batches]
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
    assert "correction:" in said and "still wait" not in said and "alarms: " in said, said
    # The incidents the workflows make of every reading (late policy correct: the newest versions of the
    # rows are the reference's over all of them).
    reference = evaluate(load([str(f) for f in EXAMPLES]).workflows, [[line for batch in batches for line in batch]])
    incidents = reference_incidents(reference.rows, FLAGS)
    assert len(incidents) >= 10 and any(key[0] in FLAGS for key in incidents)
    versions = {m[:4]: m[4] for m in expected_matches(out)}
    assert set(versions) == {key for key in incidents if key[0] not in FLAGS}
    expected = {key: (state, versions.get(key)) for key, state in incidents.items()}
    assert standing([a for _, a in receiver.received]) == expected
    assert standing(published) == expected
    ids = [a["id"] for _, a in receiver.received]
    assert len(ids) - len(set(ids)) <= webhook.MOST  # repeats only of the request in flight at the kill
    assert any(a["state"] == "updated" or a["retracted"] for _, a in receiver.received)
    assert received_before < len(receiver.received) and receiver.refused >= 3
    status = json.loads((out / "status.json").read_text())["alerts"]
    assert status["waiting"] == 0 and status["failed"] >= 4 and not status["full"]

    lines = [line for batch in batches for line in batch]
    rows, _ = reference_rows({f.stem: f.read_text() for f in EXAMPLES}, [lines])
    same_rows(result_rows(out, "latest"), rows)
    read = set(load_job(out).JOB.sensors)
    archived = pd.read_parquet(out / "archive")
    assert len(archived) == sum(reading(line)[0] in read for line in lines)  # once each, though a batch ran twice
    unread = pd.read_parquet(out / "archive-unread")
    assert len(unread) and sorted(zip(unread["sensor"], unread["ts"])) == sorted(
        reading(line)[:2] for line in lines if reading(line)[0] not in read)
    db = sqlite3.connect(out / "results.db")
    try:
        versions = db.execute("SELECT COUNT(*), COUNT(DISTINCT stream || ts || IFNULL(window_start, '') || "
                              "IFNULL(start_ts, '') || version) FROM results").fetchone()
    finally:
        db.close()
    assert versions[0] == versions[1]  # no row written twice in one version
