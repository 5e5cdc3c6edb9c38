"""A running job's switch to a newer version of its plan (`sscript update`, runtime/plan/versions.py):
at a run's start when the checkpoint holds an earlier version's state, or between two batches of
a live query. What both versions compute goes on; what the newer one adds starts at the switch."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from sensorscript.runtime.control.checkpoint import CHECKPOINT, hold_plan
from sensorscript.runtime.control.query import JobFailed
from sensorscript.runtime.control.run_options import RunSettings
from sensorscript.runtime.output.status import Status
from sensorscript.runtime.plan import versions
from sensorscript.runtime.plan.program import Job
from sensorscript.times import human_time


def at_start(job: Job, out: Path, status: Status, after: int | None, switching: bool, held, echo=print) -> Job:
    """The job as this run begins: switched to its version now if the checkpoint holds an earlier
    one's state (`switching`; `held`: that version and fingerprint), with the switch time its version
    took over at; the checkpoint notes the plan its state belongs to from now on."""
    if switching:
        echo(f"the checkpoint holds the state of plan version {held[0]}: switching to version "
             f"{job.version.number} (sscript update) before the first batch")
    job = switched(job, out, status, after, switching, echo)
    if (versions.requested(out) or 0) <= job.version.number:
        versions.clear_request(out)  # a request this run already follows
    hold_plan(out / CHECKPOINT, job)
    return job


def between_batches(job: Job, number: int, settings: RunSettings, status: Status, last_batch: int | None,
                    echo=print) -> Job:
    """Plan version `number` (sscript update) for the running `job`, whose query stopped between
    batches: with this run's policies, input cleanup, archive and Kafka settings."""
    out = settings.out
    newer, _ = versions.load(out, number)
    newer = dataclasses.replace(settings.policies_for(newer), input_cleanup=job.input_cleanup, archive=job.archive,
                                kafka=job.kafka, board=job.board)
    if (newer.partitions, newer.bucket_keys) != (job.partitions, job.bucket_keys):
        raise JobFailed(f"plan version {number} has other partitions than the running job's; "
                        f"it cannot take over its state")
    newer = switched(newer, out, status, last_batch, True, echo)
    hold_plan(out / CHECKPOINT, newer)
    return newer


def switched(job: Job, out: Path, status: Status, after: int | None, switching: bool, echo) -> Job:
    """The job with the event time its version took over at (`Version.switch_at`): as the run that
    switched recorded it, or (`switching` now, and none recorded it yet) now: just after the newest
    reading the job has seen (of any sensor: one the update starts reading too), so that every
    reading a computation the update started reads arrives after the switch. A switch now is said
    with `echo`."""
    number = job.version.number
    found = versions.applied(out, number)
    if found is None and switching:
        newest = [gauges["max_ts"] for gauges in status.partitions.values() if "max_ts" in gauges]
        newest += [status.unread_newest] if status.unread_newest is not None else []
        switch_at = int(max(newest)) + 1 if newest else None
        versions.record_applied(out, number, after, switch_at)
        found = versions.applied(out, number)
    if found is None:
        return job
    status.switched(number, found["after_batch"], found["switch_at"])
    if switching:
        begins = ("from its first reading" if found["switch_at"] is None
                  else f"from event time {found['switch_at']} ({human_time(found['switch_at'])})")
        echo(f"plan version {number} runs " + ("from the first batch" if after is None else f"after batch {after}")
             + f": what both versions compute goes on; what this one adds starts {begins}; "
             f"versions/{number}/changes.txt says what changed")
    versions.clear_request(out)
    return dataclasses.replace(job, version=dataclasses.replace(job.version, switch_at=found["switch_at"]))
