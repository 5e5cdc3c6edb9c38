"""Sources and parsing in Spark: raw lines -> readings or quarantined rows (SPEC §1).

`parse` applies the rules of sensorscript/runtime/ingest/records.py with Spark SQL
functions (so parsing stays in the JVM, vectorised); the differential tests
hold both to the same results on good and bad lines.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sensorscript.runtime.ingest import records
from sensorscript.runtime.ingest import spool


def read_lines(spark: SparkSession, source: str, max_files_per_trigger: int | None = None) -> DataFrame:
    """A streaming DataFrame with one column `line` from a folder, a socket or Kafka.

    spool:FOLDER is a socket://HOST:PORT the run loop spools into FOLDER (runtime/ingest/spool.py),
    each file deleted once a batch has committed it; kafka://BROKERS/TOPIC reads
    message values (needs the spark-sql-kafka package on the cluster); anything else is
    a folder of CSV or JSON-lines files (new files are picked up as they appear).
    """
    if source.startswith(spool.PREFIX):  # socket://: the run loop spools it (runtime/ingest/spool.py)
        frame = spark.readStream.option("cleanSource", "delete").text(source[len(spool.PREFIX):])
        return frame.select(F.col("value").alias("line"))
    if source.startswith("socket://"):
        raise ValueError(f"{source}: a socket is read through the run loop's spool (runtime/ingest/spool.py)")
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
    """Python's str.strip(" \\t\\r"): trim works on Spark's bytes, where a regex would copy each value."""
    return F.trim(column, F.lit(records.BLANKS))


def _count(column: Column, chars: str) -> Column:
    """How many characters of `column` are among `chars`."""
    return F.length(column) - F.length(F.translate(column, chars, ""))


def _signed(column: Column, chars: str) -> tuple[Column, Column]:
    """(only `chars` after an optional leading sign, the count of those chars), without a regex."""
    rest = F.translate(column, chars, "")
    only = (rest == "") | (rest.isin("+", "-") & column.startswith(rest))
    return only, F.length(column) - F.length(rest)


def parse(lines: DataFrame) -> DataFrame:
    """Columns sensor_id, ts, value, reason, raw, one row per line: a reading has `reason` null; a
    quarantined line its reason and `raw`, the line as text (valid UTF-8: other bytes read as
    U+FFFD); a line the rules skip (blank, the CSV header) has every column null, so that the
    job can count it.

    Most lines are plain CSV numbers, checked here with string functions that work on Spark's
    bytes; the regular expressions of records.py run only on what those leave in doubt
    (exponents, booleans, garbage), so a clean input never pays for them.
    The steps are separate selects so each intermediate is computed once.
    """
    stripped = (lines
                .select(F.rtrim("line", F.lit("\r")).alias("raw"))
                .select("raw", _strip(F.col("raw")).alias("text"))
                .select("raw", "text", ((F.col("text") == "") | (F.col("text") == records.HEADER)).alias("skip")))
    is_json = F.col("text").startswith("{")
    split = stripped.select(
        "raw", "skip", is_json.alias("is_json"),
        F.when(is_json, _json_object(F.col("text"))).alias("json"),
        F.split("text", ",", -1).alias("csv"))
    json_ok = F.coalesce(
        F.col("json").isNotNull()
        & F.col("json.sensor_id").isNotNull() & F.col("json.ts").isNotNull() & F.col("json.value").isNotNull()
        # An object or a list where a field should be: Spark gives its JSON text.
        & ~F.col("json.sensor_id").rlike(r"^[\[{]") & ~F.col("json.ts").rlike(r"^[\[{]")
        & ~F.col("json.value").rlike(r"^[\[{]"), F.lit(False))
    fields = split.select(
        "raw", "skip", "is_json",
        F.when(F.col("is_json"), ~json_ok).otherwise(F.size("csv") != 3).alias("malformed"),
        *[_strip(F.when(F.col("is_json"), F.col(f"json.{field}")).otherwise(F.get("csv", i))).alias(name)
          for i, (field, name) in enumerate((("sensor_id", "sensor_id"), ("ts", "ts_text"),
                                             ("value", "value_text")))])
    ts_text, value_text = F.col("ts_text"), F.col("value_text")
    # ts: records.TS_PATTERN, an optional sign and 1 to 18 digits.
    ts_digits_only, ts_digits = _signed(ts_text, "0123456789")
    ts_ok = ts_digits_only & ts_digits.between(1, 18)
    # value: a plain decimal (digits, at most one point) is certain; the rest goes to the patterns.
    plain_only, plain_chars = _signed(value_text, "0123456789.")
    dots = _count(value_text, ".")
    plain = plain_only & (dots <= 1) & (plain_chars - dots >= 1)
    lowered = F.lower(value_text)
    typed = fields.select(
        "raw", "skip", "is_json", "malformed", "sensor_id", "ts_text",
        F.when(ts_ok, ts_text.try_cast("long")).alias("ts"),
        F.when(plain, value_text.try_cast("double"))
        .when(lowered == "true", F.lit(1.0)).when(lowered == "false", F.lit(0.0))
        .when(value_text.rlike(records.VALUE_PATTERN), value_text.try_cast("double"))
        .alias("number"))
    finite = F.col("number").isNotNull() & (F.abs("number") < F.lit(float("inf")))
    reason = (F.when(F.col("skip"), F.lit(None))
              .when(F.col("malformed") & F.col("is_json"), F.lit(records.REASON_JSON))
              .when(F.col("malformed"), F.lit(records.REASON_FIELDS))
              .when(F.col("sensor_id") == "", F.lit(records.REASON_SENSOR))
              .when(F.col("ts").isNull(), F.lit(records.REASON_TS))
              .when(~finite, F.lit(records.REASON_VALUE)))
    # A skipped line's ts and value are null already (its fields are "", or the header's names).
    return (typed.select(F.when(~F.col("skip"), F.col("sensor_id")).alias("sensor_id"), "ts",
                         F.col("number").alias("value"), reason.alias("reason"), "raw")
            # The raw line goes on only for a quarantined row; Python reads it, so it must be UTF-8.
            .select("sensor_id", "ts", "value", "reason",
                    F.when(F.col("reason").isNotNull(), F.make_valid_utf8("raw")).alias("raw")))


# Strict JSON, as Python's json module reads it (Spark's default allows single quotes).
_JSON_OPTIONS = {"mode": "PERMISSIVE", "allowNonNumericNumbers": "false", "allowSingleQuotes": "false"}


def _json_object(text: Column) -> Column:
    """The fields of the one JSON object in `text`; null when more than blanks follows it.

    Spark's JSON functions stop reading at the end of the first value. A text whose only `}` is its
    last character ends with its object, and is read as it is (most lines). Any other is read as a
    key's value (`{"r": TEXT}`), and only if it is an array's only element (`[TEXT]`): whatever
    follows the object breaks one of the two (a `}`, or `, "key": 1`, would pass the first and
    not the second; a `]` the second and not the first)."""
    fields = "sensor_id: STRING, ts: STRING, value: STRING"
    ends_at_its_only_brace = F.instr(text, "}") == F.length(text)
    alone = F.json_array_length(F.concat(F.lit("["), text, F.lit("]"))) == 1
    wrapped = F.from_json(F.concat(F.lit('{"r":'), text, F.lit("}")), f"r STRUCT<{fields}>", _JSON_OPTIONS)["r"]
    return (F.when(ends_at_its_only_brace, F.from_json(text, f"STRUCT<{fields}>", _JSON_OPTIONS))
            .when(alone, wrapped))
