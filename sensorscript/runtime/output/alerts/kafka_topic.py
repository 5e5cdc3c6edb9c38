"""Alarms produced to a Kafka topic (`--alerts kafka://HOST:PORT[,HOST:PORT...]/TOPIC`), one message
an alarm, keyed by its id (`INCIDENT/REVISION`: a consumer that meets an id twice, after a delivery
the broker took but did not acknowledge in time, keeps it once), its value the alarm's JSON, as an
MQTT target gets it. librdkafka's idempotent producer (confluent-kafka) sends a request's alarms
together; each acknowledgement marks its own alarm delivered.

The run's `--kafka-option` settings are the Java client's (Spark's connector reads and writes with
it); `producer_options` gives librdkafka their security part under its own names: the protocol and
SASL mechanism as they are, a PLAIN or SCRAM login's user and password out of `sasl.jaas.config`,
a PEM trust store as `ssl.ca.location`, a PKCS#12 key store as it is. Settings of other kinds (fetch
sizes, timeouts) are the source's and the sink's alone.
"""

from __future__ import annotations

import json
import os
import re

from sensorscript.runtime.ingest import kafka
from sensorscript.runtime.output.alerts.notifier import SEND_TIMEOUT_S, Failure, Request
from sensorscript.runtime.output.alerts.settings import Target

MOST = 1_000  # alarms of one request
# Java client setting -> librdkafka's of the same meaning (the security settings the two share).
_SAME = {"security.protocol": "security.protocol", "sasl.mechanism": "sasl.mechanism",
         "ssl.keystore.location": "ssl.keystore.location", "ssl.keystore.password": "ssl.keystore.password",
         "ssl.key.password": "ssl.key.password"}
_LOGIN = re.compile(r'\b(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


def producer_options(given: tuple[str, ...], environ=os.environ) -> dict[str, str]:
    """librdkafka's settings for the run's --kafka-option values (`kafka.client_options`, env:NAME
    read), or ValueError in the user's words for a security setting it cannot take."""
    java = {key.removeprefix("kafka."): value for key, value in kafka.client_options(given, environ).items()}
    found: dict[str, str] = {}
    for key, value in java.items():
        if key in _SAME:
            found[_SAME[key]] = value
        elif key == "sasl.jaas.config":
            login = dict(_LOGIN.findall(value))
            if not re.search(r"\b(PlainLoginModule|ScramLoginModule)\b", value) or set(login) != {"username", "password"}:
                raise ValueError("--kafka-option sasl.jaas.config: the alarms' Kafka producer takes the user and "
                                 "password of a PLAIN or SCRAM login (PlainLoginModule or ScramLoginModule required "
                                 'username="..." password="...";)')
            user, password = (re.sub(r"\\(.)", r"\1", login[k]) for k in ("username", "password"))
            found["sasl.username"], found["sasl.password"] = user, password
        elif key == "ssl.truststore.location":
            if java.get("ssl.truststore.type", "").upper() != "PEM":
                raise ValueError("--kafka-option ssl.truststore.location: the alarms' Kafka producer reads a trust "
                                 "store of PEM certificates (add --kafka-option ssl.truststore.type=PEM)")
            found["ssl.ca.location"] = value
        elif key == "ssl.keystore.type" and value.upper() != "PKCS12":
            raise ValueError(f"--kafka-option ssl.keystore.type={value}: the alarms' Kafka producer reads a PKCS12 "
                             f"key store")
        elif key == "ssl.endpoint.identification.algorithm":
            found[key] = value
    return found


class KafkaTopic:
    """The notifier of a kafka:// target."""

    most = MOST

    def __init__(self, target: Target, options: tuple[str, ...] = ()):
        """`options`: the run's --kafka-option values (`producer_options`)."""
        from confluent_kafka import Producer

        self.target = target
        self.address = kafka.Address.parse(target.url)
        self.producer = Producer({"bootstrap.servers": ",".join(self.address.servers), "enable.idempotence": True,
                                  "message.timeout.ms": int(SEND_TIMEOUT_S * 1000), "linger.ms": 5,
                                  "log_level": 0,  # failures come back per message, not as log lines
                                  **producer_options(options)})

    def send(self, request: Request) -> None:
        done, failed = [], []

        def delivered(seq: int):
            return lambda error, message: (failed if error is not None else done).append((seq, error))

        topic = self.address.topics[0]
        for seq, alarm in zip(request.seqs, request.alarms):
            self.producer.produce(topic, key=str(alarm["id"]).encode(), value=json.dumps(alarm).encode(),
                                  on_delivery=delivered(seq))
        self.producer.flush(SEND_TIMEOUT_S + 5)
        if len(done) < len(request.seqs):
            reasons = sorted({str(error.str()) for _, error in failed if error is not None}) or ["no answer in time"]
            raise Failure(f"the broker {','.join(self.address.servers)} took {len(done)} of {len(request.seqs)} alarms "
                          f"({'; '.join(reasons)})", delivered=[seq for seq, _ in done])

    def close(self) -> None:
        self.producer.flush(1)
