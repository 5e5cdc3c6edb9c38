"""Alarms delivered (`sscript run --alerts`, issue #28 item 2) without Spark: the outbox takes each
batch's alarms once, delivers them at least once to a real HTTP receiver that fails (500s,
timeouts, down for a while) and to a real MQTT broker, resends after a SIGKILL only what was not
acknowledged, and says in the status when it is full."""

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
from sensorscript.runtime.output.alerts import AlertSettings, Deliverer, Outbox, Target, batch_alarms, correction_alarms
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
    return outbox.enqueue("last_batch", batch, found, last, list(targets))


def waiting_ids(outbox: Outbox, target: str = "hook") -> list[str]:
    return [ident for _, ident, _ in outbox.waiting_for(target, 1000)]


def test_each_batch_is_taken_once_and_flags_carry_over(tmp_path):
    """Matches and flags turning on are alarms; a batch done again (after a kill) adds nothing and
    leaves the flags' last values as they were, so the next batch turns on where it should."""
    outbox = Outbox(tmp_path)
    first = [flag(10, 0.0), flag(20, 1.0), flag(30, 1.0), match(15, 4.5)]
    assert take(outbox, 0, first) == 2
    assert take(outbox, 0, first) == 0  # done again: nothing new, the flag still on
    assert take(outbox, 1, [flag(40, 1.0), flag(50, 0.0), flag(60, 1.0)]) == 1  # on at 20 already; on again at 60
    ids = waiting_ids(outbox)  # in event-time order
    assert ids[1] == f"w.F/{T + 20}/1" and ids[2] == f"w.F/{T + 60}/1"
    assert ids[0].startswith(f"w.M/{T + 15}/1/") and len(ids) == 3
    body = json.loads(outbox.waiting_for("hook")[0][2])
    assert body["kind"] == "match" and body["workflow"] == "w" and body["ts"] == "2026-01-01T00:00:00.015Z"
    assert body["start_ms"] == T - 85 and body["events"][0]["sensor"] == "S1" and body["retracted"] is False
    # A run that starts afresh on the same input (its last one ended it) numbers its batches from 0
    # again with every flag off: it finds the same alarms, which are not taken twice.
    outbox.start_afresh()
    assert take(outbox, 0, first) == 0 and take(outbox, 1, [flag(70, 1.0)]) == 0  # still on since 20
    assert waiting_ids(outbox) == ids
    outbox.close()


def test_a_receiver_that_fails_gets_every_alarm(tmp_path, monkeypatch):
    """500s, a timeout and a receiver down for a while: the target is put off with a doubling delay
    (its attempts counted), and in the end the deduplicating receiver has every alarm, in order."""
    monkeypatch.setattr(webhook, "SEND_TIMEOUT_S", 0.5)
    monkeypatch.setattr(retry, "BACKOFF_FIRST_S", 0.1)
    receiver = Receiver().start()
    receiver.fail_next, receiver.slow_next, receiver.slow_s = 3, 1, 1.5
    outbox = Outbox(tmp_path)
    take(outbox, 0, [flag(t, float(t % 20 == 0)) for t in range(10, 410, 10)], targets=[receiver.url])
    told = []
    deliverer = Deliverer(tmp_path, [Target.parse(receiver.url)], on_counts=told.append).start()
    try:
        assert receiver.wait_for(20, timeout=30)
        wait_until(lambda: outbox.counts()["waiting"] == 0, "the first 20 acknowledged")
        receiver.stop()  # down
        failed = outbox.counts()["failed"]
        take(outbox, 1, [flag(t, float(t % 20 == 0)) for t in range(410, 610, 10)], targets=[receiver.url])
        wait_until(lambda: outbox.counts()["failed"] > failed, "an attempt while the receiver is down")
        assert outbox.counts()["waiting"] == 10
        receiver.start()  # back on the same port
        assert receiver.wait_for(30, timeout=30)
    finally:
        deliverer.stop()
        receiver.stop()
    counts = outbox.counts()
    assert counts["waiting"] == 0 and counts["delivered"] == 30 and counts["failed"] >= 5
    assert receiver.refused == 4
    assert list(receiver.unique()) == [f"w.F/{T + t}/1" for t in range(20, 610, 20)]  # in order
    assert told[-1]["delivered"] == 30 and told[-1]["targets"][receiver.url]["last_success"]
    outbox.close()


def test_a_receiver_that_refuses_is_retried_at_the_longest_interval(tmp_path):
    """A 404 will not go away by itself: the alarm stays, the target is put off BACKOFF_LAST_S, and
    the status says it fails and why."""
    receiver = Receiver().start()
    receiver.fail_next, receiver.fail_status = 100, 404
    outbox = Outbox(tmp_path)
    take(outbox, 0, [match(10, 1.0)], targets=[receiver.url])
    started = time.monotonic()
    deliverer = Deliverer(tmp_path, [Target.parse(receiver.url)]).start()
    try:
        wait_until(lambda: outbox.counts()["failed"], "the refusal")
        seen = time.monotonic()
        # Put off BACKOFF_LAST_S (jitter 0.8-1.2) from the refusal, which came between `started` and `seen`.
        assert started + 0.8 * retry.BACKOFF_LAST_S <= deliverer.backoff[receiver.url].next_try \
            <= seen + 1.2 * retry.BACKOFF_LAST_S
    finally:
        deliverer.stop()
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
    Deliverer(Path(sys.argv[1]), [Target.parse(sys.argv[2])]).start()
    time.sleep(600)
