"""A job that runs for years keeps its disk bounded (issue #27): each store kept for its horizon,
the archive's small files merged, readings later than the archive's horizon kept as too late to
correct; on real Spark over twelve hours of event time, and the archive's merge and expiry on real
Parquet files under concurrent readers and kills."""

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from sensorscript.compiler import compile_workflows
from sensorscript.parser import load
from sensorscript.runtime.ingest import archive
from sensorscript.runtime.output import expiry
from sensorscript.runtime.output.status import describe, read_status
from sensorscript.runtime.output.sinks import BatchRows, SQLiteSink, open_sink, sqlite_results
from sensorscript.runtime.plan import retention
from sensorscript.running import run_local
from tests.differential import assert_same, expected_rows
from oracles.streams import evaluate

H = archive.HOUR_MS
T0 = 472_223 * H  # 2023-11-14 23:00 UTC, on the hour
SCRIPT = """
A = avg(S1, 10min, 5min);
U = union(S2, S3);
B = max(U, 10min, 5min);
D = A - B;
"""


def twelve_hours(folder: Path, seed: int = 3):
    """S1..S3 every 30 s for 12 h of event time, in 24 files of half an hour of arrival each
    (modification times in order). 2 % of the readings between hours 5 and 10 come 90 min late
    (within the archive's 4 h: corrected); 10 % of those of hour 3 come 8 h late (too late to
    correct). Returns (every line, the too-late lines)."""
    rng = np.random.default_rng(seed)
    lines, arrival, too_late = [], [], []
    end = T0 + 12 * H
    for sensor in ("S1", "S2", "S3"):
        ts = np.arange(T0, end, 30_000) + int(rng.integers(0, 1000))
        u = rng.random(len(ts))
        late = (u < 0.02) & (ts > T0 + 5 * H) & (ts < end - 2 * H)
        too = (u > 0.9) & (ts >= T0 + 3 * H) & (ts < T0 + 4 * H)
        values = rng.integers(-8, 9, len(ts)) / 4
        for t, v, is_late, is_too in zip(ts, values, late, too):
            lines.append(f"{sensor},{int(t)},{v}")
            arrival.append(t + (90 * 60_000 if is_late else 8 * H if is_too else 0))
            if is_too:
                too_late.append((sensor, int(t), float(v)))
    arrival = np.array(arrival)
    order = np.argsort(arrival, kind="stable")
    cuts = np.linspace(T0, end + 1, 25)
    folder.mkdir(parents=True)
    for index in range(24):
        chosen = order[(arrival[order] >= cuts[index]) & (arrival[order] < cuts[index + 1])]
        path = folder / f"part-{index:03d}.csv"
        path.write_text("".join(lines[i] + "\n" for i in chosen))
        os.utime(path, (1_700_000_000 + index * 10,) * 2)
    return lines, too_late


