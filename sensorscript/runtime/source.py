"""Sources and parsing in Spark: raw lines -> readings or quarantined rows (SPEC §1).

`parse` applies the rules of sensorscript/runtime/records.py with Spark SQL
functions (so parsing stays in the JVM, vectorised); the differential tests
hold both to the same results on good and bad lines.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sensorscript.runtime import records

_BLANK_EDGES = r"^[ \t\r]+|[ \t\r]+$"


def read_lines(spark: SparkSession, source: str, max_files_per_trigger: int | None = None) -> DataFrame:
    """A streaming DataFrame with one column `line` from a folder, a socket or Kafka.

    socket://HOST:PORT reads CSV lines from a TCP socket; kafka://BROKERS/TOPIC reads
    message values (needs the spark-sql-kafka package on the cluster); anything else is
    a folder of CSV or JSON-lines files (new files are picked up as they appear).
    """
    if source.startswith("socket://"):
        host, port = source[len("socket://"):].rsplit(":", 1)
        frame = spark.readStream.format("socket").option("host", host).option("port", int(port)).load()
        return frame.select(F.col("value").alias("line"))
    if source.startswith("kafka://"):
        servers, topic = source[len("kafka://"):].split("/", 1)
        frame = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", servers)
                 .option("subscribe", topic).option("startingOffsets", "earliest").load())
        return frame.select(F.col("value").cast("string").alias("line"))
    reader = spark.readStream.option("recursiveFileLookup", "true")
    if max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", max_files_per_trigger)
    return reader.text(source).select(F.col("value").alias("line"))


def _strip(column: Column) -> Column:
    return F.regexp_replace(column, _BLANK_EDGES, "")


def parse(lines: DataFrame) -> DataFrame:
    """Columns sensor_id, ts, value, reason, raw; `reason` is null for a good reading.

    Blank lines and the CSV header are dropped, as in records.parse_line.
    """
    raw = F.regexp_replace(F.col("line"), "\r$", "")
    text = _strip(raw)
    is_json = text.startswith("{")
    parsed = F.from_json(text, "sensor_id STRING, ts STRING, value STRING",
                         {"mode": "PERMISSIVE", "allowNonNumericNumbers": "false"})
    csv = F.split(text, ",", -1)
    json_ok = (parsed.isNotNull() & parsed["sensor_id"].isNotNull() & parsed["ts"].isNotNull()
               & parsed["value"].isNotNull()
               # An object or a list where a field should be: Spark gives its JSON text.
               & ~parsed["value"].rlike(r"^[\[{]") & ~parsed["ts"].rlike(r"^[\[{]")
               & ~parsed["sensor_id"].rlike(r"^[\[{]"))
    sensor_id = _strip(F.when(is_json, parsed["sensor_id"]).otherwise(csv.getItem(0)))
    ts_text = _strip(F.when(is_json, parsed["ts"]).otherwise(csv.getItem(1)))
    value_text = _strip(F.when(is_json, parsed["value"]).otherwise(csv.getItem(2)))
    boolean = F.lower(value_text)
    number = F.when(boolean == "true", F.lit(1.0)).when(boolean == "false", F.lit(0.0)).when(
        value_text.rlike(records.VALUE_PATTERN), value_text.cast("double"))
    finite = number.isNotNull() & (F.abs(number) < F.lit(float("inf")))
    reason = (F.when(is_json & ~F.coalesce(json_ok, F.lit(False)), F.lit(records.REASON_JSON))
              .when(~is_json & (F.size(csv) != 3), F.lit(records.REASON_FIELDS))
              .when(sensor_id == "", F.lit(records.REASON_SENSOR))
              .when(~ts_text.rlike(records.TS_PATTERN), F.lit(records.REASON_TS))
              .when(~finite, F.lit(records.REASON_VALUE)))
    return (lines
            .where((text != "") & (text != records.HEADER))
            .select(sensor_id.alias("sensor_id"), ts_text.cast("long").alias("ts"), number.alias("value"),
                    reason.alias("reason"), raw.alias("raw")))
