"""`sscript run OUT --input kafka://...` against a real Apache Kafka broker (KRaft, started by the
test on a free port of 127.0.0.1 from the jars scripts/setup.sh fetched), through Spark's own Kafka
source, which the job hands its connector to by itself (issue #41).
"""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sensorscript.compiler import compile_workflows
from sensorscript.runtime.plan.loading import load_job
from tests.cep_harness import reference_rows, same_rows
from tests.conftest import EXAMPLES
from tests.differential import disordered_replay, reference_incidents
from tests.test_spark_alerts import FLAGS, standing
from oracles.streams import evaluate
from sensorscript.parser import load
from tests.test_restart import FILES, SENSORS, Run, compile_examples, result_rows

pytestmark = pytest.mark.spark

BOUND = 1_500  # --max-readings-per-batch in the kill test
SENTINEL = "NO-WORKFLOW-READS-ME"  # a sensor no workflow reads: counted as unread, last in each partition
# Values no record rule reads, each quarantined with its reason (an empty value is a blank line).
HOSTILE = (b"\x00\xff\xfe\x01binary", b"{garbage", b'{"ts": "soon", "value": [1]}', b"8AC2-Z,never,1.5",
           b"x" * 600_000)


class Feed:
    """A topic of `partitions` partitions and an idempotent producer into it (librdkafka's, from the
    confluent-kafka package): each partition gets its messages in the order sent."""

    def __init__(self, bootstrap: str, topic: str, partitions: int = 3):
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, NewTopic

        self.topic, self.partitions = topic, partitions
        quiet = {"bootstrap.servers": bootstrap, "log_level": 0}  # failures come back to `failed`, not as log lines
        self.admin = AdminClient(quiet)
        self.admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result()
        self.producer = Producer({**quiet, "enable.idempotence": True, "linger.ms": 5, "message.max.bytes": 1_000_000})
        self.failed: list[str] = []

    def send(self, values: list[bytes | str], key=lambda value: None, partition: int | None = None,
             keys: list[bytes] | None = None) -> None:
        """`key`: each value's key, or `keys`: the key of each value in turn."""
        for number, value in enumerate(values):
            data = value.encode() if isinstance(value, str) else value
            options = {"partition": partition} if partition is not None else {}
            self.producer.produce(self.topic, value=data, key=key(value) if keys is None else keys[number],
                                  on_delivery=self._delivered, **options)
            if number % 1000 == 999:
                self.producer.poll(0)
                time.sleep(0.02)  # a gateway's pace, not one burst: the job sees several batches
        self.flush()

    def _delivered(self, error, message) -> None:
        if error is not None:
            self.failed.append(str(error))

    def flush(self) -> None:
        assert self.producer.flush(60) == 0, "messages the broker did not take in 60 s"
        assert not self.failed, self.failed

    def end(self, ts: str) -> None:
        """A reading of the sentinel sensor last in every partition: once the job has counted them
        all as unread, it has read everything sent before them."""
        for partition in range(self.partitions):
            self.send([f"{SENTINEL},{ts},0"], partition=partition)


