"""The whole job fed by a real mosquitto (tests/brokers.py), as a user runs it through the CLI:
killed with SIGKILL mid-feed, down while readings are published, the broker restarted while the
job reads it; drained at the end. Nothing lost, nothing doubled: the results equal the reference
evaluator's over every reading published, row for row."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from sensorscript.compiler import compile_workflows
from sensorscript.runtime.plan.loading import load_job
from tests.cep_harness import reference_rows, same_rows
from tests.conftest import EXAMPLES
from tests.differential import disordered_replay
from tests.brokers import Publisher
from tests.test_mqtt_source import wait_until
from tests.test_restart import SENSORS, TIMEOUT, Run, result_rows, sscript

pytestmark = pytest.mark.spark


def test_a_job_killed_and_a_broker_restarted_mid_feed_lose_and_double_nothing(broker, tmp_path):
    batches = disordered_replay(tmp_path / "replay", seed=11, files=1)
    out = tmp_path / "out"
    compiled = compile_workflows([str(f) for f in EXAMPLES], out, str(SENSORS), 2)
    read = set(load_job(out).JOB.sensors)
    lines = sorted((line for line in batches[0] if line.split(",")[0] in read), key=lambda line: int(line.split(",")[1]))
    lines = lines[: len(lines) // 4]  # a minute of the fleet, in time order: nothing late
    parts = [lines[i * len(lines) // 4:(i + 1) * len(lines) // 4] for i in range(4)]
    publisher = Publisher(broker, "bridge-gateway")

    def publish(part: list[str]) -> None:
        """One reading a message, the sensor in the topic; every fifth as JSON."""
        for number, line in enumerate(part):
            sensor, ts, value = line.split(",")
            payload = json.dumps({"ts": int(ts), "value": float(value)}) if number % 5 == 0 else f"{ts},{value}"
            publisher.publish(f"bridge/deck/{sensor}", payload)
            if number % 500 == 499:
                time.sleep(0.05)
        publisher.wait()

    def readings() -> float:
        status = out / "status.json"
        return json.loads(status.read_text()).get("totals", {}).get("readings", 0) if status.exists() else 0

    feed = (f"{broker.url}/bridge/#", ("--sensor-from-topic", "-1"))
    run = Run(out, feed[0], bounded=False, cleanup=None, extra=feed[1])
    try:
        run.wait_for("mqtt://")
        publish(parts[0])
        wait_until(lambda: readings() > 0, TIMEOUT, "a batch of readings")
        run.kill()  # mid-feed: some of part 0 processed, maybe some spooled and not, maybe some not acknowledged
        publish(parts[1])  # while the job is down: the broker keeps them in the job's session
        broker.restart()  # and keeps them through its own restart (persistence)
        publisher.connected()
        run = Run(out, feed[0], bounded=False, cleanup=None, extra=feed[1])
        run.wait_for("mqtt://")
        publish(parts[2])
        broker.restart()  # while the job reads: it connects again by itself
        publisher.connected()
        publish(parts[3])
        sentinel = lines[-1].split(",")[1]
        publisher.publish("bridge/deck/NO-WORKFLOW-READS-ME", f"{sentinel},0")  # published last: read last
        publisher.wait()
        run.wait_for_status(lambda s: s.get("totals", {}).get("unread", 0) >= 1, "the last message read")
        run.stop_draining()
    finally:
        run.cleanup()
        publisher.close()
    assert "the broker kept this job's session" in run.output()
    expected, _ = reference_rows({f.stem: f.read_text() for f in EXAMPLES}, [lines], 0, compiled.plan)
    same_rows(result_rows(out), expected)
    assert not list((out / "checkpoint" / "spool").glob("*.csv"))  # every spooled file committed and deleted


def test_mqtt_inputs_are_checked_before_spark_starts(tmp_path, monkeypatch):
    compile_workflows([str(EXAMPLES[0])], tmp_path / "out", str(SENSORS), 1)
    monkeypatch.setenv("SSCRIPT_MQTT_PASSWORD", "s3cret")  # to be sent in plain to another host: refused
    monkeypatch.setenv("SSCRIPT_ALERTS_MQTT_PASSWORD", "al3rt")
    for arguments, words in [(("--input", "mqtt://gw:secret@127.0.0.1:1883/bridge/#"), "SSCRIPT_MQTT_PASSWORD"),
                             (("--input", "mqtt://gw@10.20.30.40:1883/bridge/#"), "--mqtt-plain-password"),
                             (("--input", str(tmp_path), "--alerts", "mqtt://al@10.20.30.40/a"), "--mqtt-plain-password"),
                             (("--input", str(tmp_path), "--sensor-from-topic", "2"), "no mqtt:// address"),
                             (("--input", "mqtt://127.0.0.1:1883/bridge/#", "--once"), "runs until stopped"),
                             (("--input", "mqtt://127.0.0.1:1883/bridge/#", "--sensor-from-topic", "0"),
                              "count from 1")]:
        found = sscript("run", str(tmp_path / "out"), *arguments)
        assert found.returncode != 0
        assert words in found.stdout + found.stderr, found.stdout + found.stderr
        assert "Traceback" not in found.stdout + found.stderr
        assert "s3cret" not in found.stdout + found.stderr and "al3rt" not in found.stdout + found.stderr
