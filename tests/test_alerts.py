"""Alarms delivered (`sscript run --alerts`, issues #28 and #40) without Spark: the outbox takes each
batch's alarms once, as incidents' states; delivers them at least once, grouped, to a real HTTP
receiver that fails (500s, timeouts, down for a while) and to a real MQTT broker; resends after a
SIGKILL only what was not acknowledged; and says in the status when it is full."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from sensorscript.runtime.output.alarms import FLAG, MATCH
from sensorscript.runtime.output.alerts import (AlertSettings, Deliverer, FlagState, Outbox, Target, batch_alarms,
                                                correction_alarms)
from sensorscript.runtime.output.alerts import payload, retry, templates, webhook
from sensorscript.runtime.output.sinks import BatchRows, open_sink, read_results
from sensorscript.runtime.output.status import describe_alerts
from sensorscript.runtime.ingest import mqtt
from tests.brokers import Broker, need_broker, subscribe
from tests.receivers import Receiver

ROOT = Path(__file__).resolve().parent.parent
T = 1_767_225_600_000
KINDS = {"w.F": FLAG, "w.M": MATCH}


def flag(ts: int, value: float | None, version: int = 1) -> dict:
    return {"stream": "w.F", "ts": T + ts, "value": value, "version": version, "plan_version": 1}


def match(ts: int, value: float | None, version: int = 1) -> dict:
    events = json.dumps([{"var": "a", "ts": T + ts, "value": value, "sensor": "S1"}]) if value is not None else None
    return {"stream": "w.M", "ts": T + ts, "value": value, "version": version, "start_ts": T + ts - 100,
            "end_ts": T + ts, "events": events, "plan_version": 1}


def frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["stream", "ts", "window_start", "window_end", "value", "version", "start_ts",
                                       "end_ts", "events", "plan_version"])


def wait_until(condition, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not {what} within {timeout} s"
        time.sleep(0.05)


def take(outbox: Outbox, batch: int, rows: list[dict], targets=("hook",)) -> int:
    """What the run loop does with a batch's rows (Alerts.batch)."""
    results = frame(rows)
    found, last = batch_alarms(results, KINDS, outbox.flags(set(results["stream"]) & {"w.F"}))
    return outbox.take(batch, found, last, list(targets))


def deliverer(out, targets, **given) -> Deliverer:
    """The delivery threads, groups sent without waiting (the tests' alarms are all there at once)."""
    return Deliverer(out, [Target.parse(t) if isinstance(t, str) else t for t in targets],
                     **{"group_wait_s": 0.0, **given})


def waiting_ids(outbox: Outbox, target: str = "hook") -> list[str]:
    return [ident for _, ident, _ in outbox.waiting_for(target, 1000)]


def test_each_batch_is_taken_once_and_flags_carry_over(tmp_path):
    """Matches fire; a flag's incident fires where it turns on and resolves where it turns off; a
    batch done again (after a kill) adds nothing and leaves the flags' states as they were, so the
    next batch turns on where it should."""
    outbox = Outbox(tmp_path)
    first = [flag(10, 0.0), flag(20, 1.0), flag(30, 1.0), match(15, 4.5)]
    assert take(outbox, 0, first) == 2
    assert take(outbox, 0, first) == 0  # done again: nothing new, the flag still on
    assert take(outbox, 1, [flag(40, 1.0), flag(50, 0.0), flag(60, 1.0)]) == 2  # off at 50, on again at 60
    bodies = [json.loads(body) for _, _, body in outbox.waiting_for("hook")]  # in event-time order
    assert [(b["id"], b["state"]) for b in bodies[1:]] == [
        (f"w.F/{T + 20}/1", "firing"), (f"w.F/{T + 20}/2", "resolved"), (f"w.F/{T + 60}/1", "firing")]
    assert bodies[2]["ts_ms"] == T + 50 and bodies[2]["started_ms"] == T + 20 and bodies[2]["incident"] == f"w.F/{T + 20}"
    body = bodies[0]
    assert body["id"].startswith(f"w.M/{T + 15}/") and body["id"].endswith("/1") and body["state"] == "firing"
    assert body["kind"] == "match" and body["workflow"] == "w" and body["ts"] == "2026-01-01T00:00:00.015Z"
    assert body["start_ms"] == T - 85 and body["events"][0]["sensor"] == "S1" and body["retracted"] is False
    # A run that starts afresh on the same input (its last one ended it) numbers its batches from 0
    # again with every flag off: it finds the same incidents in the same states, not taken twice.
    ids = [b["id"] for b in bodies]
    outbox.start_afresh()
    assert take(outbox, 0, first) == 0 and take(outbox, 1, [flag(40, 1.0), flag(50, 0.0), flag(60, 1.0)]) == 0
    assert take(outbox, 2, [flag(70, 1.0)]) == 0  # still on since 60
    assert waiting_ids(outbox) == ids
    outbox.close()


def test_an_incident_fires_updates_resolves_and_fires_again(tmp_path):
    """A match's incident through corrections: a new version is an update, a retraction resolves it,
    and the match back (a later correction) fires it again, each a revision of the same incident
    key; the same version found again is no change."""
    outbox = Outbox(tmp_path)
    take(outbox, 0, [match(15, 4.5)])
    for unit, row, new in ((-1, match(15, 5.0, version=2), 1), (-2, match(15, 5.0, version=2), 0),
                           (-3, match(15, None, version=3), 1), (-4, match(15, 6.0, version=4), 1)):
        found, last = correction_alarms(frame([row]), KINDS, frame([]), {})
        assert outbox.take(unit, found, last, ["hook"]) == new
    bodies = [json.loads(body) for _, _, body in outbox.waiting_for("hook")]
    assert [(b["revision"], b["state"], b["version"], b["retracted"]) for b in bodies] == [
        (1, "firing", 1, False), (2, "updated", 2, False), (3, "resolved", 3, True), (4, "firing", 4, False)]
    assert len({b["incident"] for b in bodies}) == 1 and len({b["id"] for b in bodies}) == 4
    assert "updated to version 2" in bodies[1]["summary"] and "retracted" in bodies[2]["summary"]
    outbox.close()


