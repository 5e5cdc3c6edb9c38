"""--input mqtt://: the driver's spool of an MQTT topic (runtime/ingest/mqtt_spool.py) against a real
mosquitto on 127.0.0.1 (tests/brokers.py): every message published reaches the spool exactly once,
through kills of the spooling process, a lost acknowledgement, a broker restarted, a job down
while readings are published; the sensor id from a topic level; the password from the
environment; TLS. The whole job over a broker, against the reference: tests/test_mqtt_job.py."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sensorscript.runtime.ingest import mqtt, mqtt_spool, records
from tests.brokers import Broker, Publisher, need_broker
from oracles.records import Reading, Rejected, read_line

ROOT = Path(__file__).resolve().parent.parent


def spooled_lines(folder: Path) -> list[str]:
    return [line for path in sorted(folder.glob("*.csv")) for line in path.read_text().splitlines()]


def wait_until(condition, timeout: float = 60, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not {what} within {timeout} s"
        time.sleep(0.05)


def test_addresses_and_topic_levels():
    address = mqtt.Address.parse("mqtt://gateway@broker.local:1884/bridge/+/#")
    assert (address.host, address.port, address.topic, address.user, address.tls) == \
        ("broker.local", 1884, "bridge/+/#", "gateway", False)
    assert mqtt.Address.parse("mqtts://b/t").port == 8883
    for wrong, words in [("mqtt://u:secret@b/t", "SSCRIPT_MQTT_PASSWORD"), ("mqtt://b", "topic is missing"),
                         ("mqtt://b:99999/t", "port"), ("http://b/t", "mqtt://")]:
        with pytest.raises(ValueError, match=words):
            mqtt.Address.parse(wrong)
    assert mqtt_spool.topic_level("bridge/pier3/8MD1-AZ", 2) == "pier3"
    assert mqtt_spool.topic_level("bridge/pier3/8MD1-AZ", -1) == "8MD1-AZ"
    assert mqtt_spool.topic_level("bridge", 3) == ""
    with pytest.raises(ValueError, match="count from 1"):
        mqtt_spool.check_level(0)


def test_a_sensor_from_the_topic_makes_whole_records():
    """Lines of time and value, CSV or JSON, become records of the topic's sensor by records.py's
    rules; what is neither is quarantined with the id, so the user sees where it came from."""
    lines = records.with_sensor(b'ts,value\n1000,1.5\r\n\n{"ts": 2000, "value": 2}\n'
                                b'{"sensor_id": "other", "ts": 3000, "value": true}\nbad\n{"ts": 1', "8MD1-AZ")
    parsed = [records.parse_line(line) for line in lines.decode().splitlines()]
    assert parsed[:3] == [records.Reading("8MD1-AZ", 1000, 1.5), records.Reading("8MD1-AZ", 2000, 2.0),
                          records.Reading("8MD1-AZ", 3000, 1.0)]
    assert [(p.raw, p.reason) for p in parsed[3:]] == [("8MD1-AZ,bad", records.REASON_FIELDS),
                                                       ('{"ts": 1', records.REASON_JSON)]


@pytest.fixture
def spooling(tmp_path):
    """Start MqttSpools on tmp_path's folders; each stopped after the test."""
    started = []

    def start(url: str, **options) -> mqtt_spool.MqttSpool:
        spool = mqtt_spool.MqttSpool(url, tmp_path / "spool", tmp_path / "journal", "sscript-test", echo=lambda _: None,
                                     **options)
        started.append(spool.start(timeout=10))
        return spool

    yield start
    for spool in started:
        spool.stop()


def test_messages_are_spooled_with_the_sensor_of_their_topic(broker, tmp_path, spooling):
    spool = spooling(f"{broker.url}/bridge/+/acc", sensor_level=2)
    publisher = Publisher(broker)
    publisher.publish("bridge/8MD1-AZ/acc", "1000,0.5\n2000,0.7")
    publisher.publish("bridge/8MD2-A/acc", '{"ts": 1500, "value": -1}')
    publisher.publish("bridge/8MD2-A/temperature", "1000,20")  # not under the filter
    publisher.wait()
    wait_until(lambda: len(spooled_lines(tmp_path / "spool")) == 3, what="three lines spooled")
    assert sorted(spooled_lines(tmp_path / "spool")) == sorted(
        ["8MD1-AZ,1000,0.5", "8MD1-AZ,2000,0.7", '{"ts": 1500, "value": -1, "sensor_id": "8MD2-A"}'])
    publisher.close()


# The spool in a process of its own, killed with SIGKILL and started again: what it spooled, over
# all its lives, is every message published, once.
SPOOL_CHILD = """
import sys, time
from pathlib import Path
from sensorscript.runtime.ingest.mqtt_spool import MqttSpool
folder = Path(sys.argv[2])
spool = MqttSpool(sys.argv[1], folder / "spool", folder / "journal", "sscript-killed", echo=print).start(timeout=20)
time.sleep(3600)
"""


