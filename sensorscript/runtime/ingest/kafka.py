"""Sensor feeds from Kafka: `kafka://HOST:PORT[,HOST:PORT...]/TOPIC[,TOPIC...]`, read by Spark's own
Kafka source (its connector handed to Spark by the session: runtime/control/jars.py). Each message's
value is a CSV line, a JSON object or a block of lines (a gateway batches readings), read by the same
record rules as a file's lines (runtime/ingest/packets.py). Spark keeps the topic partitions' offsets
in the checkpoint, so each message is taken exactly once across kills and restarts.

A run's Kafka options (`sscript run --kafka-start`, `--max-readings-per-batch`, `--kafka-option`)
travel in the job as given (`Job.kafka`); a value `env:NAME` is read from the environment only when
the reader is made, so a secret is never in an address, the job, status or a log.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import NamedTuple

PREFIX = "kafka://"
DEFAULT_PORT = 9092
# What one micro-batch takes at most, in readings (--max-readings-per-batch): a job back after an
# outage catches up in batches of this size rather than in one batch of everything the broker kept
# (20,000,000 readings in one batch, 200,000 messages of a gateway's 100 lines, ran the driver's JVM
# out of memory: docs/BENCHMARKS.md). Spark bounds a batch in messages (maxOffsetsPerTrigger), and a
# message may hold one reading or a gateway's block of hundreds: the bound in messages is the
# readings over an estimate of the readings a message holds, FIRST_GUESS until a full batch has
# measured it (`retuned`), and never fewer than FIRST_MESSAGES then.
MAX_PER_BATCH = 1_000_000
FIRST_GUESS, FIRST_MESSAGES = 200, 1_000
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")  # Kafka's legal topic names
_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)$")
# Client settings that hold a secret: given only as env:NAME, never in plain on a command line.
# A setting whose value is a secret: a password, a login, a token, or a key or certificates given
# inline (ssl.keystore.key is a private key in PEM; ssl.truststore.certificates and
# ssl.keystore.certificate.chain PEM text that is no one's business in `ps`).
_SECRET = re.compile(r"(password|sasl\.jaas\.config|secret|token|ssl\.keystore\.key$|\.certificates$|"
                     r"certificate\.chain$)", re.I)
# What Spark's source decides itself (the topics, the offsets): not a client setting to pass on.
_SPARKS = ("bootstrap.servers", "group.id", "key.deserializer", "value.deserializer", "enable.auto.commit",
           "auto.offset.reset", "interceptor.classes")


@dataclass(frozen=True)
class Address:
    servers: tuple[str, ...]
    topics: tuple[str, ...]

    @staticmethod
    def parse(url: str) -> "Address":
        """kafka://HOST:PORT[,HOST:PORT...]/TOPIC[,TOPIC...] (the port 9092 when left out), or
        ValueError in the user's words."""
        form = "kafka://HOST:PORT[,HOST:PORT...]/TOPIC[,TOPIC...]"
        if not url.startswith(PREFIX):
            raise ValueError(f"{url}: a Kafka source is {form}")
        servers, _, topics = url[len(PREFIX):].partition("/")
        if "@" in servers:
            raise ValueError(f"{url}: no user or password in a Kafka address; give them with --kafka-option "
                             f"(a secret as env:NAME)")
        found = []
        for server in servers.split(","):
            host, colon, port = server.rpartition(":") if server.rpartition(":")[2].isdigit() else (server, "", "")
            if not host or not _HOST.match(host) or (colon and not 0 < int(port) < 65536):
                raise ValueError(f"{url}: '{server}' is no broker address ({form})")
            found.append(f"{host}:{port or DEFAULT_PORT}")
        names = tuple(t for t in topics.split(",") if t)
        if not names:
            raise ValueError(f"{url}: no topic ({form})")
        for name in names:
            if not _TOPIC.match(name):
                raise ValueError(f"{url}: '{name}' is no Kafka topic name (letters, digits, '.', '_' and '-', "
                                 f"at most 249)")
        return Address(tuple(found), names)


def check_start(text: str) -> str:
    """earliest, latest, or a time (ISO 8601, or milliseconds since 1970): ValueError otherwise."""
    start_options(text)
    return text


