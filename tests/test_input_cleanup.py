"""What becomes of a folder's files once read (`--input-cleanup keep|delete|archive:DIR`, issue #27
item 3): on real Spark, delete and archive take only files of committed batches, a live run stopped
and continued loses and doubles nothing, keep keeps; a bad archive folder is refused before Spark
starts, in one sentence."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from sensorscript.cli import main
from sensorscript.compiler import compile_workflows
from sensorscript.parser import load
from sensorscript.registry import read_csv
from sensorscript.runtime.control import run_input
from sensorscript.runtime.control.stopping import request_stop
from sensorscript.runtime.ingest import source
from sensorscript.running import run_local
from sensorscript.workload import write_readings
from tests.conftest import ROOT
from tests.differential import assert_same, expected_rows, result_rows, write_replay
from oracles.streams import evaluate

EXAMPLES = [ROOT / "workflows" / n for n in ("bridge.ss", "bridge_limits.ss", "deck_vibration.ss")]
SENSORS = ROOT / "workflows" / "sensors.csv"
FILES = 6
TIMEOUT = 300


@pytest.fixture
def fleet(tmp_path) -> tuple[Path, list[list[str]]]:
    """The compiled examples and six files of readings in time order (nothing late, so the results
    do not depend on how the files fall into batches)."""
    write_readings(read_csv(SENSORS), tmp_path / "gen", seconds=120, files=1, bad_lines=2)
    lines = (tmp_path / "gen" / "readings-000.csv").read_text().splitlines()
    step = -(-len(lines) // FILES)
    compile_workflows([str(f) for f in EXAMPLES], tmp_path / "out", str(SENSORS), 2)
    return tmp_path / "out", [lines[k:k + step] for k in range(0, len(lines), step)]


def reference(batches: list[list[str]]) -> list:
    return expected_rows(evaluate(load([str(f) for f in EXAMPLES]).workflows, [[l for b in batches for l in b]]))


def committed_files(out: Path, data: Path) -> set[Path]:
    """The files of `data` the checkpoint's committed batches read (the drop-folder source's offsets,
    or Spark's file source log)."""
    state = out / "checkpoint" / "state"
    upto = source._last_committed(state, everything=False)
    found = {Path(path) for batch, files in source._drop_offsets(state).items() if batch <= upto
             for path, _, _ in files}
    if found:
        return found
    for index, files in source._source_logs(state).items():
        upto = source._committed_log_offset(state, index)
        found = {path for batch, paths in files.items() if batch <= upto for path in paths}
        if any(data.resolve() in path.parents for path in found):
            return found
    return set()


def stop_when(out: Path, mode: str, done) -> threading.Thread:
    """A thread that asks the job in `out` to stop (`mode`) once its status satisfies `done`."""
    def watch() -> None:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            path = out / "status.json"
            try:
                status = json.loads(path.read_text()) if path.exists() else {}
            except ValueError:  # being written
                status = {}
            if done(status):
                request_stop(out, mode)
                return
            time.sleep(0.2)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.mark.spark
def test_a_live_run_deletes_what_it_committed_and_continues_exactly(spark, fleet, tmp_path):
    """The default of a live run: delete. Stopped after two batches, only files of committed batches
    are gone; continued and drained, every file is gone and the results equal one run's over all."""
    out, batches = fleet
    data = write_replay(tmp_path / "data", batches)
    lines = sum(map(len, batches))
    said: list[str] = []

    stop_when(out, "boundary", lambda s: (s.get("last_batch") or 0) >= 2)
    first = run_local(out, str(data), False, None, spark=spark, echo=said.append, max_files_per_trigger=1)
    assert first.outcome == "stopped"
    assert any("deleted once the batch that read them is committed" in line for line in said)
    committed = committed_files(out, data)
    every = {(data / f"part-{k:03d}.csv").resolve() for k in range(FILES)}
    present = {p.resolve() for p in data.iterdir()}
    assert every - present and present  # some deleted, some still to read
    assert every - present <= committed  # only files of committed batches
    assert every - committed <= present  # none that a committed batch did not read
    # Read by the drop-folder source: no log of every file read (Spark's file source keeps one).
    assert (out / "checkpoint" / "input-source").read_text().split()[0] == "drop"
    assert not any(source._source_logs(out / "checkpoint" / "state").get(0, {}).values())

    keys = ("readings", "unread", "quarantined", "skipped")
    stop_when(out, "drain", lambda s: sum(s.get("totals", {}).get(k, 0) for k in keys) >= lines)
    second = run_local(out, str(data), False, None, spark=spark, echo=said.append, max_files_per_trigger=1)
    assert second.outcome == "ended"
    assert not list(data.iterdir())  # the last batch's files too (Spark would clean them with a next batch)
    assert_same(result_rows(out), reference(batches))