def test_a_value_past_the_double_range_and_a_time_past_the_year_9999_reach_a_receiver_as_json(tmp_path):
    """A match whose value is a window's sum that overflowed, at a window's end after the year 9999:
    the receiver (strict JSON, as one in Go or JavaScript) gets it, its value "+Inf" and its events'
    "-Inf" as Prometheus writes them, its time in ISO 8601's expanded form; before, the body held
    Python's `Infinity` and was refused at every attempt."""
    after_9999 = 253_402_300_800_000 + 15 - T  # match() adds T
    receiver = Receiver().start()
    outbox = Outbox(tmp_path)
    row = {**match(after_9999, float("inf")),
           "events": json.dumps([{"var": "a", "ts": T + after_9999, "value": float("-inf"), "sensor": "S1"}])}
    take(outbox, 0, [row], targets=[receiver.url])
    sending = deliverer(tmp_path, [receiver.url]).start()
    try:
        assert receiver.wait_for(1, timeout=30), f"{receiver.refused} refused"
    finally:
        sending.stop()
        receiver.stop()
    (_, alarm), = receiver.received
    assert alarm["value"] == "+Inf" and alarm["events"][0]["value"] == "-Inf"
    assert alarm["ts"] == "+010000-01-01T00:00:00.015Z" and alarm["ts_ms"] == 253_402_300_800_015
    assert "value inf" in alarm["summary"]
    assert json.loads(payload.to_json({"v": [float("nan"), 1.5]}), parse_constant=float) == {"v": ["NaN", 1.5]}
    # A match whose value is not a number (an arithmetic stream's inf - inf): said, not an error
    # (found by the hostile-sinks property test, tests/test_kafka.py).
    alarm = payload.numbered(payload.alarm_object({**match(5, float("nan")), "events": None}, MATCH), 1, "firing")
    assert alarm["value"] is None and alarm["summary"].endswith("(its value is not a number)")
    outbox.close()


def test_a_storm_goes_in_groups_and_a_failed_request_is_retried_alone(tmp_path, monkeypatch):
    """3,000 alarms of three workflows to a receiver that answers 503 to every 4th request: they go
    in requests of one workflow each, at most webhook.MOST alarms a request; the failed requests'
    alarms alone are sent again, and the receiver has each alarm once, an incident's states in order."""
    monkeypatch.setattr(retry, "BACKOFF_FIRST_S", 0.05)
    receiver = Receiver().start()
    receiver.fail_every = 4
    outbox = Outbox(tmp_path)
    kinds = {f"w{i}.M": MATCH for i in range(3)}
    rows = [dict(match(t, 1.0), stream=f"w{t % 3}.M") for t in range(1, 3_001)]
    results = frame(rows)
    found, last = batch_alarms(results, kinds, {})
    assert outbox.take(0, found, last, [receiver.url]) == 3_000
    sending = deliverer(tmp_path, [receiver.url]).start()
    try:
        wait_until(lambda: outbox.counts()["waiting"] == 0, "every alarm delivered")
    finally:
        sending.stop()
        receiver.stop()
    ids = receiver.ids()
    assert len(ids) == len(set(ids)) == 3_000  # none twice: a failed request's alarms alone go again
    assert all(len({a["workflow"] for a in body["alarms"]}) == 1 and body["group"] == {"workflow": body["alarms"][0]["workflow"]}
               and len(body["alarms"]) <= webhook.MOST for body in receiver.bodies)
    failed = outbox.counts()["failed"]  # 6 requests of 500, and each failed one again
    assert receiver.requests == 6 + failed and failed == receiver.requests // 4 >= 1
    assert {b["version"] for b in receiver.bodies} == {webhook.FORMAT}
    outbox.close()


@pytest.mark.parametrize("by, groups", [("stream", 2), ("none", 1)])
def test_alarms_are_grouped_as_asked(tmp_path, by, groups):
    receiver = Receiver().start()
    outbox = Outbox(tmp_path)
    take(outbox, 0, [flag(10, 1.0), match(15, 4.5), match(25, 4.5)], targets=[receiver.url])
    sending = deliverer(tmp_path, [receiver.url], group_by=by).start()
    try:
        assert receiver.wait_for(3)
    finally:
        sending.stop()
        receiver.stop()
    assert len(receiver.bodies) == groups
    assert receiver.bodies[0]["group"] == ({} if by == "none" else {"stream": receiver.bodies[0]["alarms"][0]["stream"]})
    outbox.close()


def test_a_group_waits_for_the_rest_of_the_storm(tmp_path):
    """--alerts-group-wait: alarms of one workflow taken a moment apart go in one request."""
    receiver = Receiver().start()
    outbox = Outbox(tmp_path)
    sending = deliverer(tmp_path, [receiver.url], group_wait_s=1.5).start()
    try:
        take(outbox, 0, [match(10, 1.0)], targets=[receiver.url])
        time.sleep(0.3)
        take(outbox, 1, [match(20, 1.0), flag(30, 1.0)], targets=[receiver.url])
        sending.wake()
        assert receiver.wait_for(3)
    finally:
        sending.stop()
        receiver.stop()
    assert [len(body["alarms"]) for body in receiver.bodies] == [3]
    outbox.close()


def test_a_receiver_that_fails_gets_every_alarm(tmp_path, monkeypatch):
    """500s, a timeout and a receiver down for a while: the failed requests are put off with a
    doubling delay (the attempts counted), and in the end the deduplicating receiver has every
    alarm, each incident's states in order."""
    monkeypatch.setattr(webhook, "SEND_TIMEOUT_S", 0.5)
    monkeypatch.setattr(retry, "BACKOFF_FIRST_S", 0.1)
    receiver = Receiver().start()
    receiver.fail_next, receiver.slow_next, receiver.slow_s = 3, 1, 1.5
    outbox = Outbox(tmp_path)
    take(outbox, 0, [flag(t, float(t % 20 == 0)) for t in range(10, 410, 10)], targets=[receiver.url])
    told = []
    sending = deliverer(tmp_path, [receiver.url], on_counts=told.append).start()
    try:
        assert receiver.wait_for(39, timeout=30)  # 20 incidents fired, 19 resolved
        wait_until(lambda: outbox.counts()["waiting"] == 0, "the first 39 acknowledged")
        receiver.stop()  # down
        failed = outbox.counts()["failed"]
        take(outbox, 1, [flag(t, float(t % 20 == 0)) for t in range(410, 610, 10)], targets=[receiver.url])
        wait_until(lambda: outbox.counts()["failed"] > failed, "an attempt while the receiver is down")
        assert outbox.counts()["waiting"] == 20  # the last resolved, 10 more fired and 9 of them resolved
        receiver.start()  # back on the same port
        assert receiver.wait_for(59, timeout=30)
    finally:
        sending.stop()
        receiver.stop()
    counts = outbox.counts()
    assert counts["waiting"] == 0 and counts["delivered"] == 59 and counts["failed"] >= 5
    assert receiver.refused == 4
    unique = receiver.unique()
    assert set(unique) == {f"w.F/{T + t}/{r}" for t in range(20, 610, 20) for r in (1, 2)} - {f"w.F/{T + 600}/2"}
    for incident in {a["incident"] for a in unique.values()}:  # firing before resolved, at the receiver
        states = [a["state"] for _, a in receiver.received if a["incident"] == incident]
        assert states[0] == "firing" and states.count("firing") == 1 and states[-1] in ("firing", "resolved")
    assert told[-1]["delivered"] == 59 and told[-1]["targets"][receiver.url]["last_success"]
    outbox.close()