def start_options(text: str | None) -> dict[str, str]:
    """Where a query that starts afresh begins in each partition (a checkpoint's offsets win)."""
    if text is None or text == "earliest":
        return {"startingOffsets": "earliest"}
    if text == "latest":
        return {"startingOffsets": "latest"}
    if text.isdigit():
        millis = int(text)
    else:
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"--kafka-start {text}: expected earliest, latest, or a time (2026-11-28T06:00:00Z, "
                             f"or milliseconds since 1970)") from None
        moment = moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
        millis = int(moment.timestamp() * 1000)
    # A partition with no message at or after that time starts at its end (Spark would fail otherwise).
    return {"startingTimestamp": str(millis), "startingOffsetsByTimestampStrategy": "latest"}


def check_option(text: str) -> str:
    """KEY=VALUE, a client setting Spark does not decide itself; a secret only as env:NAME."""
    _option(text)
    return text


def _option(text: str) -> tuple[str, str]:
    """`check_option`'s KEY and VALUE (KEY without a `kafka.` prefix), or ValueError."""
    key, equals, value = text.partition("=")
    key = key.strip().removeprefix("kafka.")
    # A blank value is none: the client would read `ssl.endpoint.identification.algorithm= ` as
    # empty, which turns the broker's host name check off without a word.
    if not equals or not key or not value.strip():
        raise ValueError(f"--kafka-option {text}: expected KEY=VALUE, e.g. security.protocol=SASL_SSL")
    if key in _SPARKS:
        raise ValueError(f"--kafka-option {key}: Spark's Kafka source sets it itself (the brokers and topics come "
                         f"from kafka://..., the offsets from the checkpoint)")
    if _SECRET.search(key) and not value.startswith("env:"):
        raise ValueError(f"--kafka-option {key}=...: a secret is not given on the command line (anyone on this "
                         f"machine reads it in `ps`); put it in an environment variable and give {key}=env:NAME")
    return key, value


PLAIN_OPTION = "--kafka-plain-password"  # the run's option that lets a SASL PLAIN password cross in clear


def check_plain_password(urls: list[str], given: tuple[str, ...], allowed: bool) -> None:
    """ValueError in one sentence when the run's --kafka-option settings would send a SASL PLAIN
    password unencrypted (security.protocol=SASL_PLAINTEXT) to a broker on another host of one of
    these kafka:// addresses (the source, the sink, the alarms' topic), unless `allowed`
    (PLAIN_OPTION): anyone on the way reads it. SCRAM proves the password without sending it."""
    from sensorscript.hosts import loopback

    settings = dict(_option(text) for text in given)
    protocol = settings.get("security.protocol", "PLAINTEXT").upper()
    mechanism = settings.get("sasl.mechanism", "GSSAPI").upper()
    if allowed or protocol != "SASL_PLAINTEXT" or mechanism != "PLAIN":
        return
    for url in urls:
        for server in Address.parse(url).servers:
            host = server.rsplit(":", 1)[0]
            if not loopback(host):
                raise ValueError(f"--kafka-option security.protocol=SASL_PLAINTEXT with sasl.mechanism=PLAIN sends "
                                 f"the password unencrypted to the broker {server}, where anyone on the way reads "
                                 f"it: use security.protocol=SASL_SSL (or a SCRAM mechanism), or {PLAIN_OPTION} to "
                                 f"allow it")


def client_options(given: tuple[str, ...], environ=os.environ) -> dict[str, str]:
    """The client settings for Spark's source (`kafka.KEY`), env:NAME read from the environment."""
    options = {}
    for text in given:
        key, value = _option(text)
        if value.startswith("env:"):
            name = value[len("env:"):]
            if name not in environ:
                raise ValueError(f"--kafka-option {key}=env:{name}: the environment variable {name} is not set")
            value = environ[name]
        options[f"kafka.{key}"] = value
    return options


# Java client setting -> librdkafka's of the same meaning (the security settings the two share).
_SAME = {"security.protocol": "security.protocol", "sasl.mechanism": "sasl.mechanism",
         "ssl.keystore.location": "ssl.keystore.location", "ssl.keystore.password": "ssl.keystore.password",
         "ssl.key.password": "ssl.key.password"}
