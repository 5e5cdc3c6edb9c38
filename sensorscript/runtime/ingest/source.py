"""Sources: what a micro-batch reads (SPEC §1), and its bytes in blocks of whole lines.

The JVM carries what to read, not readings: from a folder, Spark's `binaryFile` source lists the
new files (its checkpoint keeps which file went to which batch, so a batch re-run after a kill
reads the same files) and passes each file's path and length on, its `content` column pruned, so
Spark never reads the file itself; from Kafka, the message values as bytes. Stage 0
(runtime/ingest/packets.py) reads the bytes in Python, in blocks of at most BLOCK_BYTES cut after
a line break (`blocks`), and parses each block with Arrow by the rules of records.py
(`records.read_block`). A file of any size is read a block at a time, never whole.

Why binaryFile and not a Python streaming data source (pyspark's `DataSource.streamReader`):
docs/ARCHITECTURE.md, "Stage 0".
"""

from __future__ import annotations

from collections.abc import Iterator
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sensorscript.runtime.ingest import spool

BLOCK_BYTES = 16 << 20  # what one block of a file holds at most (plus the rest of its last line)

# The columns stage 0 reads: a file to read (its path and length), or bytes (a Kafka value).
INPUT_COLUMNS = ("path", "length", "value")
_BINARY_FILE_SCHEMA = "path string, modificationTime timestamp, length long, content binary"


def read_input(spark: SparkSession, source: str, max_files_per_trigger: int | None = None) -> DataFrame:
    """A streaming DataFrame with the columns INPUT_COLUMNS, from a folder, a socket or Kafka.

    spool:FOLDER is a socket://HOST:PORT the run loop spools into FOLDER (runtime/ingest/spool.py),
    each file deleted once a batch has committed it; kafka://BROKERS/TOPIC reads message values
    (needs the spark-sql-kafka package on the cluster; a value may hold several lines); anything
    else is a folder of CSV or JSON-lines files (new files are picked up as they appear).
    """
    if source.startswith(spool.PREFIX):  # socket://: the run loop spools it (runtime/ingest/spool.py)
        return _files(spark.readStream.option("cleanSource", "delete"), source[len(spool.PREFIX):])
    if source.startswith("socket://"):
        raise ValueError(f"{source}: a socket is read through the run loop's spool (runtime/ingest/spool.py)")
    if source.startswith("kafka://"):
        servers, topic = source[len("kafka://"):].split("/", 1)
        frame = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", servers)
                 .option("subscribe", topic).option("startingOffsets", "earliest").load())
        return frame.select(F.lit(None).cast("string").alias("path"), F.lit(None).cast("long").alias("length"),
                            F.col("value"))
    reader = spark.readStream.option("recursiveFileLookup", "true")
    if max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", max_files_per_trigger)
    return _files(reader, source)


# What a job.py compiled before stage 0 read bytes (sscript 0.x, issue #26) calls: its
# `read_lines` then `parse` now give what `read_input` gives, which its `assign_partitions` and
# `control_rows` read. So a running job (and the versions an update wrote) keeps running on a newer
# runtime without being compiled again; its checkpoint's file log is the same for either source.
def read_lines(spark: SparkSession, source: str, max_files_per_trigger: int | None = None) -> DataFrame:
    """`read_input`, under the name a job.py compiled before issue #26 calls."""
    return read_input(spark, source, max_files_per_trigger)


def parse(inputs: DataFrame) -> DataFrame:
    """What `read_lines` gave, unchanged: stage 0 now reads and parses (runtime/ingest/packets.py)."""
    return inputs


def _files(reader, folder: str) -> DataFrame:
    frame = reader.format("binaryFile").schema(_BINARY_FILE_SCHEMA).load(folder)
    return frame.select("path", "length", F.lit(None).cast("binary").alias("value"))


def blocks(path: str, length: int, block_bytes: int = BLOCK_BYTES) -> Iterator[bytes]:
    """The first `length` bytes of the file at `path` (a path or URI as Spark lists it), in blocks
    of whole lines: each ends after a line break (the last, at the end of the file), and holds at
    most `block_bytes` plus the rest of its last line. A `\\r` at a block's end stays with the next
    block, where a `\\n` may follow it (one line break, \\r\\n)."""
    with _open(path) as stream:
        rest = b""
        left = length
        while left > 0:
            chunk = stream.read(min(block_bytes, left))
            if not chunk:  # the file is shorter than when it was listed
                break
            left -= len(chunk)
            data = rest + chunk
            if left <= 0:
                rest = data
                break
            cut = max(data.rfind(b"\n"), data.rfind(b"\r", 0, len(data) - 1)) + 1
            rest = data[cut:]
            if cut:
                yield data[:cut]
        if rest:
            yield rest


def _open(path: str):
    """A binary stream of the file Spark listed: a local file (`file:/PATH`, as Hadoop writes a
    path: not percent-encoded), or one on any file system pyarrow knows (hdfs://, s3://, gs://)."""
    if path.startswith("file:"):
        local = path[len("file:"):]
        return open(local[2:] if local.startswith("///") else local, "rb")
    if "://" not in path:
        return open(path, "rb")
    from pyarrow import fs

    filesystem, inner = fs.FileSystem.from_uri(path)
    return filesystem.open_input_stream(inner)
