"""OUT/status.json: where a job stands, kept by its run loop after every batch and read by
`sscript status OUT` (and the dashboard): its policies, totals since its checkpoint began, and per
partition the watermark, its lag behind the newest reading, the policy's buffer, coverage, result
latency and state size."""

from __future__ import annotations

import json
import math
import os
import socket
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import tzinfo
from pathlib import Path

from sensorscript import atomic
from sensorscript.runtime.output.columns import MATCH_COLUMNS, RESULT_COLUMNS
from sensorscript.times import UTC, human_time

STATUS = "status.json"
_SAVING = threading.Lock()

# Counters summed over the job's life (the rest of a batch's counters are in the metrics table).
_TOTALS = ("readings", "late", "ahead", "quarantined", "unread", "skipped", "results", "forwarded_remote",
           "too_late")


@dataclass
class Status:
    path: str
    job: str
    workflows: list[str]
    watermark: str
    late_policy: str
    sink_spec: str
    sink: str
    started: float
    updated: float = 0.0
    batches: int = 0
    last_batch: int | None = None
    totals: dict[str, float] = field(default_factory=dict)
    late_by_stream: dict[str, float] = field(default_factory=dict)
    partitions: dict[str, dict[str, float]] = field(default_factory=dict)
    corrections: dict[str, float] = field(default_factory=dict)  # late policy correct: runs, rows, last
    # The run: running (by process `pid` on `host`), then stopped (to be continued), ended (its
    # input ended: every window emitted) or failed. A status left `running` by a process that is
    # gone is a run that was killed.
    state: str = "running"
    pid: int = 0
    host: str = ""
    source: str = ""
    stopped: float | None = None
    # The version of the plan the job runs (sscript update), after which batch it took over and the
    # event time what it added starts at.
    plan_version: int = 1
    plan_after_batch: int | None = None
    plan_switch_at: int | None = None
    # Output streams an update started: the event time from which each is written whole (every row
    # before it that is written is exact too); None while not known yet (a combine whose inputs have
    # not all had a tuple yet).
    # A stream on several partitions is whole from the latest of theirs (`exact_by_partition`:
    # stream -> partition -> the time it last reported, None while not known).
    exact_from: dict[str, int | None] = field(default_factory=dict)
    exact_by_partition: dict[str, dict[str, int | None]] = field(default_factory=dict)
    # The newest event time among the readings of sensors no workflow reads (an update that starts
    # reading one switches after it).
    unread_newest: float | None = None
    # How long each store is kept (store -> ms, None: kept; runtime/plan/retention.py) and what
    # each holds, as the last housekeeping pass measured it (runtime/control/housekeeping.py).
    retention: dict[str, int | None] = field(default_factory=dict)
    stores: dict[str, dict] = field(default_factory=dict)
    # `--alerts`: the outbox's counts (runtime/output/alerts/outbox.py, Outbox.counts): waiting, delivered,
    # failed, limit, full, dropped, and per target its own; empty without --alerts.
    alerts: dict = field(default_factory=dict)
    # A Kafka source (runtime/ingest/kafka.py, `progress_of`): per topic partition the offset read to,
    # the broker's newest and the lag between them, as the last batch saw them (`partitions`, `at`);
    # `skipped`: messages the broker deleted before the job read them, all runs.
    feed: dict = field(default_factory=dict)
    # `--sink kafka://...`: the topic the results go to (runtime/output/kafka_sink.py) and the run's
    # --kafka-option values (a secret as env:NAME, never its value); `sink_spec` then holds the rest
    # (quarantine, late readings, metrics). `results_spec` names both.
    results_topic: str = ""
    results_topic_options: list = field(default_factory=list)
    # On a cluster, this run's executors as the driver last saw them (runtime/control/cluster_watch.py):
    # their addresses, the most it had, those lost and when, the tasks that failed and ran again,
    # when the stage running longest started, and when the driver looked.
    cluster: dict = field(default_factory=dict)
    # An MQTT source's broker, when this run lost it (since when, why; None while connected) and
    # when it was last back (runtime/ingest/mqtt_spool.py).
    broker: dict = field(default_factory=dict)

    @staticmethod
    def start(out: Path, job, sink_spec: str, sink: str, fresh: bool, source: str = "",
              results_topic: str = "", results_topic_options: tuple[str, ...] = ()) -> "Status":
        """The status of a run starting now: a fresh one for a run that starts afresh, else the
        totals so far carried on (the checkpoint carries the state on too)."""
        path = Path(out) / STATUS
        now = time.time()
        status = Status(str(path), job.name, list(job.workflows), job.watermark, job.late, sink_spec, sink, now,
                        pid=os.getpid(), host=socket.gethostname(), source=source, plan_version=job.version.number,
                        results_topic=results_topic, results_topic_options=list(results_topic_options))
        if not fresh and path.exists():
            try:
                earlier = json.loads(path.read_text())
            except (OSError, ValueError):
                earlier = {}
            status.totals = earlier.get("totals", {})
            status.late_by_stream = earlier.get("late_by_stream", {})
            status.partitions = earlier.get("partitions", {})
            status.batches = earlier.get("batches", 0)
            status.corrections = earlier.get("corrections", {})
            status.last_batch = earlier.get("last_batch")
            status.exact_from = earlier.get("exact_from", {})
            status.exact_by_partition = earlier.get("exact_by_partition", {})
            status.unread_newest = earlier.get("unread_newest")
            status.stores = earlier.get("stores", {})
            status.feed = earlier.get("feed", {})
        if path.exists():  # the outbox outlives a fresh start: what it said stays until this run says anew
            try:
                status.alerts = json.loads(path.read_text()).get("alerts", {})
            except (OSError, ValueError):
                pass
        status._save()
        return status

    def finish(self, outcome: str) -> None:
        """The run is over: `stopped`, `ended`, `finished` or `failed`."""
        self.state = {"finished": "stopped"}.get(outcome, outcome)
        self.stopped = time.time()
        self._save()

    def batch(self, batch_id: int, counters, measures, quarantined: int, results: int, too_late: int = 0) -> None:
        """Take a batch: `counters` summed over partitions (name -> value), `measures` its rows of
        the metrics table (the partitions' gauges among them), `too_late`: its late readings older
        than the archive's horizon. A batch done again after a kill (its id not above the last one
        taken) is not counted twice."""
        if self.last_batch is not None and batch_id <= self.last_batch:
            return
        self.batches += 1
        self.last_batch = batch_id
        self.updated = time.time()
        found = {**{k: float(v) for k, v in counters.items()}, "quarantined": quarantined, "results": results,
                 "too_late": too_late}
        for name in _TOTALS:
            self.totals[name] = self.totals.get(name, 0.0) + float(found.get(name, 0.0))
        for name, value in counters.items():
            if name.startswith("late:"):
                stream = name.split(":", 1)[1]
                self.late_by_stream[stream] = self.late_by_stream.get(stream, 0.0) + float(value)
        gauges = measures[measures["partition"].notna()]
        for partition, name, value in zip(gauges["partition"], gauges["name"], gauges["value"]):
            if name in GAUGES:
                self.partitions.setdefault(str(int(partition)), {})[name] = float(value)
            elif name == "unread_newest":  # of every batch so far
                earlier = self.unread_newest if self.unread_newest is not None else float(value)
                self.unread_newest = max(earlier, float(value))
            elif name.startswith("exact_from:"):  # JSON has no infinity: None while not known yet
                stream = name.split(":", 1)[1]
                reported = self.exact_by_partition.setdefault(stream, {})
                reported[str(int(partition))] = None if math.isinf(value) else int(value)
                self.exact_from[stream] = None if None in reported.values() else max(reported.values())
        self._save()

    def switched(self, number: int, after_batch: int | None, switch_at: int | None) -> None:
        """The job runs version `number` of its plan (runtime/plan/versions.py)."""
        self.plan_version, self.plan_after_batch, self.plan_switch_at = number, after_batch, switch_at
        self._save()

    def kafka(self, found: dict) -> None:
        """Take what a batch's progress says of the Kafka source (runtime/ingest/kafka.py, `progress_of`)."""
        self.feed = {"partitions": found["partitions"], "at": time.time(),
                     "skipped": self.feed.get("skipped", 0) + found["skipped"]}
        self._save()

    def cluster_seen(self, executors: list[str], lost: list[dict], silent: dict[str, float], failed_tasks: int,
                     running_since: float | None, now: float) -> None:
        """Take a look at the cluster's executors: their addresses, those removed (address, at, reason),
        those that do not answer and since when."""
        seen = {"executors": executors, "most": max(self.cluster.get("most", 0), len(executors)), "silent": silent,
                "lost": lost[-20:], "failed_tasks": failed_tasks, "running_since": running_since}
        changed = any(self.cluster.get(key) != value for key, value in seen.items())
        self.cluster = {**seen, "at": now}
        if changed or running_since is not None:
            self._save()

    def broker_seen(self, source: str, lost_since: float | None, reason: str) -> None:
        """The MQTT source's broker (its address as the source says it, no secret) lost (since when,
        why) or back (None)."""
        back_at = self.broker.get("back_at") if lost_since is not None else time.time()
        self.broker = {"source": source, "lost_since": lost_since, "reason": reason, "back_at": back_at}
        self._save()

    def alerted(self, counts: dict) -> None:
        """The alarms' outbox as it stands (told by the delivery thread too: saves are serialised)."""
        self.alerts = counts
        self._save()

    def corrected(self, found) -> None:
        """Take a correction of late data (runtime/control/correction.py)."""
        for name in ("rows", "retracted", "settled"):
            self.corrections[name] = self.corrections.get(name, 0) + getattr(found, name)
        self.corrections["runs"] = self.corrections.get("runs", 0) + 1
        self.corrections["last"] = time.time()
        self._save()

    def emitted_until(self, job) -> int:
        return emitted_until(self.partitions, job)

    def _save(self) -> None:
        with _SAVING:  # the batch path and the alarms' delivery thread both save, in turn
            atomic.write_json(self.path, asdict(self), indent=1, sort_keys=True)  # a reader never sees half