_LOGIN = re.compile(r'\b(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


def producer_options(given: tuple[str, ...], environ=os.environ) -> dict[str, str]:
    """librdkafka's settings (the alarms' producer: runtime/output/alerts/kafka_topic.py) for the run's
    --kafka-option values, which are the Java client's (Spark's connector reads and writes with it):
    their security part under librdkafka's names, the protocol and SASL mechanism as they are, a PLAIN
    or SCRAM login's user and password out of `sasl.jaas.config`, a PEM trust store as
    `ssl.ca.location`, a PKCS#12 key store as it is; settings of other kinds (fetch sizes, timeouts)
    are the source's and the sink's alone. ValueError in the user's words for a security setting
    librdkafka cannot take; env:NAME read."""
    java = {key.removeprefix("kafka."): value for key, value in client_options(given, environ).items()}
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


class Settings(NamedTuple):
    """A run's Kafka settings, as `Job.kafka` carries them (a plain tuple in the job)."""

    start: str | None = None  # --kafka-start
    most: int | None = None  # --max-readings-per-batch
    options: tuple[str, ...] = ()  # --kafka-option
    sensor_from_key: bool = False  # --sensor-from-key: a message's key is the sensor of its lines
    per_message: float | None = None  # readings a message holds, as the run measured them (`retuned`)

    @staticmethod
    def of(given: tuple) -> "Settings":
        return Settings(*given)

    @property
    def messages_per_batch(self) -> int:
        """Spark's maxOffsetsPerTrigger: the bound in readings over the readings a message holds;
        before a batch has measured them, at least FIRST_MESSAGES (or the bound, if lower), so that
        a small bound over messages of one reading does not crawl (FIRST_MESSAGES of a gateway's
        blocks are a batch a job takes in its stride)."""
        most = self.most or MAX_PER_BATCH
        if self.per_message is None:
            return max(min(most, FIRST_MESSAGES), int(most / FIRST_GUESS))
        return max(1, int(most / self.per_message))


def retuned(settings: tuple, lines: int, messages: int) -> tuple | None:
    """The settings for the next query when a batch that took as many messages as its bound allows
    (a backlog) shows that they hold another number of lines than the estimate (less than half, or
    more than twice); None when the bound stands."""
    given = Settings.of(settings)
    if messages < 0.9 * given.messages_per_batch or messages <= 0 or lines <= 0:
        return None
    measured, estimate = lines / messages, given.per_message or FIRST_GUESS
    if 0.5 <= measured / estimate <= 2:
        return None
    return tuple(given._replace(per_message=measured))


def reader_options(source: str, settings: tuple = ()) -> dict[str, str]:
    """Spark's Kafka source's options for `source` and a run's Kafka settings (`Job.kafka`, `Settings`)."""
    run = Settings.of(settings)
    address = Address.parse(source)
    return {"kafka.bootstrap.servers": ",".join(address.servers), "subscribe": ",".join(address.topics),
            **start_options(run.start), "maxOffsetsPerTrigger": str(run.messages_per_batch),
            # Messages the broker deleted before the job read them are counted and said (`progress_of`),
            # not a query that stops for good: the next run would stop on them again.
            "failOnDataLoss": "false",
            **client_options(tuple(run.options or ()))}


def progress_of(progress, log_starts=None) -> dict | None:
    """What a batch's progress (Spark's StreamingQueryProgress) says of the Kafka source: per topic
    partition the offset the job has read to and the broker's newest (`read`, `newest`, `lag`), and
    the messages the batch covered but did not get because the broker had deleted them (`skipped`:
    its retention passed while the job was away). None without one.

    Not every offset is a message: a transactional producer's commit and abort markers take one
    each, and the messages of an aborted transaction are offsets too. So offsets covered but not
    read are only a bound; where there are any, `log_starts` (topic partition keys -> the broker's
    oldest offset of each, or None: `BrokerOffsets`) says how many lay before what the broker keeps: the
    messages deleted are the fewer of the two counts."""
    for source in progress["sources"] if progress is not None else ():
        if not str(source["description"]).startswith("Kafka"):
            continue
        start, end, newest = (_offsets(source[name]) for name in ("startOffset", "endOffset", "latestOffset"))
        partitions = {key: {"read": read, "newest": max(newest.get(key, read), read),
                            "lag": max(newest.get(key, read) - read, 0)} for key, read in sorted(end.items())}
        covered = sum(read - start.get(key, read) for key, read in end.items() if key in start)
        skipped = max(covered - int(source["numInputRows"]), 0)
        oldest = log_starts(sorted(start)) if skipped and log_starts is not None else None
        if oldest is not None:
            skipped = min(skipped, sum(max(min(oldest.get(key, 0), end.get(key, at)) - at, 0)
                                       for key, at in start.items()))
        return {"partitions": partitions, "skipped": skipped}
    return None


class BrokerOffsets:
    """The broker's offsets of the source's topic partitions, asked by the Kafka client of the
    driver's JVM (the connector's, with the source's own settings: `client_options`); None where it
    cannot say in `timeout_s`. Called with topic partition keys: the oldest offset of each (as
    `progress_of` takes `log_starts`)."""

    def __init__(self, spark, source: str, settings: tuple = (), timeout_s: float = 10.0):
        self.spark, self.source, self.settings, self.timeout_s = spark, source, settings, timeout_s

    def __call__(self, keys: list[str]) -> dict[str, int] | None:
        found = self._ask(lambda jvm, admin: keys, ("earliest",))
        return None if found is None else found[0]

    def held(self) -> int | None:
        """How many offsets the broker holds, in all partitions of the source's topics: what a job that
        starts at the oldest has to read."""
        def every_partition(jvm, admin):
            topics = jvm.java.util.ArrayList()
            for topic in Address.parse(self.source).topics:
                topics.add(topic)
            described = admin.describeTopics(topics).allTopicNames().get(*self._timeout(jvm))
            return [f"{entry.getKey()}/{info.partition()}" for entry in described.entrySet()
                    for info in entry.getValue().partitions()]

        found = self._ask(every_partition, ("earliest", "latest"))
        if found is None:
            return None
        oldest, newest = found
        return sum(max(newest.get(key, at) - at, 0) for key, at in oldest.items())

    def _timeout(self, jvm) -> tuple:
        return int(self.timeout_s * 1000), jvm.java.util.concurrent.TimeUnit.MILLISECONDS

    def _ask(self, keys_of, specs: tuple[str, ...]) -> list[dict[str, int]] | None:
        """Per OffsetSpec named in `specs` (earliest, latest), the offset of each topic partition
        `keys_of(jvm, admin)` names, asked through one admin client; None when it cannot say."""
        jvm = self.spark._jvm
        properties = jvm.java.util.Properties()
        properties.setProperty("bootstrap.servers", ",".join(Address.parse(self.source).servers))
        for key, value in client_options(tuple(Settings.of(self.settings).options)).items():
            properties.setProperty(key.removeprefix("kafka."), value)
        admin = None
        try:
            admin = jvm.org.apache.kafka.clients.admin.AdminClient.create(properties)
            keys = keys_of(jvm, admin)
            found = []
            for spec in specs:
                asked = jvm.java.util.HashMap()
                offset = getattr(jvm.org.apache.kafka.clients.admin.OffsetSpec, spec)()
                for key in keys:
                    topic, _, number = key.rpartition("/")
                    asked.put(jvm.org.apache.kafka.common.TopicPartition(topic, int(number)), offset)
                answered = admin.listOffsets(asked).all().get(*self._timeout(jvm))
                found.append({f"{entry.getKey().topic()}/{entry.getKey().partition()}": int(entry.getValue().offset())
                              for entry in answered.entrySet()})
            return found
        except Exception:  # noqa: BLE001 (the broker away, a py4j error): nothing said
            return None
        finally:
            if admin is not None:
                try:
                    admin.close()
                except Exception:  # noqa: BLE001
                    pass


def in_one_batch(offsets: BrokerOffsets, settings: tuple) -> bool:
    """Whether a query that starts afresh at the oldest offsets (`--once`, no --kafka-start) takes
    everything the broker holds in one batch, with room for as much again arriving before it starts:
    then the end of the input can go in that batch (`run_loop`), and the run needs no second query."""
    run = Settings.of(settings)
    if run.start not in (None, "earliest"):
        return False
    held = offsets.held()
    return held is not None and 2 * held <= run.messages_per_batch


def _offsets(given) -> dict[str, int]:
    """{"topic": {"0": offset, ...}} (a JSON text or parsed) as {"topic/0": offset}."""
    import json

    if not given:
        return {}
    found = json.loads(given) if isinstance(given, str) else given
    return {f"{topic}/{partition}": int(offset) for topic, offsets in (found or {}).items()
            for partition, offset in (offsets or {}).items()}
