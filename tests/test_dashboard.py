"""`sscript dashboard` in a real browser: headless Debian chromium (Playwright) over a compiled
job's folder, the page served in this process as `sscript dashboard` serves it."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import threading

import pandas as pd
import pytest

from sensorscript.compiler import compile_workflows
from sensorscript.dashboard import Dashboard
from sensorscript.dashboard.browser import chromium
from sensorscript.dashboard.figures import alarms, output_streams
from sensorscript.registry import read_csv
from sensorscript.runtime.output.sinks import BatchRows, SQLiteSink
from sensorscript.running import run_local
from sensorscript.times import UTC, human_time
from sensorscript.workload import write_readings
from tests.conftest import EXAMPLES, ROOT

SENSORS = ROOT / "workflows" / "sensors.csv"
needs_browser = pytest.mark.usefixtures("browser_here")  # fails in CI without chromium, skips elsewhere
WAIT_MS = 60_000  # a page's refresh is 3 s; the machine may be busy


@pytest.fixture
def serve():
    """Serve the dashboard of a folder on a free port; stopped after the test."""
    pages = []

    def start(out):
        page = Dashboard(out, UTC, port=0)
        threading.Thread(target=page.serve_forever, daemon=True).start()
        pages.append(page)
        return page.url

    yield start
    for page in pages:
        page.shutdown()


def streams_of(out) -> list[str]:
    plan = json.loads((out / "plan.json").read_text())
    return sorted(s for workflow in output_streams(plan).values() for s in workflow)


def shown_streams(page) -> list[str]:
    return sorted(page.locator(".stream h4").all_inner_texts())


def caption(page, stream: str):
    return page.locator(f"[id='stream-{stream}'] .caption")


@needs_browser
def test_the_page_follows_the_sink_without_a_reload(tmp_path, serve):
    """Before the job's first batch the page says so; rows the sink writes then appear on their own:
    a window result in its stream's plot, a pattern match among the alarms."""
    out = tmp_path / "out"
    compile_workflows([str(p) for p in EXAMPLES], out, str(SENSORS))
    url = serve(out)
    with chromium() as (page, errors):
        page.goto(url)
        page.get_by_text("not run yet").first.wait_for(timeout=WAIT_MS)
        assert shown_streams(page) == streams_of(out)
        page.evaluate("window.notReloaded = true")
        ts = 1_767_226_199_999
        match = [{"var": "p", "ts": ts - 200, "value": 1.5, "sensor": "8TL3-N"},
                 {"var": "q", "ts": ts, "value": 6.25, "sensor": "8TL3-N"}]
        rows = pd.DataFrame([
            {"stream": "bridge.out_AZ", "ts": ts, "window_start": ts + 1 - 600_000, "window_end": ts + 1,
             "value": 1.25, "version": 1},
            {"stream": "pier_alarms.JUMP", "ts": ts, "value": 4.75, "version": 1, "start_ts": ts - 200, "end_ts": ts,
             "events": json.dumps(match)}])
        SQLiteSink(out / "results.db").write(0, BatchRows(rows, pd.DataFrame(columns=["raw", "reason"])))
        caption(page, "bridge.out_AZ").get_by_text(f"1 result, the last 1.25 at {human_time(ts)}").wait_for(
            timeout=WAIT_MS)
        alarm = page.locator("tr.alarm").first
        alarm.get_by_text("pier_alarms.JUMP").wait_for(timeout=WAIT_MS)
        assert human_time(ts) in alarm.inner_text() and "q = 6.25 (8TL3-N" in alarm.inner_text()
        assert page.evaluate("window.notReloaded") is True
        assert errors == []


@pytest.fixture(scope="module")
def demo_data(tmp_path_factory):
    """The demo's readings (scripts/demo.sh): 30 minutes of the example sensors, 4 files, 5 bad lines."""
    folder = tmp_path_factory.mktemp("demo-data")
    write_readings(read_csv(SENSORS), folder, 1800, files=4, bad_lines=5)
    return sorted(folder.iterdir())