# What a partition's row in the status shows, in order, with how to print each.
GAUGES = {
    "watermark": ("watermark", "time"),
    "max_ts": ("newest reading", "time"),
    "lag_ms": ("lag", "ms"),
    "k_ms": ("buffer", "ms"),
    "disorder": ("order P", "share"),
    "alpha": ("alpha", "share"),
    "coverage": ("coverage", "share"),
    "latency_mean_ms": ("latency", "ms"),
    "state_bytes": ("state", "bytes"),
    "batch_ms": ("batch time", "ms"),  # stage 1's, of the last batch
}


def smallest_watermark(partitions: dict[str, dict[str, float]], job) -> int:
    """The smallest watermark of the partitions: every reading below it is in (or late)."""
    marks = [g["watermark"] for g in partitions.values() if "watermark" in g]
    if len(marks) < job.partitions:  # a partition that has not spoken holds every stage it feeds back
        return -(2**63)
    return int(min(marks))


def emitted_until(partitions: dict[str, dict[str, float]], job) -> int:
    """The event time below which the stream has emitted every row: the smallest watermark of the
    partitions, less the longest `within` of the job's patterns (a pattern may hold its matches
    back that long)."""
    from sensorscript.runtime.plan.program import Pattern

    mark = smallest_watermark(partitions, job)
    if mark == -(2**63):
        return mark
    within = max((n.within for q in job.first_stage + job.second_stage if q is not None for n in q.nodes
                  if isinstance(n, Pattern)), default=0)
    return mark - within