@pytest.mark.spark
def test_twelve_hours_keep_each_store_for_its_horizon(spark, tmp_path):
    """Archive 4 h, late store 10 h (compiled), results 5 h (given to a run): the job is SIGKILLed
    after 12 batches (6 h of event time: hours merged, corrections run, at any moment of either),
    then a run continues and ends the input. At the end the archive holds every reading from its
    floor on and nothing before, its hours merged; late readings older than 4 h are counted and kept
    as too late, the others corrected; the results kept are exact (the reference over every reading,
    the too-late ones aside) from where the results' horizon removed the older ones, and `sscript
    status` says it all."""
    from tests.test_restart import Run

    (tmp_path / "w.ss").write_text(SCRIPT)
    job = compile_workflows([str(tmp_path / "w.ss")], tmp_path / "out", partitions=2, late="correct:1min",
                            retention={"archive": "4h", "late": "10h"})
    lines, too_late = twelve_hours(tmp_path / "data")
    first = Run(job.out, tmp_path / "data")
    try:
        first.wait_for_status(lambda s: (s.get("last_batch") or 0) >= 12, "12 batches")
        first.kill()
    finally:
        first.cleanup()
    summary = run_local(job.out, str(tmp_path / "data"), True, None, spark=spark, echo=lambda *_: None,
                        max_files_per_trigger=1, retain=["results=5h", "metrics=1s"])
    assert summary.outcome == "ended"
    out = job.out
    now = max(int(line.split(",")[1]) for line in lines)  # the newest reading: where the job stands at the end

    # Too late to correct: counted, kept, flagged; the other late readings corrected.
    status = read_status(job.out)
    assert status["totals"]["too_late"] == len(too_late) > 20
    assert status["corrections"]["rows"] > 0
    db = sqlite3.connect(out / "results.db")
    flagged = [(s, t, v) for s, t, v in db.execute("SELECT sensor_id, ts, value FROM late WHERE too_late = 1")]
    assert Counter(flagged) == Counter(too_late)
    # The late store: nothing older than its horizon (trimmed a 24th of it at a time).
    oldest_late = db.execute("SELECT MIN(ts) FROM late").fetchone()[0]
    assert now - 10 * H - 10 * H / 24 <= oldest_late

    # The archive: whole from its floor, nothing before it, each hour behind merged.
    folder = out / archive.FOLDER
    floor = archive.floor(folder)
    assert floor == (now - 4 * H) // H * H
    hours = [hour for hour, _ in archive._hours(folder)]
    assert min(hours) * H == floor
    codes = {code: sensor for sensor, (code, _) in job_sensors(out).items()}
    code, ts, value = archive.read(folder, codes, floor, 2**62)
    expected = sorted((s, int(t), float(v)) for s, t, v in (line.split(",") for line in lines) if int(t) >= floor)
    assert sorted(zip((codes[int(c)] for c in code), ts.tolist(), value.tolist())) == expected
    for hour, where in archive._hours(folder):
        taken, superseded = archive._chosen(where)
        assert not superseded  # swept
        if (hour + 2) * H <= now:  # an hour behind by more than COMPACT_AFTER: merged, per partition
            merged = [p for p in taken if archive.MERGED.fullmatch(p.name)]
            assert {p.name.split("-")[0] for p in merged} == {"p0", "p1"}, sorted(p.name for p in taken)

    # Results: none before the horizon's cut; from it on, exact.
    cut = expiry.expired_before(out)
    assert now - 5 * H - 5 * H / 24 <= cut <= now - 5 * H
    kept = sqlite_results(out / "results.db", "latest")
    assert kept and min(row[1] for row in kept) >= cut
    assert db.execute("SELECT COUNT(*) FROM results WHERE ts < ?", (cut,)).fetchone()[0] == 0
    on_time = [line for line in lines if tuple_of(line) not in set(too_late)]
    reference = [row for row in expected_rows(evaluate(load([str(tmp_path / "w.ss")]).workflows, [on_time]))
                 if row[1] >= cut]
    assert_same(kept, reference)

    text = describe(read_status(out))
    assert "too late to correct: %d late readings" % len(too_late) in text
    assert "raw readings archived for corrections 4 h of event time" in text
    assert "results 5 h of event time" in text and "on disk: archive" in text
    # The run's horizons are kept in the checkpoint for the next runs; the compiled ones stay the job's.
    assert retention.kept(out / "checkpoint") == {"results": "5h", "metrics": "1s"}
    # Metrics older than their horizon (1 s) are per-minute rows now, whole minutes of them: every
    # reading counted is in one or the other, once.
    def counted() -> tuple[float, int]:
        per_batch = db.execute("SELECT COALESCE(SUM(value), 0) FROM metrics WHERE name = 'readings'").fetchone()[0]
        per_minute, minutes, newest = db.execute("SELECT COALESCE(SUM(total), 0), COUNT(*), MAX(minute) "
                                                 "FROM metrics_minutes WHERE name = 'readings'").fetchone()
        oldest_kept = db.execute("SELECT MIN(time) FROM metrics").fetchone()[0]
        assert newest is None or oldest_kept is None or oldest_kept >= newest + 60  # whole minutes
        return per_batch + per_minute, minutes

    assert counted()[0] == len(lines)
    # Every row older than now: all of them per minute, none lost or doubled: one per-minute row for
    # each minute and partition the per-batch rows fall in, beside those made before.
    minutes = db.execute("SELECT COUNT(*) FROM (SELECT DISTINCT CAST(time / 60 AS INTEGER), partition FROM metrics "
                         "WHERE name = 'readings')").fetchone()[0] + counted()[1]
    expiry.downsample_metrics(f"sqlite:{out / 'results.db'}", time.time() + 61)
    assert counted() == (len(lines), minutes) and minutes > 0
    assert db.execute("SELECT COUNT(*) FROM metrics").fetchone()[0] == 0