@needs_browser
@pytest.mark.spark
def test_the_demo_in_a_browser(spark, tmp_path, serve, demo_data):
    """The job runs over the demo's first 15 minutes; the page shows every output stream of the
    examples. The job runs again over all 30 (afresh: the first run ended its input); without a
    reload the page shows the later results and lists every alarm of the demo."""
    out, data = tmp_path / "out", tmp_path / "data"
    data.mkdir()
    for path in demo_data[:2]:
        shutil.copy(path, data)
    compile_workflows([str(p) for p in EXAMPLES], out, str(SENSORS))
    run_local(out, str(data), True, None, spark=spark, echo=lambda *_: None)
    first = last_result(out, "bridge.out_AZ")
    url = serve(out)
    with chromium() as (page, errors):
        page.goto(url)
        caption(page, "bridge.out_AZ").get_by_text(f"the last {first[1]:.6g} at {human_time(first[0])}").wait_for(
            timeout=WAIT_MS)
        assert shown_streams(page) == streams_of(out)
        page.locator("#plan img").wait_for(timeout=WAIT_MS)  # the DAG
        page.evaluate("window.notReloaded = true")

        for path in demo_data[2:]:
            shutil.copy(path, data)
        run_local(out, str(data), True, None, spark=spark, echo=lambda *_: None)
        later = last_result(out, "bridge.out_AZ")
        assert later[0] > first[0]
        caption(page, "bridge.out_AZ").get_by_text(f"the last {later[1]:.6g} at {human_time(later[0])}").wait_for(
            timeout=WAIT_MS)
        expected = expected_alarms(out)
        page.locator("#alarm-list").get_by_text(f"{len(expected):,} alarms").wait_for(timeout=WAIT_MS)
        listed = page.locator("tr.alarm").all_inner_texts()
        assert len(listed) == len(expected) > 50  # newest first, as the database has them
        for text, (ts, stream) in zip(listed, expected):
            assert text.startswith(human_time(ts)) and stream in text, (text, ts, stream)
        assert page.evaluate("window.notReloaded") is True
        assert "5" in page.locator("#health-body tr", has_text="quarantined lines").inner_text()

        # The workflow filter, as a user works it: open the list, tick a workflow.
        chosen = [(ts, stream) for ts, stream in expected if stream.startswith("pier_alarms.")]
        assert 0 < len(chosen) < len(expected)
        page.locator("#workflows").click()
        page.get_by_role("option", name="pier_alarms", exact=True).click()
        page.keyboard.press("Escape")
        page.locator("#alarm-list").get_by_text(f"{len(chosen):,} alarms").wait_for(timeout=WAIT_MS)
        listed = page.locator("tr.alarm").all_inner_texts()
        assert len(listed) == len(chosen)
        for text, (ts, stream) in zip(listed, chosen):
            assert text.startswith(human_time(ts)) and stream in text, (text, ts, stream)
        assert errors == []


def last_result(out, stream: str) -> tuple[int, float]:
    db = sqlite3.connect(out / "results.db")
    try:
        return db.execute("SELECT ts, value FROM results WHERE stream = ? ORDER BY ts DESC LIMIT 1",
                          (stream,)).fetchone()
    finally:
        db.close()


def expected_alarms(out) -> list[tuple[int, str]]:
    """Every pattern match in the sink, and every time a 0/1 flag turned on, newest first."""
    db = sqlite3.connect(out / "results.db")
    try:
        matches = db.execute("SELECT ts, stream FROM results WHERE events IS NOT NULL").fetchall()
        others = db.execute("SELECT stream, ts, value FROM results WHERE events IS NULL AND window_start IS NULL "
                            "ORDER BY stream, ts").fetchall()
    finally:
        db.close()
    turned_on = []
    for stream in {s for s, _, _ in others}:
        rows = [(ts, v) for s, ts, v in others if s == stream]
        if all(v in (0.0, 1.0) for _, v in rows):  # a flag
            turned_on += [(ts, stream) for (ts, v), before in zip(rows, [0.0] + [v for _, v in rows])
                          if v == 1 and before != 1]
    assert turned_on  # deck_vibration.ALERT
    return sorted(matches + turned_on, key=lambda a: (-a[0], a[1]))


def test_alarms_are_matches_and_flags_turning_on():
    kinds = {"w.F": "combine", "w.M": "pattern", "w.V": "combine"}
    results = pd.DataFrame({"stream": ["w.F"] * 5 + ["w.M", "w.V", "w.V"], "ts": [1, 2, 3, 4, 5, 3, 1, 2],
                            "value": [1.0, 1.0, 0.0, 1.0, 1.0, 2.5, 1.0, 0.5],
                            "events": [None] * 5 + ["[]", None, None]})
    found = alarms(results, kinds)
    assert list(zip(found["ts"], found["stream"])) == [(4, "w.F"), (3, "w.M"), (1, "w.F")]


def test_the_header_shows_the_newest_backfill(tmp_path):
    """A backfill asked for (sscript update --backfill) shows under the plan's version, as
    `sscript status` says it, and changes the page's version (it is redrawn) as it goes."""
    from sensorscript.dashboard.app import _header
    from sensorscript.dashboard.reading import JobOutput
    from sensorscript.runtime.control import backfill as backfills
    from sensorscript.runtime.plan import versions

    out = tmp_path / "out"
    compile_workflows([str(ROOT / "workflows" / "bridge.ss")], out, str(SENSORS))
    versions.folder(out, 2).mkdir(parents=True)
    asked = backfills.request(out, 2, 1_767_225_780_000)
    before = JobOutput(out).snapshot()
    shown = [part for part in _header(before, UTC) if getattr(part, "id", None) == "backfill"]
    assert [line.children for line in shown[0].children] == asked.describe(out)
    assert "backfill of plan version 2 from 2026-01-01 00:03:00.000 UTC: asked for" in shown[0].children[0].children
    asked.state, asked.hours, asked.hours_done, asked.pid, asked.host = "running", 4, 1, os.getpid(), socket.gethostname()
    asked.save(out)
    after = JobOutput(out).snapshot()
    assert after.version() != before.version()
    assert "running: 1 of 4 hours of archive read (25 %)" in after.backfill.describe(out)[0]