def test_a_spool_killed_again_and_again_loses_and_doubles_nothing(broker, tmp_path):
    """Each kill lands while that life of the spool is spooling: it has spooled lines of its own and
    messages are still being published (the publisher goes on until the last kill)."""
    need_broker()
    rng = random.Random(5)

    def child() -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", SPOOL_CHILD, f"{broker.url}/feed/#", str(tmp_path)],
                                stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)})

    # The job's session first (as a job's first run makes it): from then on the broker keeps its messages.
    mqtt_spool.MqttSpool(f"{broker.url}/feed/#", tmp_path / "spool", tmp_path / "journal", "sscript-killed",
                         echo=lambda _: None).start(timeout=10).stop()
    publisher = Publisher(broker)
    killed = threading.Event()
    published = []

    def send() -> None:
        i = 0
        while not killed.is_set() or i < 6_000:  # until the last kill, and at least 6,000 messages
            publisher.publish(f"feed/{i % 7}", f"s{i % 7},{i},{i}")
            i += 1
            if i % 100 == 0:
                time.sleep(0.05)
        published.append(i)

    sending = threading.Thread(target=send)
    process = child()
    sending.start()
    under_way = 0
    for _ in range(6):  # killed at random moments while it spools the messages that keep coming
        before = len(spooled_lines(tmp_path / "spool"))
        wait_until(lambda: len(spooled_lines(tmp_path / "spool")) > before, 60, "spooling by this life of the spool")
        time.sleep(rng.uniform(0, 0.3))
        process.send_signal(signal.SIGKILL)
        under_way += sending.is_alive() and len(spooled_lines(tmp_path / "spool")) > before
        process.wait()
        process = child()
    killed.set()
    sending.join()
    publisher.wait()
    messages = published[0]
    assert under_way == 6  # every kill found this life spooling, with messages still to come
    try:
        deadline = time.monotonic() + 60
        while len(spooled_lines(tmp_path / "spool")) < messages and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1)  # anything doubled would come now
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
        publisher.close()
    numbers = sorted(int(line.split(",")[1]) for line in spooled_lines(tmp_path / "spool"))
    missing, doubled = sorted(set(range(messages)) - set(numbers)), len(numbers) - len(set(numbers))
    assert (missing, doubled) == ([], 0), f"{len(missing)} missing ({missing[:20]}...), {doubled} doubled"
    assert not list((tmp_path / "spool").glob(".*"))  # nothing half written stays visible to the source


def test_an_acknowledgement_lost_does_not_spool_a_message_twice(broker, tmp_path, spooling):
    """A PUBACK that never reaches the broker (the job killed after the file is on disk, or the
    connection lost): the broker sends the message again, marked DUP; the journal knows it."""
    spool = spooling(f"{broker.url}/feed")
    acknowledge = spool._client.ack
    spool._client.ack = lambda mid, qos: None  # the acknowledgements are lost on the way
    publisher = Publisher(broker)
    for i in range(50):
        publisher.publish("feed", f"s,{i},{i}")
    publisher.wait()
    wait_until(lambda: len(spooled_lines(tmp_path / "spool")) == 50, what="50 lines spooled")
    spool._client.ack = acknowledge
    spool._client._sock_close()  # the connection drops; paho connects again, the broker sends the 50 again
    wait_until(lambda: spool.duplicates == 50, what="the 50 messages sent again recognised")
    publisher.publish("feed", "s,50,50")  # a new message may carry a packet id of the old ones: it is no repeat
    publisher.wait()
    wait_until(lambda: len(spooled_lines(tmp_path / "spool")) == 51, what="the new message spooled")
    assert sorted(int(line.split(",")[1]) for line in spooled_lines(tmp_path / "spool")) == list(range(51))
    publisher.close()


