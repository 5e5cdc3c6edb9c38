"""Sources: what a micro-batch reads, and its bytes in blocks of whole lines.

The JVM carries what to read, not readings: from a folder, Spark's `binaryFile` source lists the
new files (its checkpoint keeps which file went to which batch, so a batch re-run after a kill
reads the same files) and passes each file's path and length on, its `content` column pruned, so
Spark never reads the file itself; from Kafka, the message values as bytes. Stage 0
(runtime/ingest/packets.py) reads the bytes in Python, in blocks of at most BLOCK_BYTES cut after
a line break (`blocks`), and parses each block with Arrow by the rules of records.py
(`records.read_block`). A file of any size is read a block at a time, never whole.

A live feed's folder (files deleted or archived once read) and the socket's spool are read by the
drop-folder source instead (runtime/ingest/drop_folder.py, `drop:FOLDER`), whose checkpoint stays
bounded: Spark's file source remembers every file it has read.

Why binaryFile and not a Python streaming data source (pyspark's `DataSource.streamReader`):
docs/ARCHITECTURE.md, "Stage 0".
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sensorscript.runtime.ingest import drop_folder, kafka, mqtt, mqtt_spool, records, spool

BLOCK_BYTES = 16 << 20  # what one block of a file holds at most (plus the rest of its last line)

# The columns stage 0 reads: a file to read (its path and length), or bytes (a Kafka value).
INPUT_COLUMNS = ("path", "length", "value")
KEY_COLUMN = "key"  # a Kafka message's key, read with --sensor-from-key: the sensor id of its lines
_BINARY_FILE_SCHEMA = "path string, modificationTime timestamp, length long, content binary"


def read_input(spark: SparkSession, source: str, max_files_per_trigger: int | None = None,
               cleanup: str = "keep", kafka_settings: tuple = ()) -> DataFrame:
    """A streaming DataFrame with the columns INPUT_COLUMNS, from a folder, a socket or Kafka.

    drop:FOLDER is a folder whose files go once read (`cleanup` delete or archive:DIR), read by
    runtime/ingest/drop_folder.py, whose checkpoint stays bounded (the run loop chooses it for a live
    feed's folder and for a socket's spool); spool:FOLDER is a socket://HOST:PORT the run loop spools into FOLDER (runtime/ingest/spool.py),
    each file deleted once a batch has committed it; kafka://BROKERS/TOPIC reads message values
    with Spark's Kafka source (runtime/ingest/kafka.py; `kafka_settings`: the run's, `Job.kafka`; a
    value may hold several lines); anything
    else is a folder of CSV or JSON-lines files (new files are picked up as they appear), whose
    files are kept, deleted or moved once read by `cleanup` (`input_cleanup`).
    """
    if source.startswith(drop_folder.PREFIX):  # a live feed's folder (runtime/ingest/drop_folder.py)
        return _drop_folder(spark, source[len(drop_folder.PREFIX):], max_files_per_trigger, cleanup)
    if source.startswith(spool.PREFIX):  # socket://: the run loop spools it (runtime/ingest/spool.py)
        return _files(spark.readStream.option("cleanSource", "delete"), source[len(spool.PREFIX):])
    if spooled(source):
        raise ValueError(f"{source}: a socket or broker is read through the run loop's spool (runtime/ingest/spool.py)")
    if source.startswith(kafka.PREFIX):
        frame = spark.readStream.format("kafka").options(**kafka.reader_options(source, kafka_settings)).load()
        key = [F.col("key")] if kafka.Settings.of(kafka_settings).sensor_from_key else []
        return frame.select(F.lit(None).cast("string").alias("path"), F.lit(None).cast("long").alias("length"),
                            F.col("value"), *key)
    reader = spark.readStream.option("recursiveFileLookup", "true")
    if max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", max_files_per_trigger)
    mode, archive_dir = _cleanup_mode(cleanup)
    if mode != "keep":  # Spark's cleanSource: a batch's files go once the batch is committed
        reader = reader.option("cleanSource", "archive" if archive_dir else "delete")
        if archive_dir:
            reader = reader.option("sourceArchiveDir", archive_dir)
    return _files(reader, source)


# ---- What becomes of a folder's files once read (--input-cleanup) ----------------------------------
#
# keep: they stay (a folder replayed, read again by a later run that starts afresh); delete: they are
# deleted; archive:DIR: moved under DIR, at their own absolute path (Spark's sourceArchiveDir). A
# live feed (a gateway's drop folder) would otherwise grow without end, and Spark lists the whole
# folder at every trigger. Spark deletes or moves a batch's files when it builds the next batch,
# after the batch's commit, so a run killed at any point loses nothing (`clean_committed` does what
# Spark leaves: the files of the last batch of a run whose input ended, and of a batch run again
# after a kill).
CLEANUP_HELP = "keep, delete or archive:DIR"


def input_cleanup(requested: str | None, source: str, once: bool) -> str:
    """The cleanup of a run's input files: `requested` (checked), or by default `delete` for a run
    that goes on until stopped (a live feed's folder) and `keep` for --once (a bounded replay of a
    folder, which a later --once run reads again). An archive folder comes back absolute. Raises
    ValueError in the user's words."""
    if requested is None:
        return "keep" if once or streamed(source) else "delete"
    mode, archive_dir = _cleanup_mode(requested)
    if streamed(source) and mode != "keep":
        raise ValueError(f"--input-cleanup {requested}: a socket's or broker's spool is deleted as it is read, and Kafka keeps "
                         f"its own retention; the option is for a folder of files")
    if archive_dir is None:
        return mode
    if "://" in archive_dir or "://" in source:
        return requested  # Spark checks a file system's paths itself
    folder, archive = Path(source).resolve(), Path(archive_dir).expanduser().resolve()
    if archive == folder or folder in archive.parents or archive in folder.parents:
        raise ValueError(f"--input-cleanup archive:{archive_dir}: the archive folder must be outside the input "
                         f"folder {source} (and not hold it), or the files moved there would be read again")
    if archive.exists() and not archive.is_dir():
        raise ValueError(f"--input-cleanup archive:{archive_dir}: not a folder")
    return f"archive:{archive}"


