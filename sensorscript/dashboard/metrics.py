"""/metrics: the job's health for Prometheus, in its text format (prometheus_client), read from
OUT/status.json at each scrape.

A collector of our own, not counters kept in this process: the job keeps its totals and each
partition's gauges in status.json after every batch (runtime/output/status.py), so a scrape reports
what the job wrote, the same after a restart of the dashboard, and costs one small file read when
status.json changed (reading.JobOutput.status keeps the last one parsed), never a read of the sink.
Counters restart from 0 when a job starts afresh; Prometheus' rate() takes that for a reset.

Names follow Prometheus' conventions: the `sscript_` prefix, the unit in the name (`_seconds`,
`_bytes`, `_ratio`), `_total` on counters; every series carries the `job` label (the job's
name; Prometheus renames it `exported_job` unless the scrape says honor_labels: true), per partition
also `partition`.
"""

from __future__ import annotations

from flask import Flask, Response, request
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import choose_encoder

from sensorscript.dashboard.reading import JobOutput
from sensorscript.runtime.output.status import run_state

PREFIX = "sscript_"

# status.json `totals` -> counters (name without `_total`: the library adds it), with their help.
TOTALS = {
    "readings": ("readings", "Readings taken in, of the sensors the workflows read"),
    "results": ("results", "Result rows written to the sink"),
    "late": ("late_readings", "Readings that came after the watermark had passed them (the late policy took them)"),
    "quarantined": ("quarantined_lines", "Input lines that could not be read as readings (kept with the reason)"),
    "ahead": ("held_ahead_readings", "Readings held out of event time for being too far ahead of the others"),
    "unread": ("unread_readings", "Readings of sensors no workflow reads, ignored"),
    "skipped": ("skipped_lines", "Blank and header lines of the input, skipped"),
    "too_late": ("too_late_readings", "Late readings older than the archive's horizon, which no correction takes"),
}

# status.json `partitions` (the last batch's gauges, as status.GAUGES names them; a test keeps the two
# in step) -> gauges per partition, with the factor to the metric's unit.
PARTITION_GAUGES = {
    "watermark": ("watermark_timestamp_seconds", "The partition's watermark, an event time (Unix seconds)", 1e-3),
    "max_ts": ("newest_reading_timestamp_seconds", "The newest reading's event time on the partition (Unix "
                                                   "seconds)", 1e-3),
    "lag_ms": ("watermark_lag_seconds", "How far the watermark trails the newest reading (the watermark delay)", 1e-3),
    "k_ms": ("watermark_buffer_seconds", "The watermark policy's buffer (K-slack) on the partition", 1e-3),
    "disorder": ("arrival_order_ratio", "Share of readings in event-time order (adaptive watermark's P)", 1.0),
    "alpha": ("watermark_alpha_ratio", "The quality policy's alpha (its buffer as a share of the largest delay)", 1.0),
    "coverage": ("window_coverage_ratio", "Share of readings in time for their windows (quality policy)", 1.0),
    "latency_mean_ms": ("result_latency_seconds", "Mean time from a result's readings being in to its emission, "
                                                  "in the last batch", 1e-3),
    "state_bytes": ("state_bytes", "Size of the partition's state (open windows, partial matches)", 1.0),
    "batch_ms": ("partition_batch_seconds", "Time the partition's first stage took in the last batch", 1e-3),
}

RUN_STATES = ("running", "killed", "stopped", "ended", "failed")  # status.run_state's

# status.json `alerts` (the alarm outbox, when the job delivers alarms): key -> (name, help, counter?)
ALERTS = {
    "waiting": ("alerts_waiting", "Alarms in the outbox, not delivered yet", False),
    "delivered": ("alerts_delivered", "Alarms delivered", True),
    "failed": ("alerts_failed", "Alarm deliveries that failed", True),
    "silenced": ("alerts_silenced", "Alarms held back by silences", True),
    "limit": ("alerts_outbox_limit", "How many alarms the outbox holds at most", False),
    "full": ("alerts_outbox_full", "1 while the outbox is full (further alarms wait to enter it)", False),
}


