"""`sscript dashboard` in a real browser: headless Debian chromium (Playwright) over a compiled
job's folder, the page served in this process as `sscript dashboard` serves it."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

import pandas as pd
import pytest
from playwright.sync_api import expect
from click.testing import CliRunner

from sensorscript.cli import main
from sensorscript.compiler import compile_workflows
from sensorscript.dashboard import Dashboard, reading, sqlite_look
from sensorscript.dashboard.browser import chromium
from sensorscript.dashboard.figures import output_streams
from sensorscript.runtime.output.alarms import FLAG as FLAG_KIND, MATCH as MATCH_KIND, alarms
from sensorscript.dashboard.reading import JobOutput
from sensorscript.parser import load
from sensorscript.registry import read_csv
from sensorscript.runtime.control.correction import newest
from sensorscript.runtime.output.sinks import BatchRows, SQLiteSink, read_results
from sensorscript.running import run_local
from sensorscript.times import UTC, human_time
from sensorscript.workload import write_readings, write_workflows
from tests.conftest import EXAMPLES, ROOT
from tests.differential import reference_alarms
from oracles.streams import evaluate

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


def showing(url: str, workflows) -> str:
    """The page's address that opens it on these workflows."""
    return f"{url}?{urlencode([('workflow', w) for w in workflows])}"


def examples_of(out) -> list[str]:
    return sorted(json.loads((out / "plan.json").read_text())["workflows"])


@needs_browser
def test_the_page_follows_the_sink_without_a_reload(tmp_path, serve):
    """Before the job's first batch the page says so; rows the sink writes then appear on their own:
    a window result in its stream's plot, a pattern match among the alarms."""
    out = tmp_path / "out"
    compile_workflows([str(p) for p in EXAMPLES], out, str(SENSORS))
    url = serve(out)
    with chromium() as (page, errors):
        page.goto(url)  # a job of a few workflows: all of them are shown
        page.get_by_text("not run yet").first.wait_for(timeout=WAIT_MS)
        expect(page.locator(".caption")).to_have_count(len(streams_of(out)), timeout=WAIT_MS)
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


@needs_browser
def test_a_pick_reaches_the_address_while_the_server_is_slow(tmp_path, serve, monkeypatch):
    """A person picks a workflow and closes the list while the server is still answering the pick:
    the address names the pick all the same (a bookmark keeps it). The server is made slow here (the
    picker's list takes 2 s to build), as a loaded one is: Dash drops the answer to a callback that is
    asked again before it returns, so clearing the typed name must not ask again the callback that
    writes the address (it did: the address lost the pick, and test_a_thousand_workflows_in_a_browser
    failed one run in three)."""
    from sensorscript.dashboard import app as page_app

    out = tmp_path / "out"
    compile_workflows([str(p) for p in EXAMPLES], out, str(SENSORS))
    first, second = examples_of(out)[:2]
    listed = page_app._options

    def slowly(*args):
        time.sleep(2)
        return listed(*args)

    monkeypatch.setattr(page_app, "_options", slowly)
    url = serve(out)
    with chromium() as (page, errors):
        page.goto(showing(url, [first]))
        expect(page.locator(".workflow")).to_have_count(1, timeout=WAIT_MS)
        page.locator("#workflows").click()
        page.keyboard.type(second)
        page.get_by_role("option", name=second, exact=True).click(timeout=WAIT_MS)
        page.keyboard.press("Escape")  # the typed name cleared while the pick is answered
        expect(page).to_have_url(showing(url, [first, second]), timeout=WAIT_MS)
        expect(page.locator(".workflow")).to_have_count(2, timeout=WAIT_MS)
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
    """The job runs over the demo's first 15 minutes; the page, opened on every workflow of the
    examples, shows each of their output streams. The job runs again over all 30 (afresh: the first
    run ended its input); without a reload the page shows the later results and lists every alarm of
    the demo; the filter keeps those of one workflow."""
    out, data = tmp_path / "out", tmp_path / "data"
    data.mkdir()
    for path in demo_data[:2]:
        shutil.copy(path, data)
    compile_workflows([str(p) for p in EXAMPLES], out, str(SENSORS))
    run_local(out, str(data), True, None, spark=spark, echo=lambda *_: None)
    first = last_result(out, "bridge.out_AZ")
    url = serve(out)
    with chromium() as (page, errors):
        page.goto(showing(url, examples_of(out)))
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
        expected = expected_alarms(out, EXAMPLES, demo_data)
        page.locator("#alarm-list").get_by_text(f"{len(expected):,} alarms").wait_for(timeout=WAIT_MS)
        listed = page.locator("tr.alarm").all_inner_texts()
        assert len(listed) == len(expected) > 50  # newest first, as the database has them
        for text, (ts, stream) in zip(listed, expected):
            assert text.startswith(human_time(ts)) and stream in text, (text, ts, stream)
        assert page.evaluate("window.notReloaded") is True
        assert "5" in page.locator("tr.health", has_text="quarantined lines").inner_text()

        # The filter, as a user works it: a workflow's name typed, then Enter.
        chosen = [(ts, stream) for ts, stream in expected if stream.startswith("pier_alarms.")]
        assert 0 < len(chosen) < len(expected)
        page.locator("#alarm-filter").fill("pier_alarms")
        page.keyboard.press("Enter")
        page.locator("#alarm-list").get_by_text(f"{len(chosen):,} alarms that match").wait_for(timeout=WAIT_MS)
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


