"""/metrics for Prometheus (issue #28, item 3): the dashboard's server reports the job's health from
OUT/status.json in Prometheus' text format, parsed here with prometheus_client's own parser; the
sample Grafana dashboard asks only for what it exports."""

from __future__ import annotations

import json
import re
import sqlite3
import time
import urllib.request

import pytest
from prometheus_client.openmetrics import parser as openmetrics_parser
from prometheus_client.parser import text_string_to_metric_families

from sensorscript.compiler import compile_workflows
from sensorscript.dashboard import reading
from sensorscript.registry import read_csv
from sensorscript.running import run_local
from sensorscript.runtime.output.status import GAUGES
from sensorscript.workload import write_readings
from tests.conftest import EXAMPLES, ROOT
from tests.test_dashboard_auth import ask, serving

SENSORS = ROOT / "workflows" / "sensors.csv"
GRAFANA = ROOT / "docs" / "grafana" / "sensorscript.json"

# What the user reads (docs/DASHBOARD.md, "Prometheus and Grafana"), written out here: status.json's
# totals -> the counter /metrics exports them as, and each partition's gauge -> (the metric, the factor
# from status.json's unit, milliseconds or a plain number, to the metric's, seconds or a plain number).
TOTALS = {"readings": "sscript_readings_total", "results": "sscript_results_total",
          "late": "sscript_late_readings_total", "quarantined": "sscript_quarantined_lines_total",
          "ahead": "sscript_held_ahead_readings_total", "unread": "sscript_unread_readings_total",
          "skipped": "sscript_skipped_lines_total", "too_late": "sscript_too_late_readings_total"}
PARTITION_GAUGES = {"watermark": ("sscript_watermark_timestamp_seconds", 1e-3),
                    "max_ts": ("sscript_newest_reading_timestamp_seconds", 1e-3),
                    "lag_ms": ("sscript_watermark_lag_seconds", 1e-3),
                    "k_ms": ("sscript_watermark_buffer_seconds", 1e-3),
                    "disorder": ("sscript_arrival_order_ratio", 1.0),
                    "alpha": ("sscript_watermark_alpha_ratio", 1.0),
                    "coverage": ("sscript_window_coverage_ratio", 1.0),
                    "latency_mean_ms": ("sscript_result_latency_seconds", 1e-3),
                    "state_bytes": ("sscript_state_bytes", 1.0),
                    "batch_ms": ("sscript_partition_batch_seconds", 1e-3)}


