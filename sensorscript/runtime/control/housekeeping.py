"""Housekeeping: what keeps a job's disk bounded for years (runtime/plan/retention.py).

After each batch the run loop starts a pass on a thread of its own (unless the last one is still
going: a pass never holds up a batch, and passes never overlap). A pass

- merges the archive's small files of each hour that is COMPACT_AFTER behind the watermark
  (archive.compact: only files of committed batches), and moves its floor to the horizon
  (archive.expire): late policy correct;
- removes the late store's rows and, if asked, the results behind their horizons, once the
  horizon has moved on by a 24th of itself since the last removal (so a DELETE runs about once
  an hour for a day's horizon, not every batch);
- turns the metrics rows older than their horizon into per-minute rows, and removes per-minute
  rows older than theirs;
- measures each store's size for `sscript status`.

Event time is "now" for the job where the stream has emitted every row, capped at the newest
reading it has seen (`event_now`).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from sensorscript.runtime.ingest import archive
from sensorscript.runtime.output import expiry
from sensorscript.runtime.plan.program import Job
from sensorscript.runtime.plan.retention import STORES, Retention
from sensorscript.runtime.output.status import Status

COMPACT_AFTER = archive.HOUR_MS  # an hour's files are merged once the watermark is an hour past its end
STEP = 24  # an event-time store is trimmed when its horizon moved by 1/STEP of itself


def event_now(status: Status, job: Job) -> int | None:
    """Where the job stands in event time: every row before it emitted, capped at the newest reading
    (the end of a bounded input moves the watermarks to +infinity, and ages nothing); None before
    every partition has spoken."""
    emitted = status.emitted_until(job)
    newest = [g["max_ts"] for g in status.partitions.values() if "max_ts" in g]
    if emitted <= -(2**62) or not newest:
        return None
    return int(min(emitted, max(newest)))


class Housekeeping:
    def __init__(self, out: Path, job: Job, sink_spec: str, retention: Retention, status: Status,
                 correcting: bool, echo=print):
        self.out, self.job, self.sink_spec, self.retention = Path(out), job, sink_spec, retention
        self.status, self.correcting, self.echo = status, correcting, echo
        self.thread: threading.Thread | None = None
        self.trimmed: dict[str, float] = {}  # store -> the cutoff of its last trim
        self.failure: str | None = None
        status.retention = dict(retention.horizons)

    def after_batch(self, batch_id: int) -> None:
        """A batch was written: start a pass, unless one is going. Only batches before this one are
        committed (Spark starts a batch once the one before is). Where the job stands is taken here,
        on the batch's thread, which keeps the status."""
        if self.thread is not None and self.thread.is_alive():
            return
        self.thread = threading.Thread(target=self._guarded, args=(batch_id - 1, event_now(self.status, self.job)),
                                       name="sscript-housekeeping", daemon=True)
        self.thread.start()

    def finish(self, patience: float = 120.0) -> None:
        """Wait for the pass going (a kill at any step of one loses nothing: archive.py)."""
        if self.thread is not None:
            self.thread.join(patience)

    def last_pass(self, committed: int) -> None:
        """A pass now, on this thread (the run ends: the stores as it leaves them)."""
        self.finish()
        self._guarded(committed, event_now(self.status, self.job))

    def _guarded(self, committed: int, now: int | None) -> None:
        try:
            self.run(committed, now)
            self.failure = None
        except Exception as exc:  # noqa: BLE001 (said once; the next pass tries again; the job goes on)
            why = f"{type(exc).__name__}: {exc}"
            if why != self.failure:
                self.echo(f"housekeeping: could not trim the stores just now ({why}); it tries again after the "
                          f"next batch")
            self.failure = why

    def run(self, committed: int, now: int | None) -> dict:
        """One pass; `committed`: the last batch surely committed, `now`: where the job stands in
        event time (`event_now`). Returns (and puts in the status) what each store holds."""
        horizons = self.retention
        stores: dict[str, dict] = {}
        folder = Path(self.job.archive) if self.job.archive else self.out / archive.FOLDER
        if self.correcting and folder.exists():
            if now is not None and horizons["archive"] is not None:
                archive.expire(folder, now - horizons["archive"])
            if now is not None:
                archive.compact(folder, now - COMPACT_AFTER, committed)
            else:
                archive.sweep(folder)
            size, files = archive.size(folder)
            stores["archive"] = {"bytes": size, "files": files, "from": archive.floor(folder)}
        if now is not None and (cut := self._cut("late", now)) is not None:
            expiry.expire_late(self.sink_spec, cut)
        if now is not None and (cut := self._cut("results", now)) is not None:
            expiry.expire_results(self.out, self.sink_spec, cut,
                                  {name for q in self.job.programs for names in q.outputs.values() for name in names})
        wall = time.time() * 1000
        if (cut := self._cut("metrics", wall)) is not None:
            expiry.downsample_metrics(self.sink_spec, cut / 1000)
        if (cut := self._cut("metrics-minutes", wall)) is not None:
            expiry.expire_minutes(self.sink_spec, cut / 1000)
        stores["sink"] = {"bytes": expiry.size(self.sink_spec)}
        for name in ("checkpoint", "corrections"):
            stores[name] = {"bytes": expiry.bytes_in(self.out / name)}
        self.status.stores = stores
        return stores

    def _cut(self, store: str, now: float) -> int | float | None:
        """Where `store` is trimmed now (`now` less its horizon, in its clock's ms), or None: it is kept
        forever, or its cut moved on too little since the last trim (a 24th of an event-time horizon,
        a minute at most of a wall-clock one)."""
        horizon = self.retention[store]
        if horizon is None:
            return None
        cut, last = now - horizon, self.trimmed.get(store)
        step = horizon / STEP if STORES[store][1] == "event" else min(60_000, horizon)
        if last is not None and cut - last < step:
            return None
        self.trimmed[store] = cut
        return cut