def check_input_cleanup(text: str) -> str:
    """`text` if it is keep, delete or archive:DIR, else ValueError (what the CLI checks first)."""
    _cleanup_mode(text)
    return text


def _cleanup_mode(text: str) -> tuple[str, str | None]:
    """(keep | delete | archive, the archive folder or None)."""
    if text in ("keep", "delete"):
        return text, None
    if text.startswith("archive:") and text[len("archive:"):].strip():
        return "archive", text[len("archive:"):]
    raise ValueError(f"--input-cleanup {text}: expected {CLEANUP_HELP}")


# Inputs that are not a folder of files: the driver spools a socket's lines and a broker's messages
# into files (runtime/ingest/spool.py, mqtt_spool.py); Kafka is read by Spark.
BROKERS = tuple(f"{scheme}://" for scheme in mqtt.SCHEMES)
SPOOLED = ("socket://", *BROKERS)
STREAMS_HELP = "socket://HOST:PORT, mqtt://[USER@]HOST:PORT/TOPIC or kafka://BROKERS/TOPIC"


def spooled(source: str) -> bool:
    """Whether the run loop spools `source` (a socket or an MQTT topic) for the query to read."""
    return source.startswith(SPOOLED)


def streamed(source: str) -> bool:
    """Whether `source` is a feed rather than a folder of files (which is read once, or replayed)."""
    return source.startswith((*SPOOLED, "kafka://", spool.PREFIX))


def check_feed(source: str, sensor_level: int | None = None, login: mqtt.Login = mqtt.Login(),
               kafka_settings: tuple = ()) -> None:
    """A feed's address and options, checked before Spark starts (ValueError in the user's words)."""
    if source.startswith(kafka.PREFIX):
        kafka.reader_options(source, kafka_settings)  # the address, and every env:NAME set
    elif any(kafka_settings):
        raise ValueError("--kafka-start, --max-readings-per-batch, --kafka-option and --sensor-from-key are for a "
                         "kafka:// input")
    if source.startswith(BROKERS):
        login.password(mqtt.Address.parse(source, "an MQTT source"))
        mqtt_spool.check_level(sensor_level)
    elif sensor_level is not None:
        raise ValueError("--sensor-from-topic takes the sensor id from an MQTT topic: the input is no mqtt:// address")


