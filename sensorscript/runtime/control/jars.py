"""The Java parts a job hands to Spark itself: Spark's Kafka connector (and, for the tests and the
demo only, an Apache Kafka broker). scripts/setup.sh fetches them from Maven Central into a cache
of the project (`.venv/jars/`, or SSCRIPT_JARS) with scripts/fetch_jars.py; a job never fetches at
its start, and a user types nothing about jars: the session passes the connector's to Spark, local
and on a cluster (`spark.jars` ships them to the executors).

The connector is Spark's own build for the newest Spark release Maven Central serves (4.2.0; the
pinned pyspark is 4.3.0, whose connector is not published there): the Kafka source and sink are
Data Source V2 and read and write through it unchanged, which tests/test_kafka.py proves against a
real broker.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# Maven coordinates (group:artifact:version); what they need comes with them.
KAFKA_CONNECTOR = ("org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0",)
KAFKA_BROKER = ("org.apache.kafka:kafka_2.13:4.1.1", "org.apache.kafka:kafka-tools:4.1.1",
                "org.apache.logging.log4j:log4j-slf4j-impl:2.24.3")
PARTS = {"kafka-connector": KAFKA_CONNECTOR, "kafka-broker": KAFKA_BROKER}
STAMP = ".fetched"  # in a part's folder: the coordinates it was fetched for


def cache() -> Path:
    """Where the parts are: SSCRIPT_JARS, else `jars/` in the Python environment (.venv/jars)."""
    return Path(os.environ.get("SSCRIPT_JARS") or Path(sys.prefix) / "jars")


def folder(part: str) -> Path:
    return cache() / part


def fetched(part: str) -> bool:
    """Whether `part` is in the cache, fetched for the coordinates named above."""
    stamp = folder(part) / STAMP
    return stamp.is_file() and stamp.read_text().split() == list(PARTS[part])


def jars(part: str) -> list[Path]:
    """The jar files of `part` (none when it was not fetched)."""
    return sorted(folder(part).glob("*.jar")) if fetched(part) else []


def why_no(part: str) -> str | None:
    """None where `part` is in the cache, else why not, in one sentence."""
    if fetched(part):
        return None
    return (f"Spark's Kafka connector is not installed in {folder(part)} (scripts/setup.sh fetches it)"
            if part == "kafka-connector" else
            f"the Kafka broker's jars are not installed in {folder(part)} (scripts/setup.sh fetches them)")


def spark_options() -> dict[str, str]:
    """What a Spark session is given so that `format("kafka")` works: the connector's jars, where
    they were fetched (Spark puts them on the driver's class path and ships them to the executors)."""
    connector = jars("kafka-connector")
    return {"spark.jars": ",".join(str(jar) for jar in connector)} if connector else {}