@pytest.mark.spark
def test_keep_archive_and_delete_of_a_bounded_run(spark, fleet, tmp_path):
    """--once by default keeps the files read; with archive:DIR it moves every one under DIR at its own
    path (Spark's layout); with delete in a single batch (whose files Spark would leave) it deletes
    them all. The results are exact each time."""
    out, batches = fleet
    data = write_replay(tmp_path / "data", batches)
    before = {p.name: p.read_bytes() for p in data.iterdir()}
    kept = run_local(out, str(data), True, None, spark=spark, echo=lambda *_: None, max_files_per_trigger=2)
    assert kept.outcome == "ended" and {p.name: p.read_bytes() for p in data.iterdir()} == before
    assert_same(result_rows(out), reference(batches))

    shelf = tmp_path / "read"
    moved = run_local(out, str(data), True, None, spark=spark, echo=lambda *_: None, max_files_per_trigger=2,
                      input_cleanup=f"archive:{shelf}")
    assert moved.outcome == "ended" and not list(data.iterdir())
    archived = shelf / str(data.resolve()).lstrip(os.sep)
    assert {p.name: p.read_bytes() for p in archived.iterdir()} == before
    assert_same(result_rows(out), reference(batches))

    # The whole input in one batch, which carries the end of the input too: Spark would delete its
    # files only with a next batch, which never comes; the run loop deletes them.
    write_replay(data, batches)
    deleted = run_local(out, str(data), True, None, spark=spark, echo=lambda *_: None, input_cleanup="delete")
    assert deleted.outcome == "ended" and deleted.batches == 1 and not list(data.iterdir())
    assert_same(result_rows(out), reference(batches))


def test_a_bad_archive_folder_is_refused_before_spark_starts(tmp_path):
    compile_workflows([str(EXAMPLES[0])], tmp_path / "out", str(SENSORS), 1)
    (tmp_path / "data").mkdir()
    (tmp_path / "notes.txt").write_text("x\n")
    runner = CliRunner()
    for bad, says in ((tmp_path / "data" / "old", "must be outside the input folder"),
                      (tmp_path, "must be outside the input folder"),
                      (tmp_path / "notes.txt", "not a folder")):
        result = runner.invoke(main, ["run", str(tmp_path / "out"), "--input", str(tmp_path / "data"),
                                      "--input-cleanup", f"archive:{bad}"])
        assert result.exit_code == 1 and says in result.output and "Traceback" not in result.output, result.output
        assert len([line for line in result.output.splitlines() if line.startswith("error")]) == 1
    result = runner.invoke(main, ["run", str(tmp_path / "out"), "--input", str(tmp_path / "data"),
                                  "--input-cleanup", "shred"])
    assert result.exit_code == 2 and "expected keep, delete or archive:DIR" in result.output
    assert not (tmp_path / "out" / "checkpoint").exists()


def test_the_default_deletes_a_live_feed_and_keeps_a_replay():
    assert source.input_cleanup(None, "data", once=False) == "delete"
    assert source.input_cleanup(None, "data", once=True) == "keep"
    assert source.input_cleanup(None, "kafka://b:9092/t", once=False) == "keep"
    with pytest.raises(ValueError, match="for a folder of files"):
        source.input_cleanup("delete", "socket://127.0.0.1:9999", once=False)


def test_a_job_compiled_before_keeps_its_files_and_says_so():
    """A job.py whose build_query does not hand the cleanup to read_input (compiled before it
    existed) cannot delete: the run keeps the files and says so."""
    def old_build_query(spark, input_path, control_path, max_files_per_trigger=None, job=None):
        return source.read_input(spark, input_path, max_files_per_trigger)

    def new_build_query(spark, input_path, control_path, max_files_per_trigger=None, job=None):
        return source.read_input(spark, input_path, max_files_per_trigger, cleanup=job.input_cleanup)

    said: list[str] = []
    assert run_input._input_cleanup(old_build_query, None, "data", False, said.append) == "keep"
    assert "compiled before --input-cleanup" in said[0] and "kept" in said[0]
    assert run_input._input_cleanup(new_build_query, None, "data", False, said.append) == "delete"


@pytest.mark.spark
def test_a_live_feed_killed_mid_feed_reads_every_file_once(fleet, tmp_path):
    """`sscript run` on a drop folder fed three files, SIGKILLed as batch 2 is written (its job's
    process group: driver, JVM, workers), fed three more and started again, then drained: each file
    was read by exactly one micro-batch (the offset log), the results equal the reference over all
    the data (a file read twice or lost would change them), and the folder is empty."""
    from tests.test_restart import Run  # the CLI in a child session, killed by process group

    out, batches = fleet
    staged = write_replay(tmp_path / "staged", batches)  # moved in as the feed delivers them
    data = tmp_path / "data"
    data.mkdir()

    def deliver(indices) -> None:
        for k in indices:
            os.rename(staged / f"part-{k:03d}.csv", data / f"part-{k:03d}.csv")

    deliver(range(3))
    runs = [Run(out, data, cleanup="delete")]
    try:
        runs[0].wait_for_status(lambda s: (s.get("last_batch") or 0) >= 2, "batch 2")
        runs[0].kill()
        deliver(range(3, FILES))
        runs.append(Run(out, data, cleanup="delete"))
        output = runs[1].drain(sum(map(len, batches)))
    finally:
        for run in runs:
            run.cleanup()
    assert "continuing from the checkpoint" in output
    state = out / "checkpoint" / "state"
    # A batch in which the folder had nothing new logs the offset before it again: one read.
    offsets = {tuple(map(tuple, files)) for files in source._drop_offsets(state).values()}
    read = [Path(path).name for files in offsets for path, _, _ in files]
    assert sorted(read) == [f"part-{k:03d}.csv" for k in range(FILES)]  # each in one batch: none twice, none lost
    assert not list(data.iterdir())
    assert_same(result_rows(out), reference(batches))
