"""`sscript update` on a running Spark job (real Spark, in child processes through the CLI, as a user
runs them): the job switches between two micro-batches and its rows equal the reference evaluator's
over the timeline of versions (tests/test_update.py checks the engine's side without Spark); a job
killed during an update and started again ends with the same rows."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sensorscript.compiler import compile_workflows
from sensorscript.runtime.plan import versions
from tests.differential import write_replay
from tests.test_restart import Run, sscript
from tests.test_update import (EXTRA, LIMITS_TIGHTER, LIMITS_V2, ROOT, SENSORS, assert_rows, batches_of,
                               exact_or_absent, readings, reference_rows)

pytestmark = pytest.mark.spark

FILES = 9  # micro-batches; the update is asked for after the fourth


@pytest.fixture()
def setup(tmp_path):
    for name in ("bridge.ss", "bridge_limits.ss"):
        (tmp_path / name).write_text((ROOT / "workflows" / name).read_text())
    (tmp_path / "extra.ss").write_text(EXTRA)
    batches = batches_of(readings(), FILES)
    data = write_replay(tmp_path / "data", batches)
    out = tmp_path / "out"
    old = [str(tmp_path / "bridge.ss"), str(tmp_path / "bridge_limits.ss")]
    new = [str(tmp_path / "bridge.ss"), str(tmp_path / "extra.ss")]
    compile_workflows(old, out, SENSORS)
    return out, data, batches, old, new


def rows(out: Path) -> tuple[dict[str, list[tuple]], dict[str, set[int]]]:
    db = sqlite3.connect(out / "results.db")
    found, plans = {}, {}
    for stream, ts, start, end, value, plan in db.execute(
            "SELECT stream, ts, window_start, window_end, value, plan_version FROM results"):
        found.setdefault(stream, []).append((stream, ts, start, end, value))
        plans.setdefault(stream, set()).add(plan)
    watermarks = dict(db.execute("SELECT partition, value FROM metrics WHERE name = 'watermark' AND batch_id = ?",
                                 (versions.applied(out, 2)["after_batch"],)).fetchall())
    db.close()
    return {s: sorted(r, key=lambda r: (r[1], r[2] if r[2] is not None else -1)) for s, r in found.items()}, \
        plans | {"_watermarks": watermarks}


def check(out: Path, batches, old: list[str], new: list[str]) -> None:
    """Kept streams over the whole input, removed ones up to the switch, added ones from it on."""
    found, plans = rows(out)
    applied = versions.applied(out, 2)
    whole = reference_rows(old, batches)
    for stream in ("bridge.out_MZ", "bridge.out_AZ"):
        assert_rows(found[stream], [r for r in whole if r[0] == stream])
        assert plans[stream] <= {1, 2}
    old_job, _ = versions.load(out, 1)
    partition_of = {n: p.partition for p in old_job.first_stage for names in p.outputs.values() for n in names}
    for stream in ("bridge_limits.EXCEEDED", "bridge_limits.TWIST"):
        mark = plans["_watermarks"][partition_of[stream]]
        assert_rows(found.get(stream, []), [r for r in whole if r[0] == stream and r[1] < mark])
        assert plans.get(stream, {1}) == {1}
    # Added: against the new workflows over ALL the readings, exact or absent, whole from the time
    # the job said (sscript status), which is no later than their first windows after the switch
    # (LEVEL: 10 minutes every 5; HIGH: PEAK4's 20 minutes every 5).
    expected = reference_rows(new, batches)
    exact = exact_from(out)
    first_start = -(-applied["switch_at"] // 300_000) * 300_000
    assert exact == {"extra.LEVEL": first_start + 600_000 - 1, "extra.HIGH": first_start + 1_200_000 - 1}
    for stream in ("extra.HIGH", "extra.LEVEL"):
        exact_or_absent(found[stream], expected, stream, applied["switch_at"], exact[stream])
        assert sum(1 for r in found[stream] if r[1] >= exact[stream]) >= 6
        assert plans[stream] == {2}


def exact_from(out: Path) -> dict[str, int | None]:
    """From when each stream an update started is written whole, as the job says (status.json)."""
    return json.loads((out / "status.json").read_text())["exact_from"]


def test_a_running_job_takes_an_update_between_two_batches(setup):
    out, data, batches, old, new = setup
    run = Run(out, data)
    try:
        run.wait_for_status(lambda s: (s.get("last_batch") or -1) >= 3, "batch 3")
        updated = sscript("update", str(out), *new, "--sensors", SENSORS)
        assert updated.returncode == 0, updated.stdout + updated.stderr
        assert ("computations added (start empty at the switch): 4: 8WL3, HIGH (extra.HIGH), LEVEL (extra.LEVEL), "
                "PEAK4 (extra.PEAK4)") in updated.stdout
        assert "computations removed: 2: EXCEEDED (bridge_limits.EXCEEDED), TWIST (bridge_limits.TWIST)" in updated.stdout
        assert "runs plan version 2 (OUT/versions/2), after batch" in updated.stdout
        assert "rows written whole from" in updated.stdout and "  extra.LEVEL: 20" in updated.stdout
        status = sscript("status", str(out))
        assert "plan version 2" in status.stdout
        run.drain(sum(map(len, batches)))
    finally:
        run.cleanup()
    assert "plan version 2 runs after batch" in run.output()
    check(out, batches, old, new)


def test_a_job_killed_during_an_update_ends_with_the_same_rows(setup):
    out, data, batches, old, new = setup
    from sensorscript.update import update_workflows

    first = Run(out, data)
    try:
        first.wait_for_status(lambda s: (s.get("last_batch") or -1) >= 3, "batch 3")
        update_workflows(new, out, SENSORS)  # the request is out: the job is killed before or while it switches
        time.sleep(0.3)
        first.kill()
    finally:
        first.cleanup()
    second = Run(out, data)
    try:
        second.drain(sum(map(len, batches)))
    finally:
        second.cleanup()
    assert versions.applied(out, 2) is not None
    check(out, batches, old, new)


def test_mode_dual_hands_a_changed_stream_over_once_the_new_windows_have_filled(setup):
    """bridge_limits' MD1Z becomes a 20-minute mean: EXCEEDED and TWIST are written by the old
    computations until 25 minutes after the switch (plan_version 1: the new mean's first window that
    starts at the switch or later has ended by then), by the new ones after (2)."""
    out, data, batches, old, _ = setup
    (out.parent / "v2").mkdir()
    (out.parent / "v2" / "bridge_limits.ss").write_text(LIMITS_V2)
    new = [old[0], str(out.parent / "v2" / "bridge_limits.ss")]
    run = Run(out, data)
    try:
        run.wait_for_status(lambda s: (s.get("last_batch") or -1) >= 3, "batch 3")
        updated = sscript("update", str(out), *new, "--sensors", SENSORS, "--mode", "dual")
        assert updated.returncode == 0, updated.stdout + updated.stderr
        assert "bridge_limits.TWIST: the old computation's rows until 25min after the switch" in updated.stdout
        run.drain(sum(map(len, batches)))
    finally:
        run.cleanup()
    found, plans = rows(out)
    switch_at = versions.applied(out, 2)["switch_at"]
    cut = switch_at + 25 * 60_000  # the fill: the new 20-minute mean's first window (slide 5 minutes)
    assert exact_from(out)["bridge_limits.TWIST"] <= cut
    before = reference_rows(old, batches)
    after = reference_rows(new, batches)
    for stream in ("bridge.out_MZ", "bridge.out_AZ"):
        assert_rows(found[stream], [r for r in before if r[0] == stream])
    db = sqlite3.connect(out / "results.db")
    for stream in ("bridge_limits.EXCEEDED", "bridge_limits.TWIST"):
        expected = [r for r in before if r[0] == stream and r[1] < cut] + [r for r in after if r[0] == stream
                                                                           and r[1] >= cut]
        assert_rows(found[stream], expected)
        versions_by_time = db.execute("SELECT ts < ?, plan_version FROM results WHERE stream = ? GROUP BY 1, 2",
                                      (cut, stream)).fetchall()
        assert sorted(versions_by_time) == [(0, 2), (1, 1)], versions_by_time
    db.close()



def test_an_update_with_corrections_of_late_data(tmp_path):
    """Late policy correct across an update (mode clear) that adds a workflow and tightens a threshold
    (bridge_limits' EXCEEDED compares with 12.0 instead of 12.5): a tenth of each file's readings
    arrive with the next file, late; at the end every kept stream equals the reference over all the
    readings, and the computations the update added or changed equal it from the switch on,
    corrections included (a correction recomputes them from the switch only: versions.started)."""
    for name in ("bridge.ss", "bridge_limits.ss"):
        (tmp_path / name).write_text((ROOT / "workflows" / name).read_text())
    (tmp_path / "extra.ss").write_text(EXTRA)
    batches = batches_of(readings(), FILES)
    for k in range(FILES - 1):  # every tenth reading of a file comes with the next one
        late = batches[k][5::10]
        batches[k] = [line for i, line in enumerate(batches[k]) if i < 5 or (i - 5) % 10]
        batches[k + 1] = late + batches[k + 1]
    data = write_replay(tmp_path / "data", batches)
    out = tmp_path / "out"
    old = [str(tmp_path / "bridge.ss"), str(tmp_path / "bridge_limits.ss")]
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "bridge_limits.ss").write_text(LIMITS_TIGHTER)
    new = [str(tmp_path / "bridge.ss"), str(tmp_path / "extra.ss"), str(tmp_path / "v2" / "bridge_limits.ss")]
    compile_workflows(old, out, SENSORS, late="correct")
    run = Run(out, data)
    try:
        run.wait_for_status(lambda s: (s.get("last_batch") or -1) >= 3, "batch 3")
        updated = sscript("update", str(out), *new, "--sensors", SENSORS, "--backfill", "--timeout", "240")
        assert updated.returncode == 0, updated.stdout + updated.stderr
        run.drain(sum(map(len, batches)))
    finally:
        run.cleanup()
    assert "corrected" in run.output() or "correction" in run.output()
    assert "backfill of plan version 2 from the start of the archive: done" in updated.stdout, updated.stdout
    db = sqlite3.connect(out / "results.db")
    latest = {}
    for stream, ts, start, end, value in db.execute("SELECT stream, ts, window_start, window_end, value FROM latest"):
        latest.setdefault(stream, []).append((stream, ts, start, end, value))
    db.close()
    everything = [[line for batch in batches for line in batch]]  # one batch: nothing is late
    for stream in ("bridge.out_MZ", "bridge.out_AZ", "bridge_limits.TWIST"):
        assert_rows(sorted(latest[stream], key=lambda r: (r[1], r[2])),
                    [r for r in reference_rows(old, everything) if r[0] == stream])
    expected = reference_rows(new, everything)
    switch_at = versions.applied(out, 2)["switch_at"]
    exact = exact_from(out)
    assert set(exact) == {"extra.HIGH", "extra.LEVEL", "bridge_limits.EXCEEDED"}
    for stream in ("extra.HIGH", "extra.LEVEL", "bridge_limits.EXCEEDED"):
        got = sorted(latest[stream], key=lambda r: (r[1], r[2] if r[2] is not None else -1))
        exact_or_absent(got, expected, stream, switch_at, exact[stream])
        assert any(r[1] >= exact[stream] for r in got)
    # The backfill (`--backfill`: from the start of the archive) ran beside the job, corrections of
    # late data before and after it: from when it says each stream is complete, the newest rows are
    # the new workflows' over all the readings, from the start: HIGH reads sensors the job read all
    # along, LEVEL reads 8WL3, which the update began to read (stage 0 archived its readings
    # before, unread), EXCEEDED (a threshold changed) is restated with the new one.
    done = json.loads((versions.folder(out, 2) / "backfill.json").read_text())
    assert done["complete_from"] == {"extra.HIGH": None, "extra.LEVEL": None, "bridge_limits.EXCEEDED": None}
    for stream, complete_from in done["complete_from"].items():
        got = sorted(latest[stream], key=lambda r: (r[1], r[2] if r[2] is not None else -1))
        assert exact_or_absent(got, expected, stream, complete_from or 0, complete_from or 0) == []


def test_the_issue_case_writes_no_partial_sum_and_a_backfill_fills_its_history(tmp_path, mode="dual"):
    """Issue #24 through the CLI: a job runs the bridge workflow; mid-run an update adds a workflow
    that shares MD1Z and sums, every 10 s, a union of MD1Z, a new 7-second mean and a raw sensor.
    No sum is written from part of its input: every row of shared.w is the workflows' value over
    all the readings, and none is missing from the time `sscript update` printed. Then `sscript
    backfill OUT --since SINCE`, killed once while it runs and run again, completes shared.w and
    hist.h from SINCE: the job's rows and the backfill's are the workflows' over all readings, no
    key twice.
    (Mode dual here; both modes run without Spark in tests/test_update.py.)"""
    from tests.test_update import HISTORY, SHARED, deck_and_accelerometers

    (tmp_path / "seed.ss").write_text((ROOT / "workflows" / "bridge.ss").read_text())
    (tmp_path / "shared.ss").write_text(SHARED)
    (tmp_path / "hist.ss").write_text(HISTORY)  # over 8MD1-AZ, which the job read (and archived) all along
    batches = batches_of(deck_and_accelerometers(minutes=20), FILES)
    data = write_replay(tmp_path / "data", batches)
    out = tmp_path / "out"
    old = [str(tmp_path / "seed.ss")]
    new = [*old, str(tmp_path / "shared.ss"), str(tmp_path / "hist.ss")]
    compile_workflows(old, out, SENSORS, late="correct")  # the archive a backfill reads
    run = Run(out, data)
    try:
        run.wait_for_status(lambda s: (s.get("last_batch") or -1) >= 3, "batch 3")
        updated = sscript("update", str(out), *new, "--sensors", SENSORS, "--mode", mode)
        assert updated.returncode == 0, updated.stdout + updated.stderr
        run.drain(sum(map(len, batches)))
    finally:
        run.cleanup()
    found, _ = rows(out)
    exact = exact_from(out)
    printed = [line for line in updated.stdout.splitlines() if line.startswith("  shared.w: ")]
    assert printed, updated.stdout  # said once the first batch on the new version was written
    switch_at = versions.applied(out, 2)["switch_at"]
    # w is whole from its first 10-second window after y's first whole window (7 s every 3 s).
    y_from = -(-switch_at // 3_000) * 3_000 + 7_000 - 1
    assert exact["shared.w"] == -(-y_from // 10_000) * 10_000 + 10_000 - 1
    missing = exact_or_absent(found["shared.w"], reference_rows(new, batches), "shared.w", switch_at,
                              exact["shared.w"])
    assert missing and sum(1 for r in found["shared.w"] if r[1] >= exact["shared.w"]) > 20
    whole = reference_rows(old, batches)
    for stream in ("seed.out_MZ", "seed.out_AZ"):
        assert_rows(found[stream], [r for r in whole if r[0] == stream])

    since = 1_767_225_600_000 + 3 * 60_000  # three minutes into the readings
    backfill = subprocess.Popen([sys.executable, "-m", "sensorscript.cli", "backfill", str(out), "--since",
                                 "2026-01-01T00:03:00"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
    record = out / "versions" / "2" / "backfill.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and backfill.poll() is None:
        if record.exists() and json.loads(record.read_text())["state"] == "running":
            os.killpg(backfill.pid, signal.SIGKILL)  # the command and the backfill it runs
            break
        time.sleep(0.02)
    backfill.wait(timeout=60)
    assert json.loads(record.read_text())["since"] == since
    if json.loads(record.read_text())["state"] == "running":  # killed before it was done
        assert "cut short" in sscript("status", str(out)).stdout
    again = sscript("backfill", str(out))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "backfill of plan version 2 from 2026-01-01 00:03:00.000 UTC: done" in again.stdout, again.stdout
    db = sqlite3.connect(out / "results.db")
    latest = sorted(db.execute("SELECT stream, ts, window_start, window_end, value FROM latest WHERE stream IN "
                               "('shared.w', 'hist.h')"), key=lambda r: (r[0], r[1]))
    twice = db.execute("SELECT COUNT(*) FROM (SELECT 1 FROM results GROUP BY stream, ts, window_start, window_end, "
                       "version HAVING COUNT(*) > 1)").fetchone()[0]
    filled = db.execute("SELECT COUNT(*), MIN(plan_version), MAX(plan_version) FROM results WHERE stream = 'hist.h' "
                        "AND ts < ?", (exact["hist.h"],)).fetchone()
    db.close()
    done = json.loads(record.read_text())
    assert twice == 0 and done["state"] == "done"
    # Both complete from SINCE, w too, though it needs sensors the job began to read at the switch:
    # stage 0 archived their readings before, unread.
    reference = reference_rows(new, batches)
    assert done["complete_from"] == {"hist.h": since, "shared.w": since}
    for stream in ("hist.h", "shared.w"):
        assert exact_or_absent(latest, reference, stream, since, since) == []
    assert filled[0] >= 2 and filled[1:] == (2, 2)  # the history, written by version 2
    assert "hist.h: from 2026-01-01 00:03:00.000 UTC" in sscript("status", str(out)).stdout