def run_state(status: dict) -> str:
    """running, killed (left running by a process that is gone), stopped, ended or failed."""
    state = status.get("state", "stopped")
    # A status that names no host (an older release's) is taken at its word, as another host's.
    if state == "running" and not alive(status.get("pid", 0), status.get("host") or ""):
        return "killed"
    return state


def alive(pid: int, host: str | None = None) -> bool:
    """Process `pid` of `host` (None: this one) is there: one of another host is taken at its word;
    a zombie, dead but not yet reaped, is not."""
    if host is not None and host != socket.gethostname():
        return True
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    try:  # a zombie (dead, not yet reaped by its parent) is gone too (Linux)
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True


def describe_state(status: dict, tz: tzinfo = UTC) -> str:
    """The run's state in one sentence, with what to do next (times in `tz`)."""
    state = run_state(status)
    out = Path(status["path"]).parent
    after = f"after batch {status['last_batch']}" if status.get("last_batch") is not None else "before its first batch"
    resume = f"sscript run {out} --input {status.get('source') or 'DATA'}"
    when = human_time((status.get("stopped") or status["updated"] or status["started"]) * 1000, tz)
    if state == "running":
        return (f"running (process {status.get('pid')} on {status.get('host')}) since "
                f"{human_time(status['started'] * 1000, tz)}; sscript stop {out} [--drain] stops it")
    if state == "killed":
        return (f"not running: the process that ran it ({status.get('pid')}) is gone, {after}; "
                f"'{resume}' continues from its checkpoint")
    if state == "stopped":
        return f"stopped at {when}, {after}; '{resume}' continues from its checkpoint"
    if state == "ended":
        return f"ended at {when}: its input ended {after} and every window was emitted; a new run starts afresh"
    return f"failed at {when}, {after}; '{resume}' continues from its checkpoint"