def scrape(url: str) -> dict[tuple[str, frozenset], float]:
    """/metrics parsed: (sample name, its labels) -> value; also checks the family types."""
    status, headers, body = ask(url + "metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for family in text_string_to_metric_families(body.decode()):
        assert family.name.startswith("sscript_"), family.name
        assert family.type == ("counter" if family.name + "_total" in body.decode() else "gauge"), family.name
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


@pytest.fixture(scope="module")
def ran(spark, tmp_path_factory):
    """The examples' job run on Spark over 10 minutes of the demo's readings, 3 lines of them bad."""
    place = tmp_path_factory.mktemp("metrics")
    out, data = place / "out", place / "data"
    write_readings(read_csv(SENSORS), data, 600, files=2, bad_lines=3)
    compile_workflows([str(p) for p in EXAMPLES], out, str(SENSORS))
    run_local(out, str(data), True, None, spark=spark, echo=lambda *_: None)
    return out


@pytest.mark.spark
def test_the_metrics_of_a_job_run_on_spark(ran):
    out = ran
    status = json.loads((out / "status.json").read_text())
    job = ("job", status["job"])
    with serving(out) as page:
        samples = scrape(page.url)
    totals = status["totals"]
    db = sqlite3.connect(out / "results.db")
    try:
        (rows,) = db.execute("SELECT COUNT(*) FROM results").fetchone()
    finally:
        db.close()
    assert totals["readings"] > 0 and totals["quarantined"] == 3
    assert samples[("sscript_results_total", frozenset([job]))] == totals["results"] == rows > 0
    for key, name in TOTALS.items():
        assert samples[(name, frozenset([job]))] == totals.get(key, 0), key
    assert samples[("sscript_batches_total", frozenset([job]))] == status["batches"] > 0
    assert samples[("sscript_plan_version", frozenset([job]))] == 1
    assert samples[("sscript_last_batch_timestamp_seconds", frozenset([job]))] == status["updated"]
    states = {dict(labels)["state"]: value for (name, labels), value in samples.items() if name == "sscript_run_state"}
    assert states == {"running": 0, "killed": 0, "stopped": 0, "ended": 1, "failed": 0}  # --once: its input ended

    partitions = status["partitions"]
    assert len(partitions) == json.loads((out / "plan.json").read_text())["partitions"]["count"]
    for partition, gauges in partitions.items():
        labels = frozenset([job, ("partition", partition)])
        # Every partition reports these (the last batch ended the input: no watermark, it is at +infinity).
        assert {"state_bytes", "batch_ms", "max_ts"} <= set(gauges)
        assert samples[("sscript_partition_batch_seconds", labels)] > 0
        for key, value in gauges.items():  # every gauge status.json has is one the user is told of
            name, factor = PARTITION_GAUGES[key]
            assert samples[(name, labels)] == pytest.approx(value * factor), key
    assert not any(name.startswith("sscript_alerts") for name, _ in samples)  # no alarms delivered: none


def full_status(out, **more) -> dict:
    """A status.json as a running job writes it, every gauge of two partitions, the stores measured."""
    status = {"path": str(out / "status.json"), "job": "bridge", "workflows": ["bridge"], "watermark": "fixed:5s",
              "late_policy": "drop", "sink_spec": f"sqlite:{out / 'results.db'}", "sink": "SQLite", "started": 100.0,
              "updated": 160.5, "batches": 7, "last_batch": 6, "plan_version": 2, "state": "stopped",
              "totals": {key: float(10 * n + 1) for n, key in enumerate(TOTALS)},
              "partitions": {str(p): {key: 1000.0 * (p + 1) + n for n, key in enumerate(PARTITION_GAUGES)}
                             for p in (0, 1)},
              "stores": {"archive": {"bytes": 4096, "files": 2}, "sink": {"bytes": 8192}}, **more}
    (out / "status.json").write_text(json.dumps(status))
    return status


@pytest.fixture
def out(tmp_path, monkeypatch):
    """The examples compiled; a look at the sink fails the test (a scrape reads status.json only)."""
    folder = tmp_path / "out"
    compile_workflows([str(p) for p in EXAMPLES], folder, str(SENSORS))

    def no_sink(*_):
        raise AssertionError("a scrape read the sink")

    monkeypatch.setattr(reading.JobOutput, "_sink", no_sink)
    return folder


def test_every_gauge_of_the_status_is_exported():
    """Every gauge status.json may hold (status.GAUGES) is one docs/DASHBOARD.md's table names."""
    assert set(PARTITION_GAUGES) == set(GAUGES)
    page = (ROOT / "docs" / "DASHBOARD.md").read_text()
    for name in [*TOTALS.values(), *(name for name, _ in PARTITION_GAUGES.values())]:
        assert f"`{name}`" in page, name


def test_the_metrics_follow_status_json(out):
    """Nothing before the job's first run; then every total, gauge and store of status.json, in the
    metric's unit; the alarm outbox only when status.json has it; a new status at the next scrape."""
    with serving(out) as page:
        assert scrape(page.url) == {}
        status = full_status(out)
        samples = scrape(page.url)
        job = ("job", "bridge")
        for key, name in TOTALS.items():
            assert samples[(name, frozenset([job]))] == status["totals"][key]
        assert samples[("sscript_plan_version", frozenset([job]))] == 2
        assert samples[("sscript_run_state", frozenset([job, ("state", "stopped")]))] == 1
        for p in ("0", "1"):
            for key, (name, factor) in PARTITION_GAUGES.items():
                expected = status["partitions"][p][key] * factor
                assert samples[(name, frozenset([job, ("partition", p)]))] == pytest.approx(expected)
        assert samples[("sscript_watermark_lag_seconds", frozenset([job, ("partition", "1")]))] == pytest.approx(
            status["partitions"]["1"]["lag_ms"] / 1000)
        assert samples[("sscript_store_bytes", frozenset([job, ("store", "archive")]))] == 4096
        assert not any(name.startswith("sscript_alerts") for name, _ in samples)

        # Prometheus asks for OpenMetrics first: the same samples in that format.
        asked = urllib.request.Request(page.url + "metrics", headers={
            "Accept": "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"})
        with urllib.request.urlopen(asked, timeout=60) as response:
            assert response.headers["Content-Type"].startswith("application/openmetrics-text")
            families = openmetrics_parser.text_string_to_metric_families(response.read().decode())
            assert {(s.name, frozenset(s.labels.items())): s.value for f in families for s in f.samples} == samples

        time.sleep(0.01)  # another mtime
        full_status(out, alerts={"waiting": 12, "delivered": 340, "failed": 3, "silenced": 2, "limit": 10000,
                                 "full": False})
        samples = scrape(page.url)
        assert {name: value for (name, _), value in samples.items() if name.startswith("sscript_alerts")} == {
            "sscript_alerts_waiting": 12, "sscript_alerts_delivered_total": 340, "sscript_alerts_failed_total": 3,
            "sscript_alerts_silenced_total": 2, "sscript_alerts_outbox_limit": 10000, "sscript_alerts_outbox_full": 0}
        assert not any(name.startswith("sscript_kafka") for name, _ in samples)

        # A Kafka source: its lag per topic partition, and what the broker deleted before the job read it.
        time.sleep(0.01)
        full_status(out, feed={"at": 160.0, "skipped": 17, "partitions": {
            "bridge.readings/0": {"read": 90, "newest": 100, "lag": 10},
            "bridge.readings/2": {"read": 5, "newest": 5, "lag": 0}}})
        samples = scrape(page.url)
        assert {key: value for key, value in samples.items() if key[0].startswith("sscript_kafka")} == {
            ("sscript_kafka_lag_messages", frozenset([job, ("topic", "bridge.readings"), ("partition", "0")])): 10,
            ("sscript_kafka_lag_messages", frozenset([job, ("topic", "bridge.readings"), ("partition", "2")])): 0,
            ("sscript_kafka_skipped_messages_total", frozenset([job])): 17}


def test_the_grafana_dashboard_asks_only_for_exported_metrics(out):
    """docs/grafana/sensorscript.json: valid JSON, a panel for each measure the issue names, and every
    metric its queries use is one /metrics exports (with every part of status.json present)."""
    grafana = json.loads(GRAFANA.read_text())
    expressions = []

    def collect(node):
        if isinstance(node, dict):
            expressions.extend(str(v) for k, v in node.items() if k in ("expr", "definition"))
            expressions.extend(str(v["query"]) for k, v in node.items() if k == "query" and isinstance(v, dict))
            for value in node.values():
                collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    collect(grafana)
    used = {name for expression in expressions for name in re.findall(r"\bsscript_[a-z0-9_]+", expression)}
    full_status(out, alerts={"waiting": 1, "delivered": 2, "failed": 0, "limit": 10, "full": True})
    with serving(out) as page:
        exported = {name for name, _ in scrape(page.url)}
    assert used and used <= exported, used - exported
    for needed in ("sscript_readings_total", "sscript_results_total", "sscript_watermark_lag_seconds",
                   "sscript_result_latency_seconds", "sscript_state_bytes", "sscript_partition_batch_seconds",
                   "sscript_alerts_waiting", "sscript_late_readings_total", "sscript_quarantined_lines_total"):
        assert needed in used, needed
    queries = [e for e in expressions if not e.startswith("label_values(")]  # the job variable's list
    assert all("rate(" in e for e in queries if "_total" in e)  # counters as rates