def expected_alarms(out, scripts, files) -> list[tuple[int, str]]:
    """Every pattern match in the sink, and every time a 0/1 flag turned on, newest first; checked
    against the alarms the workflows `scripts` make of the readings in `files`, read in one batch (a
    run --once without --max-files-per-trigger), by the reference."""
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
    found = sorted(matches + turned_on, key=lambda a: (-a[0], a[1]))
    lines = [line for path in sorted(files) for line in Path(path).read_text().splitlines()]
    reference = evaluate(load([str(path) for path in scripts]).workflows, [lines])
    assert sorted(found) == sorted((ts, stream) for stream, ts, _, _ in reference_alarms(reference.rows))
    return found


def test_alarms_are_matches_and_flags_turning_on():
    kinds = {"w.F": FLAG_KIND, "w.M": MATCH_KIND}  # w.V: a combine stream that is no flag (alarms.alarm_kinds)
    results = pd.DataFrame({"stream": ["w.F"] * 5 + ["w.M", "w.V", "w.V"], "ts": [1, 2, 3, 4, 5, 3, 1, 2],
                            "value": [1.0, 1.0, 0.0, 1.0, 1.0, 2.5, 1.0, 0.5],
                            "events": [None] * 5 + ["[]", None, None]})
    found = alarms(results, kinds)
    assert [(a.ts, a.stream) for a in found] == [(4, "w.F"), (3, "w.M"), (1, "w.F")]


def test_the_header_shows_the_newest_backfill(tmp_path):
    """A backfill asked for (sscript update --backfill) shows under the plan's version, as
    `sscript status` says it, and as it goes (the header is drawn anew at each refresh)."""
    from sensorscript.dashboard.app import _header
    from sensorscript.runtime.control import backfill as backfills
    from sensorscript.runtime.plan import versions

    out = tmp_path / "out"
    compile_workflows([str(ROOT / "workflows" / "bridge.ss")], out, str(SENSORS))
    versions.folder(out, 2).mkdir(parents=True)
    asked = backfills.request(out, 2, 1_767_225_780_000)
    output = JobOutput(out)

    def shown():
        found = [part for part in _header(output, UTC) if getattr(part, "id", None) == "backfill"]
        return [line.children for line in found[0].children]

    assert shown() == asked.describe(out)
    assert "backfill of plan version 2 from 2026-01-01 00:03:00.000 UTC: asked for" in shown()[0]
    asked.state, asked.hours, asked.hours_done, asked.pid, asked.host = "running", 4, 1, os.getpid(), socket.gethostname()
    asked.save(out)
    assert "running: 1 of 4 hours of archive read (25 %)" in shown()[0]