def open_feed(source: str, folder: Path, journal: Path, out: Path, sensor_level: int | None = None,
              tls: mqtt.Tls = mqtt.Tls(), echo=print, login: mqtt.Login = mqtt.Login(), on_broker=None):
    """The spool of a socket or an MQTT topic into `folder` (its `input` is what the query reads);
    not started. `journal`: where the MQTT spool keeps its journals (runtime/ingest/mqtt_spool.py);
    `on_broker(address, lost_since, reason)`: told when an MQTT broker is lost and back (None, "")."""
    if source.startswith("socket://"):
        return spool.SocketSpool(source, folder, echo=echo)
    return mqtt_spool.MqttSpool(source, folder, journal, mqtt_spool.client_id(out), sensor_level, tls, echo=echo,
                                 login=login, on_broker=on_broker)


def clean_committed(state: Path, folder: str, cleanup: str, everything: bool = False) -> int:
    """Delete or archive (by `cleanup`) the files of `folder` that the checkpoint's query (its folder
    `state`) read in committed batches and that are still there: Spark's file source cleans a
    batch's files when it builds the next one, and the drop-folder source when the next one is
    logged (runtime/ingest/drop_folder.py), so a run leaves those of its last committed batch, and
    of a batch before one run again after a kill (never committed again). `everything`: the input
    has ended, every batch logged was committed. Returns how many files went."""
    mode, archive_dir = _cleanup_mode(cleanup)
    if mode == "keep" or "://" in folder:
        return 0
    root = Path(folder).resolve()
    gone = 0
    for index, files in _source_logs(state).items():
        if not any(root in path.parents for paths in files.values() for path in paths):
            continue  # another source's log (the control folder's)
        upto = max(files, default=-1) if everything else _committed_log_offset(state, index)
        for batch, paths in files.items():
            if batch > upto:
                continue
            for path in paths:
                if path.exists() and root in path.parents:
                    drop_folder.remove(path, archive_dir)
                    gone += 1
    upto = _last_committed(state, everything)
    for batch, files in _drop_offsets(state).items():
        if batch <= upto:
            gone += sum(drop_folder.discard(path, length, mtime_ns, archive_dir)
                        for path, length, mtime_ns in files if root in Path(path).parents)
    return gone


def _drop_offsets(state: Path) -> dict[int, list[list]]:
    """Micro-batch -> the files its drop-folder offsets list, for the batches in the offset log."""
    found = {}
    for log in (state / "offsets").glob("[0-9]*"):
        if log.name.isdigit():
            lines = log.read_text().splitlines()[2:]
            files = [entry for line in lines for entry in (drop_folder.offsets_files(line) or ())]
            if files:
                found[int(log.name)] = files
    return found


def _last_committed(state: Path, everything: bool) -> int:
    """The last micro-batch committed (with `everything`: the last one logged), -1 if none."""
    folder = state / ("offsets" if everything else "commits")
    return max((int(p.name) for p in folder.glob("[0-9]*") if p.name.isdigit()), default=-1)


def _source_logs(state: Path) -> dict[int, dict[int, list[Path]]]:
    """Per source of the checkpoint's query, its file log: log offset -> the files read at it."""
    found: dict[int, dict[int, list[Path]]] = {}
    for log_folder in sorted((state / "sources").glob("[0-9]*")):
        files: dict[int, set[Path]] = {}
        for log in log_folder.iterdir():
            if log.name.startswith(".") or not log.name.split(".")[0].isdigit():
                continue
            for line in log.read_text().splitlines()[1:]:
                entry = json.loads(line)
                path = urlparse(entry["path"]).path
                files.setdefault(entry["batchId"], set()).add(Path(path))
        found[int(log_folder.name)] = {batch: sorted(paths) for batch, paths in sorted(files.items())}
    return found


def _committed_log_offset(state: Path, index: int) -> int:
    """The log offset of source `index` that the last committed micro-batch read up to (-1: none)."""
    last = _last_committed(state, everything=False)
    if last < 0:
        return -1
    lines = (state / "offsets" / str(last)).read_text().splitlines()
    offset = lines[2 + index] if len(lines) > 2 + index else "-"
    return -1 if offset.strip() == "-" else int(json.loads(offset)["logOffset"])