def results_spec(out: Path, status: dict) -> str:
    """Where the job's results are read back from and corrections and backfills write them: its
    sink, or `topic:OUT` when they go to a Kafka topic (runtime/output/sinks.py)."""
    from sensorscript.runtime.output.kafka_sink import SPEC_PREFIX

    return f"{SPEC_PREFIX}{Path(out)}" if status.get("results_topic") else status["sink_spec"]


def read_status(out: Path) -> dict:
    path = Path(out) / STATUS
    if not path.exists():
        if not Path(out).is_dir():  # a typo of OUT, most often
            raise FileNotFoundError(f"no such folder: {out}")
        if not (Path(out) / "plan.json").exists():
            raise FileNotFoundError(f"{out} holds no compiled job (sscript compile WORKFLOWS -o {out})")
        raise FileNotFoundError(f"{path}: the job in {out} has not run yet (sscript run {out} --input DATA)")
    return json.loads(path.read_text())


def gauge_text(value: float, kind: str, tz: tzinfo = UTC) -> str:
    """A gauge's value as GAUGES says to print it."""
    if kind == "time":
        return human_time(value, tz)
    if kind == "ms":
        return f"{value / 1000:,.1f} s" if abs(value) >= 1000 else f"{value:,.0f} ms"
    if kind == "share":
        return f"{value:.3f}"
    if kind == "bytes":
        return (f"{value / 1024:,.1f} KiB" if value < 1024 ** 2 else f"{value / 1024 ** 2:,.1f} MiB"
                if value < 1024 ** 3 else f"{value / 1024 ** 3:,.2f} GiB")
    return f"{value:,.0f}"


def describe_feed(status: dict, tz: tzinfo = UTC) -> list[str]:
    """A Kafka source's lag per topic partition, and the messages it lost to the broker's retention."""
    feed = status.get("feed") or {}
    partitions = feed.get("partitions") or {}
    if not partitions:
        return []
    lag = sum(p["lag"] for p in partitions.values())
    shown = sorted(partitions.items(), key=lambda item: -item[1]["lag"])
    lines = [f"Kafka: {lag:,} messages behind the broker's newest at {human_time(feed['at'] * 1000, tz)} ("
             + ", ".join(f"{key} {p['lag']:,}" for key, p in shown[:6])
             + (f", and {len(shown) - 6} partitions more" if len(shown) > 6 else "") + ")"]
    if feed.get("skipped"):
        lines.append(f"Kafka: {feed['skipped']:,} messages deleted by the broker before the job read them (its "
                     f"retention passed while the job was away): their readings are not in the results")
    return lines