@needs_browser
@pytest.mark.spark
def test_a_thousand_workflows_in_a_browser(spark, tmp_path, serve):
    """A job of 1,093 workflows (the examples, 1,024 generated bridge workflows over 1,000 sensors
    and 64 threshold flags) compiled as `sscript compile` does and run on Spark over 20 s of
    readings. The page shows at once the title, the health and every alarm, and results only of the
    workflows of the newest alarms, never every plot; a workflow picked in the searchable list shows
    its plots and goes into the address, which opens the page on it alone."""
    fleet = write_workflows(tmp_path, 1024, 1000, ROOT / "workflows", flags=64)
    write_readings(fleet, tmp_path / "data", 20, files=2)
    out = tmp_path / "out"
    scripts = sorted(str(p) for p in (tmp_path / "workflows").glob("*.ss"))
    compiled = CliRunner().invoke(main, ["compile", *scripts, "-o", str(out), "--sensors", str(tmp_path / "sensors.csv")])
    assert compiled.exit_code == 0, compiled.output
    run_local(out, str(tmp_path / "data"), True, None, spark=spark, echo=lambda *_: None)
    status = json.loads((out / "status.json").read_text())
    streams = output_streams(json.loads((out / "plan.json").read_text()))
    # The reference over the workflows that can raise alarms (flagNNNN and the examples; the generated
    # bridge workflows wfNNNN have no comparison and no pattern): 4 s, where all 1,093 take minutes.
    alarming = [path for path in scripts if not Path(path).name.startswith("wf")]
    expected = expected_alarms(out, alarming, sorted((tmp_path / "data").iterdir()))
    newest = list(dict.fromkeys(stream.rsplit(".", 1)[0] for _, stream in expected))[:3]
    assert len(streams) == 1093 and len(expected) > 10 and len(newest) == 3
    pick = "wf0042"
    url = serve(out)
    with chromium() as (page, errors):
        page.goto(url)
        page.locator("#title").get_by_text(f"SensorScript job {status['job']}").wait_for(timeout=WAIT_MS)
        page.locator("tr.health", has_text="results").get_by_text(f"{status['totals']['results']:,.0f}").wait_for(
            timeout=WAIT_MS)
        page.locator("#alarm-list").get_by_text(f"{len(expected):,} alarms, newest first").wait_for(timeout=WAIT_MS)
        listed = page.locator("tr.alarm").all_inner_texts()
        assert len(listed) == len(expected)
        for text, (ts, stream) in zip(listed, expected):
            assert text.startswith(human_time(ts)) and stream in text, (text, ts, stream)

        # Results of the workflows of the newest alarms only.
        expect(page.locator(".workflow")).to_have_count(len(newest), timeout=WAIT_MS)
        expect(page.locator(".caption")).to_have_count(sum(len(streams[w]) for w in newest), timeout=WAIT_MS)
        assert [h.split(" (")[0] for h in page.locator(".workflow h3").all_inner_texts()] == newest
        assert shown_streams(page) == sorted(s for w in newest for s in streams[w])

        # A person types a name into the list and picks it.
        page.locator("#workflows").click()
        page.keyboard.type(pick)
        page.get_by_role("option", name=pick, exact=True).click()
        page.keyboard.press("Escape")
        for stream in streams[pick]:
            ts, value = last_result(out, stream)
            caption(page, stream).get_by_text(f"the last {value:.6g} at {human_time(ts)}").wait_for(timeout=WAIT_MS)
            page.locator(f"[id='stream-{stream}'] .main-svg").first.wait_for(timeout=WAIT_MS)  # drawn
        expect(page).to_have_url(showing(url, [*newest, pick]), timeout=WAIT_MS)

        # A wall screen set to that workflow.
        page.goto(showing(url, [pick]))
        expect(page.locator(".caption")).to_have_count(len(streams[pick]), timeout=WAIT_MS)
        assert shown_streams(page) == sorted(streams[pick])
        assert errors == []


@pytest.fixture
def examples_out(tmp_path, monkeypatch):
    """The examples compiled, a sink of their streams written by hand, and every look reading OUT
    (not once a second); `reads` records the rowid ranges each look asks the sink for."""
    out = tmp_path / "out"
    compile_workflows([str(p) for p in EXAMPLES], out, str(SENSORS))
    monkeypatch.setattr(reading, "READ_EVERY_S", -1.0)
    reads = []
    real = sqlite_look.SQLite.rows

    def spy(self, streams, after, upto, columns, by_stream=True):
        reads.append((tuple(streams), after, upto))
        return real(self, streams, after, upto, columns, by_stream)

    monkeypatch.setattr(sqlite_look.SQLite, "rows", spy)
    return out, SQLiteSink(out / "results.db"), reads


FLAG, MATCH = "deck_vibration.ALERT", "pier_alarms.JUMP"  # a combine stream (0/1) and a pattern
T = 1_767_225_600_000


def flag(ts: int, value: float | None, version: int = 1) -> dict:
    return {"stream": FLAG, "ts": T + ts, "value": value, "version": version}


def match(ts: int, value: float | None, version: int = 1) -> dict:
    events = json.dumps([{"var": "q", "ts": T + ts, "value": value, "sensor": "8TL3-N"}])
    return {"stream": MATCH, "ts": T + ts, "value": value, "version": version, "start_ts": T + ts - 100,
            "end_ts": T + ts, "events": events if value is not None else None}


def write(sink, batch: int, rows: list[dict]) -> None:
    sink.write(batch, BatchRows(pd.DataFrame(rows), pd.DataFrame(columns=["raw", "reason"])))


