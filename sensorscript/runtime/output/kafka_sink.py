"""Results to a Kafka topic: `--sink kafka://HOST:PORT[,HOST:PORT...]/TOPIC`, written by the
executors through Spark's own Kafka sink: no result row crosses the driver.

Each result row becomes one message: its key `STREAM/TS` (a pattern's match `STREAM/TS/START_TS`,
since matches of one stream may end at the same time), its value a JSON object of the row's
columns (sinks.RESULT_COLUMNS, a match's MATCH_COLUMNS, and `plan_version`; an empty column left
out). Kafka's producer puts the messages of one key on one partition, in order.

Kafka takes a message at least once: a batch that a kill cut short after its results reached the
topic and before the driver committed it is written again by the next run, the same rows with the
same keys and versions. A consumer keeps, per key, the row of the highest version (an upsert by
key and version), so a row written twice counts once (README, "Results to Kafka").

The batch's small facts (quarantine, late readings, metrics, and the ledger of written batches)
stay in the local SQLite store, written by the driver after the topic took the results: a batch in
the ledger is in the topic. Of the result rows the driver collects only those of the streams whose
alarms it delivers (`--alerts`), and two counts.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from sensorscript.runtime.ingest import kafka
from sensorscript.runtime.plan.program import Job

PREFIX = kafka.PREFIX
# The columns of a result's message, in order (runtime/output/rows.py's OUTPUT_SCHEMA names them).
MESSAGE_COLUMNS = ("stream", "ts", "window_start", "window_end", "value", "version", "start_ts", "end_ts", "events")


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
        address = kafka.Address.parse(self.url)
        return {"kafka.bootstrap.servers": ",".join(address.servers), "topic": address.topics[0],
                **kafka.client_options(self.options)}

    def describe(self) -> str:
        return f"{self.url} (results, written by the executors)"

    def write(self, batch, job: Job, keep: frozenset[str] = frozenset()) -> tuple[pd.DataFrame, int, int]:
        """A micro-batch's result rows to the topic from the executors; returns the batch's other
        rows with the result rows of the streams in `keep` (the driver's share), how many result rows
        there were, and how many of them were pattern matches. The batch is computed once (kept in
        the executors' memory, spilling to disk, while it is read three times)."""
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        batch.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            results = batch.filter(F.col("kind") == "result")
            messages(results, job).write.format("kafka").options(**self.writer_options()).save()
            counted = results.agg(F.count(F.lit(1)).alias("rows"), F.count("events").alias("matches")).first()
            driver = F.col("kind") != "result"
            if keep:
                driver = driver | F.col("stream").isin(sorted(keep))
            rows = batch.filter(driver).toPandas()
        finally:
            batch.unpersist()
        return rows, int(counted["rows"]), int(counted["matches"])


def messages(results, job: Job):
    """The result rows as Kafka messages (columns key, value), computed by the executors; a row's
    plan version by the job's one rule (`Job.handed_over`, as `Job.plan_versions` on the driver)."""
    from pyspark.sql import functions as F

    stream, ts = F.col("stream"), F.col("ts")
    plan = F.lit(job.version.number)
    for name, before, old_version in job.handed_over():
        plan = F.when((stream == name) & (ts < before), F.lit(old_version)).otherwise(plan)
    key = F.concat_ws("/", stream, ts.cast("string"), F.col("start_ts").cast("string"))  # a null start_ts left out
    value = F.to_json(F.struct(*[F.col(c) for c in MESSAGE_COLUMNS], plan.alias("plan_version")))
    return results.select(key.alias("key"), value.alias("value"))
