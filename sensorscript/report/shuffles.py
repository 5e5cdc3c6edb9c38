"""Tuples that crossed Spark's shuffles, read from the driver's status store.

The jobs of a streaming query carry the query's run id as their job group; the status
store (filled even with the UI off) keeps each stage's shuffle write records. Summing
them over the completed stages of those jobs gives the tuples the job sent across the
network. Stages Spark skipped (their output reused) carry no metrics and add nothing.
Retention: the store keeps the last `spark.ui.retainedJobs` / `retainedStages` (1,000),
plenty for a bounded `--once` run of a few micro-batches.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shuffled:
    records: int  # every shuffle write
    bytes: int
    stages: int
    from_input: int  # written by stages that read the input files: the shuffle of raw readings
    from_input_bytes: int = 0


def scala_list(scala_seq) -> list:
    """A Scala Seq that Spark's status store returns, as a Python list."""
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


def streaming_jobs(spark) -> set[int]:
    """Ids of the retained jobs that belong to a streaming query (those with a job group)."""
    context = spark.sparkContext._jsc.sc()
    context.listenerBus().waitUntilEmpty(10_000)
    jobs = set()
    for job in scala_list(context.statusStore().jobsList(None)):
        if job.jobGroup().isDefined():
            jobs.add(int(job.jobId()))
    return jobs


def shuffled(spark, jobs: set[int]) -> Shuffled:
    """Shuffle write records and bytes of the completed stages of `jobs`."""
    store = spark.sparkContext._jsc.sc().statusStore()
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(10_000)
    seen: set[tuple[int, int]] = set()
    records = size = from_input = from_input_bytes = 0
    default = getattr(store, "stageData$default$5")()
    for job_id in sorted(jobs):
        for stage_id in scala_list(store.job(job_id).stageIds()):
            try:
                attempts = scala_list(store.stageData(stage_id, False, None, False, default))
            except Exception:  # never submitted (skipped) or no longer retained
                continue
            for stage in attempts:
                key = (int(stage.stageId()), int(stage.attemptId()))
                if key in seen or stage.status().toString() != "COMPLETE":
                    continue
                seen.add(key)
                records += int(stage.shuffleWriteRecords())
                size += int(stage.shuffleWriteBytes())
                if int(stage.inputRecords()) > 0:
                    from_input += int(stage.shuffleWriteRecords())
                    from_input_bytes += int(stage.shuffleWriteBytes())
    return Shuffled(records, size, len(seen), from_input, from_input_bytes)