def test_a_receiver_that_refuses_is_retried_at_the_longest_interval(tmp_path):
    """A 404 will not go away by itself: the alarm stays, put off BACKOFF_LAST_S, and the status
    says it fails and why."""
    receiver = Receiver().start()
    receiver.fail_next, receiver.fail_status = 100, 404
    outbox = Outbox(tmp_path)
    take(outbox, 0, [match(10, 1.0)], targets=[receiver.url])
    started = time.time()
    sending = deliverer(tmp_path, [receiver.url]).start()
    try:
        wait_until(lambda: outbox.counts()["failed"], "the refusal")
        seen = time.time()
        next_try = outbox.queue(receiver.url, 1)[0][4]
        # Put off BACKOFF_LAST_S (jitter 0.8-1.2) from the refusal, which came between `started` and `seen`.
        assert started + 0.8 * retry.BACKOFF_LAST_S <= next_try <= seen + 1.2 * retry.BACKOFF_LAST_S
    finally:
        sending.stop()
        receiver.stop()
    counts = outbox.counts()
    assert counts["waiting"] == 1 and counts["failed"] == 1 and receiver.refused == 1
    lines = describe_alerts({"alerts": counts})
    assert "1 waiting in the outbox" in lines[0]
    assert f"to {receiver.url}: 1 waiting, 0 delivered, failing: HTTP 404" in lines[1]


def test_a_full_outbox_counts_what_it_does_not_keep(tmp_path):
    outbox = Outbox(tmp_path, limit=5)
    assert take(outbox, 0, [match(t, 1.0) for t in range(10, 90, 10)]) == 5
    assert take(outbox, 0, [match(t, 1.0) for t in range(10, 90, 10)]) == 0  # done again: not counted twice
    counts = outbox.counts()
    assert (counts["waiting"], counts["full"], counts["dropped"], counts["limit"]) == (5, True, 3, 5)
    assert "FULL: 3 alarms were not kept" in describe_alerts({"alerts": counts})[0]


DELIVER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from sensorscript.runtime.output.alerts import Deliverer, Target
    Deliverer(Path(sys.argv[1]), [Target.parse(sys.argv[2])], group_wait_s=0).start()
    time.sleep(600)
""")


def test_a_killed_deliverer_resends_only_what_was_not_acknowledged(tmp_path):
    """A delivery process killed with SIGKILL mid-way (the receiver takes the first request, a
    workflow's 100 alarms, and holds the others unanswered: the kill lands while they are in
    flight): the next one sends every alarm the receiver did not acknowledge, and none it did."""
    receiver = Receiver().start()
    receiver.hold_after = 100
    outbox = Outbox(tmp_path)
    kinds = {f"w{i}.M": MATCH for i in range(4)}
    found, last = batch_alarms(frame([dict(match(t, 1.0), stream=f"w{t % 4}.M") for t in range(1, 401)]), kinds, {})
    outbox.take(0, found, last, [receiver.url])
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, "-c", DELIVER, str(tmp_path), receiver.url], env=environment)
    try:
        wait_until(lambda: receiver.held, "a second request in flight")
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        receiver.hold_after = None
        receiver.release.set()
        before = receiver.ids()
        acknowledged = {ident for ident, _, delivered in outbox.latencies() if delivered is not None}
        assert len(before) == 100 and acknowledged <= set(before)
        process = subprocess.Popen([sys.executable, "-c", DELIVER, str(tmp_path), receiver.url], env=environment)
        assert receiver.wait_for(400, timeout=60)
        wait_until(lambda: outbox.counts()["waiting"] == 0, "every alarm acknowledged")
    finally:
        process.kill()
        process.wait()
        receiver.stop()
    after = receiver.ids()[len(before):]
    assert not acknowledged & set(after)  # nothing acknowledged was sent again
    assert len(after) == len(set(after)) and set(before) | set(after) == {i for i, _, _ in outbox.latencies()}
    assert outbox.counts()["waiting"] == 0


def test_alarms_published_over_mqtt_through_a_broker_restart(tmp_path, broker):
    """QoS 1 publishes to a real mosquitto, a subscriber in the test receives them; the broker
    restarted meanwhile, what waited is published once it is back."""
    subscriber, got = subscribe(broker, "bridge/alarms", "test-alarms")
    target = f"{broker.url}/bridge/alarms"
    outbox = Outbox(tmp_path)
    take(outbox, 0, [match(t, 1.0) for t in range(10, 60, 10)], targets=[target])
    deliverer = globals()["deliverer"](tmp_path, [target]).start()
    try:
        deadline = time.monotonic() + 20
        while len(got) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(got) == 5
        broker.stop()
        take(outbox, 1, [flag(100, 1.0)], targets=[target])
        time.sleep(1.0)
        assert outbox.counts()["waiting"] == 1
        broker.start()
        deadline = time.monotonic() + 40
        while len({a["id"] for a in got}) < 6 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        deliverer.stop()
        subscriber.loop_stop()
        subscriber.disconnect()
    assert [a["id"] for a in got][-1] == f"w.F/{T + 100}/1" and len({a["id"] for a in got}) == 6
    assert outbox.counts()["waiting"] == 0


def test_a_storm_published_over_mqtt_with_many_in_flight(tmp_path, broker):
    """10,000 alarms to a real mosquitto (QoS 1, up to mqtt_topic.IN_FLIGHT unacknowledged at once):
    a subscriber receives each once, an incident's states in order."""
    subscriber, got = subscribe(broker, "bridge/storm", "test-storm")
    target = f"{broker.url}/bridge/storm"
    outbox = Outbox(tmp_path)
    kinds = {f"pier{i:02d}.F": FLAG for i in range(20)}
    rows = [dict(flag(t * 10, float(t % 2 == 0)), stream=f"pier{i:02d}.F") for t in range(500) for i in range(20)]
    found, last = batch_alarms(frame(rows), kinds, {})
    assert outbox.take(0, found, last, [target]) == 10_000
    sending = deliverer(tmp_path, [target]).start()
    try:
        wait_until(lambda: outbox.counts()["waiting"] == 0, "10,000 alarms acknowledged by the broker", 120)
        wait_until(lambda: len(got) >= 10_000, "10,000 alarms received by the subscriber", 60)
    finally:
        sending.stop()
        subscriber.loop_stop()
        subscriber.disconnect()
    assert len({a["id"] for a in got}) == 10_000
    seen: dict[str, int] = {}
    first = {}
    for alarm in got:
        first.setdefault(alarm["id"], alarm)
    for alarm in first.values():  # each id's first receipt, in the order received (a dict keeps it)
        assert alarm["revision"] == seen.get(alarm["incident"], 0) + 1
        seen[alarm["incident"]] = alarm["revision"]
    outbox.close()