def test_a_broker_restarted_and_a_job_away_lose_nothing(broker, tmp_path, spooling):
    """Published while the spool is stopped (the job down) or while the broker restarts: the
    persistent session keeps it, and the spool gets it when both are back."""
    spool = spooling(f"{broker.url}/feed")
    publisher = Publisher(broker)
    for i in range(100):
        publisher.publish("feed", f"s,{i},{i}")
    publisher.wait()
    wait_until(lambda: len(spooled_lines(tmp_path / "spool")) == 100, what="100 lines spooled")
    spool.stop()
    for i in range(100, 200):  # the job is down
        publisher.publish("feed", f"s,{i},{i}")
    publisher.wait()
    broker.restart()  # SIGTERM: mosquitto saves the sessions and their queues
    publisher.connected()
    again = spooling(f"{broker.url}/feed")
    for i in range(200, 300):
        publisher.publish("feed", f"s,{i},{i}")
    publisher.wait(timeout=60)
    wait_until(lambda: len(spooled_lines(tmp_path / "spool")) == 300, what="300 lines spooled")
    assert sorted(int(line.split(",")[1]) for line in spooled_lines(tmp_path / "spool")) == list(range(300))
    broker.restart()  # while the spool is connected: it connects again by itself
    publisher.connected()
    for i in range(300, 400):
        publisher.publish("feed", f"s,{i},{i}")
    publisher.wait(timeout=60)
    wait_until(lambda: len(spooled_lines(tmp_path / "spool")) == 400, what="400 lines spooled")
    assert sorted(int(line.split(",")[1]) for line in spooled_lines(tmp_path / "spool")) == list(range(400))
    # This spool's own lines: the 100 published while the job was away and the 200 after, each once,
    # though the broker restarted under it (what it sent again was recognised, not spooled twice).
    assert again.lines == 300
    publisher.close()


@pytest.mark.server  # starts its own server (the quick tier leaves it out)
def test_the_password_comes_from_the_environment(tmp_path, monkeypatch, spooling):
    need_broker()
    secured = Broker(tmp_path / "secured", user="gateway", password="s3cret").start()
    try:
        monkeypatch.setenv(mqtt.PASSWORD_VARIABLE, "wrong")
        with pytest.raises(ValueError, match=f"refused.*{mqtt.PASSWORD_VARIABLE}"):
            spooling(f"mqtt://gateway@127.0.0.1:{secured.port}/feed")
        monkeypatch.setenv(mqtt.PASSWORD_VARIABLE, "s3cret")
        spooling(f"mqtt://gateway@127.0.0.1:{secured.port}/feed")
        publisher = Publisher(secured)  # a message through the broker that lets only the gateway in
        publisher.publish("feed", "s,1,2.5")
        publisher.wait()
        wait_until(lambda: spooled_lines(tmp_path / "spool") == ["s,1,2.5"], what="the message spooled")
        publisher.close()
    finally:
        secured.stop()


@pytest.mark.server  # starts its own server (the quick tier leaves it out)
def test_tls_with_the_brokers_ca(tmp_path, spooling):
    """mqtts:// with --mqtt-ca: the spool connects to a broker that speaks only TLS and trusts it by
    the CA given; without that CA (the system's, which never signed it) it refuses the broker."""
    need_broker()
    ca, cert, key = Broker.certificates(tmp_path / "certificates")
    secured = Broker(tmp_path / "tls", tls=(ca, cert, key)).start()
    try:
        url = f"mqtts://127.0.0.1:{secured.port}/feed"
        with pytest.raises(ValueError, match="cannot connect|certificate"):
            mqtt_spool.MqttSpool(url, tmp_path / "s0", tmp_path / "j0", "sscript-tls0",
                                 echo=lambda _: None).start(timeout=1)
        spooling(url, tls=mqtt.Tls(ca=str(ca)))
        publisher = Publisher(secured, ca=ca)  # a message over TLS, both ways
        publisher.publish("feed", "s,1,2.5")
        publisher.wait()
        wait_until(lambda: spooled_lines(tmp_path / "spool") == ["s,1,2.5"], what="the message spooled")
        publisher.close()
    finally:
        secured.stop()


def test_the_gateway_script_feeds_the_spool(broker, tmp_path, spooling):
    """scripts/gateway.py (docs/SOURCES_AND_SINKS.md's live example) publishes generated readings a sensor a topic;
    the spool, reading the sensor from the topic, holds exactly those readings, and the bad lines."""
    data = tmp_path / "data"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "generate_data.py"), str(data), "--seconds", "20",
                    "--files", "2", "--bad-lines", "3"], check=True, capture_output=True)
    spool = spooling(f"{broker.url}/bridge/#", sensor_level=-1)
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gateway.py"), str(data), "--broker", broker.url,
                           "--speed", "0"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    published = [line for path in sorted(data.glob("*.csv")) for line in path.read_text().splitlines()]
    order = lambda r: (r.sensor_id, r.ts, r.value)  # noqa: E731
    # What was published, and what the spool holds, read by the oracle's rules (oracles/records.py).
    wanted = sorted((r for r in map(read_line, published) if isinstance(r, Reading)), key=order)
    wait_until(lambda: spool.lines >= len(wanted) + 3, what="every reading spooled")
    got = [read_line(line) for line in spooled_lines(tmp_path / "spool")]
    assert sorted((r for r in got if isinstance(r, Reading)), key=order) == wanted
    assert len([r for r in got if isinstance(r, Rejected)]) == 3
