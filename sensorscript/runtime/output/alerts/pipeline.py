"""What the run loop calls (`Alerts`): a run's alarms found in each written batch and correction
(detection.py), taken into the outbox once (outbox.py), delivered beside the query by the delivery
threads (delivery.py), and waited for when the input ended (`--once`, `stop --drain`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from sensorscript.runtime.output.alarms import FLAG, alarm_kinds
from sensorscript.runtime.output.alerts.delivery import Deliverer
from sensorscript.runtime.output.alerts.detection import batch_alarms, correction_alarms
from sensorscript.runtime.output.alerts.outbox import Outbox
from sensorscript.runtime.output.alerts.settings import AlertSettings, Target
from sensorscript.runtime.output.alerts.templates import load_template
from sensorscript.runtime.output.sinks import read_results
from sensorscript.runtime.plan.program import Job


@dataclass
class Alerts:
    """A run's alarms: taken from each batch and correction into the outbox, delivered beside the
    query by the delivery threads, waited for when the input ended (`--once`, `stop --drain`)."""

    settings: AlertSettings
    out: Path
    status: object  # runtime/output/status.py's Status: its `alerts`
    echo: object = print
    targets: list[Target] = field(default_factory=list)
    outbox: Outbox | None = None
    deliverer: Deliverer | None = None
    _kinds: tuple = (None, {})

    @staticmethod
    def open(settings: AlertSettings, out: Path, job: Job, status, echo=print, fresh: bool = False) -> "Alerts":
        alerts = Alerts(settings, Path(out), status, echo, settings.check(job))
        alerts.outbox = Outbox(out, settings.limit)
        if fresh:
            alerts.outbox.start_afresh()
        template = load_template(settings.template) if settings.template else None
        alerts.deliverer = Deliverer(out, alerts.targets, template, settings.tls, settings.limit,
                                     on_counts=status.alerted, login=settings.login).start()
        counts = alerts.outbox.counts()
        status.alerted(counts)
        which = ", ".join(settings.workflows) if settings.workflows else "every workflow"
        echo(f"alarms of {which} go to {', '.join(t.key for t in alerts.targets)}"
             + (f"; {counts['waiting']:,} left by an earlier run wait in {alerts.outbox.path}" if counts["waiting"] else ""))
        return alerts

    def kinds(self, job: Job) -> dict[str, str]:
        """The streams whose alarms are delivered (of the workflows asked for): MATCH or FLAG."""
        if self._kinds[0] is not job:
            wanted = set(self.settings.workflows)
            self._kinds = (job, {s: k for s, k in alarm_kinds(job).items()
                                 if not wanted or s.rsplit(".", 1)[0] in wanted})
        return self._kinds[1]

    def batch(self, batch_id: int, results: pd.DataFrame, job: Job) -> None:
        """The batch path: a written batch's alarms into the outbox (once), then the deliverer woken."""
        kinds = self.kinds(job)
        if self.outbox.taken("last_batch", batch_id) or not kinds:
            return
        flag_streams = {s for s, k in kinds.items() if k == FLAG}
        present = set(results["stream"].unique()) & flag_streams if len(results) else set()
        found, last = batch_alarms(results, kinds, self.outbox.flags(present))
        if self.outbox.enqueue("last_batch", batch_id, found, last, [t.key for t in self.targets]):
            self.deliverer.wake()

    def corrected(self, number: int, changed: pd.DataFrame, sink_spec: str, job: Job) -> None:
        """A correction wrote `changed` as batch -number: the alarms it changes."""
        kinds = self.kinds(job)
        if self.outbox.taken("last_correction", number):
            return
        touched = sorted(set(changed["stream"]) & {s for s, k in kinds.items() if k == FLAG})
        stored = read_results(sink_spec, touched) if touched else pd.DataFrame(columns=changed.columns)
        found, last = correction_alarms(changed, kinds, stored, self.outbox.flags(touched))
        if self.outbox.enqueue("last_correction", number, found, last, [t.key for t in self.targets]):
            self.deliverer.wake()

    def finish(self, wait: bool) -> None:
        """The run ends: with `wait` (--once), first until every alarm is delivered or the
        timeout passed; then say how many wait."""
        deadline = time.monotonic() + self.settings.timeout_s
        keys = [t.key for t in self.targets]
        while wait and self.outbox.waiting(keys) and time.monotonic() < deadline and self.deliverer.alive():
            self.deliverer.wake()
            time.sleep(0.1)
        self.deliverer.stop()
        counts = self.outbox.counts()
        self.outbox.close()
        self.status.alerted(counts)
        failing = {t: c.get("last_error") for t, c in counts["targets"].items() if c.get("waiting") and c.get("last_error")}
        self.echo(f"alarms: {counts['delivered']:,} delivered so far, {counts['waiting']:,} wait in {self.outbox.path}"
                  + (" (the next run on this folder sends them)" if counts["waiting"] else "")
                  + (f"; {counts['dropped']:,} dropped: the outbox was full ({counts['limit']:,})" if counts["dropped"]
                     else "")
                  + "".join(f"; {t}: {error}" for t, error in sorted(failing.items())))