LONG_STAGE_S = 30.0  # a stage running this long is said in the status


def describe_cluster(status: dict, tz: tzinfo = UTC) -> list[str]:
    """A job on a cluster: its executors, those it lost, the tasks run again, a batch that waits."""
    cluster = status.get("cluster") or {}
    if not cluster:
        return []
    executors, most = cluster["executors"], cluster["most"]
    line = f"cluster: {len(executors)} executor{'' if len(executors) == 1 else 's'}" + \
        (f" ({', '.join(executors)})" if executors else "")
    if len(executors) < most:
        line += f", {most - len(executors)} fewer than it had: the job goes on with the others, slower"
    lines = [line]
    for address, since in sorted((cluster.get("silent") or {}).items()):
        lines.append(f"cluster: the executor at {address} has not answered since {human_time(since * 1000, tz)}: its "
                     f"worker is down or cut off from the network; its tasks wait, or run again on the others once "
                     f"Spark gives it up")
    for lost in cluster.get("lost", [])[-3:]:
        when = f" at {human_time(lost['at'] * 1000, tz)}" if lost.get("at") else ""
        why = f" ({lost['reason']})" if lost.get("reason") else ""
        lines.append(f"cluster: lost the executor at {lost['address']}{when}{why}; Spark runs its tasks again on "
                     f"the others")
    if cluster.get("failed_tasks"):
        lines.append(f"cluster: {cluster['failed_tasks']:,} tasks failed and ran again")
    since = cluster.get("running_since")
    if since is not None and cluster["at"] - since >= LONG_STAGE_S and run_state(status) == "running":
        lines.append(f"cluster: a batch has been running for {cluster['at'] - since:,.0f} s (since "
                     f"{human_time(since * 1000, tz)}): it waits on an executor that is slow or out of reach")
    return lines


def describe_broker(status: dict, tz: tzinfo = UTC) -> list[str]:
    """An MQTT source's broker: lost while it is (and why), or when it came back."""
    broker = status.get("broker") or {}
    if broker.get("lost_since") is not None and run_state(status) == "running":
        return [f"MQTT: lost the broker of {broker['source']} at {human_time(broker['lost_since'] * 1000, tz)} "
                f"({broker['reason']}); reconnecting: what it publishes meanwhile waits there"]
    if broker.get("back_at"):
        return [f"MQTT: the broker of {broker['source']} was lost and came back at "
                f"{human_time(broker['back_at'] * 1000, tz)}; it sent what it kept meanwhile"]
    return []


def describe(status: dict, tz: tzinfo = UTC) -> str:
    """`sscript status`: the job in a few lines, in the user's terms (times in `tz`)."""
    totals = status.get("totals", {})
    lines = [f"job {status['job']}: workflows {', '.join(status['workflows'])}",
             f"  {describe_state(status, tz)}",
             f"  {describe_version(status, tz)}",
             *(f"  {line}" for line in describe_exact(status, tz=tz)),
             *(f"  {line}" for line in describe_cluster(status, tz)),
             *(f"  {line}" for line in describe_broker(status, tz)),
             f"  watermark {status['watermark']}, late readings: {status['late_policy']}; results in {status['sink']}"]
    if status.get("last_batch") is None:
        lines.append("  no batch yet")
        return "\n".join(lines)
    lines.append(f"  {status['batches']:,} batches, the last (#{status['last_batch']}) at "
                 f"{human_time(status['updated'] * 1000, tz)}")
    lines.append(f"  readings {totals.get('readings', 0):,.0f}, results {totals.get('results', 0):,.0f}, "
                 f"late {totals.get('late', 0):,.0f}, quarantined {totals.get('quarantined', 0):,.0f}, "
                 f"held ahead of the watermark {totals.get('ahead', 0):,.0f}")
    lines.append(f"  ignored, counted: {totals.get('unread', 0):,.0f} readings of sensors no workflow reads, "
                 f"{totals.get('skipped', 0):,.0f} blank or header lines")
    late = sorted(status.get("late_by_stream", {}).items(), key=lambda item: (-item[1], item[0]))
    if late:
        lines.append("  late readings by the result stream they missed: "
                     + ", ".join(f"{stream} {count:,.0f}" for stream, count in late[:10])
                     + (f", and {len(late) - 10} more" if len(late) > 10 else ""))
    corrections = status.get("corrections", {})
    if corrections.get("runs"):
        lines.append(f"  corrections of late data: {corrections['runs']:,.0f} runs, {corrections['rows']:,.0f} rows "
                     f"corrected, {corrections['retracted']:,.0f} retracted, the last at "
                     f"{human_time(corrections['last'] * 1000, tz)}")
    if totals.get("too_late"):
        lines.append(f"  too late to correct: {totals['too_late']:,.0f} late readings older than the archive's horizon "
                     f"(kept in the late store, too_late = 1; no correction takes them)")
    lines += [f"  {line}" for line in describe_stores(status, tz)]
    lines += [f"  {line}" for line in describe_alerts(status, tz)]
    lines += [f"  {line}" for line in describe_feed(status, tz)]
    for partition, gauges in sorted(status.get("partitions", {}).items(), key=lambda item: int(item[0])):
        shown = [f"{label} {gauge_text(gauges[name], kind, tz)}" for name, (label, kind) in GAUGES.items() if name in gauges]
        lines.append(f"  partition {partition}: " + ", ".join(shown))
    return "\n".join(lines)