@pytest.mark.server  # starts its own server (the quick tier leaves it out)
def test_an_alarm_broker_takes_a_password_of_its_own(tmp_path, monkeypatch):
    """--alerts mqtt://USER@... takes its password from SSCRIPT_ALERTS_MQTT_PASSWORD, not from the
    source's SSCRIPT_MQTT_PASSWORD (#39, finding 4: one password was sent to every broker)."""
    need_broker()
    secured = Broker(tmp_path / "secured", user="alarms", password="al3rt").start()
    monkeypatch.setenv(mqtt.PASSWORD_VARIABLE, "the-source-password")
    monkeypatch.setenv(mqtt.ALERTS_PASSWORD_VARIABLE, "al3rt")
    subscriber, got = subscribe(secured, "plant/alarms", "test-alarms")
    target = f"mqtt://alarms@127.0.0.1:{secured.port}/plant/alarms"
    outbox = Outbox(tmp_path)
    take(outbox, 0, [match(10, 1.0)], targets=[target])
    settings = AlertSettings.of([target])
    deliverer = Deliverer(tmp_path, settings.check(), login=settings.login).start()
    try:
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        deliverer.stop()
        subscriber.loop_stop()
        subscriber.disconnect()
        secured.stop()
    assert [(a["stream"], a["ts_ms"] - T, a["version"]) for a in got] == [("w.M", 10, 1)]


@pytest.mark.parametrize("host", ["10.20.30.40", "broker.plant.example", "[fd00::7]"])
def test_a_password_over_plain_mqtt_to_another_host_is_refused(host):
    """An alarms' broker off this host over mqtt:// would read its password off the wire: refused in
    one sentence that names the way out, unless the run says --mqtt-plain-password (#39, finding 4)."""
    environ = {mqtt.ALERTS_PASSWORD_VARIABLE: "al3rt"}
    target = f"mqtt://alarms@{host}/plant/alarms"
    with pytest.raises(ValueError) as refused:
        AlertSettings.of([target]).check(environ=environ)
    said = str(refused.value)
    assert len(said.splitlines()) == 1 and "al3rt" not in said
    assert "mqtts://" in said and "--mqtt-plain-password" in said and mqtt.ALERTS_PASSWORD_VARIABLE in said
    AlertSettings.of([target], plain_password=True).check(environ=environ)
    AlertSettings.of([target.replace("mqtt://", "mqtts://")]).check(environ=environ)  # TLS
    AlertSettings.of([target]).check(environ={})  # no password to send
    for here in ("127.0.0.1", "localhost", "[::1]", "127.8.9.10"):
        AlertSettings.of([f"mqtt://alarms@{here}/plant/alarms"]).check(environ=environ)


def test_a_correction_sends_the_alarms_it_changes_once_written(tmp_path):
    """Late data corrected: a flag off after all at a row where it turned on (its incident resolved,
    retracted), on at a later row instead (a new incident); a match retracted (resolved). The
    alarms are staged before the sink's write and taken once the sink holds it: a process killed
    before writing leaves none (the correction, run again, stages them anew), one killed after
    writing leaves them to the next `settle`, which takes them once."""
    sink_spec = f"sqlite:{tmp_path / 'results.db'}"
    sink = open_sink(sink_spec, matches=True)
    outbox = Outbox(tmp_path)
    rows = [flag(10, 0.0), flag(20, 1.0), flag(30, 1.0), match(15, 4.5)]
    sink.write(0, BatchRows(frame(rows), pd.DataFrame(columns=["raw", "reason"])))
    take(outbox, 0, rows)
    changed = frame([flag(20, 0.0, version=2), match(15, None, version=2)])
    found, last = correction_alarms(changed, KINDS, read_results(sink_spec, ["w.F"]), outbox.flags(["w.F"]))
    outbox.stage(-1, found, last)
    assert outbox.settle(sink.wrote, ["hook"]) == 0 and outbox.staged() == 1  # not written yet, its process alive
    dead = subprocess.Popen(["true"])
    dead.wait()
    outbox.db.execute("UPDATE staged SET pid = ?", (dead.pid,))
    assert outbox.settle(sink.wrote, ["hook"]) == 0 and outbox.staged() == 0  # died before writing: dropped
    outbox.stage(-1, found, last)  # the correction run again
    sink.write(-1, BatchRows(changed, pd.DataFrame()))
    outbox.db.execute("UPDATE staged SET pid = ?", (dead.pid,))  # ... and killed before it took them
    assert outbox.settle(sink.wrote, ["hook"]) == 3 and outbox.settle(sink.wrote, ["hook"]) == 0  # once
    bodies = [json.loads(body) for _, _, body in outbox.waiting_for("hook")]
    said = [(b["stream"], b["ts_ms"] - T, b["state"], b["version"], b["retracted"]) for b in bodies]
    assert said == [("w.M", 15, "firing", 1, False), ("w.F", 20, "firing", 1, False),  # the batch's
                    ("w.M", 15, "resolved", 2, True), ("w.F", 20, "resolved", 2, True),  # the correction's
                    ("w.F", 30, "firing", 1, False)]
    assert bodies[3]["id"] == f"w.F/{T + 20}/2" and bodies[3]["value"] == 0.0
    assert outbox.flags(["w.F"])["w.F"] == (T + 30, 1.0, T + 30)  # on since 30 now


