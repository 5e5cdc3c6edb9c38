"""Watermark policies and late readings on real Spark: a disordered feed replayed over many
micro-batches and two partitions (docs/LANGUAGE.md, "Event time and late readings")."""

import json
import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from sensorscript.compiler import compile_workflows
from sensorscript.parser import load
from oracles.streams import evaluate
from sensorscript.runtime.output.status import describe, read_status
from sensorscript.running import run_local
from sensorscript.runtime.output.sinks import sqlite_results
from tests.differential import assert_same, disordered_replay, expected_rows, result_rows, write_replay
from tests.test_watermark import assert_same_late, expected_lateness, without

pytestmark = pytest.mark.spark

SCRIPT = """
A   = avg(S1, 2s, 1s);
U   = union(S2, S3);
B   = max(U, 2s, 1s);
D   = A - B;
HI  = pattern(x: S4 -> y: S4) where x.value > 1 and y.value > x.value within 3s;
"""


def feed(folder: Path, files: int, seed: int, burst_ms: float = 1500) -> list[list[str]]:
    """60 s of S1..S4 at 20 Hz, each reading delayed by an exponential delay, in bursts: the
    readings arrive in order of ts + delay, cut into `files` files whose modification times give
    the replay its order (Spark's file source takes files by modification time, not by name)."""
    rng = np.random.default_rng(seed)
    lines, arrival = [], []
    for sensor in ("S1", "S2", "S3", "S4"):
        ts = np.arange(0, 60_000, 50) + rng.integers(0, 5)
        burst = (ts // 10_000) % 2 == 1  # every other 10 s the gateway holds readings back
        delay = rng.exponential(burst_ms, len(ts)) * burst + rng.exponential(30, len(ts))
        lines += [f"{sensor},{int(t)},{rng.integers(-8, 9) / 4}" for t in ts]
        arrival += list(ts + delay)
    order = np.argsort(arrival, kind="stable")
    batches = [[lines[i] for i in part] for part in np.array_split(order, files)]
    write_replay(folder, batches)
    return batches


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    folder = tmp_path_factory.mktemp("late")
    (folder / "w.ss").write_text(SCRIPT)
    return folder, compile_workflows([str(folder / "w.ss")], folder / "out", partitions=2, watermark="adaptive:3s")


@pytest.mark.parametrize("watermark", [None, "quality:0.05,0.05"], ids=["adaptive-compiled", "quality"])
def test_logged_late_readings_and_results_add_up(spark, compiled, tmp_path, watermark):
    """The job's policy (adaptive:3s, compiled) or one given for the run: the late store holds exactly
    the readings the policy's rule makes late, computed by the test
    (oracles/lateness.py) over the same micro-batches and partitions, and the results are
    those of the other readings."""
    folder, job = compiled
    policy = watermark or "adaptive:3s"
    batches = feed(tmp_path / "data", files=6, seed=1)
    summary = run_local(job.out, str(tmp_path / "data"), True, None, spark=spark, echo=lambda *_: None,
                        max_files_per_trigger=1, watermark=watermark)
    db = sqlite3.connect(job.out / "results.db")
    late = [(s, t, v) for s, t, v in db.execute("SELECT sensor_id, ts, value FROM late")]
    lines = [line for batch in batches for line in batch]
    assert 0 < len(late) == summary.late < len(lines) // 4
    assert summary.readings == len(lines)
    # Which readings are late: the rule's, one file a micro-batch, each sensor on its plan's partition.
    judged = expected_lateness(policy, batches, job.plan.partitions.sensor_partition, job.plan.codes)
    assert judged.late
    assert_same_late(late, judged.late)
    # The results are exactly those of the readings that came on time.
    on_time = without(lines, judged.late)
    expected = evaluate(load([str(folder / "w.ss")]).workflows, [on_time])
    assert_same(result_rows(job.out), expected_rows(expected))
    # Each late reading names the result streams it missed (a tilt of S4 misses only the pattern).
    missed = dict(db.execute("SELECT sensor_id, streams FROM late GROUP BY sensor_id"))
    assert missed.get("S1") in (None, "w.D") and missed.get("S4") in (None, "w.HI")
    assert all(w > t for t, w in db.execute("SELECT ts, watermark FROM late"))
    # Metrics per batch and partition; the status the CLI shows.
    watermarks = list(db.execute("SELECT batch_id, partition, value FROM metrics WHERE name = 'watermark' "
                                 "ORDER BY partition, batch_id"))
    assert {p for _, p, _ in watermarks} == {0, 1} and len(watermarks) >= 2 * len(batches)
    for partition in (0, 1):
        marks = [w for _, p, w in watermarks if p == partition]
        assert marks == sorted(marks)  # never decreasing
    per_stream = dict(db.execute("SELECT name, SUM(value) FROM metrics WHERE name LIKE 'late:%' GROUP BY name"))
    assert per_stream["late:w.D"] == sum(1 for s, _, _ in late if s in ("S1", "S2", "S3"))
    status = read_status(job.out)
    assert status["totals"]["late"] == summary.late and set(status["partitions"]) == {"0", "1"}
    text = describe(status)
    assert policy in text and "partition 1: watermark 1970-01-01" in text and "UTC" in text


def test_a_run_overrides_the_policies_and_drop_keeps_no_store(spark, compiled, tmp_path):
    """fixed:500 for this run instead of the compiled adaptive policy: exactly the reference's late
    readings (the reference judges a fixed delay per partition and batch), and none stored."""
    folder, job = compiled
    batches = feed(tmp_path / "data", files=5, seed=2)
    summary = run_local(job.out, str(tmp_path / "data"), True, None, spark=spark, echo=lambda *_: None,
                        max_files_per_trigger=1, watermark="fixed:500", late="drop")
    partition_of = job.plan.partitions.sensor_partition
    expected = evaluate(load([str(folder / "w.ss")]).workflows, batches, 500, partition_of)
    assert summary.late == expected.late > 0
    assert_same(result_rows(job.out), expected_rows(expected))
    db = sqlite3.connect(job.out / "results.db")
    assert db.execute("SELECT COUNT(*) FROM late").fetchone() == (0,)
    assert json.loads((job.out / "status.json").read_text())["watermark"] == "fixed:500"


def test_file_sinks_keep_the_late_store_and_metrics_beside_the_results(spark, compiled, tmp_path):
    folder, job = compiled
    feed(tmp_path / "data", files=4, seed=3)
    sink = tmp_path / "sink" / "results.csv"
    summary = run_local(job.out, str(tmp_path / "data"), True, f"csv:{sink}", spark=spark, echo=lambda *_: None,
                        max_files_per_trigger=1)
    import pandas as pd

    late = pd.concat([pd.read_csv(f) for f in sorted((sink.parent / "late").glob("*.csv"))])
    assert list(late.columns) == ["sensor_id", "ts", "value", "watermark", "streams", "batch_id", "too_late"]
    assert late["too_late"].isna().all()  # late policy log: no archive, no horizon
    assert len(late) == summary.late > 0
    metrics = pd.concat([pd.read_csv(f) for f in sorted((sink.parent / "metrics").glob("*.csv"))])
    assert {"watermark", "lag_ms", "disorder", "state_bytes", "readings"} <= set(metrics["name"])


@pytest.mark.parametrize("gamma", ["correct:1s", "correct:1h"])
def test_corrected_results_equal_the_reference_over_all_the_data(spark, compiled, tmp_path, gamma):
    """With `correct`, the newest version of every row is exact in the end: equal to the reference
    over every reading, late ones included; corrections run during the feed (a span of 1 s) or only
    once the input has ended (1 h); every version is kept."""
    folder, job = compiled
    batches = feed(tmp_path / "data", files=6, seed=4)
    lines = [line for batch in batches for line in batch]
    messages = []
    summary = run_local(job.out, str(tmp_path / "data"), True, None, spark=spark, echo=messages.append,
                        max_files_per_trigger=1, late=gamma)
    assert summary.late > 0 and summary.corrected > 0
    expected = evaluate(load([str(folder / "w.ss")]).workflows, [lines])
    assert_same(sqlite_results(job.out / "results.db", "latest"), expected_rows(expected))
    corrections = [m for m in messages if m.startswith("correction:")]
    assert len(corrections) > (1 if gamma == "correct:1s" else 0)
    db = sqlite3.connect(job.out / "results.db")
    assert db.execute("SELECT MAX(version) FROM results").fetchone()[0] >= 2
    # The archive holds every reading once, late ones included.
    archived = spark.read.parquet(str(job.out / "archive")).count()
    assert archived == len(lines)
    # sscript status tells of the corrections.
    assert "corrections of late data" in describe(read_status(job.out))


def test_corrections_of_the_examples_are_exact(spark, tmp_path):
    """Every bundled workflow (shared windows, a cut edge and so a second stage, arithmetic, patterns
    with negation, Kleene closures and partition by sensor) over a disordered replay: with
    `correct`, the newest rows equal the reference over all the data, match columns included."""
    from tests.cep_harness import reference_rows, same_rows
    from tests.conftest import EXAMPLES, ROOT

    sensors = ROOT / "workflows" / "sensors.csv"
    lines = [line for batch in disordered_replay(tmp_path, seed=7) for line in batch]
    data = tmp_path / "data"
    out = tmp_path / "out"
    compiled = compile_workflows([str(f) for f in EXAMPLES], out, str(sensors), 2, watermark="fixed:100",
                                 late="correct:2s")
    from sensorscript.codegen.program import programs

    firsts, seconds = programs(compiled.plan)
    assert any(second is not None for second in seconds)  # a cut edge: stage 2 runs too
    # ... over which 8AC3-Z's slice partials cross, not its readings: a correction recomputes them too.
    assert any(f.partials for first in firsts for f in first.forwards)
    summary = run_local(out, str(data), True, None, spark=spark, echo=lambda *_: None, max_files_per_trigger=1)
    assert summary.late > 100 and summary.corrected > 0
    expected, _ = reference_rows({f.stem: f.read_text() for f in EXAMPLES}, [lines])
    db = sqlite3.connect(out / "results.db")
    rows = [tuple(r) for r in db.execute("SELECT stream, ts, window_start, window_end, value, start_ts, end_ts, "
                                         "events FROM latest")]
    same_rows(rows, expected)
    assert {r[0] for r in rows} >= {"pier_alarms.SURGE", "bridge.out_MZ"}


def test_a_replay_follows_modification_times_or_names(spark, compiled, tmp_path):
    """Files named in event-time order but written newest first: Spark's file source reads them by
    modification time, newest file first, and most readings come late; `name` order reads them as
    named, and none does."""
    folder, job = compiled
    data = tmp_path / "data"
    data.mkdir()
    for index in range(6):
        path = data / f"part-{index:03d}.csv"
        path.write_text("".join(f"S{s},{index * 10_000 + t},1.0\n" for t in range(0, 10_000, 100) for s in (1, 2, 3, 4)))
        os.utime(path, (1_700_000_000 - index * 10, 1_700_000_000 - index * 10))  # the last file is the oldest
    by_time = run_local(job.out, str(data), True, None, spark=spark, echo=lambda *_: None, max_files_per_trigger=1)
    assert by_time.late > 1000
    said = []
    by_name = run_local(job.out, str(data), True, None, spark=spark, echo=said.append, max_files_per_trigger=1,
                        replay_order="name")
    assert by_name.late == 0 and by_name.readings == 2400 and said[0].startswith("replaying 6 files in name order")


def test_the_commands_a_user_runs(tmp_path):
    """compile with policies, a bad policy, run (a child process, as `sscript run` does), status,
    results with people's times, and correct, through the CLI."""
    from click.testing import CliRunner

    from sensorscript.cli import main

    (tmp_path / "w.ss").write_text(SCRIPT)
    feed(tmp_path / "data", files=4, seed=5)
    out = str(tmp_path / "out")
    runner = CliRunner()
    bad = runner.invoke(main, ["compile", str(tmp_path / "w.ss"), "-o", out, "--watermark", "later:5s"])
    assert bad.exit_code == 2 and "unknown watermark policy 'later'" in bad.output
    bad = runner.invoke(main, ["compile", str(tmp_path / "w.ss"), "-o", out, "--late", "fix"])
    assert bad.exit_code == 2 and "unknown late policy 'fix'" in bad.output
    compiled = runner.invoke(main, ["compile", str(tmp_path / "w.ss"), "-o", out, "--watermark", "quality:0.05,0.05",
                                    "--late", "correct:2s"])
    assert compiled.exit_code == 0, compiled.output
    assert "quality:0.05,0.05" in (tmp_path / "out" / "job.py").read_text()
    ran = runner.invoke(main, ["run", out, "--input", str(tmp_path / "data"), "--once", "--max-files-per-trigger", "1"])
    assert ran.exit_code == 0, ran.output
    assert "late" in ran.output and "correction:" in ran.output and "Traceback" not in ran.output
    status = runner.invoke(main, ["status", out])
    assert status.exit_code == 0 and "quality:0.05,0.05" in status.output and "partition 0: watermark" in status.output
    shown = runner.invoke(main, ["results", out, "--stream", "w.D", "--limit", "3"])
    assert shown.exit_code == 0 and shown.output.startswith("w.D: ") and "1970-01-01 00:00:" in shown.output
    corrected = runner.invoke(main, ["correct", out])
    assert corrected.exit_code == 0 and "no late readings pending" in corrected.output, corrected.output
    never = runner.invoke(main, ["status", str(tmp_path / "nowhere")])
    assert never.exit_code == 1 and "no such folder" in never.output
