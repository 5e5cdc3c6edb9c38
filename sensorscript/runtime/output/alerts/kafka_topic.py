"""Alarms produced to a Kafka topic (`--alerts kafka://HOST:PORT[,HOST:PORT...]/TOPIC`), one message
an alarm, keyed by its id (`INCIDENT/REVISION`: a consumer that meets an id twice, after a delivery
the broker took but did not acknowledge in time, keeps it once), its value the alarm's JSON, as an
MQTT target gets it. librdkafka's idempotent producer (confluent-kafka) sends a request's alarms
together; each acknowledgement marks its own alarm delivered.

The run's `--kafka-option` settings reach the producer as `kafka.producer_options` gives them
(their security part, in librdkafka's names).
"""

from __future__ import annotations

from sensorscript.runtime.ingest import kafka
from sensorscript.runtime.output.alerts.notifier import SEND_TIMEOUT_S, Failure, Request
from sensorscript.runtime.output.alerts.payload import to_json
from sensorscript.runtime.output.alerts.settings import Target

MOST = 1_000  # alarms of one request


class KafkaTopic:
    """The notifier of a kafka:// target."""

    most = MOST

    def __init__(self, target: Target, options: tuple[str, ...] = ()):
        """`options`: the run's --kafka-option values (`kafka.producer_options`)."""
        from confluent_kafka import Producer

        self.target = target
        self.address = kafka.Address.parse(target.url)
        self.producer = Producer({"bootstrap.servers": ",".join(self.address.servers), "enable.idempotence": True,
                                  "message.timeout.ms": int(SEND_TIMEOUT_S * 1000), "linger.ms": 5,
                                  "log_level": 0,  # failures come back per message, not as log lines
                                  **kafka.producer_options(options)})

    def send(self, request: Request) -> None:
        done, failed = [], []

        def delivered(seq: int):
            return lambda error, message: (failed if error is not None else done).append((seq, error))

        topic = self.address.topics[0]
        for seq, alarm in zip(request.seqs, request.alarms):
            self.producer.produce(topic, key=str(alarm["id"]).encode(), value=to_json(alarm).encode(),
                                  on_delivery=delivered(seq))
        self.producer.flush(SEND_TIMEOUT_S + 5)
        if len(done) < len(request.seqs):
            reasons = sorted({str(error.str()) for _, error in failed if error is not None}) or ["no answer in time"]
            raise Failure(f"the broker {','.join(self.address.servers)} took {len(done)} of {len(request.seqs)} alarms "
                          f"({'; '.join(reasons)})", delivered=[seq for seq, _ in done])

    def close(self) -> None:
        self.producer.flush(1)