def test_targets_templates_and_settings():
    assert Target.parse("env:HOOK", {"HOOK": "https://hooks.slack.com/services/T/B/secret"}).key == "env:HOOK"
    for wrong, said in [("ftp://x", "alarms go to"), ("mqtt://h/a/#", "wildcard"), ("env:NOPE", "is not set"),
                        ("mqtt://u:pw@h/t", "password"), ("postgresql://u:pw@h/db", "holds no password"),
                        ("postgresql://h", "name the server and the database: postgresql://host/DB")]:
        with pytest.raises(ValueError, match=said) as refused:
            Target.parse(wrong, {})
        assert ":pw@" not in str(refused.value)
    # A database's alarms table: the user may be named (the password comes as libpq finds it).
    database = Target.parse("postgresql://sensors@db:5433/plant?schema=bridge", {})
    assert database.kind == "postgresql" and database.key == "postgresql://db:5433/plant"
    settings = AlertSettings.of(["http://h/x"], ["a,b", "c"], "5min")
    assert settings.workflows == ("a", "b", "c") and settings.timeout_s == 300


@pytest.mark.parametrize("name", templates.BUILT_IN)
def test_the_built_in_templates_render_json(name):
    """The built-in templates (templates/alerts/*.j2) render a group of alarms, or one, into valid JSON:
    Alertmanager's webhook body, PagerDuty's event, Slack, Teams, ntfy."""
    template = templates.load_template(name)
    fired = payload.example()
    resolved = payload.numbered({**fired, "state": "resolved"}, 2, "resolved")
    for alarms in ([fired], [fired, resolved] * 15):
        body = json.loads(templates.render(template, alarms if template.group else alarms[0],
                                           {"workflow": "pier_alarms"}, "workflow=pier_alarms", "R0UT1NG"))
        assert "pier_alarms" in json.dumps(body)
    if name == "alertmanager":
        assert body["version"] == "4" and body["status"] == "firing" and len(body["alerts"]) == 30
        assert body["alerts"][1]["status"] == "resolved" and body["alerts"][1]["endsAt"] == resolved["ts"]
        assert body["alerts"][0]["labels"]["incident"] == fired["incident"] and body["groupLabels"] == {"workflow": "pier_alarms"}
    if name == "pagerduty":
        assert not template.group and template.routing_key
        assert (body["routing_key"], body["event_action"], body["dedup_key"]) == ("R0UT1NG", "trigger", fired["incident"])
        assert body["payload"]["severity"] == "critical" and body["payload"]["source"] == "pier_alarms.JUMP"


def test_a_template_of_pagerduty_needs_its_routing_key():
    with pytest.raises(ValueError, match=templates.ROUTING_KEY_VARIABLE):
        AlertSettings.of(["https://events.pagerduty.com/v2/enqueue"], template="pagerduty").check(environ={})
    AlertSettings.of(["https://events.pagerduty.com/v2/enqueue"], template="pagerduty").check(
        environ={templates.ROUTING_KEY_VARIABLE: "R0UT1NG"})


HOSTILE_ID = 'S"1\\", "text": "x'


@pytest.mark.parametrize("text", ['{"text": "{{ alarm.summary }} by {{ alarm.events | map(attribute=\'sensor\') | join(\', \') }}"}',
                                  '{"text": "{{ alarm.events[0].sensor }}", "value": {{ alarm.value }}, '
                                  '"retracted": {{ alarm.retracted }}, "end": {{ alarm.end_ms }}, "plan": {{ alarm.plan_version }}}',
                                  '{"who": {{ alarm.events[0].sensor | tojson }}, "stream": "{{ alarm.stream }}"}'])
def test_a_template_without_tojson_writes_json_of_hostile_ids(tmp_path, text):
    """What a template prints is written as JSON string content (`|tojson` stays as it was): a sensor
    id or stream name with quotes and backslashes stays inside its string (#39, finding 8)."""
    events = json.dumps([{"var": "a", "ts": 1767226320000, "value": 0.61, "sensor": HOSTILE_ID}])
    alarm = payload.alarm_object({"stream": 'w"\\.J\n', "ts": 1767226320000, "version": 1, "value": 0.5,
                                  "start_ts": 1, "end_ts": 2, "events": events}, "match")
    (tmp_path / "t.j2").write_text(text)
    body = json.loads(templates.render(templates.load_template(str(tmp_path / "t.j2")), alarm))
    assert HOSTILE_ID in body.get("text", "") + body.get("who", "")
    assert set(body) <= {"text", "value", "retracted", "end", "plan", "who", "stream"}
    assert body.get("stream", alarm["stream"]) == alarm["stream"]


@pytest.mark.parametrize("text", ["{{ alarm.__class__.__mro__[1].__subclasses__() }}",
                                  "{{ ''.__class__.__base__.__subclasses__() }}",
                                  "{{ cycler.__init__.__globals__.os }}"])
def test_an_alert_template_runs_in_the_sandbox(tmp_path, text):
    (tmp_path / "t.j2").write_text(text)
    with pytest.raises(ValueError, match="--alerts-template"):
        templates.render(templates.load_template(str(tmp_path / "t.j2")), payload.example())


@pytest.mark.parametrize("text", ['{% include "other.j2" %}', '{% import "macros.j2" as m %}{{ m.x() }}',
                                  '{% extends "base.j2" %}', '{% from "m.j2" import x %}'])
def test_a_template_that_reads_other_files_is_refused_when_it_is_loaded(tmp_path, text):
    """The job loads one file; an include was an internal error (no loader) at the first alarm."""
    (tmp_path / "t.j2").write_text(text)
    with pytest.raises(ValueError, match=r"--alerts-template .*t\.j2: a template is one file; \{% include %\}"):
        templates.load_template(str(tmp_path / "t.j2"))