def fleet(tmp_path: Path, out: Path, seed: int, share: int):
    """The examples compiled into `out` with a watermark a minute behind (the partitions of a topic are
    read at different paces, and the tests compare with the reference over all readings, so no
    reading may be late); the readings they read of 1/`share` of 240 s of the fleet, in time order."""
    batches = disordered_replay(tmp_path / "replay", seed=seed, files=1)
    compiled = compile_workflows([str(f) for f in EXAMPLES], out, str(SENSORS), 2, watermark="fixed:60000")
    read = set(load_job(out).JOB.sensors)
    lines = sorted((line for line in batches[0] if line.split(",")[0] in read), key=lambda line: int(line.split(",")[1]))
    return compiled, lines[: len(lines) // share]


def drained(run: Run, feed: Feed, lines: list[str]) -> str:
    """The sentinels sent last, read by the job: `sscript stop --drain`; the run's output."""
    feed.end(lines[-1].split(",")[1])
    run.wait_for_status(lambda s: s.get("totals", {}).get("unread", 0) >= feed.partitions,
                        "the sentinel of every partition read")
    return run.stop_draining()


def test_a_topic_of_three_partitions_fed_while_the_job_is_killed_and_its_broker_stopped_loses_and_doubles_nothing(
        kafka, tmp_path):
    """A producer feeds a topic of three partitions (the sensor as the message key, as a gateway
    keys them) while the job reads it; the job is SIGKILLed mid-feed (messages keep coming while it
    is down) and restarted, and catches up in bounded batches. Then the broker goes away for 20 s
    while the job reads its topic, and comes back (its log on disk): the job waits and goes on by
    itself. Spark's Kafka offsets in the checkpoint take each message exactly once. Hostile values
    go to quarantine with their reasons. The results equal the reference evaluator over exactly the
    readings the broker delivered."""
    out = tmp_path / "out"
    compiled, lines = fleet(tmp_path, out, seed=41, share=4)
    parts = [lines[i * len(lines) // 4:(i + 1) * len(lines) // 4] for i in range(4)]
    feed = Feed(kafka.bootstrap, "bridge-readings")
    by_sensor = lambda line: line.split(",")[0].encode()  # noqa: E731

    def totals() -> dict:
        status = out / "status.json"
        return json.loads(status.read_text()).get("totals", {}) if status.exists() else {}

    source = f"kafka://{kafka.bootstrap}/bridge-readings"
    bound = ("--max-readings-per-batch", str(BOUND))  # the outage below is caught up in several batches
    run = Run(out, source, bounded=False, cleanup=None, extra=bound)
    try:
        feed.send(parts[0], key=by_sensor)
        run.wait_for_status(lambda s: s.get("totals", {}).get("readings", 0) > 0, "a batch of readings")
        run.kill()
        feed.send(parts[1], key=by_sensor)  # while the job is down: Kafka keeps them
        run = Run(out, source, bounded=False, cleanup=None, extra=bound)
        feed.send(parts[2][: len(parts[2]) // 2], key=by_sensor)
        before = len(parts[0]) + len(parts[1])  # what the job had to catch up on (the totals go on from run to run)
        run.wait_for_status(lambda s: s.get("totals", {}).get("readings", 0) >= before, "the outage caught up")
        caught_up = run.output()
        kafka.stop()
        time.sleep(20)
        assert run.process.poll() is None, run.output()  # the job waits for the broker
        kafka.start()
        feed.send(parts[2][len(parts[2]) // 2:], key=by_sensor)
        feed.send(list(HOSTILE))
        feed.send(parts[3], key=by_sensor)
        output = drained(run, feed, lines)
    finally:
        run.cleanup()
        if kafka.process.poll() is not None:  # the module's next tests share the broker
            kafka.start()
    assert "Traceback" not in output, output
    # Part 1 waited in the broker while the job was down: more messages than one batch takes.
    taken = [int(n.replace(",", "")) for n in re.findall(r"^batch \d+: ([\d,]+) readings", caught_up, re.M)]
    assert len(parts[1]) > BOUND and taken and max(taken) <= BOUND and len(taken) >= 2, caught_up
    counted = totals()
    assert counted.get("late", 0) == 0, counted  # else the comparison below would not be over all readings
    assert counted["readings"] == len(lines), counted
    assert json.loads((out / "status.json").read_text())["feed"]["skipped"] == 0
    expected, _ = reference_rows({f.stem: f.read_text() for f in EXAMPLES}, [lines], 0, compiled.plan)
    same_rows(result_rows(out), expected)
    reasons = quarantined(out)
    assert len(reasons) == len(HOSTILE), reasons
    assert all(reason for _, reason in reasons), reasons


def quarantined(out: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(out / "results.db") as db:
        return [tuple(row) for row in db.execute("SELECT raw, reason FROM quarantine")]


def test_kafka_addresses_and_options_are_checked_in_the_users_words(monkeypatch):
    from sensorscript.runtime.ingest import kafka

    assert kafka.Address.parse("kafka://a:9093,b/t1,t2") == kafka.Address(("a:9093", "b:9092"), ("t1", "t2"))
    assert kafka.Address.parse("kafka://[::1]:9092/t").servers == ("[::1]:9092",)
    for url, says in [("kafka://a:9092", "no topic"), ("kafka://a:9092/", "no topic"),
                      ("kafka://a:0/t", "'a:0' is no broker address"), ("kafka:///t", "'' is no broker address"),
                      ("kafka://a/t?x", "'t?x' is no Kafka topic name"),
                      ("kafka://user:pw@a/t", "no user or password in a Kafka address")]:
        with pytest.raises(ValueError, match=re.escape(says)):
            kafka.Address.parse(url)
    assert kafka.start_options(None) == {"startingOffsets": "earliest"}
    assert kafka.start_options("latest") == {"startingOffsets": "latest"}
    assert kafka.start_options("2026-11-28T06:00:00Z")["startingTimestamp"] == "1795845600000"
    assert kafka.start_options("1795845600000")["startingTimestamp"] == "1795845600000"
    with pytest.raises(ValueError, match="expected earliest, latest, or a time"):
        kafka.start_options("yesterday")
    with pytest.raises(ValueError, match="a secret is not given on the command line"):
        kafka.check_option("sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required;")
    for inline in ("ssl.keystore.key=-----BEGIN PRIVATE KEY-----", "ssl.truststore.certificates=-----BEGIN",
                   "ssl.keystore.certificate.chain=-----BEGIN"):  # a key or certificates given inline (PEM)
        with pytest.raises(ValueError, match="a secret is not given on the command line"):
            kafka.check_option(inline)
    assert kafka.check_option("ssl.keystore.location=/etc/k.p12") and kafka.check_option("ssl.keystore.type=PKCS12")
    for blank in ("ssl.endpoint.identification.algorithm= ", "ssl.endpoint.identification.algorithm=\t"):
        with pytest.raises(ValueError, match="expected KEY=VALUE"):  # would turn the host name check off
            kafka.check_option(blank)
    with pytest.raises(ValueError, match="Spark's Kafka source sets it itself"):
        kafka.check_option("group.id=mine")
    monkeypatch.setenv("JAAS", "secret-config")
    options = kafka.reader_options("kafka://a/t", ("latest", 400_000, ("security.protocol=SASL_SSL", "sasl.jaas.config=env:JAAS")))
    assert options == {"kafka.bootstrap.servers": "a:9092", "subscribe": "t", "startingOffsets": "latest",
                       "maxOffsetsPerTrigger": "2000", "failOnDataLoss": "false", "kafka.security.protocol": "SASL_SSL",
                       "kafka.sasl.jaas.config": "secret-config"}  # 400,000 readings of 200 a message at first
    # The bound in messages follows what full batches measure of the readings a message holds.
    assert kafka.Settings.of(()).messages_per_batch == kafka.MAX_PER_BATCH // kafka.FIRST_GUESS
    assert kafka.Settings.of((None, 4000)).messages_per_batch == 1000  # not fewer than FIRST_MESSAGES at first
    assert kafka.Settings.of((None, 500)).messages_per_batch == 500  # nor more than the bound
    assert kafka.retuned((None, 4000), lines=1000, messages=1000) == (None, 4000, (), False, 1.0)  # one a message
    assert kafka.Settings.of((None, 4000, (), False, 1.0)).messages_per_batch == 4000
    assert kafka.retuned((None, 4000), lines=1000, messages=600) is None  # not a full batch: no backlog
    assert kafka.retuned((None, 4000, (), False, 1.0), lines=9000, messages=4000) == (None, 4000, (), False, 2.25)
    assert kafka.retuned((None, 4000, (), False, 1.0), lines=5000, messages=4000) is None  # the estimate holds
    assert kafka.retuned((None, 4000, (), False, 1.0), lines=400_000, messages=4000)[4] == 100.0
    with pytest.raises(ValueError, match="the environment variable NOT_SET is not set"):
        kafka.reader_options("kafka://a/t", (None, None, ("ssl.key.password=env:NOT_SET",)))
    # The sink and the alarms' target take one topic each.
    from sensorscript.runtime.output.alerts.settings import Target
    from sensorscript.runtime.output.kafka_sink import ResultsTopic

    assert ResultsTopic.of("kafka://a:9093/out", ("security.protocol=SASL_SSL",)).writer_options() == {
        "kafka.bootstrap.servers": "a:9093", "topic": "out", "kafka.security.protocol": "SASL_SSL"}
    with pytest.raises(ValueError, match="results go to one topic, not 2"):
        ResultsTopic.of("kafka://a/t1,t2")
    assert Target.parse("kafka://a/alarms").kind == "kafka"
    with pytest.raises(ValueError, match="alarms are produced to one topic, not 2"):
        Target.parse("kafka://a/t1,t2")
    # The alarms' producer (librdkafka) takes the security settings of the Java client's options.
    producer_options = kafka.producer_options

    monkeypatch.setenv("JAAS", 'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" '
                               'password="p\\"w";')
    assert producer_options(("security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512", "sasl.jaas.config=env:JAAS",
                             "ssl.truststore.type=PEM", "ssl.truststore.location=/etc/ca.pem",
                             "ssl.endpoint.identification.algorithm=https", "fetch.max.bytes=1000")) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "u",
        "sasl.password": 'p"w', "ssl.ca.location": "/etc/ca.pem", "ssl.endpoint.identification.algorithm": "https"}
    monkeypatch.setenv("JAAS", "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;")
    with pytest.raises(ValueError, match="the user and password of a PLAIN or SCRAM login"):
        producer_options(("sasl.jaas.config=env:JAAS",))
    with pytest.raises(ValueError, match="a trust store of PEM certificates"):
        producer_options(("ssl.truststore.location=/etc/trust.jks",))


def test_kafka_options_are_checked_before_spark_starts(tmp_path):
    from tests.test_restart import sscript

    compile_workflows([str(EXAMPLES[0])], tmp_path / "out", str(SENSORS), 1)
    for arguments, says in [(("--input", "kafka://127.0.0.1:9092"), "no topic"),
                            (("--input", str(tmp_path), "--kafka-start", "latest"), "are for a kafka:// input"),
                            (("--input", "kafka://127.0.0.1:9092/t", "--kafka-option", "ssl.keystore.password=x"),
                             "a secret is not given on the command line"),
                            (("--input", "kafka://127.0.0.1:9092/t", "--max-readings-per-batch", "0"), "0"),
                            (("--input", str(tmp_path), "--sink", "kafka://10.255.255.1:9092/results",
                              "--kafka-option", "security.protocol=SASL_PLAINTEXT", "--kafka-option",
                              "sasl.mechanism=PLAIN"),
                             "sends the password unencrypted to the broker 10.255.255.1:9092, where anyone on the way "
                             "reads it: use security.protocol=SASL_SSL (or a SCRAM mechanism), or "
                             "--kafka-plain-password to allow it")]:
        done = sscript("run", str(tmp_path / "out"), *arguments)
        assert done.returncode != 0 and "Traceback" not in done.stderr + done.stdout, done.stderr
        assert says in done.stderr + done.stdout, done.stderr + done.stdout


def test_an_alarm_topic_named_by_a_variable_or_a_file_is_checked_for_a_plain_password(tmp_path, monkeypatch):
    """--alerts env:VARIABLE or file:PATH holding a kafka:// address to another host: the password
    check sees the address they hold, as it sees one given as it stands."""
    from sensorscript.runtime.control.run_options import RunSettings

    monkeypatch.setenv("ALARM_TOPIC", "kafka://10.255.255.1:9092/alarms")
    (tmp_path / "topic").write_text("kafka://10.255.255.2:9092/alarms\n")
    plain = ("security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN", "sasl.password=env:P")
    for given, broker in (("env:ALARM_TOPIC", "10.255.255.1:9092"), (f"file:{tmp_path / 'topic'}", "10.255.255.2:9092")):
        settings = RunSettings(out=tmp_path / "out", input=str(tmp_path), alerts=(given,), kafka_option=plain)
        with pytest.raises(ValueError, match=f"sends the password unencrypted to the broker {broker}"):
            settings.check()


def test_messages_deleted_while_the_job_was_away_are_counted_and_said_and_the_lag_is_in_status(kafka, tmp_path):
    """The broker deletes the oldest messages of a topic while the job is stopped (retention passed:
    here AdminClient.delete_records, what retention does): the next run reads on from the oldest
    message left, says how many it lost in one line and in status, never stops for it; `sscript
    status` shows the lag per topic partition. The results equal the reference over exactly the
    readings the broker delivered."""
    from confluent_kafka import TopicPartition

    from tests.test_restart import sscript

    out = tmp_path / "out"
    compiled, lines = fleet(tmp_path, out, seed=43, share=8)
    first, away, last = lines[: len(lines) // 3], lines[len(lines) // 3: 2 * len(lines) // 3], lines[2 * len(lines) // 3:]
    deleted = len(away) // 2
    feed = Feed(kafka.bootstrap, "one-partition", partitions=1)
    source = f"kafka://{kafka.bootstrap}/one-partition"
    feed.send(first)
    run = Run(out, source, bounded=False, cleanup=None, extra=("--max-readings-per-batch", "1500"))
    try:
        run.wait_for_status(lambda s: s.get("totals", {}).get("readings", 0) >= len(first), "the first part read")
        stopped = sscript("stop", str(out))
        assert stopped.returncode == 0 and run.finish() == 0, stopped.stdout + stopped.stderr + run.output()
        feed.send(away)
        gone = feed.admin.delete_records([TopicPartition("one-partition", 0, len(first) + deleted)])
        for future in gone.values():
            future.result()
        feed.send(last)
        feed.end(lines[-1].split(",")[1])
        run = Run(out, source, bounded=False, cleanup=None, extra=("--max-readings-per-batch", "1500"))
        behind = run.wait_for_status(lambda s: (s.get("feed", {}).get("partitions", {}).get("one-partition/0", {})
                                                .get("lag", 0) > 0), "a lag behind the broker")
        # The sentinel read, and the progress of the batch that read it taken (the run loop reads it
        # once the batch has committed: status has the lag of the batch before until then).
        run.wait_for_status(lambda s: s.get("totals", {}).get("unread", 0) >= 1 and s.get("feed", {}).get(
            "partitions", {}).get("one-partition/0", {}).get("lag", -1) == 0, "the sentinel read, no lag left")
        shown = sscript("status", str(out)).stdout
        output = run.stop_draining()
    finally:
        run.cleanup()
    assert behind["feed"]["partitions"]["one-partition/0"]["newest"] == len(first) + len(away) + len(last) + 1
    assert "Kafka: 0 messages behind the broker's newest" in shown and "(one-partition/0 0)" in shown, shown
    assert f"Kafka: {deleted:,} messages deleted by the broker before the job read them" in shown, shown
    said = re.findall(r"^batch \d+: ([\d,]+) Kafka messages were deleted by the broker before the job read them", output,
                      re.M)  # in the batches whose offsets held them (a batch takes at most 500 offsets)
    assert sum(int(n.replace(",", "")) for n in said) == deleted, output
    assert "Traceback" not in output, output
    status = json.loads((out / "status.json").read_text())
    assert status["feed"]["skipped"] == deleted and status["totals"].get("late", 0) == 0, status["feed"]
    delivered = first + away[deleted:] + last
    assert status["totals"]["readings"] == len(delivered)
    expected, _ = reference_rows({f.stem: f.read_text() for f in EXAMPLES}, [delivered], 0, compiled.plan)
    same_rows(result_rows(out), expected)


def test_the_lag_and_the_lost_messages_in_status_and_the_dashboards_health():
    from sensorscript.dashboard.app import _health_summary
    from sensorscript.runtime.output.status import describe_feed
    from sensorscript.times import UTC

    status = {"started": 100.0, "updated": 160.0, "batches": 3, "last_batch": 2, "late_policy": "log",
              "watermark": "fixed:5s", "sink": "SQLite", "totals": {},
              "feed": {"at": 1_795_845_600.0, "skipped": 1_305, "partitions": {
                  "a/0": {"read": 90, "newest": 100, "lag": 10}, "a/1": {"read": 7, "newest": 2_007, "lag": 2_000}}}}
    assert describe_feed(status, UTC) == [
        "Kafka: 2,010 messages behind the broker's newest at 2026-11-28 06:00:00.000 UTC (a/1 2,000, a/0 10)",
        "Kafka: 1,305 messages deleted by the broker before the job read them (its retention passed while the job was "
        "away): their readings are not in the results"]
    shown = str(_health_summary(status, UTC))
    assert "2,010 messages behind the broker's newest" in shown and "1,305 messages deleted by the broker" in shown
    assert describe_feed({**status, "feed": {}}, UTC) == []


def test_messages_keyed_by_sensor_in_transactions_read_once_with_sensor_from_key(kafka, tmp_path):
    """`--sensor-from-key`: a gateway sends only time and value, keyed by the sensor: a line, a
    block of lines, or a JSON object per message; a message without a key is quarantined for it.
    It writes in transactions, each leaving a commit marker (an offset that is no message): no
    message is counted as deleted (the offsets covered but not read are checked against the oldest
    offset the broker keeps). `--once` reads what the topic holds (in bounded batches), emits every
    window and stops. The results equal the reference over exactly those readings."""
    from confluent_kafka import Producer

    from tests.test_restart import sscript

    out = tmp_path / "out"
    compiled, lines = fleet(tmp_path, out, seed=43, share=6)
    feed = Feed(kafka.bootstrap, "keyed-readings")
    by_sensor: dict[str, list[str]] = {}
    for line in lines:
        sensor, ts, value = line.split(",")
        by_sensor.setdefault(sensor, []).append(f"{ts},{value}")
    messages: list[tuple[bytes, bytes | None]] = []
    for number, (sensor, readings) in enumerate(sorted(by_sensor.items())):
        if number % 3 == 0:  # a gateway's block of lines, with the CSV header it may send
            blocks = [readings[i:i + 7] for i in range(0, len(readings), 7)]
            messages += [(("ts,value\n" + "\n".join(block)).encode(), sensor.encode()) for block in blocks]
        elif number % 3 == 1:
            messages += [(json.dumps({"ts": int(r.split(",")[0]), "value": float(r.split(",")[1])}).encode(),
                          sensor.encode()) for r in readings]
        else:
            messages += [(r.encode(), sensor.encode()) for r in readings]
    messages.append((b"1000,4.5", None))  # no key: no sensor
    gateway = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": "gateway-1", "log_level": 0})
    gateway.init_transactions(30)
    for start in range(0, len(messages), 300):
        gateway.begin_transaction()
        for value, key in messages[start:start + 300]:
            gateway.produce(feed.topic, value=value, key=key)
        gateway.commit_transaction(30)
    done = sscript("run", str(out), "--input", f"kafka://{kafka.bootstrap}/keyed-readings", "--sensor-from-key",
                   "--once", "--max-readings-per-batch", "2500")
    assert done.returncode == 0 and "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    batches = re.findall(r"^batch \d+: ([\d,]+) readings", done.stdout, re.M)
    assert len(batches) >= 3, done.stdout  # bounded batches, then the end of the input
    assert "deleted by the broker" not in done.stdout, done.stdout
    status = json.loads((out / "status.json").read_text())
    assert status["totals"]["readings"] == len(lines) and status["totals"].get("late", 0) == 0, status["totals"]
    assert status["feed"]["skipped"] == 0, status["feed"]
    expected, _ = reference_rows({f.stem: f.read_text() for f in EXAMPLES}, [lines], 0, compiled.plan)
    same_rows(result_rows(out), expected)
    assert quarantined(out) == [(",1000,4.5", "empty sensor_id")]


def topic_messages(bootstrap: str, topic: str) -> list[tuple[str, dict]]:
    """Every message of `topic` from its start, in each partition's order: (key, the JSON value)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.time_ns()}", "log_level": 0,
                         "enable.auto.commit": False})
    try:
        found = []
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        for number in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, number), timeout=30)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, number, low)])
            while True:
                message = consumer.poll(10)
                assert message is not None, f"{topic}/{number}: nothing within 10 s before offset {high}"
                assert message.error() is None, message.error()
                found.append((message.key().decode(), json.loads(message.value())))
                if message.offset() >= high - 1:
                    break
        return found
    finally:
        consumer.close()


def same_message(a: dict, b: dict) -> bool:
    """The same row, its values (and its events' values) equal but for rounding: a batch done again
    after a kill may cut the readings into other batches, which add in another order."""
    close = lambda x, y: math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9)  # noqa: E731
    events = [json.loads(row.get("events") or "[]") for row in (a, b)]
    return ({k: v for k, v in a.items() if k not in ("value", "events")}
            == {k: v for k, v in b.items() if k not in ("value", "events")} and close(a["value"], b["value"])
            and len(events[0]) == len(events[1])
            and all({**x, "value": 0} == {**y, "value": 0} and close(x["value"], y["value"]) for x, y in zip(*events)))


def test_results_and_corrections_to_a_topic_through_kills_count_once_and_are_read_back(kafka, tmp_path, monkeypatch):
    """`--sink kafka://.../TOPIC` with late policy `correct`: each result row a message keyed STREAM/TS
    (a match's STREAM/TS/START_TS) with its version, written by the executors; corrections read the
    rows they compare with back from the topic (Spark's Kafka source, on the executors) and write the
    changed rows there with the next version; their alarms are judged by the rows read back. Results
    and alarms go through the broker's SASL listener (`--kafka-option`, the secret from the
    environment). The job SIGKILLed after its fourth batch while it replays a folder and restarted (batches written
    again): what a consumer keeps (the highest version of each key, a row written twice counted once,
    a retraction removing it) equals the reference over all the readings, late ones too, and so do
    the alarms standing; the quarantine stays in OUT/results.db; `sscript results` reads the same
    newest rows back from the topic; the secret is in no file of OUT and not in the output."""
    from tests.brokers import SASL_PASSWORD, sasl_options
    from tests.test_restart import sscript

    batches = disordered_replay(tmp_path / "replay", seed=11, files=FILES)  # late readings in most files
    data = tmp_path / "replay" / "data"
    replayed = (data / "part-002.csv").stat()
    (data / "part-002.csv").write_text("\n".join(batches[2] + ["8AC2-Z,never,1.5"]) + "\n")
    os.utime(data / "part-002.csv", ns=(replayed.st_atime_ns, replayed.st_mtime_ns))  # its place in the replay
    out = tmp_path / "out"
    compile_examples(out, late="correct:2s")
    kafka.topic("corrected", 3)
    kafka.topic("corrected-alarms", 1)
    options, secret = sasl_options()
    for name, value in secret.items():
        monkeypatch.setenv(name, value)
    sink = ("--sink", f"kafka://{kafka.sasl_bootstrap}/corrected", "--alerts",
            f"kafka://{kafka.sasl_bootstrap}/corrected-alarms", *options)
    lines = [line for batch in batches for line in batch]
    runs = []
    try:
        for stop_after in ("batch 3:",):  # killed once: the batch it held is written again
            runs.append(Run(out, data, extra=sink))
            runs[-1].wait_for(stop_after)
            runs[-1].kill()
        runs.append(Run(out, data, extra=sink))
        output = runs[-1].drain(len(lines) + 1)
    finally:
        for run in runs:
            run.cleanup()
    assert "Traceback" not in output and re.search(r"correction: .* [1-9][\d,]* rows corrected", output), output
    assert f"results: kafka://{kafka.sasl_bootstrap}/corrected; quarantine, late readings and metrics: sqlite:" in output
    assert "corrected (results, written by the executors)" in json.loads((out / "status.json").read_text())["sink"]
    messages = topic_messages(kafka.bootstrap, "corrected")
    assert any(row["version"] > 1 for _, row in messages)  # corrections reached the topic
    assert {r["plan_version"] for _, r in messages} == {1}
    assert all(key == f"{r['stream']}/{r['ts']}" + (f"/{r['start_ts']}" if "start_ts" in r else "") for key, r in messages)
    expected, _ = reference_rows({f.stem: f.read_text() for f in EXAMPLES}, [lines])
    same_rows(upserted(messages), expected)
    assert quarantined(out) == [("8AC2-Z,never,1.5", quarantined(out)[0][1])]
    with sqlite3.connect(out / "results.db") as db:
        assert db.execute("SELECT count(*) FROM results").fetchone() == (0,)  # the rows are in the topic only
    alarms = topic_messages(kafka.bootstrap, "corrected-alarms")
    reference = evaluate(load([str(f) for f in EXAMPLES]).workflows, [lines])
    incidents = reference_incidents(reference.rows, FLAGS)
    # A match's alarm carries the newest version of its row, as the topic holds it (a correction raises it).
    newest: dict[tuple, int] = {}
    for _, row in messages:
        if row.get("events") is not None:
            key = (row["stream"], row["ts"], row["start_ts"], row["end_ts"])
            newest[key] = max(newest.get(key, 0), row["version"])
    assert standing([alarm for _, alarm in alarms]) == {key: (state, None if key[0] in FLAGS else newest[key])
                                                       for key, state in incidents.items()}
    assert any(version > 1 for version in newest.values())  # an alarm revised by a correction read back
    assert SASL_PASSWORD not in output
    assert not [p for p in out.rglob("*") if p.is_file() and SASL_PASSWORD.encode() in p.read_bytes()]
    said = sscript("results", str(out), "--limit", "0")
    assert said.returncode == 0, said.stdout + said.stderr
    counts = dict(re.findall(r"^(\S+): ([\d,]+) rows", said.stdout, re.M))
    per_stream: dict[str, int] = {}
    for row in expected:
        per_stream[row[0]] = per_stream.get(row[0], 0) + 1
    assert {s: int(n.replace(",", "")) for s, n in counts.items()} == per_stream


def upserted(messages: list[tuple[str, dict]]) -> list[tuple]:
    """What a consumer keeps: per key the row of the highest version (a row written twice, after a
    kill or a run started afresh, is the same row again), as tests.test_restart.result_rows gives them."""
    kept: dict[str, dict] = {}
    for key, row in messages:
        if key in kept and kept[key]["version"] == row["version"]:
            assert same_message(kept[key], row), (key, kept[key], row)  # the same key and version: the same row
        if key not in kept or row["version"] >= kept[key]["version"]:
            kept[key] = row
    return [(r["stream"], r["ts"], r.get("window_start"), r.get("window_end"), r["value"], r.get("start_ts"),
             r.get("end_ts"), r.get("events")) for r in kept.values()
            if r.get("value") is not None]  # a retraction (no value) removes the key's row



# Times at every boundary the rules and the sinks have: the years 1 and 9999 (a window's bounds
# reach past both), the epoch, and around them; values at the double range's ends and past them (a
# window's sum that overflowed), the smallest subnormal, NaN (an arithmetic stream's inf - inf).
_BOUNDARY_TS = st.sampled_from([-62_135_596_800_000, -62_135_596_799_999, -1, 0, 1, 1_767_225_600_000,
                                253_402_300_799_999, 253_402_300_799_000])
_HOSTILE_VALUE = st.one_of(st.sampled_from([1e308, -1e308, float("inf"), float("-inf"), float("nan"), 5e-324, -0.0]),
                           st.floats(allow_nan=True, allow_infinity=True))
# Input lines that are quarantined: NUL bytes, bytes that are not UTF-8, control characters, quotes.
_HOSTILE_LINE = st.lists(st.sampled_from([b"\x00", b"\xff\xfe", b"\xed\xa0\x80", b"\x0c", b"\x1b[31m", b"'", b'"',
                                          b"\\", b"\t", b",", b"x", "\u2028".encode(), "\U0001f525".encode()]),
                         min_size=1, max_size=12).map(b"".join)


@pytest.mark.server
def test_hostile_readings_reach_every_sink_and_alarm_target(kafka, postgres, broker, tmp_path):
    """Result rows at every time boundary with values past the double range, and quarantined lines
    of NULs, bytes that are not UTF-8 and control characters (issue #62): each written by every sink
    (SQLite, CSV, Parquet, PostgreSQL) and read back, and each row's alarm sent to every target
    (a webhook, MQTT, Kafka, PostgreSQL's alarms table) as strict JSON, never an error: one value the
    job accepts never fails the batch that carries it."""
    import itertools

    import numpy as np
    import pandas as pd

    from sensorscript.runtime.ingest import mqtt
    from sensorscript.runtime.ingest.records import read_block
    from sensorscript.runtime.output.alarms import MATCH
    from sensorscript.runtime.output.alerts.kafka_topic import KafkaTopic
    from sensorscript.runtime.output.alerts.mqtt_topic import Topic
    from sensorscript.runtime.output.alerts.notifier import Request
    from sensorscript.runtime.output.alerts.payload import alarm_object, numbered
    from sensorscript.runtime.output.alerts.postgres_table import AlarmsTable
    from sensorscript.runtime.output.alerts.settings import Target
    from sensorscript.runtime.output.alerts.webhook import Webhook
    from sensorscript.runtime.output.sinks import BatchRows, open_sink, read_results
    from tests.brokers import subscribe
    from tests.receivers import Receiver

    server, pg_url = postgres
    topic = kafka.topic("hostile-alarms", 1)
    receiver = Receiver().start()
    subscriber, published = subscribe(broker, "alarms/hostile", "hostile-reader")
    targets = [Webhook(Target.parse(receiver.url)), KafkaTopic(Target.parse(topic)), AlarmsTable(Target.parse(pg_url)),
               Topic(Target.parse(f"{broker.url}/alarms/hostile"), mqtt.Tls(), "hostile-writer", mqtt.Login())]
    sinks = [f"sqlite:{tmp_path / 'results.db'}", f"csv:{tmp_path / 'results.csv'}", f"parquet:{tmp_path / 'parquet'}",
             pg_url]
    batches, seqs, sent = itertools.count(), itertools.count(1), []

    @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
    @given(rows=st.lists(st.tuples(_BOUNDARY_TS, _HOSTILE_VALUE), min_size=1, max_size=4, unique_by=lambda r: r[0]),
           lines=st.lists(_HOSTILE_LINE, min_size=1, max_size=4))
    def through_everything(rows, lines):
        batch_id = next(batches)
        stream = f"h{batch_id}.M"
        ts = np.array([t for t, _ in rows], np.int64)
        events = [json.dumps([{"var": "a", "ts": int(t), "value": v, "sensor": "S\x00\ufffd"}]) for t, v in rows]
        results = pd.DataFrame({"stream": stream, "ts": ts, "window_start": ts - 1_000, "window_end": ts,
                                "value": [v for _, v in rows], "version": 1, "start_ts": ts - 500, "end_ts": ts,
                                "events": events, "plan_version": 1})
        rejected = read_block(b"\n".join(lines) + b"\n").rejected
        quarantine = pd.DataFrame({"raw": [r.raw for r in rejected], "reason": [r.reason for r in rejected]})
        for spec in sinks:
            open_sink(spec, matches=True).write(batch_id, BatchRows(results, quarantine))
            back = read_results(spec, [stream]).sort_values(["ts", "value"], ignore_index=True)
            wanted = results.sort_values(["ts", "value"], ignore_index=True)
            assert back["ts"].astype("int64").tolist() == wanted["ts"].tolist(), spec
            assert np.array_equal(back["value"].to_numpy(float), wanted["value"].to_numpy(float), equal_nan=True), spec
        alarms = [numbered(alarm_object(row, MATCH), 1, "firing") for row in results.to_dict("records")]
        request = Request([next(seqs) for _ in alarms], alarms)
        for target in targets:
            target.send(request)
        sent.extend(alarms)

    try:
        through_everything()
        assert receiver.wait_for(len(sent), timeout=30), f"{receiver.refused} refused"
        deadline = time.monotonic() + 30
        while len(published) < len(sent) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        for target in targets:
            getattr(target, "close", lambda: None)()
        subscriber.disconnect()
        subscriber.loop_stop()
        receiver.stop()
    ids = sorted(alarm["id"] for alarm in sent)
    strict = {"parse_constant": lambda constant: pytest.fail(f"{constant} is not JSON")}
    assert sorted(alarm["id"] for _, alarm in receiver.received) == ids  # the receiver reads strict JSON
    assert sorted(json.loads(json.dumps(alarm), **strict)["id"] for alarm in published) == ids
    stored = [json.loads(json.dumps(value), **strict) for _, value in topic_messages(kafka.bootstrap, "hostile-alarms")]
    assert sorted(alarm["id"] for alarm in stored) == ids
    with server.connect() as db:
        assert db.execute(f'SELECT count(*) FROM "{pg_url.rsplit("schema=", 1)[1]}".alarms').fetchone()[0] == len(ids)