# What a job.py compiled before stage 0 read bytes (sscript 0.x, issue #26) calls: its
# `read_lines` then `parse` now give what `read_input` gives, which its `assign_partitions` and
# `control_rows` read. So a running job (and the versions an update wrote) keeps running on a newer
# runtime without being compiled again; its checkpoint's file log is the same for either source.
def read_lines(spark: SparkSession, source: str, max_files_per_trigger: int | None = None) -> DataFrame:
    """`read_input`, under the name a job.py compiled before issue #26 calls (its files are kept:
    the run loop says so)."""
    return read_input(spark, source, max_files_per_trigger)


def parse(inputs: DataFrame) -> DataFrame:
    """What `read_lines` gave, unchanged: stage 0 now reads and parses (runtime/ingest/packets.py)."""
    return inputs


def _drop_folder(spark: SparkSession, folder: str, max_files_per_trigger: int | None, cleanup: str) -> DataFrame:
    if _cleanup_mode(cleanup)[0] == "keep":
        raise ValueError(f"{folder}: a drop folder's files go once read (--input-cleanup delete or archive:DIR)")
    spark.dataSource.register(drop_folder.DropFolder)
    reader = (spark.readStream.format(drop_folder.FORMAT).option("path", str(Path(folder).resolve()))
              .option("cleanup", cleanup).option("partitions", spark.sparkContext.defaultParallelism))
    if max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", max_files_per_trigger)
    return reader.load()


def _files(reader, folder: str) -> DataFrame:
    frame = reader.format("binaryFile").schema(_BINARY_FILE_SCHEMA).load(folder)
    return frame.select("path", "length", F.lit(None).cast("binary").alias("value"))


def blocks(path: str, length: int, block_bytes: int = BLOCK_BYTES) -> Iterator[bytes | records.Rejected]:
    """The first `length` bytes of the file at `path` (a path or URI as Spark lists it), in blocks
    of whole lines: each ends after a line break (the last, at the end of the file), and holds at
    most `block_bytes` plus the rest of its last line. A `\\r` at a block's end stays with the next
    block, where a `\\n` may follow it (one line break, \\r\\n).

    A line longer than records.MAX_LINE_BYTES is never held: once the rest of a block's last line
    passes that, its first bytes make its rejection (records.overlong), yielded in its place, and
    the file is read past its end. So a block holds at most `block_bytes` plus that bound."""
    longest = records.MAX_LINE_BYTES
    with _open(path) as stream:
        rest = b""
        left = length
        long_start: bytes | None = None  # the first bytes of a line too long to hold, being read past
        after_return = False  # a long line ended by a \r at a chunk's end: a \n may begin the next
        at_start = True  # no line of the file yielded yet (a byte-order mark is not part of the line)
        while left > 0:
            chunk = stream.read(min(block_bytes, left))
            if not chunk:  # the file is shorter than when it was listed
                break
            left -= len(chunk)
            if after_return:
                chunk, after_return = chunk[chunk.startswith(b"\n"):], False
            if long_start is not None:
                end = _line_break(chunk)
                if end < 0:
                    continue
                yield records.overlong(long_start.decode("utf-8", "replace"))
                long_start, at_start = None, False
                if chunk[end:end + 2] == b"\r\n":
                    end += 1
                elif chunk[end:end + 1] == b"\r" and end == len(chunk) - 1:
                    after_return = True
                chunk = chunk[end + 1:]
            data = rest + chunk
            if left <= 0:
                rest = data
                break
            cut = max(data.rfind(b"\n"), data.rfind(b"\r", 0, len(data) - 1)) + 1
            rest = data[cut:]
            if cut:
                yield data[:cut]
                at_start = False
            if len(rest) > longest:
                start = rest[len(records.BOM):] if at_start and rest.startswith(records.BOM) else rest
                long_start, rest = start[:records.KEPT_BYTES + 4], b""
        if long_start is not None:
            yield records.overlong(long_start.decode("utf-8", "replace"))
        elif rest:
            yield rest


def _line_break(data: bytes) -> int:
    """Where the first line break of `data` is (\\n or \\r), or -1."""
    found = [at for at in (data.find(b"\n"), data.find(b"\r")) if at >= 0]
    return min(found) if found else -1


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
