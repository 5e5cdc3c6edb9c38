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
# What one micro-batch takes at most, in messages (Spark's maxOffsetsPerTrigger): a job back after
# an outage catches up in batches of this size rather than in one batch of everything the broker kept.
MAX_PER_BATCH = 200_000
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")  # Kafka's legal topic names
_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)$")
# Client settings that hold a secret: given only as env:NAME, never in plain on a command line.
_SECRET = re.compile(r"(password|sasl\.jaas\.config|secret|token)", re.I)
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
    if not equals or not key or not value:
        raise ValueError(f"--kafka-option {text}: expected KEY=VALUE, e.g. security.protocol=SASL_SSL")
    if key in _SPARKS:
        raise ValueError(f"--kafka-option {key}: Spark's Kafka source sets it itself (the brokers and topics come "
                         f"from kafka://..., the offsets from the checkpoint)")
    if _SECRET.search(key) and not value.startswith("env:"):
        raise ValueError(f"--kafka-option {key}=...: a secret is not given on the command line (anyone on this "
                         f"machine reads it in `ps`); put it in an environment variable and give {key}=env:NAME")
    return key, value


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


class Settings(NamedTuple):
    """A run's Kafka settings, as `Job.kafka` carries them (a plain tuple in the job)."""

    start: str | None = None  # --kafka-start
    most: int | None = None  # --max-readings-per-batch
    options: tuple[str, ...] = ()  # --kafka-option
    sensor_from_key: bool = False  # --sensor-from-key: a message's key is the sensor of its lines

    @staticmethod
    def of(given: tuple) -> "Settings":
        return Settings(*given)


def reader_options(source: str, settings: tuple = ()) -> dict[str, str]:
    """Spark's Kafka source's options for `source` and a run's Kafka settings (`Job.kafka`, `Settings`)."""
    start, most, given, _ = Settings.of(settings)
    address = Address.parse(source)
    return {"kafka.bootstrap.servers": ",".join(address.servers), "subscribe": ",".join(address.topics),
            **start_options(start), "maxOffsetsPerTrigger": str(most or MAX_PER_BATCH),
            # Messages the broker deleted before the job read them are counted and said (`progress_of`),
            # not a query that stops for good: the next run would stop on them again.
            "failOnDataLoss": "false",
            **client_options(tuple(given or ()))}


def progress_of(progress) -> dict | None:
    """What a batch's progress (Spark's StreamingQueryProgress) says of the Kafka source: per topic
    partition the offset the job has read to and the broker's newest (`read`, `newest`, `lag`), and
    the offsets the batch covered but did not get (`skipped`: messages the broker deleted before the
    job read them, its retention having passed while the job was away). None without one."""
    for source in progress["sources"] if progress is not None else ():
        if not str(source["description"]).startswith("Kafka"):
            continue
        start, end, newest = (_offsets(source[name]) for name in ("startOffset", "endOffset", "latestOffset"))
        partitions = {key: {"read": read, "newest": max(newest.get(key, read), read),
                            "lag": max(newest.get(key, read) - read, 0)} for key, read in sorted(end.items())}
        covered = sum(read - start.get(key, read) for key, read in end.items() if key in start)
        return {"partitions": partitions, "skipped": max(covered - int(source["numInputRows"]), 0)}
    return None


def _offsets(given) -> dict[str, int]:
    """{"topic": {"0": offset, ...}} (a JSON text or parsed) as {"topic/0": offset}."""
    import json

    if not given:
        return {}
    found = json.loads(given) if isinstance(given, str) else given
    return {f"{topic}/{partition}": int(offset) for topic, offsets in (found or {}).items()
            for partition, offset in (offsets or {}).items()}