def describe_stores(status: dict, tz: tzinfo = UTC) -> list[str]:
    """How long each store is kept and what it holds (runtime/plan/retention.py)."""
    from sensorscript.runtime.plan.retention import Retention

    horizons, stores = status.get("retention") or {}, status.get("stores") or {}
    if not horizons:
        return []
    lines = ["kept: " + "; ".join(Retention(horizons).describe())]
    sizes = []
    if "archive" in stores:
        held = stores["archive"]
        since = held.get("from")
        sizes.append(f"archive {gauge_text(held['bytes'], 'bytes')} in {held['files']:,} files"
                     + (f", from {human_time(since, tz)}" if since is not None and since > -(2**62) else ""))
    sizes += [f"{name} {gauge_text(stores[name]['bytes'], 'bytes')}" for name in ("sink", "checkpoint", "corrections")
              if name in stores]
    if sizes:
        lines.append("on disk: " + ", ".join(sizes))
    return lines


def describe_alerts(status: dict, tz: tzinfo = UTC) -> list[str]:
    """Alarms delivered (--alerts): what waits in the outbox, what was delivered, what fails, per
    target; the silences in force."""
    alerts = status.get("alerts") or {}
    if not alerts:
        return []
    lines = [f"alarms: {alerts['waiting']:,} waiting in the outbox (at most {alerts['limit']:,}), "
             f"{alerts['delivered']:,} delivered, {alerts['failed']:,} attempts failed"
             + (f", {alerts['silenced']:,} held back by silences" if alerts.get("silenced") else "")
             + (f"; FULL: {alerts.get('dropped', 0):,} alarms were not kept" if alerts.get("full") or alerts.get("dropped")
                else "")]
    for target, counts in sorted(alerts.get("targets", {}).items()):
        said = [f"{counts.get('waiting', 0):,} waiting", f"{counts.get('delivered', 0):,} delivered"]
        if counts.get("last_success"):
            said.append(f"the last at {human_time(counts['last_success'] * 1000, tz)}")
        if counts.get("last_error") and (counts.get("last_error_at") or 0) >= (counts.get("last_success") or 0):
            said.append(f"failing: {counts['last_error']} (last tried {human_time(counts['last_error_at'] * 1000, tz)})")
        lines.append(f"  to {target}: " + ", ".join(said))
    for silence in alerts.get("silences", ()):
        lines.append(f"  silenced: {silence['what']} until {human_time(silence['until'] * 1000, tz)} "
                     f"(silence {silence['id']}" + (f": {silence['comment']}" if silence.get("comment") else "")
                     + "; sscript alerts expire ends it)")
    return lines