def tuple_of(line: str):
    sensor, ts, value = line.split(",")
    return sensor, int(ts), float(value)


def job_sensors(out: Path) -> dict:
    from sensorscript.runtime.plan.loading import load_job

    return load_job(out).JOB.sensors


# ------------------------------------------------------------------ the archive on its own

def write_hours(folder: Path, batches: int = 12, partitions: int = 2, seed: int = 0) -> list[tuple]:
    """Archive files as stage 1 writes them (archive.write): `batches` batches per partition over
    three hours, each with readings of several hours; returns every (code, ts, value) written."""
    rng = np.random.default_rng(seed)
    written = []
    for batch in range(batches):
        for partition in range(partitions):
            n = 200
            code = rng.integers(0, 5, n) + partition * 5
            ts = T0 + rng.integers(0, 3 * H, n)
            value = rng.normal(size=n)
            archive.write(str(folder), partition, batch, code, ts, value)
            written += list(zip(code.tolist(), ts.tolist(), value.tolist()))
    return sorted(written)


def read_all(folder: Path) -> list[tuple]:
    code, ts, value = archive.read(folder, {c: f"S{c}" for c in range(10)}, T0 - H, T0 + 10 * H)
    return sorted(zip(code.tolist(), ts.tolist(), value.tolist()))


