"""How readings should reach stage 0: the ways of reading a folder of CSV files into Python, measured.

    .venv/bin/python scripts/bench_sources.py [--readings 2000000] [--files 8] [--rounds 2] [--no-warm-up] [--keep DIR]

`--readings` readings (1,000 sensors) in `--files` CSV files; each way reads them all on local[2]
with trigger availableNow and a noop sink, and ends, as the job's stage 0 does, in Python:

  text       Spark's text source, split and cast in Spark SQL, then a mapInArrow (the job before #26)
  content    binaryFile with its content column: each file's bytes cross into Python, parsed by pyarrow
  paths      binaryFile without content (the job's source): paths cross, Python reads each file in
             blocks of whole lines (source.blocks) and parses them by pyarrow
  datasource a Python streaming data source (pyspark's DataSource.streamReader): files listed in
             Python, offsets in Spark's checkpoint, one partition per file range, read and parsed by
             pyarrow in the partition; then a mapInArrow (stage 0's place), so each reading crosses
             from Python into the JVM and back
  datasource-alone  the data source without the mapInArrow after it

Every way parses with the same pyarrow call (typed columns), so the figures compare transports.
Readings per second = readings / the batches' own time (Spark's triggerExecution, the query's start
left out) and the query's whole time; the median of `--rounds` rounds, the ways alternated.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, SupportsTriggerAvailableNow

SCHEMA = "sensor_id string, ts long, value double"
ARROW_SCHEMA = pa.schema([("sensor_id", pa.string()), ("ts", pa.int64()), ("value", pa.float64())])
RANGE_BYTES = 16 << 20
WAYS = ("text", "content", "paths", "datasource", "datasource-alone")


def parse(data: bytes):
    """CSV bytes (no header) -> Arrow batches, the same pyarrow call for every way."""
    if not data:
        return []
    table = pacsv.read_csv(pa.BufferReader(data), pacsv.ReadOptions(column_names=ARROW_SCHEMA.names,
                                                                     use_threads=False, block_size=1 << 22),
                           convert_options=pacsv.ConvertOptions(column_types=ARROW_SCHEMA))
    return table.to_batches(max_chunksize=100_000)


class FileRange(InputPartition):
    def __init__(self, path: str, size: int, lo: int, hi: int):
        self.path, self.size, self.lo, self.hi = path, size, lo, hi


class FolderSource(DataSource):
    """A folder of CSV files as a Python streaming source: its offset is the files taken so far."""

    @classmethod
    def name(cls):
        return "csvfolder"

    def schema(self):
        return SCHEMA

    def streamReader(self, schema):
        return FolderReader(self.options["path"])


class FolderReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, folder: str):
        self.folder = folder

    def initialOffset(self):
        return {"taken": [], "batch": []}

    def getDefaultReadLimit(self):
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self):
        pass

    def latestOffset(self, start, limit):
        entries = sorted((e.stat().st_mtime_ns, e.path, e.stat().st_size) for e in os.scandir(self.folder)
                         if e.is_file() and not e.name.startswith((".", "_")))
        new = [(path, size) for _, path, size in entries if path not in start["taken"]]
        if not new:
            return start
        return {"taken": start["taken"] + [p for p, _ in new], "batch": [[p, s] for p, s in new]}

    def partitions(self, start, end):
        if end == start:
            return []
        return [FileRange(p, s, lo, min(lo + RANGE_BYTES, s)) for p, s in end["batch"]
                for lo in range(0, max(s, 1), RANGE_BYTES)]

    def read(self, partition):
        yield from parse(_range(partition.path, partition.size, partition.lo, partition.hi))

    def commit(self, end):
        pass


def _range(path: str, size: int, lo: int, hi: int) -> bytes:
    """The lines of `path` that start in [lo, hi)."""
    with open(path, "rb") as f:
        f.seek(max(lo - 1, 0))
        data = f.read(min(hi, size) - max(lo - 1, 0))
        if lo > 0:  # the line that began before lo is the previous range's
            cut = data.find(b"\n")
            data = data[cut + 1:] if cut >= 0 else b""
        if data and not data.endswith(b"\n") and hi < size:  # finish the last line
            rest = f.read(size - hi)
            end = rest.find(b"\n")
            data += rest[:end + 1] if end >= 0 else rest
    return data


def _passthrough(batches):
    yield from batches


def _content(batches):
    for batch in batches:
        for content in batch.column("content"):
            yield from parse(content.as_py())


def _paths(batches):
    from sensorscript.runtime.ingest.source import blocks

    for batch in batches:
        for path, length in zip(batch.column("path").to_pylist(), batch.column("length").to_pylist()):
            for data in blocks(path, length):
                yield from parse(data)


def frame(spark, way: str, folder: str):
    binary = "path string, modificationTime timestamp, length long, content binary"
    if way == "text":
        parts = F.split("value", ",", -1)
        return (spark.readStream.text(folder).select(parts[0].alias("sensor_id"), parts[1].cast("long").alias("ts"),
                                                     parts[2].cast("double").alias("value"))
                .mapInArrow(_passthrough, SCHEMA))
    if way == "content":
        return spark.readStream.format("binaryFile").schema(binary).load(folder).select("content") \
            .mapInArrow(_content, SCHEMA)
    if way == "paths":
        return spark.readStream.format("binaryFile").schema(binary).load(folder).select("path", "length") \
            .mapInArrow(_paths, SCHEMA)
    source = spark.readStream.format("csvfolder").option("path", folder).load()
    return source if way == "datasource-alone" else source.mapInArrow(_passthrough, SCHEMA)


def write_files(folder: Path, readings: int, files: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(26)
    per_file = -(-readings // files)
    for k in range(files):
        n = min(per_file, readings - k * per_file)
        i = np.arange(k * per_file, k * per_file + n)
        table = pa.table({"sensor_id": pa.array(np.char.add("S", (i % 1000).astype(str))),
                          "ts": 1_767_225_600_000 + i, "value": np.round(rng.normal(0, 10, n), 4)})
        pacsv.write_csv(table, folder / f"part-{k:03d}.csv", pacsv.WriteOptions(include_header=False,
                                                                                 quoting_style="none"))
        os.utime(folder / f"part-{k:03d}.csv", (1_700_000_000 + k, 1_700_000_000 + k))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readings", type=int, default=2_000_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-warm-up", dest="warm_up", action="store_false",
                        help="no warm-up run of each way first (a smoke run's figures, not a benchmark's)")
    parser.add_argument("--keep", help="work in this folder and keep it")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    work = Path(args.keep or tempfile.mkdtemp(prefix="sscript-sources-"))
    data = work / "data"
    shutil.rmtree(data, ignore_errors=True)
    write_files(data, args.readings, args.files)
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(FolderSource)

    def run(way: str) -> tuple[float, float]:
        checkpoint = work / f"checkpoint-{way}"
        shutil.rmtree(checkpoint, ignore_errors=True)
        start = time.perf_counter()
        query = (frame(spark, way, str(data)).writeStream.format("noop").trigger(availableNow=True)
                 .option("checkpointLocation", str(checkpoint)).start())
        query.awaitTermination()
        whole = time.perf_counter() - start
        progress = [p for p in query.recentProgress if p["numInputRows"]]
        return sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000, whole

    for way in WAYS if args.warm_up else ():  # warm-up: the JVM compiles each way's code once
        run(way)
    measured: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
    for number in range(args.rounds):
        for way in WAYS if number % 2 == 0 else WAYS[::-1]:
            measured[way].append(run(way))
    print(f"{args.readings:,} readings in {args.files} files, local[2], noop sink, median of {args.rounds}:")
    for way, runs in measured.items():
        batches, whole = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
        print(f"  {way:<17} {args.readings / batches:>12,.0f} readings/s (batches {batches:.2f} s, "
              f"query {whole:.2f} s)")
    spark.stop()
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
