"""An Apache Kafka broker of its own on 127.0.0.1 (KRaft: broker and controller in one process), from
the jars scripts/setup.sh fetched: for trying `sscript run --input kafka://...`, and for the tests
and benchmarks.

    .venv/bin/python scripts/kafka_broker.py [--port PORT] [--dir DIR] [--partitions N] [--for SECONDS]
                                             [--sasl-user NAME]

prints `bootstrap: 127.0.0.1:PORT` once the broker answers and runs until Ctrl-C or SIGTERM (or for
SECONDS), then stops it. `--sasl-user NAME` adds a second listener that takes SASL PLAIN logins of
that user, whose password it reads from the environment's KAFKA_PASSWORD (printed as `sasl
bootstrap: 127.0.0.1:PORT`), for trying `--kafka-option` (docs/SOURCES_AND_SINKS.md, "Sensor feeds from Kafka").
As a library (tests/brokers.py): `KafkaBroker(folder).start()`, with its
configuration, formatted storage and log in `folder` (never a service of the machine); `stop()`
(or `stop(kill=True)`: SIGKILL) and `start()` again keep its topics and messages.
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from sensorscript.hosts import Place, free_ports
from sensorscript.runtime.control import jars

PART = "kafka-broker"
LOG4J = """status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = file
"""


def why_no_kafka() -> str | None:
    """None where a broker can be started here, else why not (in one sentence)."""
    if shutil.which("java") is None:
        return "Java is not installed (the Kafka broker runs on Java 17)"
    return jars.why_no(PART)


class KafkaBroker:
    """One KRaft node on 127.0.0.1:`port` (its controller on a second port), topics made with
    `partitions` partitions by default; its data, configuration and log under `folder`. `users`
    (name: password): a SASL_PLAINTEXT listener on a third port too (`sasl_bootstrap`) that takes
    PLAIN logins of these users; the plain listener stays for the tests' own clients. `place`: a
    test host to run on (scripts/netns.py), on its address; `folder` must then be one it sees."""

    def __init__(self, folder: Path, port: int | None = None, partitions: int = 3, heap: str = "512m",
                 users: dict[str, str] | None = None, place: Place = Place()):
        self.folder, self.place, self.address = Path(folder), place, place.address
        self.folder.mkdir(parents=True, exist_ok=True)
        ports = [p for p in free_ports(3) if p != port]
        self.port, self.controller, self.sasl_port = port or ports[0], ports[1], ports[2] if users else None
        self.heap = heap
        self.process: subprocess.Popen | None = None
        self.log = self.folder / "kafka.log"
        self.config = self.folder / "server.properties"
        at = self.address
        sasl = f",SASL_PLAINTEXT://{at}:{self.sasl_port}" if users else ""
        logins = " ".join(f'user_{name}="{password}"' for name, password in (users or {}).items())
        self.config.write_text("\n".join([
            "process.roles=broker,controller", "node.id=1",
            f"controller.quorum.voters=1@{at}:{self.controller}",
            f"listeners=PLAINTEXT://{at}:{self.port}{sasl},CONTROLLER://{at}:{self.controller}",
            f"advertised.listeners=PLAINTEXT://{at}:{self.port}{sasl}",
            "controller.listener.names=CONTROLLER", "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            *(["sasl.enabled.mechanisms=PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config="
               f"org.apache.kafka.common.security.plain.PlainLoginModule required {logins};"] if users else []),
            f"log.dirs={self.folder / 'data'}", f"num.partitions={partitions}",
            "offsets.topic.replication.factor=1", "offsets.topic.num.partitions=1",
            "transaction.state.log.replication.factor=1", "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1", "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            # Retention is checked every 10 s here (5 min by default), so a test can see it act.
            "log.retention.check.interval.ms=10000",
        ]) + "\n")
        self.config.chmod(0o600)  # the users' passwords
        (self.folder / "log4j2.properties").write_text(LOG4J.format(log=self.log, level="INFO"))

    @property
    def bootstrap(self) -> str:
        return f"{self.address}:{self.port}"

    @property
    def sasl_bootstrap(self) -> str:
        """The listener that takes SASL PLAIN logins (with `users`)."""
        return f"{self.address}:{self.sasl_port}"

    def _java(self, main: str, *arguments: str) -> list[str]:
        return self.place.wrap([
            "java", f"-Xmx{self.heap}", f"-Xms{self.heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            f"-Dlog4j2.configurationFile={self.folder / 'log4j2.properties'}",
            "-cp", str((self.place.kafka_jars or jars.folder(PART)) / "*"), main, *arguments])

    def _format(self) -> None:
        """Format the storage once (a cluster id of its own); a restart keeps it."""
        if (self.folder / "data" / "meta.properties").exists():
            return
        cluster = "-"
        while cluster[0] == "-":  # Kafka's id is a UUID in URL-safe base64: one that starts with '-' reads as an option
            cluster = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        done = subprocess.run(self._java("kafka.tools.StorageTool", "format", "--cluster-id", cluster, "--config",
                                         str(self.config)),
                              capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"formatting the Kafka broker's storage failed: {done.stdout}{done.stderr}")

    def start(self, timeout: float = 60.0) -> "KafkaBroker":
        if (reason := why_no_kafka()) is not None:
            raise RuntimeError(reason)
        self._format()
        with open(self.folder / "kafka.out", "ab") as out:
            self.process = subprocess.Popen(self._java("kafka.Kafka", str(self.config)), stdout=out,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the Kafka broker exited with {self.process.returncode}: {self.tail()}")
            if self.answers():
                return self
            time.sleep(0.2)
        self.stop(kill=True)
        raise RuntimeError(f"the Kafka broker did not answer on {self.bootstrap} within {timeout} s: {self.tail()}")

    def answers(self) -> bool:
        """Whether the broker answers a metadata request (not only accepts connections)."""
        from confluent_kafka.admin import AdminClient

        try:
            AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0}).list_topics(timeout=1)
            return True
        except Exception:  # noqa: BLE001 (librdkafka's KafkaException: not yet)
            return False

    def tail(self, lines: int = 30) -> str:
        text = ""
        for path in (self.folder / "kafka.out", self.log):
            if path.exists():
                text += "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) + "\n"
        return text

    def stop(self, kill: bool = False) -> None:
        """Stop the broker: SIGTERM (a clean shutdown) or, with `kill`, SIGKILL."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGKILL if kill else signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    def topic(self, name: str, partitions: int) -> str:
        """Make the topic `name` of `partitions` partitions; its kafka:// address."""
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result()
        return f"kafka://{self.bootstrap}/{name}"


