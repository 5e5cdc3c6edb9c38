"""Results to a Kafka topic: `--sink kafka://HOST:PORT[,HOST:PORT...]/TOPIC`, written by the
executors through Spark's own Kafka sink: no result row crosses the driver.

Each result row becomes one message: its key `STREAM/TS` (a pattern's match `STREAM/TS/START_TS`,
since matches of one stream may end at the same time), its value a JSON object of the row's
columns (sinks.RESULT_COLUMNS, a match's MATCH_COLUMNS, and `plan_version`; an empty column left
out). Kafka's producer puts the messages of one key on one partition, in order.

Kafka takes a message at least once: a batch that a kill cut short after its results reached the
topic and before the driver committed it is written again by the next run, the same rows with the
same keys and versions. A consumer keeps, per key, the row of the highest version (an upsert by
key and version), so a row written twice counts once (docs/SOURCES_AND_SINKS.md, "Results to Kafka").

The batch's small facts (quarantine, late readings, metrics, and the ledger of written batches)
stay in the local SQLite store, written by the driver after the topic took the results: a batch in
the ledger is in the topic. Of the result rows the driver collects only those of the streams whose
alarms it delivers (`--alerts`), and three counts.

Corrections of late data and backfills (late policy `correct`, `sscript backfill`) compare what they
recompute with the newest version of each row in the topic: `read` scans the topic on the
executors (Spark's Kafka source, as a batch) and brings the driver only the rows of the streams and
times asked for. It starts at the first message that can hold such a row, found by `TopicIndex`:
per minute of wall-clock time, the latest row time written in it. Their changed rows go to the
topic by `send`, through the same Spark writer and message form as a batch's (`messages`), as the
sink's unit `topic:OUT` (`sinks.open_sink`): the topic first, then the ledger.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from sensorscript.runtime.ingest import kafka
from sensorscript.runtime.output.rows import OUTPUT_SCHEMA
from sensorscript.runtime.plan.program import Job

PREFIX = kafka.PREFIX
# The columns of a result's message, in order (runtime/output/rows.py's OUTPUT_SCHEMA names them).
MESSAGE_COLUMNS = ("stream", "ts", "window_start", "window_end", "value", "version", "start_ts", "end_ts", "events")
PLAN_VERSION = "plan_version"  # the message's last field (sinks.PLAN_COLUMN)
# A message's fields as the driver sends them (`send`) and a read back finds them (`read`).
FIELDS = (*MESSAGE_COLUMNS, PLAN_VERSION)
# Their types: the stage's output types (rows.OUTPUT_SCHEMA), the plan version a long.
_TYPES = {**dict(f.split() for f in OUTPUT_SCHEMA.split(", ")), PLAN_VERSION: "long"}
_SCHEMA = ", ".join(f"{c} {_TYPES[c]}" for c in FIELDS)
# `sinks.open_sink("topic:OUT")`: the results topic of the job in OUT, with its ledger in OUT's store.
SPEC_PREFIX = "topic:"
# How much earlier than the driver's clock a message's time may be (the executors' and the brokers'
# clocks): a read back starts this much before the first minute that wrote a row it asks for.
CLOCK_MARGIN_MS = 5 * 60_000


def is_topic(spec: str | None) -> bool:
    return bool(spec) and spec.startswith(PREFIX)


@dataclass(frozen=True)
class ResultsTopic:
    """Where the results go (`url`: kafka://BROKERS/TOPIC, one topic) with the run's Kafka client
    settings (`options`: --kafka-option values, a secret as env:NAME, read when the writer is made)."""

    url: str
    options: tuple[str, ...] = ()

    @staticmethod
    def of(url: str, options: tuple[str, ...] = ()) -> "ResultsTopic":
        """Checked: ValueError in the user's words."""
        address = kafka.Address.parse(url)
        if len(address.topics) != 1:
            raise ValueError(f"--sink {url}: results go to one topic, not {len(address.topics)}")
        kafka.client_options(options)  # every env:NAME set
        return ResultsTopic(url, tuple(options))

    def writer_options(self) -> dict[str, str]:
        return {**self._client(), "topic": kafka.Address.parse(self.url).topics[0]}

    def _client(self) -> dict[str, str]:
        """The Kafka client's settings, Spark's connector's way: the brokers and --kafka-option."""
        return {"kafka.bootstrap.servers": ",".join(kafka.Address.parse(self.url).servers),
                **kafka.client_options(self.options)}

    def describe(self) -> str:
        return f"{self.url} (results, written by the executors)"

    @staticmethod
    def of_status(status: dict) -> "ResultsTopic":
        """The results topic a run's status keeps (the address and the --kafka-option values; a secret
        as env:NAME, read from this process's environment)."""
        return ResultsTopic.of(status["results_topic"], tuple(status.get("results_topic_options", ())))

    def send(self, spark, records: list[tuple]) -> None:
        """Rows the driver holds (a correction's, a backfill's: plain values in FIELDS' order) to the
        topic, as `messages` of a batch's rows, through Spark's Kafka writer."""
        if records:
            data = spark.createDataFrame(records, schema=_SCHEMA)
            messages(data, None).write.format("kafka").options(**self.writer_options()).save()

    def read(self, spark, streams: list[str] | None, lo: int | None, hi: int | None,
             since_ms: int | None) -> pd.DataFrame:
        """Every version of the rows the topic holds (of these streams, lo <= ts < hi), in FIELDS,
        from the messages written at `since_ms` (ms since the epoch)
        on, or all. Scanned by the executors; the driver receives the rows asked for."""
        from pyspark.sql import functions as F

        options = {**self._client(), "subscribe": kafka.Address.parse(self.url).topics[0],
                   "endingOffsets": "latest", "failOnDataLoss": "false"}
        if since_ms is None:
            options["startingOffsets"] = "earliest"
        else:  # from the first message at or after since_ms; none: from the end
            options.update(startingTimestamp=str(int(since_ms)), startingOffsetsByTimestampStrategy="latest")
        found = (spark.read.format("kafka").options(**options).load()
                 .select(F.from_json(F.col("value").cast("string"), _SCHEMA).alias("row")).select("row.*")
                 .filter(F.col("stream").isNotNull()))  # a message not of this form: not a result
        if streams is not None:
            found = found.filter(F.col("stream").isin(sorted(streams)))
        if lo is not None and lo > -(2**63):
            found = found.filter(F.col("ts") >= F.lit(int(lo)))
        if hi is not None and hi < 2**63 - 1:
            found = found.filter(F.col("ts") < F.lit(int(hi)))
        return found.toPandas()

    def write(self, batch, job: Job, keep: frozenset[str] = frozenset(),
              index: "TopicIndex | None" = None) -> tuple[pd.DataFrame, int, int]:
        """A micro-batch's result rows to the topic from the executors; returns the batch's other
        rows with the result rows of the streams in `keep` (the driver's share), how many result rows
        there were, and how many of them were pattern matches. The batch is computed once (kept in
        the executors' memory, spilling to disk, while it is read three times). `index`: told the
        latest row time the batch writes, before it writes it."""
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        batch.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            started = time.time()
            results = batch.filter(F.col("kind") == "result")
            counted = results.agg(F.count(F.lit(1)).alias("rows"), F.count("events").alias("matches"),
                                  F.max("ts").alias("latest")).first()
            if index is not None and counted["latest"] is not None:  # before the write: a kill after it finds it
                index.note(started, int(counted["latest"]))
            messages(results, job).write.format("kafka").options(**self.writer_options()).save()
            driver = F.col("kind") != "result"
            if keep:
                driver = driver | F.col("stream").isin(sorted(keep))
            rows = batch.filter(driver).toPandas()
        finally:
            batch.unpersist()
        return rows, int(counted["rows"]), int(counted["matches"])


class TopicIndex:
    """Where in the results topic a read back starts: per minute of the driver's wall clock, when
    its first write began and the latest row time (`ts`) written in it (a table beside the ledger,
    in OUT's SQLite store; a row a minute, 525,600 a year). A row at time t was written in a minute
    whose latest row time is t or later: the first such minute is where the rows at t or later start."""

    TABLE = "results_topic_minutes"

    def __init__(self, path: Path):
        self.path = Path(path)

    def note(self, started_s: float, latest_ts: int) -> None:
        """A write that began at `started_s` (time.time()) holds rows up to `latest_ts`."""
        started_ms = int(started_s * 1000)
        with self._connect() as db:
            db.execute(f"INSERT INTO {self.TABLE} VALUES (?, ?, ?) ON CONFLICT(minute) DO UPDATE SET "
                       f"latest_ts = max(latest_ts, excluded.latest_ts), first_ms = min(first_ms, excluded.first_ms)",
                       (started_ms // 60_000, started_ms, int(latest_ts)))

    def since(self, lo: int | None) -> int | None:
        """The time (ms) a read of the rows at `lo` or later starts from; None: from the oldest message."""
        if lo is None or lo <= -(2**63):
            return None
        db = self._connect()
        try:
            (first,) = db.execute(f"SELECT min(first_ms) FROM {self.TABLE} WHERE latest_ts >= ?", (int(lo),)).fetchone()
            if first is None:  # no write noted with a row at lo or later: none to read, but the newest minute's
                (first,) = db.execute(f"SELECT max(first_ms) FROM {self.TABLE}").fetchone()
        finally:
            db.close()
        return None if first is None else int(first) - CLOCK_MARGIN_MS

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=60)
        db.execute(f"CREATE TABLE IF NOT EXISTS {self.TABLE} (minute INTEGER PRIMARY KEY, first_ms INTEGER NOT NULL, "
                   f"latest_ts INTEGER NOT NULL)")
        return db


def spark_for_read_back(out: Path):
    """The process's Spark session: the job's, or the one `sscript correct`, `sscript backfill` and
    `sscript results` start for a job whose results go to a topic (`session.read_back_session`)."""
    from pyspark.sql import SparkSession

    if SparkSession._instantiatedSession is None:
        raise RuntimeError(f"the results of {out} are in a Kafka topic, read by Spark: no Spark session runs here")
    return SparkSession._instantiatedSession


def messages(results, job: Job | None):
    """The result rows as Kafka messages (columns key, value), computed by the executors; a row's
    plan version by the job's one rule (`Job.handed_over`, as `Job.plan_versions` on the driver), or,
    with no job, the rows' own plan_version (a correction's, which the driver set by that rule)."""
    from pyspark.sql import functions as F

    stream, ts = F.col("stream"), F.col("ts")
    if job is None:
        plan = F.col(PLAN_VERSION)
    else:
        plan = F.lit(job.version.number)
        for name, before, old_version in job.handed_over():
            plan = F.when((stream == name) & (ts < before), F.lit(old_version)).otherwise(plan)
    key = F.concat_ws("/", stream, ts.cast("string"), F.col("start_ts").cast("string"))  # a null start_ts left out
    value = F.to_json(F.struct(*[F.col(c) for c in MESSAGE_COLUMNS], plan.alias(PLAN_VERSION)))
    return results.select(key.alias("key"), value.alias("value"))