def test_merging_keeps_every_reading_once_and_leaves_one_file_per_hour_and_partition(tmp_path):
    folder = tmp_path / "archive"
    written = write_hours(folder)
    assert read_all(folder) == written
    merged = archive.compact(folder, T0 + 3 * H, upto_batch=9)  # batches 10, 11 are not committed yet
    assert merged == 3 * 2 * 10
    assert read_all(folder) == written
    for _, where in archive._hours(folder):
        assert sorted(p.name for p in where.glob("*.parquet")) == [
            "p0-b10.parquet", "p0-b11.parquet", "p0-upto9.parquet", "p1-b10.parquet", "p1-b11.parquet",
            "p1-upto9.parquet"]
    # A batch done again rewrites its own small files only; merged again once enough gather.
    before = read_all(folder)
    archive.forget(folder, 11)
    left = read_all(folder)
    assert len(left) == len(before) - 2 * 200
    archive.AGAIN_AFTER, again = 2, archive.AGAIN_AFTER
    try:
        for batch in range(12, 14):
            archive.write(str(folder), 0, batch, np.array([1]), np.array([T0 + 5]), np.array([0.5]))
        archive.compact(folder, T0 + 3 * H, upto_batch=13)
    finally:
        archive.AGAIN_AFTER = again
    names = {p.name for p in dict(archive._hours(folder))[T0 // H].glob("*")}
    assert "p0-upto13.parquet" in names and "p0-upto9.parquet" not in names and "p0-b12.parquet" not in names
    assert read_all(folder) == sorted(left + [(1, T0 + 5, 0.5)] * 2)


def test_a_reader_sees_the_small_files_or_the_merged_one_never_both_never_neither(tmp_path):
    """A correction that listed the small files before a merge reads them whole: the files the merge
    supersedes are deleted only when no reader holds the archive. Readers and merges in threads,
    many times over: every read equals what was written."""
    folder = tmp_path / "archive"
    written = write_hours(folder, batches=40)
    with archive.reading(folder):  # a correction reading now
        archive.compact(folder, T0 + 3 * H, upto_batch=19)
        assert any(archive._chosen(w)[1] for _, w in archive._hours(folder))  # superseded, not yet deleted
        assert read_all_unlocked(folder) == written
    assert archive.sweep(folder)
    assert not any(archive._chosen(w)[1] for _, w in archive._hours(folder))
    errors, reads = [], []

    def reader():
        while not done.is_set():
            try:
                reads.append(read_all(folder) == written)
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)

    done = threading.Event()
    threads = [threading.Thread(target=reader) for _ in range(2)]
    for thread in threads:
        thread.start()
    archive.AGAIN_AFTER, again = 1, archive.AGAIN_AFTER
    try:
        for upto in range(20, 40):
            archive.compact(folder, T0 + 3 * H, upto_batch=upto)
    finally:
        archive.AGAIN_AFTER = again
        done.set()
        for thread in threads:
            thread.join()
    assert not errors and reads and all(reads)
    assert read_all(folder) == written


def read_all_unlocked(folder: Path) -> list[tuple]:
    """read_all from another thread's lock (flock: a second open file conflicts as another process would)."""
    result = []
    thread = threading.Thread(target=lambda: result.append(read_all(folder)))
    thread.start()
    thread.join(30)
    return result[0]


# A merge that SIGKILLs itself at the KILL_AT-th step of its work (a row group written, a merged
# file closed, renamed into place, a superseded file deleted), after writing where to MARKER.
_MERGE = """
import os, signal, sys
from pathlib import Path
import pyarrow.parquet as pq
from sensorscript.runtime.ingest import archive
archive.AGAIN_AFTER = 1
folder, before, upto, kill_at, marker = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
steps = []

def step(name, work):
    def counted(*args, **kwargs):
        steps.append(name)
        if len(steps) == kill_at:
            Path(marker).write_text(" ".join(steps))
            os.kill(os.getpid(), signal.SIGKILL)
        return work(*args, **kwargs)
    return counted

pq.ParquetWriter.write_table = step("write", pq.ParquetWriter.write_table)
pq.ParquetWriter.close = step("close", pq.ParquetWriter.close)
os.replace = step("rename", os.replace)
Path.unlink = step("delete", Path.unlink)
archive.compact(folder, before, upto)
"""


def test_a_kill_at_any_moment_of_a_merge_loses_and_doubles_nothing(tmp_path):
    """A merge in a process of its own, SIGKILLed at a random step of its work, many times over (and
    once between the merged file's rename and the sweep): the archive reads as written after each
    kill, and the next merge completes what the killed one left. Each kill lands inside a merge:
    the merge itself says where, just before it dies."""
    folder = tmp_path / "archive"
    written = write_hours(folder, batches=30)
    rng = np.random.default_rng(7)
    landed = set()
    for round_ in range(12):
        marker = tmp_path / f"killed-{round_}"
        process = subprocess.run([sys.executable, "-c", _MERGE, str(folder), str(T0 + 3 * H), str(2 + round_ * 2),
                                  str(rng.integers(1, 8)), str(marker)],
                                 env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
        assert process.returncode == -signal.SIGKILL and marker.exists(), f"round {round_}: no kill inside the merge"
        landed.add(marker.read_text().split()[-1])
        assert read_all(folder) == written, f"after the kill of round {round_} ({marker.read_text()})"
    assert landed >= {"write", "close", "rename"}, landed  # while writing a merged file, and after
    # Killed between rename and sweep: superseded files stay, and are never read.
    archive.AGAIN_AFTER, again = 1, archive.AGAIN_AFTER
    try:
        for _, where in archive._hours(folder):
            archive._merge_hour(where, 29)
    finally:
        archive.AGAIN_AFTER = again
    assert any(archive._chosen(w)[1] for _, w in archive._hours(folder))
    assert read_all(folder) == written
    archive.compact(folder, T0 + 3 * H, 29)
    assert read_all(folder) == written
    assert not list(folder.rglob(".*.tmp")) and not any(archive._chosen(w)[1] for _, w in archive._hours(folder))


def test_expiry_moves_the_floor_then_removes_the_hours_behind_it(tmp_path):
    folder = tmp_path / "archive"
    written = write_hours(folder)
    assert archive.floor(folder) == archive.NEG_INF
    with archive.reading(folder):  # a reader holds it: the floor moves, the hour stays for now
        assert archive.expire(folder, T0 + H + 1234) == T0 + H
        assert T0 // H in dict(archive._hours(folder))
    assert archive.sweep(folder)
    assert [hour for hour, _ in archive._hours(folder)] == [T0 // H + 1, T0 // H + 2]
    assert archive.earliest(folder) == T0 + H
    assert read_all(folder) == [row for row in written if row[1] >= T0 + H]
    assert archive.expire(folder, T0 + 30) is None  # the floor never moves back
    # Nor past what is there: an archive whose readings all lie after the cut keeps its floor.
    fresh = tmp_path / "fresh"
    archive.write(str(fresh), 0, 0, np.array([1]), np.array([T0 + 5 * H]), np.array([1.0]))
    assert archive.expire(fresh, T0 + 2 * H) is None and archive.floor(fresh) == archive.NEG_INF


# ------------------------------------------------------------------ sinks

def test_metrics_become_per_minute_rows_then_go(tmp_path):
    """Per-batch metrics older than their horizon are aggregated per minute, partition and measure
    (count, sum, least, most) and removed in one transaction; per-minute rows past theirs go."""
    path = tmp_path / "results.db"
    sink = SQLiteSink(path)
    import pandas as pd

    base = 1_700_000_000.0 - 1_700_000_000.0 % 60
    for batch in range(10):
        frame = pd.DataFrame({"batch_id": batch, "partition": [0, 1, None], "time": base + batch * 15,
                              "name": ["lag_ms", "lag_ms", "results"], "value": [batch, 2 * batch, 10.0]})
        sink.write(batch, BatchRows(pd.DataFrame(), pd.DataFrame(), None, frame))
    taken = expiry.downsample_metrics(f"sqlite:{path}", base + 120 + 7)  # minutes 0 and 1 are whole
    assert taken == 8 * 3
    db = sqlite3.connect(path)
    assert db.execute("SELECT COUNT(*), MIN(time) FROM metrics").fetchone() == (6, base + 120)
    rows = db.execute("SELECT minute, partition, name, batches, total, low, high FROM metrics_minutes "
                      "ORDER BY minute, name, partition").fetchall()
    assert set(rows) >= {(base, None, "results", 4, 40.0, 10.0, 10.0), (base, 0, "lag_ms", 4, 6.0, 0.0, 3.0),
                         (base, 1, "lag_ms", 4, 12.0, 0.0, 6.0)}
    assert len(rows) == 6
    assert expiry.expire_minutes(f"sqlite:{path}", base + 60 + 60) == 3  # minute 0 is past
    assert db.execute("SELECT MIN(minute) FROM metrics_minutes").fetchone()[0] == base + 60


def test_file_sinks_expire_their_batch_files(tmp_path):
    import pandas as pd

    spec = f"parquet:{tmp_path / 'results'}"
    sink = open_sink(spec)
    for batch in range(4):
        results = pd.DataFrame({"stream": "w.A", "ts": [batch * 1000, batch * 1000 + 500], "window_start": None,
                                "window_end": None, "value": 1.0, "version": 1, "plan_version": 1})
        late = pd.DataFrame({"sensor_id": "S1", "ts": [batch * 1000], "value": 1.0, "watermark": 0, "streams": "w.A",
                             "batch_id": batch, "too_late": 0})
        metrics = pd.DataFrame({"batch_id": batch, "partition": [0], "time": 600.0 + batch, "name": "lag_ms",
                                "value": 1.0})
        sink.write(batch, BatchRows(results, pd.DataFrame(), late, metrics))
    for path in (tmp_path / "metrics").glob("*.csv"):  # written when their rows say (time 600 s)
        os.utime(path, (600, 600))
    assert expiry.expire_results(tmp_path, spec, 2000, {"w.A"}) == 2
    assert sorted(p.name for p in (tmp_path / "results").glob("*.parquet")) == ["batch-000002.parquet",
                                                                                "batch-000003.parquet"]
    assert expiry.expired_before(tmp_path) == 2000
    assert expiry.expire_late(spec, 1500) == 2
    assert expiry.downsample_metrics(spec, 700.0) == 4
    assert not list((tmp_path / "metrics").glob("*.csv"))
    minutes = pd.read_csv(next((tmp_path / expiry.MINUTES_FOLDER).glob("*.csv")))
    assert minutes["batches"].tolist() == [4] and minutes["minute"].tolist() == [600.0]
    with pytest.raises(ValueError, match="cannot expire from the CSV sink"):
        expiry.check(f"csv:{tmp_path / 'r.csv'}", 1000)


def test_retain_is_checked_in_the_users_words():
    assert retention.parse(["archive=7d", "results=forever"]) == {"archive": "7d", "results": "forever"}
    assert retention.resolve({"archive": "2d"}, {"late": "1h"})["archive"] == 2 * 86_400_000
    assert retention.resolve()["results"] is None
    for wrong, said in (("archiv=7d", "STORE=DURATION"), ("archive=7 days", "not a duration"),
                        ("archive=0s", "longer than 0")):
        with pytest.raises(ValueError, match=said):
            retention.parse([wrong])


@pytest.mark.spark
def test_a_live_query_started_anew_every_few_batches_loses_and_doubles_nothing(spark, tmp_path):
    """A live run whose query is stopped between batches and started again every 3 batches (what
    bounds Spark's RocksDB snapshots: run_options.REFRESH_AFTER), drained at the end: every reading
    counted once, the results equal the reference over the readings that came on time, and each
    state store's newest snapshot holds a MANIFEST written anew (small: it grows by about 186 bytes
    a batch while a store stays open, 10 KB after 55 batches), not one grown over every batch."""
    from sensorscript.runtime.control.stopping import request_stop

    (tmp_path / "w.ss").write_text(SCRIPT)
    job = compile_workflows([str(tmp_path / "w.ss")], tmp_path / "out", partitions=2)
    lines, _ = twelve_hours(tmp_path / "data")
    said, done = [], []
    runner = threading.Thread(target=lambda: done.append(run_local(
        job.out, str(tmp_path / "data"), False, None, spark=spark, echo=said.append, max_files_per_trigger=1,
        input_cleanup="keep", refresh_after=3)))
    runner.start()
    deadline = time.monotonic() + 600
    while not (job.out / "status.json").exists() or read_status(job.out)["totals"].get("readings", 0) < len(lines):
        assert runner.is_alive() and time.monotonic() < deadline, "\n".join(said[-5:])
        time.sleep(0.5)
    request_stop(job.out, "drain")
    runner.join(300)
    assert done and done[0].outcome == "ended", "\n".join(said[-5:])
    restarts = [line for line in said if line.startswith("after 3 batches the query starts anew")]
    assert len(restarts) >= 5
    assert done[0].readings == len(lines)
    # The reference reads the files a batch each (max_files_per_trigger=1), in their order, with the
    # plan's partitions and the compiled watermark (fixed:0): its late readings are the late table's.
    batches = [path.read_text().splitlines() for path in sorted((tmp_path / "data").glob("part-*.csv"))]
    expected = evaluate(load([str(tmp_path / "w.ss")]).workflows, batches, 0, job.plan.partitions.sensor_partition)
    db = sqlite3.connect(job.out / "results.db")
    assert db.execute("SELECT COUNT(*) FROM late").fetchone()[0] == expected.late > 0
    assert_same(sqlite_results(job.out / "results.db"), expected_rows(expected))
    import zipfile

    stores = [p for p in (job.out / "checkpoint" / "state" / "state").glob("*/*") if p.name.isdigit()]
    assert len(stores) == 4  # two operators, two partitions
    for store in stores:
        newest = max(store.glob("*.zip"), key=lambda p: int(p.stem))
        with zipfile.ZipFile(newest) as snapshot:
            manifest = [i.file_size for i in snapshot.infolist() if i.filename.startswith("MANIFEST")]
        assert manifest and manifest[0] < 4_000, (store, manifest)