def describe_version(status: dict, tz: tzinfo = UTC) -> str:
    """Which version of the plan runs, and since when (sscript update; times in `tz`)."""
    number = status.get("plan_version", 1)
    if number == 1:
        return "plan version 1 (as compiled; sscript update makes the next)"
    after = status.get("plan_after_batch")
    switch_at = status.get("plan_switch_at")
    return (f"plan version {number} (OUT/versions/{number}), "
            + ("from the first batch" if after is None else f"after batch {after}")
            + ("" if switch_at is None else f"; what it added starts at {human_time(switch_at, tz)}"))


def describe_exact(status: dict, streams=None, tz: tzinfo = UTC) -> list[str]:
    """From when the output streams an update started are written whole (of `streams`, or all):
    every row written is exact; before that time some rows are absent (not computed from part of
    their input)."""
    exact = {name: at for name, at in status.get("exact_from", {}).items() if streams is None or name in streams}
    if not exact:
        return []
    lines = ["rows written whole from (an update started these streams; before, a row is exact or absent):"]
    for name, at in sorted(exact.items()):
        when = human_time(at, tz) if at is not None else "not known yet: once its inputs have had values"
        lines.append(f"  {name}: {when}")
    return lines


def describe_results(rows, limit: int, tz: tzinfo = UTC) -> str:
    """Result rows per stream (the newest `limit` of each), with times people read (in `tz`)."""
    return "\n".join(result_lines(result_groups(rows, limit), tz))


def result_groups(rows, limit: int):
    """(stream, how many rows, the newest `limit` of them: all with 0) per stream, in name order."""
    for stream, group in rows.groupby("stream", sort=True):
        group = group.sort_values(["ts", "version"])
        yield stream, len(group), group.tail(limit) if limit else group


SHOWN_COLUMNS = RESULT_COLUMNS + MATCH_COLUMNS


def selected_groups(query, source: str, streams, limit: int, mark: str = "?"):
    """`result_groups` of a sink that selects in SQL (SQLite, PostgreSQL), from `source` (the table
    `results` or the view `latest`); `query(sql, parameters)` returns the rows, `mark` is the
    driver's placeholder. The streams and their counts come first; each stream's rows are read when
    its turn comes, so memory holds one stream's shown rows, never the sink's."""
    import pandas as pd

    where, parameters = "", []
    if streams is not None:
        where, parameters = f"WHERE stream IN ({', '.join([mark] * len(streams))})", list(streams)
    counts = query(f"SELECT stream, count(*) FROM {source} {where} GROUP BY stream ORDER BY stream", parameters)
    for stream, count in counts:
        newest = query(f"SELECT {', '.join(SHOWN_COLUMNS)} FROM {source} WHERE stream = {mark} "
                       f"ORDER BY ts DESC, version DESC" + (f" LIMIT {mark}" if limit else ""),
                       [stream, *([limit] if limit else [])])
        yield stream, count, pd.DataFrame(newest[::-1], columns=SHOWN_COLUMNS)


def result_lines(groups, tz: tzinfo = UTC):
    """The lines of `sscript results`, one stream after another as `groups` yields them (stream, rows,
    the rows shown): what a sink that selects per stream (`selected_groups`) never holds all at once."""
    shown_any = False
    for stream, count, shown in groups:
        shown_any = True
        more = f" (the last {len(shown):,} of {count:,})" if len(shown) < count else ""
        yield f"{stream}: {count:,} rows{more}"
        for row in shown.itertuples(index=False):
            window = ""
            if row.window_start == row.window_start and row.window_start is not None:  # not NaN
                window = f"  window {human_time(row.window_start, tz)} .. {human_time(row.window_end, tz)}"
            value = "retracted" if row.value != row.value or row.value is None else f"{row.value:.6g}"
            version = f"  version {int(row.version)}" if int(row.version) > 1 else ""
            match = f"  events {row.events}" if isinstance(getattr(row, "events", None), str) else ""
            yield f"  {human_time(row.ts, tz)}  {value}{window}{version}{match}"
    if not shown_any:
        yield "no results"