def test_an_alarms_file_or_template_others_may_change_is_refused(tmp_path):
    """--alerts file:PATH says where the alarms go and --alerts-template FILE what they say: a file
    others may write to, or that another user owns, is refused in one sentence, as OUT's code is."""
    from sensorscript.runtime.output.alerts.settings import _held

    hook, body = tmp_path / "hook.url", tmp_path / "body.j2"
    hook.write_text("http://127.0.0.1:9/hook\n")
    body.write_text('{"text": {{ alarm.summary|tojson }}}')
    for path in (hook, body):
        path.chmod(0o600)
    assert _held(f"file:{hook}", {}) == "http://127.0.0.1:9/hook" and templates.load_template(str(body))
    for path in (hook, body):
        path.chmod(0o620)
    with pytest.raises(ValueError, match=r"--alerts file:.*hook\.url: others may write to it \(mode -rw--w----\): "
                                         r"chmod go-w .*; whoever can change it decides where the alarms go"):
        _held(f"file:{hook}", {})
    with pytest.raises(ValueError, match=r"--alerts-template .*body\.j2: others may write to it"):
        templates.load_template(str(body))
    if os.geteuid() == 0:  # another user's file (root may give one away)
        for path in (hook, body):
            path.chmod(0o600)
            os.chown(path, 65534, 65534)
        with pytest.raises(ValueError, match=r"hook\.url: it belongs to the user .*, not to you"):
            _held(f"file:{hook}", {})
        with pytest.raises(ValueError, match=r"body\.j2: it belongs to the user .*, not to you"):
            templates.load_template(str(body))


SECRET_URLS = ["http://u53r:p4ss@host/hook", "https://host/hook?token=T0P", "https://host/x?a=1&api_key=K3Y",
               "http://u53r@host/hook"]


@pytest.mark.parametrize("url", SECRET_URLS)
def test_a_credential_in_an_alert_url_is_refused_in_one_sentence(url):
    """As the MQTT input refuses a password in its address (#39, finding 2)."""
    with pytest.raises(ValueError) as refused:
        Target.parse(url, {})
    said = str(refused.value)
    assert "env:VARIABLE" in said and "file:PATH" in said and len(said.splitlines()) == 1
    assert not any(secret in said for secret in ("u53r", "p4ss", "T0P", "K3Y"))


def test_secrets_come_from_the_environment_or_a_file_and_show_redacted(tmp_path):
    (tmp_path / "hook").write_text("https://u:pw@hooks.example/services/T/B?token=T0P\n")
    from_file = Target.parse(f"file:{tmp_path / 'hook'}", {})
    assert from_file.url == "https://u:pw@hooks.example/services/T/B?token=T0P" and from_file.key == f"file:{tmp_path / 'hook'}"
    from_env = Target.parse("env:HOOK", {"HOOK": "https://hooks.example/x?token=T0P"})
    assert from_env.key == "env:HOOK"
    assert Target.parse("https://hooks.example/x?topic=a", {}).key == "https://hooks.example/x"
    with pytest.raises(ValueError) as refused:  # an env: address that does not parse: its value unsaid
        Target.parse("env:HOOK", {"HOOK": "mqtt://u:T0P@broker/a/#"})
    assert "T0P" not in str(refused.value) and "u:" not in str(refused.value)


def test_the_outbox_shows_targets_and_errors_redacted_also_those_of_earlier_versions(tmp_path):
    outbox = Outbox(tmp_path)
    old = "https://hooks.example/x?token=T0P"  # how earlier versions keyed a target: as given
    take(outbox, 0, [match(10, 1.0), match(20, 1.0)], [old, "https://hooks.example/x?token=OTHER"])
    a, b = waiting_ids(outbox, old)
    outbox.failed(old, "HTTPError: 403 for https://u:pw@hooks.example/x?token=T0P")
    outbox.close()
    outbox = Outbox(tmp_path)
    assert [ident for _, ident, _ in outbox.waiting_for("https://hooks.example/x")] == [a, b]
    outbox.failed("https://hooks.example/x", "timed out reaching https://hooks.example/x?token=T0P")
    for seq, _, _ in outbox.waiting_for("https://hooks.example/x"):
        outbox.acknowledged("https://hooks.example/x", seq)
    counts = outbox.counts()
    assert counts["waiting"] == 0 and list(counts["targets"]) == ["https://hooks.example/x"]
    assert counts["targets"]["https://hooks.example/x"]["last_error"] == "timed out reaching https://hooks.example/x"
    outbox.close()
    dump = "\n".join(sqlite3.connect(tmp_path / "alerts" / "outbox.db").iterdump())
    assert "T0P" not in dump and "OTHER" not in dump and "pw" not in dump


def test_a_silence_holds_back_new_incidents_but_lets_sent_ones_resolve(tmp_path):
    """`sscript alerts silence`: the incidents of a workflow or a stream that begin while it lasts are
    held back for every target, their later states with them; an incident sent before it resolves
    all the same; once it ends, new incidents go again. Status says it."""
    receiver = Receiver().start()
    outbox = Outbox(tmp_path)
    sending = deliverer(tmp_path, [receiver.url]).start()
    try:
        take(outbox, 0, [flag(10, 1.0), match(12, 1.0)], targets=[receiver.url])
        assert receiver.wait_for(2)
        number = outbox.silence("w", 3600, "bridge inspection")
        take(outbox, 1, [flag(20, 0.0), flag(30, 1.0), match(35, 1.0)], targets=[receiver.url])
        take(outbox, 2, [flag(40, 0.0)], targets=[receiver.url])
        sending.wake()
        wait_until(lambda: outbox.counts()["waiting"] == 0, "all taken off the queue")
        assert outbox.expire(number) and not outbox.expire(number)
        take(outbox, 3, [flag(50, 1.0)], targets=[receiver.url])
        sending.wake()
        assert receiver.wait_for(4)
    finally:
        sending.stop()
        receiver.stop()
    got = [(a["incident"], a["state"]) for _, a in receiver.received]
    assert got[2:] == [(f"w.F/{T + 10}", "resolved"), (f"w.F/{T + 50}", "firing")]  # 30's incident and 35's held back
    counts = outbox.counts()
    assert counts["silenced"] == 3 and counts["targets"][receiver.url]["silenced"] == 3 and not counts["silences"]
    outbox.silence("w.M", 60)
    lines = describe_alerts({"alerts": outbox.counts()})
    assert "3 held back by silences" in lines[0] and any(line.startswith("  silenced: w.M until") for line in lines)
    outbox.close()