""")


def test_a_killed_deliverer_resends_only_what_was_not_acknowledged(tmp_path):
    """A delivery process killed with SIGKILL mid-way (the receiver holds the 51st alarm unanswered:
    the kill lands while it is in flight): the next one sends every alarm the receiver did not
    acknowledge, and none it did."""
    receiver = Receiver().start()
    receiver.hold_after = 50
    outbox = Outbox(tmp_path)
    take(outbox, 0, [match(t, 1.0) for t in range(1, 401)], targets=[receiver.url])
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, "-c", DELIVER, str(tmp_path), receiver.url], env=environment)
    try:
        wait_until(lambda: receiver.held, "the 51st alarm in flight")
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        receiver.hold_after = None
        receiver.release.set()
        before = receiver.ids()
        acknowledged = {ident for ident, _, delivered in outbox.latencies() if delivered is not None}
        assert len(before) == 50 and acknowledged <= set(before) and len(set(before) - acknowledged) <= 1
        process = subprocess.Popen([sys.executable, "-c", DELIVER, str(tmp_path), receiver.url], env=environment)
        assert receiver.wait_for(400, timeout=60)
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
    deliverer = Deliverer(tmp_path, [Target.parse(target)]).start()
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


def test_a_correction_sends_the_alarms_it_changes(tmp_path):
    """Late data corrected: a flag off after all at a row where it turned on (the alarm retracted,
    with the row's new version), on at a later row instead (a new alarm); a match retracted."""
    sink_spec = f"sqlite:{tmp_path / 'results.db'}"
    sink = open_sink(sink_spec, matches=True)
    outbox = Outbox(tmp_path)
    rows = [flag(10, 0.0), flag(20, 1.0), flag(30, 1.0), flag(40, 0.0), match(15, 4.5)]
    sink.write(0, BatchRows(frame(rows), pd.DataFrame(columns=["raw", "reason"])))
    take(outbox, 0, rows)
    changed = frame([flag(20, 0.0, version=2), match(15, None, version=2)])
    sink.write(-1, BatchRows(changed, pd.DataFrame()))
    stored = read_results(sink_spec, ["w.F"])
    found, last = correction_alarms(changed, KINDS, stored, outbox.flags(["w.F"]))
    outbox.enqueue("last_correction", 1, found, last, ["hook"])
    assert outbox.enqueue("last_correction", 1, found, last, ["hook"]) == 0  # once
    bodies = [json.loads(body) for _, _, body in outbox.waiting_for("hook")]
    said = [(b["stream"], b["ts_ms"] - T, b["version"], b["retracted"]) for b in bodies]
    assert said == [("w.M", 15, 1, False), ("w.F", 20, 1, False),  # the batch's, in event-time order
                    ("w.M", 15, 2, True), ("w.F", 20, 2, True), ("w.F", 30, 1, False)]  # the correction's
    assert bodies[3]["id"] == f"w.F/{T + 20}/2/retracted" and bodies[3]["value"] == 0.0


def test_targets_templates_and_settings():
    assert Target.parse("env:HOOK", {"HOOK": "https://hooks.slack.com/services/T/B/secret"}).key == "env:HOOK"
    for wrong, said in [("ftp://x", "alarms go to"), ("mqtt://h/a/#", "wildcard"), ("env:NOPE", "is not set"),
                        ("mqtt://u:pw@h/t", "password")]:
        with pytest.raises(ValueError, match=said):
            Target.parse(wrong, {})
    settings = AlertSettings.of(["http://h/x"], ["a,b", "c"], "5min")
    assert settings.workflows == ("a", "b", "c") and settings.timeout_s == 300


@pytest.mark.parametrize("name", ["slack", "teams", "ntfy"])
def test_the_documented_templates_render_json(name):
    """The templates README gives (docs/alerts/*.j2) render the example alarm into valid JSON."""
    template = templates.load_template(str(ROOT / "docs" / "alerts" / f"{name}.j2"))
    body = json.loads(templates.render(template, payload.example()))
    assert "pier_alarms.JUMP" in json.dumps(body)


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
    outbox.enqueue("last_batch", 0, [{"id": "a"}, {"id": "b"}], {}, [old, "https://hooks.example/x?token=OTHER"])
    outbox.failed(old, "HTTPError: 403 for https://u:pw@hooks.example/x?token=T0P")
    outbox.close()
    outbox = Outbox(tmp_path)
    assert [ident for _, ident, _ in outbox.waiting_for("https://hooks.example/x")] == ["a", "b"]
    outbox.failed("https://hooks.example/x", "timed out reaching https://hooks.example/x?token=T0P")
    for seq, _, _ in outbox.waiting_for("https://hooks.example/x"):
        outbox.acknowledged("https://hooks.example/x", seq)
    counts = outbox.counts()
    assert counts["waiting"] == 0 and list(counts["targets"]) == ["https://hooks.example/x"]
    assert counts["targets"]["https://hooks.example/x"]["last_error"] == "timed out reaching https://hooks.example/x"
    outbox.close()
    dump = "\n".join(sqlite3.connect(tmp_path / "alerts" / "outbox.db").iterdump())
    assert "T0P" not in dump and "OTHER" not in dump and "pw" not in dump