class Gateway:
    """A producer of readings into a topic as a fleet's gateways send them: blocks of `per_message`
    CSV lines (sensor_id,ts,value) in one message, the messages keyed by `gateways` gateway ids in
    turn (gw0, gw1, ...; the job reads no key without --sensor-from-key), so that every partition
    holds every stretch of event time, as where many gateways send at once: a backlog read in
    bounded batches is then cut at about the same event time in each partition. (Unkeyed, librdkafka
    fills one partition for a while, then the next: a partition's stretch of a backlog lies ahead of
    another's, and the readings of the other behind a batch's cut come late.)"""

    def __init__(self, bootstrap: str, topic: str, per_message: int = 100, gateways: int = 64):
        from confluent_kafka import Producer

        self.topic, self.per_message, self.gateways, self.messages = topic, per_message, gateways, 0
        self.producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0, "linger.ms": 20,
                                  "batch.size": 1_000_000, "compression.type": "lz4",
                                  "queue.buffering.max.kbytes": 1_048_576})
        self.failed: list[str] = []

    def send(self, lines: list[str]) -> int:
        """Queue `lines` in blocks; the messages queued."""
        count = 0
        for start in range(0, len(lines), self.per_message):
            block = "\n".join(lines[start:start + self.per_message]).encode()
            key = f"gw{(self.messages + count) % self.gateways}"
            while True:
                try:
                    self.producer.produce(self.topic, value=block, key=key, on_delivery=self._delivered)
                    break
                except BufferError:  # the client's queue is full: let it send
                    self.producer.poll(0.05)
            count += 1
            self.producer.poll(0)
        self.messages += count
        return count

    def _delivered(self, error, _message) -> None:
        if error is not None:
            self.failed.append(str(error))

    def flush(self, timeout: float = 300) -> None:
        """Wait until the broker has taken every message queued; RuntimeError otherwise."""
        left = self.producer.flush(timeout)
        if left or self.failed:
            raise RuntimeError(f"the broker did not take {left:,} messages in {timeout:g} s"
                               + (f"; refused: {self.failed[:3]}" if self.failed else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument("--dir", help="its configuration, data and log (default: a new temporary folder)")
    parser.add_argument("--partitions", type=int, default=3, help="partitions of a topic made without saying")
    parser.add_argument("--for", dest="seconds", type=float, help="stop after this many seconds")
    parser.add_argument("--sasl-user", help="a SASL PLAIN listener too, for this user (password: $KAFKA_PASSWORD)")
    args = parser.parse_args()
    if (reason := why_no_kafka()) is not None:
        raise SystemExit(f"kafka_broker.py: {reason}")
    users = None
    if args.sasl_user:
        if not os.environ.get("KAFKA_PASSWORD"):
            raise SystemExit("kafka_broker.py: --sasl-user takes the user's password from KAFKA_PASSWORD, which is not set")
        users = {args.sasl_user: os.environ["KAFKA_PASSWORD"]}
    folder = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="sscript-kafka-"))
    broker = KafkaBroker(folder, port=args.port or None, partitions=args.partitions, users=users).start()
    print(f"bootstrap: {broker.bootstrap}", flush=True)
    if users:
        print(f"sasl bootstrap: {broker.sasl_bootstrap}", flush=True)
    print(f"(its data and log in {folder}; Ctrl-C stops it)", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
    try:
        time.sleep(args.seconds) if args.seconds is not None else signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        broker.stop()
    print("the Kafka broker stopped")


if __name__ == "__main__":
    main()
