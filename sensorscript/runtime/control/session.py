"""The Spark session a job runs in."""

from __future__ import annotations

import os
import sys

from sensorscript.runtime.plan.program import Job


# A job runs for months: its JVMs take their whole heap when they start (-Xms = -Xmx, the pages
# touched at once) instead of growing it under load and handing it back, so their memory is flat
# from the start. Measured by scripts/soak.py (docs/BENCHMARKS.md): with Spark's defaults the
# driver JVM's heap, committed by G1 as it saw fit, moved between 550 and 900 MiB of the 1 GiB
# allowed during 8 minutes at 40,000 readings/s, and with it the JVM's RSS.
HEAP_OPTIONS = "-Xms{memory} -XX:+AlwaysPreTouch"


def jvm_options(memory: str = "1g") -> str:
    """The JVM options of a driver or executor whose heap is `memory` (Spark's spark.*.memory)."""
    return HEAP_OPTIONS.format(memory=memory)


def spark_session(job: Job, master: str | None, ui: bool = False, app_name: str | None = None):
    """A Spark session fitted to the job: shuffle partitions = plan partitions, RocksDB state, quiet,
    the JVMs' heaps taken whole at the start."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.appName(app_name or f"sensorscript:{job.name}")
               .config("spark.driver.extraJavaOptions", jvm_options())
               .config("spark.executor.extraJavaOptions", jvm_options())
               .config("spark.sql.shuffle.partitions", str(job.partitions))
               .config("spark.sql.streaming.stateStore.providerClass",
                       "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100000")
               # Input files split into pieces of at most 40 MB, so that two cores share a large
               # batch evenly (at 128 MB, 303 MB of CSV made 3 tasks: 10M readings' stage 0 took
               # 22.8 s, with 40 MB 18.2 s).
               .config("spark.sql.files.maxPartitionBytes", str(40 * 2**20))
               .config("spark.ui.enabled", "true" if ui else "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.streaming.stopGracefullyOnShutdown", "true"))
    if master:
        builder = builder.master(master)
    spark = builder.getOrCreate()
    # Progress and errors are reported in the user's terms (batches, readings, windows);
    # Spark's own log is for debugging: SSCRIPT_SPARK_LOG=WARN brings it back.
    spark.sparkContext.setLogLevel(os.environ.get("SSCRIPT_SPARK_LOG", "OFF"))
    return spark

