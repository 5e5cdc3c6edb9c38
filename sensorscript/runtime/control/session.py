"""The Spark session a job runs in, and where Spark's own output goes.

Spark's JVM writes its log and what its Python workers print (pyspark's transformWithStateInPandas
workers print banners at every query start) to its standard output and error. A user of the job
sees its batch lines, not Spark's internals: the JVM this process starts writes into a log file
(OUT/spark.log, two files of at most 5 MiB), and `SSCRIPT_SPARK_LOG=LEVEL` (e.g. WARN) brings
Spark's log back to the terminal, at that level, for debugging.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import subprocess
import sys
import threading
from pathlib import Path

from sensorscript.runtime.control import cluster_security, jars
from sensorscript.runtime.plan.loading import keep_private
from sensorscript.runtime.plan.program import Job


# A job runs for months: its JVMs take their whole heap when they start (-Xms = -Xmx, the pages
# touched at once) instead of growing it under load and handing it back, so their memory is flat
# from the start. Measured by scripts/soak.py (docs/BENCHMARKS.md): with Spark's defaults the
# driver JVM's heap, committed by G1 as it saw fit, moved between 550 and 900 MiB of the 1 GiB
# allowed during 8 minutes at 40,000 readings/s, and with it the JVM's RSS.
HEAP_OPTIONS = "-Xms{memory} -XX:+AlwaysPreTouch"
SPARK_LOG = "spark.log"  # in OUT: what Spark's JVM and its Python workers printed
LOG_BYTES, LOG_FILES = 5 * 2**20, 1  # the log's bound: this size, then one older file beside it


# More options for the job's JVMs, driver and executors (a garbage collector, a JIT setting, a
# diagnostic flag), after ours: e.g. the test suite's `-XX:TieredStopAtLevel=1 -XX:+UseSerialGC`
# (scripts/test.sh), for JVMs that live seconds.
EXTRA_OPTIONS = "SSCRIPT_JVM_OPTIONS"


# What one Arrow batch between the JVM and the Python workers holds at most: 100,000 rows and 64 MiB
# (stage 0 joins a batch's Kafka messages, which may be large, into one block of lines).
ARROW_BATCHES = {"spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
                 "spark.sql.execution.arrow.maxBytesPerBatch": str(64 * 2**20)}


def extra_jvm_options() -> str:
    """What SSCRIPT_JVM_OPTIONS adds to the options of the job's JVMs."""
    return os.environ.get(EXTRA_OPTIONS, "").strip()


def jvm_options(memory: str = "1g") -> str:
    """The JVM options of a driver or executor whose heap is `memory` (Spark's spark.*.memory), and
    the user's (SSCRIPT_JVM_OPTIONS)."""
    return " ".join(filter(None, [HEAP_OPTIONS.format(memory=memory), extra_jvm_options()]))


def spark_log_level() -> str | None:
    """The level of Spark's log the user asked to see (SSCRIPT_SPARK_LOG), or None."""
    return os.environ.get("SSCRIPT_SPARK_LOG") or None


def spark_session(job: Job, master: str | None, ui: bool = False, app_name: str | None = None,
                  log: Path | None = None):
    """A Spark session fitted to the job: shuffle partitions = plan partitions, RocksDB state, quiet,
    the JVMs' heaps taken whole at the start. `log`: the file Spark's own output goes to (else it
    is dropped), unless SSCRIPT_SPARK_LOG asks for it on the terminal."""
    from pyspark.sql import SparkSession

    keep_private()  # before the JVM starts: its checkpoint and state files are the owner's alone too
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    options = {
        "spark.app.name": app_name or f"sensorscript:{job.name}",
        "spark.driver.extraJavaOptions": jvm_options(),
        "spark.executor.extraJavaOptions": jvm_options(),
        "spark.sql.shuffle.partitions": str(job.partitions),
        "spark.sql.streaming.stateStore.providerClass":
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        **ARROW_BATCHES,
        # Input files split into pieces of at most 40 MB, so that two cores share a large batch
        # evenly (at 128 MB, 303 MB of CSV made 3 tasks: 10M readings' stage 0 took 22.8 s, with
        # 40 MB 18.2 s).
        "spark.sql.files.maxPartitionBytes": str(40 * 2**20),
        "spark.ui.enabled": "true" if ui else "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.streaming.stopGracefullyOnShutdown": "true",
        # Hadoop's file systems apply a umask of their own (022) to the checkpoint's files: the owner's alone.
        "spark.hadoop.fs.permissions.umask-mode": "077",
        **jars.spark_options(),  # Spark's Kafka connector (kafka:// inputs and sinks)
        **cluster_security.from_environment(),  # on a standalone cluster: its secret, RPC and spills encrypted
        **({"spark.master": master} if master else {}),
    }
    start_jvm(options, log)
    spark = SparkSession.builder.config(map=options).getOrCreate()
    # Progress and errors are reported in the user's terms (batches, readings, windows); Spark's
    # own warnings go to the log file, where there is one.
    spark.sparkContext.setLogLevel(spark_log_level() or ("WARN" if log is not None else "OFF"))
    return spark


def read_back_session(out: Path, status: dict, job: Job) -> None:
    """For work beside a job on its results (`sscript correct`, `sscript backfill`, `sscript
    results`): where they go to a Kafka topic, which Spark reads back and writes
    (runtime/output/kafka_sink.py), the job's kind of session on local[2], its output into OUT/spark.log."""
    if status.get("results_topic"):
        spark_session(job, "local[2]", app_name=f"sensorscript:{job.name}:read-back", log=Path(out) / SPARK_LOG)


def start_jvm(options: dict[str, str], log: Path | None) -> None:
    """Start Spark's JVM with its output read by this process (into `log`, or to the terminal as
    SSCRIPT_SPARK_LOG asks), unless there is one already: under spark-submit the JVM started this
    process (its output is spark-submit's, which `sscript run --cluster` sends to OUT/spark.log),
    and a process runs one JVM for all its sessions."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if "PYSPARK_GATEWAY_PORT" in os.environ or SparkContext._gateway is not None:
        return
    conf = SparkConf(loadDefaults=False).setAll(list(options.items()))
    gateway = launch_gateway(conf, popen_kwargs={"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT})
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)
    writer = output_writer(log)
    threading.Thread(target=pass_on, args=(gateway.proc.stdout, writer), name="spark-output", daemon=True).start()


def output_writer(log: Path | None):
    """Where a line of Spark's output goes: the terminal's standard error (SSCRIPT_SPARK_LOG), the
    bounded log file, or nowhere."""
    if spark_log_level():
        return lambda line: sys.stderr.write(line)
    if log is None:
        return lambda line: None
    log.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.handlers.RotatingFileHandler(log, maxBytes=LOG_BYTES, backupCount=LOG_FILES, delay=True)
    handler.terminator = ""  # the lines keep their own ends
    record = logging.makeLogRecord({})

    def write(line: str) -> None:
        record.msg = line
        handler.emit(record)
    return write


def pass_on(stream, write) -> None:
    """Read a JVM's output to its end, in bytes or text (a JVM whose pipe is not read would block
    once it fills)."""
    for line in stream:
        write(line.decode("utf-8", "replace") if isinstance(line, bytes) else line)