def test_alarms_follow_the_sink_one_batch_at_a_time(examples_out):
    """After each batch, the alarms kept from the rows added since the last look are those of every
    row worked out afresh: with a flag's corrected value, a row older than its stream's last, a
    retracted match. Each look asks the sink only for the rows added since the one before, and
    for a stream's rows from the beginning only when such a row came."""
    out, sink, reads = examples_out
    output = JobOutput(out)
    kinds = output.plan().alarm_kinds
    assert kinds[FLAG] == FLAG_KIND and kinds[MATCH] == MATCH_KIND  # from plan.json: a comparison, a pattern
    batches = [
        [flag(10, 0.0), flag(20, 1.0), match(15, 4.5)],  # turned on at 20; a match
        [flag(30, 1.0), flag(40, 0.0), flag(50, 1.0)],  # on again at 50
        [flag(20, 0.0, version=2)],  # late data: off at 20 after all, so on from 30
        [flag(5, 1.0)],  # came after 50: on at 5, off at 10
        [match(15, None, version=2), match(60, 5.0)],  # the match retracted; another
        [flag(60, 0.0), flag(70, 1.0)],  # off, then on again at 70
    ]
    expected = [[(20, FLAG), (15, MATCH)], [(50, FLAG), (20, FLAG), (15, MATCH)],
                [(50, FLAG), (30, FLAG), (15, MATCH)], [(50, FLAG), (30, FLAG), (15, MATCH), (5, FLAG)],
                [(60, MATCH), (50, FLAG), (30, FLAG), (5, FLAG)], [(70, FLAG), (60, MATCH), (50, FLAG), (30, FLAG), (5, FLAG)]]
    for batch, (rows, alarms_now) in enumerate(zip(batches, expected)):
        before = output._results.rowid
        reads.clear()
        write(sink, batch, rows)
        found = output.alarms().newest_first
        assert [(a.ts - T, a.stream) for a in found] == alarms_now, batch
        afresh = newest(read_results(f"sqlite:{out / 'results.db'}"))
        assert found == alarms(afresh[afresh["value"].notna()], kinds)
        first, *again = reads
        assert first[1:] == (before, output._results.rowid)  # only what is new
        assert all(len(streams) == 1 and after == 0 for streams, after, _ in again)  # a stream from the start
        assert [streams[0] for streams, _, _ in again] == ([FLAG] if batch in (2, 3) else [MATCH] if batch == 4 else [])
        assert JobOutput(out).alarms().newest_first == found  # a page opened now: corrections among its first rows


def test_a_streams_rows_are_read_once_then_as_they_come(examples_out):
    """The rows of a stream a page shows are read whole when it first shows them, then only those
    added since (through the index on (stream, ts)); a correction replaces the row it corrects."""
    out, sink, reads = examples_out
    output = JobOutput(out)
    write(sink, 0, [flag(10, 0.0), flag(20, 1.0), match(15, 4.5)])
    assert list(output.stream_rows([FLAG])[FLAG]["value"]) == [0.0, 1.0]
    assert reads[-1] == ((FLAG,), 0, 3)
    write(sink, 1, [flag(30, 1.0), flag(20, 0.0, version=2)])
    reads.clear()
    rows = output.stream_rows([FLAG, MATCH])
    assert reads[-2:] == [((FLAG,), 3, 5), ((MATCH,), 0, 5)]  # the flag's new rows; the match's stream whole
    assert list(zip(rows[FLAG]["ts"] - T, rows[FLAG]["value"])) == [(10, 0.0), (20, 0.0), (30, 1.0)]
    assert list(rows[MATCH]["value"]) == [4.5]
    reads.clear()
    assert output.stream_rows([FLAG, MATCH])[FLAG] is rows[FLAG] and reads == []  # nothing new: nothing read


def test_the_plan_is_read_once_per_compile(tmp_path, monkeypatch):
    """plan.json is parsed when the page first needs it and again only once the job is compiled
    again; the page keeps a summary of it (at 10,240 workflows the file is 28 MB)."""
    out = tmp_path / "out"
    compile_workflows([str(p) for p in EXAMPLES], out, str(SENSORS))
    parsed = []
    real = json.loads
    monkeypatch.setattr(reading.json, "loads", lambda text: parsed.append(len(text)) or real(text))
    output = JobOutput(out)
    first = output.plan()
    assert output.plan() is first and len(parsed) == 1
    assert sorted(first.workflows) == examples_of(out) and first.kinds[FLAG] == "combine"
    assert sum(first.sensors_placed) == first.sensors and first.drawable is not None
    compile_workflows([str(p) for p in EXAMPLES[:2]], out, str(SENSORS))
    os.utime(out / "plan.json", (first.mtime + 5, first.mtime + 5))
    parsed.clear()
    assert sorted(output.plan().workflows) == sorted(p.stem for p in EXAMPLES[:2]) and len(parsed) == 1
    assert output.plan() is output.plan() and len(parsed) == 1