class JobCollector:
    """The metrics of the job in OUT, from its status.json at each collect (none before its first run)."""

    def __init__(self, output: JobOutput):
        self.output = output

    def collect(self):
        status = self.output.status()
        if not status:
            return
        job = {"job": status.get("job") or self.output.out.name}
        labels = list(job)
        totals = status.get("totals") or {}
        for key, (name, help_text) in TOTALS.items():
            family = CounterMetricFamily(PREFIX + name, help_text, labels=labels)
            family.add_metric(list(job.values()), _number(totals.get(key, 0)))
            yield family
        batches = CounterMetricFamily(PREFIX + "batches", "Micro-batches the job has taken", labels=labels)
        batches.add_metric(list(job.values()), _number(status.get("batches", 0)))
        yield batches
        yield _gauge("plan_version", "The version of the plan the job runs (sscript update makes the next)",
                     job, _number(status.get("plan_version", 1)))
        if status.get("updated"):
            yield _gauge("last_batch_timestamp_seconds", "When the job took its last batch (Unix seconds)", job,
                         _number(status["updated"]))
        state = run_state(status)
        family = GaugeMetricFamily(PREFIX + "run_state", "1 for the state the job's run is in: running, killed "
                                   "(left running by a process that is gone), stopped, ended or failed",
                                   labels=[*labels, "state"])
        for name in RUN_STATES:
            family.add_metric([*job.values(), name], float(name == state))
        yield family

        partitions = sorted((status.get("partitions") or {}).items(), key=lambda item: int(item[0]))
        for key, (name, help_text, factor) in PARTITION_GAUGES.items():
            found = [(partition, gauges[key]) for partition, gauges in partitions if _is_number(gauges.get(key))]
            if found:
                family = GaugeMetricFamily(PREFIX + name, help_text, labels=[*labels, "partition"])
                for partition, value in found:
                    family.add_metric([*job.values(), partition], float(value) * factor)
                yield family

        stores = {name: held["bytes"] for name, held in (status.get("stores") or {}).items()
                  if isinstance(held, dict) and _is_number(held.get("bytes"))}
        if stores:
            family = GaugeMetricFamily(PREFIX + "store_bytes", "What each store the job keeps holds on disk, as its "
                                       "last housekeeping pass measured it", labels=[*labels, "store"])
            for name, size in sorted(stores.items()):
                family.add_metric([*job.values(), name], float(size))
            yield family

        feed = status.get("feed") if isinstance(status.get("feed"), dict) else {}
        lags = [(key.rpartition("/"), held["lag"]) for key, held in sorted((feed.get("partitions") or {}).items())
                if isinstance(held, dict) and _is_number(held.get("lag"))]
        if lags:
            family = GaugeMetricFamily(PREFIX + "kafka_lag_messages", "Messages of a Kafka topic partition the job has "
                                       "not read yet (the broker's newest offset less the job's), as its last batch saw",
                                       labels=[*labels, "topic", "partition"])
            for (topic, _, partition), lag in lags:
                family.add_metric([*job.values(), topic, partition], float(lag))
            yield family
        if feed:
            family = CounterMetricFamily(PREFIX + "kafka_skipped_messages", "Kafka messages the broker deleted before "
                                         "the job read them (its retention passed while the job was away)", labels=labels)
            family.add_metric(list(job.values()), _number(feed.get("skipped", 0)))
            yield family

        outbox = status.get("alerts")
        if isinstance(outbox, dict):
            for key, (name, help_text, counter) in ALERTS.items():
                if _is_number(outbox.get(key)):
                    family = (CounterMetricFamily if counter else GaugeMetricFamily)(PREFIX + name, help_text,
                                                                                     labels=labels)
                    family.add_metric(list(job.values()), float(outbox[key]))
                    yield family


def serve_metrics(server: Flask, output: JobOutput) -> None:
    """GET /metrics on the dashboard's Flask server, in the format the scraper asks for (Prometheus'
    text format, or OpenMetrics)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(JobCollector(output))

    @server.route("/metrics")
    def metrics():
        encode, content_type = choose_encoder(request.headers.get("Accept"))
        return Response(encode(registry), content_type=content_type)


def _gauge(name: str, help_text: str, job: dict, value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(PREFIX + name, help_text, labels=list(job))
    family.add_metric(list(job.values()), value)
    return family


def _is_number(value) -> bool:
    return isinstance(value, (int, float))  # a bool too: `full` is 1 or 0


def _number(value) -> float:
    return float(value) if _is_number(value) else 0.0
