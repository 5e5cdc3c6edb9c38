"""Late policy `correct` during a run: every reading is archived, the late readings of each batch
wait (`correction.Pending`), and once they span GAMMA the results they touched are computed again
and written with a higher version (`correction.correct`), as they are once more when the input
ends. A late reading older than the archive's horizon cannot be corrected: it is marked too late."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from sensorscript.runtime.control import correction
from sensorscript.runtime.control.housekeeping import event_now
from sensorscript.runtime.control.run_summary import RunSummary
from sensorscript.runtime.ingest import archive
from sensorscript.runtime.plan.program import Job
from sensorscript.runtime.state.engine import POS_INF


def archiving(job: Job, out: Path) -> Job:
    """The job with its archive of every reading (OUT/archive), begun if nothing is archived yet."""
    job = dataclasses.replace(job, archive=str((out / archive.FOLDER).resolve()))
    if not (out / archive.FOLDER).exists():  # nothing archived yet: both folders begin with this run
        archive.begin(job.archive)
    return job


class LateCorrections:
    """The corrections of one run; `alarms`: the run's alarms (runtime/output/alerts.py), told of
    what a correction changed, or None."""

    def __init__(self, out: Path, sink_spec: str, gamma_ms: int, archive_horizon: int | None, status,
                 summary: RunSummary, alarms, echo=print):
        self.out, self.sink_spec, self.gamma_ms, self.horizon = out, sink_spec, gamma_ms, archive_horizon
        self.status, self.summary, self.alarms, self.echo = status, summary, alarms, echo
        self.pending = correction.Pending(out)

    def mark_too_late(self, late_rows, job: Job) -> np.ndarray:
        """Which of a batch's late readings are older than the archive's horizon (a `too_late`
        column of the late store's rows, too)."""
        too_late = np.zeros(len(late_rows), bool)
        now = event_now(self.status, job)
        if now is not None and self.horizon is not None:
            too_late = late_rows["ts"].to_numpy(np.int64) < now - self.horizon
        late_rows["too_late"] = too_late.astype(np.int64)
        return too_late

    def add(self, batch_id: int, late_rows, job: Job) -> None:
        """A batch's late readings that a correction can take."""
        if len(late_rows):
            self.pending.add(batch_id, late_rows["sensor_id"].map(lambda s: job.sensors[s][0]).to_numpy(np.int64),
                             late_rows["ts"].to_numpy(np.int64), late_rows["value"].to_numpy(np.float64))

    def after_batch(self, job: Job) -> None:
        """Correct once the pending late readings span GAMMA, up to where the results are emitted."""
        if self.pending.span_ms() > self.gamma_ms:
            self.correct(self.status.emitted_until(job), job)

    def at_the_end(self, job: Job) -> None:
        """The input has ended: every late reading can be settled."""
        self.correct(POS_INF, job)

    def correct(self, until: int, job: Job) -> None:
        alarms, spec = self.alarms, self.sink_spec
        found = correction.correct(job, self.out, spec, until, alarms=alarms and alarms.writes)
        self.summary.corrected += found.rows + found.retracted
        self.status.corrected(found)
        self.echo(found.describe())