def test_the_targets_are_kept_in_out_and_what_waits_follows_them(tmp_path):
    """A run with --alerts keeps its settings in OUT (no secret: env:, file: or a URL without one);
    a run without --alerts uses them, --alerts none forgets them; a run naming other targets
    delivers to them what waited for the old ones."""
    from sensorscript.runtime.output.alerts.pipeline import kept_settings

    template = tmp_path / "body.j2"
    template.write_text('{"text": {{ alarm.summary | tojson }}}')
    given = AlertSettings.of(["env:HOOK", "http://127.0.0.1:9/a"], ["w"], "5min", str(template),
                             group_by="stream", group_wait="500ms")
    assert kept_settings(given, tmp_path) == (given, "")
    kept, said = kept_settings(None, tmp_path)
    assert kept == given and "--alerts none stops them" in said and kept.template == str(template.resolve())
    assert kept.group_wait_s == 0.5 and kept.group_by == "stream"
    assert kept_settings(AlertSettings.of(["none"]), tmp_path) == (None, "") and kept_settings(None, tmp_path)[0] is None
    outbox = Outbox(tmp_path)
    take(outbox, 0, [match(10, 1.0), match(20, 1.0)], targets=["old-a", "old-b"])
    outbox.acknowledged("old-a", outbox.waiting_for("old-a", 1)[0][0])
    assert outbox.retarget(["new"]) == {"old-a": 1, "old-b": 2}
    counts = outbox.counts()
    assert list(counts["targets"]) == ["new", "old-a"] and counts["targets"]["new"]["waiting"] == 2
    outbox.close()


def test_the_end_of_a_run_says_in_one_sentence_what_waits_and_what_comes_of_it(tmp_path):
    """#40 item 4: one sentence, which names what sends the rest (today's two lines contradicted)."""
    from sensorscript.runtime.output.alerts.pipeline import said

    outbox = Outbox(tmp_path)
    take(outbox, 0, [match(t, 1.0) for t in range(10, 60, 10)], targets=["http://h/a"])
    for seq, _, _ in outbox.waiting_for("http://h/a", 3):
        outbox.acknowledged("http://h/a", seq)
    outbox.failed("http://h/a", "HTTP 503 Service Unavailable")
    sentence = said(outbox.counts(), tmp_path, 60.0)
    assert len(sentence.splitlines()) == 1 and sentence.count(". ") == 0
    assert sentence.startswith("alarms: 3 to http://h/a delivered so far; 2 still wait in ")
    assert "after 60 s (http://h/a: HTTP 503 Service Unavailable)" in sentence
    assert f"'sscript alerts deliver {tmp_path}' sends them now" in sentence and "starts its results afresh" in sentence
    outbox.close()


def test_a_storm_of_10000_alarms_reaches_a_failing_a_down_and_a_slow_receiver_once_each(tmp_path):
    """#40 item 5: 10,000 alarms at once (as an earthquake sets off every pier) to three receivers:
    one answering 503 to every 4th request, one down until the others are served (tried in vain
    meanwhile), one answering each request after 2 s. Each ends with every alarm exactly once (no
    repeats: a failed request's alarms alone go again), each incident's states in order. How long each took is docs/BENCHMARKS.md's (bench_alerts.py
    --storm), not asserted here."""
    failing, down, slow = Receiver().start(), Receiver(), Receiver().start()
    failing.fail_every, slow.delay_s = 4, 2.0
    outbox = Outbox(tmp_path)
    kinds = {f"pier{i:02d}.{kind}": (FLAG if kind == "F" else MATCH) for i in range(20) for kind in "FM"}
    rows = []
    for t in range(250):  # 20 piers: a match every row, a flag on and off by turns
        for pier in range(20):
            rows.append(dict(match(t * 10, 1.0), stream=f"pier{pier:02d}.M"))
            rows.append(dict(flag(t * 10, float(t % 2 == 0)), stream=f"pier{pier:02d}.F"))
    found, last = batch_alarms(frame(rows), kinds, {})
    targets = [failing.url, down.url, slow.url]
    assert outbox.take(0, found, last, targets) == len(found) == 10_000
    sending = deliverer(tmp_path, targets).start()
    try:
        wait_until(lambda: not outbox.waiting([failing.url, slow.url]), "the failing and the slow receiver served", 120)
        # Down until then, and tried in vain more than once meanwhile (each failure backs off).
        wait_until(lambda: outbox.counts()["targets"][down.url].get("failed", 0) >= 2,
                   "the down receiver tried twice", 60)
        down.start()
        wait_until(lambda: not outbox.waiting(targets), "the receiver back served", 120)
    finally:
        sending.stop()
        for receiver in (failing, down, slow):
            receiver.stop()
    expected = {ident for ident, _, _ in outbox.latencies()}
    for receiver in (failing, down, slow):
        ids = receiver.ids()
        assert len(ids) == len(set(ids)) == 10_000 and set(ids) == expected
        seen: dict[str, int] = {}
        for _, alarm in receiver.received:  # an incident's revisions in order, none missing
            assert alarm["revision"] == seen.get(alarm["incident"], 0) + 1
            seen[alarm["incident"]] = alarm["revision"]
    assert failing.refused >= 1 and outbox.counts()["targets"][down.url]["failed"] >= 1
    outbox.close()


def test_the_alerts_commands(tmp_path):
    """`sscript alerts silence/silences/expire/deliver` on a compiled job (no Spark): a silence of a
    workflow or stream the job has, refused for one it has not (in one sentence that lists them);
    `deliver` sends what waits to the targets the job keeps, and says there are none when no run
    was given --alerts."""
    from click.testing import CliRunner

    from sensorscript.cli import main
    from sensorscript.compiler import compile_workflows
    from tests.conftest import EXAMPLES

    out = tmp_path / "out"
    compile_workflows([str(f) for f in EXAMPLES], out)
    runner = CliRunner()
    said = runner.invoke(main, ["alerts", "silence", str(out), "pier_alarms", "--for", "2h", "--comment", "pier 4"])
    assert said.exit_code == 0 and said.output.startswith("silence 1: the alarms of pier_alarms"), said.output
    wrong = runner.invoke(main, ["alerts", "silence", str(out), "pier_alarm", "--for", "2h"])
    assert wrong.exit_code == 1 and "'pier_alarm' is neither a workflow" in wrong.output and "pier_alarms" in wrong.output
    assert "Traceback" not in wrong.output
    listed = runner.invoke(main, ["alerts", "silences", str(out)])
    assert listed.output.startswith("1: pier_alarms until ") and "(pier 4)" in listed.output
    assert runner.invoke(main, ["alerts", "expire", str(out), "1"]).exit_code == 0
    again = runner.invoke(main, ["alerts", "expire", str(out), "1"])
    assert again.exit_code == 1 and "no silence 1 in force" in again.output
    none = runner.invoke(main, ["alerts", "deliver", str(out)])
    assert none.exit_code == 0 and "no run on it was given --alerts" in none.output
    receiver = Receiver().start()
    AlertSettings.of([receiver.url]).save(out)
    outbox = Outbox(out)
    take(outbox, 0, [match(10, 1.0), flag(20, 1.0)], targets=[receiver.url])
    outbox.close()
    try:
        sent = runner.invoke(main, ["alerts", "deliver", str(out), "--timeout", "30s"])
    finally:
        receiver.stop()
    assert sent.exit_code == 0 and sent.output.startswith(f"alarms: 2 to {receiver.url} delivered so far"), sent.output
    assert len(receiver.unique()) == 2


def test_a_run_checks_the_targets_kept_in_out_before_it_starts(tmp_path, monkeypatch):
    """A run without --alerts delivers to the targets an earlier run kept: they are checked before
    Spark starts, and a problem says where they come from and how to stop them."""
    from sensorscript.runtime.control.run_options import RunSettings

    (tmp_path / "data").mkdir()
    AlertSettings.of(["env:HOOK"]).save(tmp_path)
    monkeypatch.delenv("HOOK", raising=False)
    with pytest.raises(ValueError) as refused:
        RunSettings(out=tmp_path, input=str(tmp_path / "data")).check()
    said = str(refused.value)
    assert "HOOK is not set" in said and "kept in" in said and "--alerts none stops them" in said
    RunSettings(out=tmp_path, input=str(tmp_path / "data"), alerts=("none",)).check()
    monkeypatch.setenv("HOOK", "http://127.0.0.1:9/hook")
    RunSettings(out=tmp_path, input=str(tmp_path / "data")).check()


def test_the_review_s_cases_of_incidents_and_retries(tmp_path, monkeypatch):
    """Found by a review of #40's change, each failing before its fix:
    - a flag's run that resolved, made by a correction to last to the end again, fires again;
    - a flag's state only moves forward (a backfill's write taken after later batches);
    - the open incident of a flag outlives the trim, so its resolution is taken;
    - after a fresh start, correction numbers begin again and their alarms are staged;
    - a success does not pull forward alarms put off by a Retry-After or a lasting refusal."""
    from sensorscript.runtime.output.alerts import outbox as outbox_module

    outbox = Outbox(tmp_path)
    take(outbox, 0, [flag(10, 1.0), flag(20, 0.0), flag(30, 0.0)])
    stored = frame([flag(10, 1.0), flag(20, 0.0), flag(30, 0.0)])
    changed = frame([flag(20, 1.0, version=2), flag(30, 1.0, version=2)])
    found, last = correction_alarms(changed, KINDS, stored, outbox.flags(["w.F"]))
    assert outbox.take(-1, found, last, ["hook"]) == 1
    assert [json.loads(b)["state"] for _, _, b in outbox.waiting_for("hook")] == ["firing", "resolved", "firing"]
    assert outbox.flags(["w.F"])["w.F"] == (T + 30, 1.0, T + 10)
    outbox.take(-2, [], {"w.F": FlagState(T + 5, 0.0, None)}, ["hook"])  # older than the state: left as it is
    assert outbox.flags(["w.F"])["w.F"] == (T + 30, 1.0, T + 10)
    monkeypatch.setattr(outbox_module, "KEPT_INCIDENTS", 1)
    take(outbox, 1, [match(t, 1.0) for t in range(40, 60)])
    outbox.trim()
    assert take(outbox, 2, [flag(70, 0.0)]) == 1  # the open flag incident was kept: it resolves
    assert outbox.taken(-1)
    outbox.start_afresh()
    assert not outbox.taken(-1) and not outbox.taken(0)
    seqs = [seq for seq, _, _ in outbox.waiting_for("hook", 3)]
    outbox.failed("hook", "HTTP 429", seqs[:1], time.time() + 600)  # Retry-After: 600 s
    outbox.failed("hook", "HTTP 404", seqs[1:2], time.time() + 600)  # lasting
    outbox.failed("hook", "HTTP 503", seqs[2:3], time.time() + 600, revivable=True)
    outbox.acknowledged("hook", [], revive=True)
    tries = {seq: next_try for seq, _, _, _, next_try, _ in outbox.queue("hook", 3)}
    assert tries[seqs[0]] > time.time() + 500 and tries[seqs[1]] > time.time() + 500 and tries[seqs[2]] <= time.time()
    outbox.close()


def test_a_kept_env_target_is_named_without_reading_it_and_a_file_target_kept_absolute(tmp_path, monkeypatch):
    """`sscript correct` run from a shell without the job's environment stages its alarms all the
    same (the target's key is what was given); a relative file: target is kept absolute."""
    from sensorscript.runtime.output.alerts import Writes

    monkeypatch.chdir(tmp_path)
    (tmp_path / "hook.txt").write_text("http://127.0.0.1:9/hook")
    AlertSettings.of(["env:HOOK", "file:hook.txt"]).save(tmp_path / "out")
    monkeypatch.delenv("HOOK", raising=False)
    writes = Writes.of(tmp_path / "out")
    assert writes.targets == ["env:HOOK", f"file:{tmp_path / 'hook.txt'}"]
    writes.close()


def test_a_correction_reads_the_runs_it_touches_not_the_flag_s_history(tmp_path):
    """flag_history: from the last row before the change that is not 1 to the first after it that is
    not 1 (where the runs over the change begin and end), however far, and no further."""
    from sensorscript.runtime.output.alerts.pipeline import flag_history

    spec = f"sqlite:{tmp_path / 'results.db'}"
    values = [0.0] * 20_000 + [1.0] * 3_000 + [0.0] * 20_000  # a row every 100 ms: a run from 2,000 s to 2,300 s
    open_sink(spec).write(0, BatchRows(frame([flag(i * 100, v) for i, v in enumerate(values)]),
                                       pd.DataFrame(columns=["raw", "reason"])))
    rows = flag_history(spec, "w.F", T + 2_150_000, T + 2_150_100)
    assert rows["ts"].min() < T + 2_000_000 and rows["ts"].max() >= T + 2_300_000  # the 0s around the run
    assert len(rows) < len(values) / 4  # not the hours before and after
