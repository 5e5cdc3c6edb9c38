"""A continuous job killed, interrupted and stopped, each time started again on its folder: nothing
lost, nothing doubled (issue: reliability). Real Spark in child processes started through the CLI,
as a user runs them; the results are compared with the reference evaluator row for row.

The job is every bundled workflow (shared windows, a cut edge and so a second stage, arithmetic,
patterns with negation, Kleene closures and partition by sensor) over a disordered replay of eight
files read one per micro-batch, so some readings come late and go to the late store.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlparse

import pytest

from sensorscript.compiler import compile_workflows
from sensorscript.runtime.plan.loading import load_job
from sensorscript.runtime.output.status import alive
from tests.cep_harness import reference_rows, same_rows
from tests.conftest import EXAMPLES, ROOT
from tests.differential import disordered_replay, write_replay

pytestmark = pytest.mark.spark

SENSORS = ROOT / "workflows" / "sensors.csv"
FILES = 8
DELAY_MS = 100  # the watermark: fixed:100
TIMEOUT = 300  # seconds a run may take to reach a point the test waits for


@pytest.fixture(scope="module")
def replay(tmp_path_factory) -> tuple[Path, list[list[str]]]:
    """The example fleet's disordered replay, eight files (tests/differential.py)."""
    folder = tmp_path_factory.mktemp("replay")
    batches = disordered_replay(folder, seed=11, files=FILES)
    data = folder / "data"
    return data, batches


class Run:
    """`sscript run OUT --input DATA --max-files-per-trigger 1` in a child process of its own
    session (as a terminal runs it: Ctrl-C reaches `sscript` only), its output collected. The files
    read are kept (`cleanup`; a live run's default deletes them): the tests read them again."""

    def __init__(self, out: Path, data: Path | str, bounded: bool = True, cleanup: str | None = "keep",
                 extra: tuple[str, ...] = ()):
        self.out = out
        self.began = time.time()
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sensorscript.cli", "run", str(out), "--input", str(data),
             *(["--max-files-per-trigger", "1"] if bounded else []),
             *(["--input-cleanup", cleanup] if cleanup else []), *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.process.stdout), daemon=True)
        self.reader.start()

    def wait_for(self, prefix: str) -> None:
        deadline = time.monotonic() + TIMEOUT
        while not any(line.startswith(prefix) for line in self.lines):
            assert self.process.poll() is None, f"the run ended before '{prefix}':\n{self.output()}"
            assert time.monotonic() < deadline, f"no '{prefix}' within {TIMEOUT} s:\n{self.output()}"
            time.sleep(0.2)

    def wait_for_status(self, what, waiting_for: str) -> dict:
        """Until the status this run's job writes (OUT/status.json, not one a run before left) satisfies `what`."""
        deadline = time.monotonic() + TIMEOUT
        while True:
            path = self.out / "status.json"
            status = json.loads(path.read_text()) if path.exists() else {}
            if status.get("started", 0) >= self.began and what(status):
                return status
            assert self.process.poll() is None, f"the run ended before {waiting_for}:\n{self.output()}"
            assert time.monotonic() < deadline, f"not {waiting_for} within {TIMEOUT} s:\n{self.output()}"
            time.sleep(0.2)

    def wait_for_lines(self, lines: int) -> None:
        """Until the job has taken `lines` lines in all, in this run and those before (a restart after
        a kill may take two files in one batch, so batch ids do not count files)."""
        keys = ("readings", "unread", "quarantined", "skipped")
        self.wait_for_status(lambda s: sum(s.get("totals", {}).get(k, 0) for k in keys) >= lines, f"{lines} lines")

    def drain(self, lines: int) -> str:
        """`sscript stop OUT --drain` once the job has taken all `lines` lines; the run's output."""
        self.wait_for_lines(lines)
        return self.stop_draining()

    def stop_draining(self) -> str:
        """`sscript stop OUT --drain` now, and the run ends; the run's output."""
        stopped = sscript("stop", str(self.out), "--drain")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert "its input ended after batch" in stopped.stdout
        assert self.finish() == 0, self.output()
        return self.output()

    def job_pid(self) -> int:
        return json.loads((self.out / "status.json").read_text())["pid"]

    def kill(self) -> None:
        """SIGKILL the job (its Python driver, the JVM, the Python workers) and `sscript` itself."""
        pid = self.job_pid()
        os.killpg(os.getpgid(pid), signal.SIGKILL)
        self.process.kill()
        self.process.wait(timeout=30)
        deadline = time.monotonic() + 30
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(pid)

    def finish(self) -> int:
        code = self.process.wait(timeout=TIMEOUT)
        self.reader.join(timeout=10)
        return code

    def output(self) -> str:
        return "".join(self.lines)

    def cleanup(self) -> None:
        for pid in (self.process.pid, *([self._status_pid()] if (self.out / "status.json").exists() else [])):
            try:
                os.killpg(os.getpgid(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def _status_pid(self) -> int:
        try:
            return self.job_pid()
        except (OSError, ValueError):
            return -1


def sscript(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sensorscript.cli", *arguments], capture_output=True, text=True,
                          timeout=TIMEOUT)


def result_rows(out: Path, table: str = "results") -> list[tuple]:
    db = sqlite3.connect(out / "results.db")
    return [tuple(r) for r in db.execute(f"SELECT stream, ts, window_start, window_end, value, start_ts, end_ts, "
                                         f"events FROM {table}")]


def compile_examples(out: Path, late: str):
    return compile_workflows([str(f) for f in EXAMPLES], out, str(SENSORS), 2, watermark=f"fixed:{DELAY_MS}",
                             late=late)


def batches_read(out: Path) -> list[list[str]]:
    """The lines each committed micro-batch took, as Spark's checkpoint records them: the offset log
    gives each batch the file source's log offset, the source log the files of each offset."""
    state = out / "checkpoint" / "state"
    files: dict[int, list[str]] = {}
    for log in (state / "sources" / "0").iterdir():  # the data source's (source 1 is the control folder)
        if not log.name.startswith("."):
            for line in log.read_text().splitlines()[1:]:
                entry = json.loads(line)
                files.setdefault(entry["batchId"], []).append(urlparse(entry["path"]).path)
    committed = sorted(int(p.name) for p in (state / "commits").iterdir() if p.name.isdigit())
    batches, read = [], -1
    for batch in committed:
        offset = (state / "offsets" / str(batch)).read_text().splitlines()[2]
        upto = read if offset == "-" else json.loads(offset)["logOffset"]
        batches.append([line for o in range(read + 1, upto + 1) for f in sorted(files[o])
                        for line in Path(f).read_text().splitlines()])
        read = upto
    return batches


def reading(line: str) -> tuple[str, int, float]:
    sensor, ts, value = line.split(",")
    return sensor, int(ts), float(value)


def test_killed_interrupted_and_drained_with_the_late_store(replay, tmp_path):
    """SIGKILL after batch 2, start again, Ctrl-C after batch 5, start again, read the rest, `sscript
    stop --drain`: the results equal the reference's over the same micro-batches (late readings
    left out), and the late store holds each late reading once."""
    data, batches = replay
    out = tmp_path / "out"
    compiled = compile_examples(out, late="log")
    runs = []
    try:
        first = Run(out, data)
        runs.append(first)
        first.wait_for("batch 2:")
        first.kill()
        assert "the process that ran it" in sscript("status", str(out)).stdout  # and how to continue

        second = Run(out, data)
        runs.append(second)
        second.wait_for("batch 5:")
        second.process.send_signal(signal.SIGINT)  # Ctrl-C in the terminal
        assert second.finish() == 0, second.output()
        said = second.output()
        assert "continuing from the checkpoint" in said and "stopping after the batch being written" in said
        assert "continues from here" in said and "Traceback" not in said
        assert "stopped at" in sscript("status", str(out)).stdout

        third = Run(out, data)
        runs.append(third)
        assert "every window and pending match was emitted" in third.drain(sum(map(len, batches)))
    finally:
        for run in runs:
            run.cleanup()

    read = batches_read(out)  # a restart after the kill may have taken two files in one batch
    assert sorted(line for batch in read for line in batch) == sorted(line for batch in batches for line in batch)
    scripts = {f.stem: f.read_text() for f in EXAMPLES}
    expected, evaluation = reference_rows(scripts, read, DELAY_MS, compiled.plan)
    same_rows(result_rows(out), expected)  # no row missing, none twice
    assert {row[0] for row in expected} >= {"pier_alarms.SURGE", "bridge.out_MZ"}
    db = sqlite3.connect(out / "results.db")
    late = Counter((s, t, v) for s, t, v in db.execute("SELECT sensor_id, ts, value FROM late"))
    fed = Counter(reading(line) for batch in batches for line in batch)
    assert sum(late.values()) == evaluation.late > 0
    assert all(count <= fed[key] for key, count in late.items())  # each late reading logged once
    batch_ids = [b for (b,) in db.execute("SELECT batch_id FROM sscript_batches ORDER BY batch_id")]
    assert batch_ids == list(range(len(batch_ids)))  # every batch written once, none skipped


def test_stop_says_when_no_job_runs(tmp_path):
    out = tmp_path / "out"
    never = sscript("stop", str(out))
    assert never.returncode == 1 and f"no such folder: {out}" in never.stderr and "Traceback" not in never.stderr


def test_a_checkpoint_of_another_plan_is_not_continued(tmp_path):
    """A folder compiled again with other workflows: its checkpoint's state belongs to the old plan,
    so a run says so (before Spark starts) instead of feeding it to the new one."""
    from sensorscript.runtime.control.run_loop import run
    from sensorscript.runtime.control.run_options import RunSettings

    out = tmp_path / "out"
    compile_workflows([str(EXAMPLES[0])], out, str(SENSORS), 2)
    commits = out / "checkpoint" / "state" / "commits"
    commits.mkdir(parents=True)
    (commits / "0").write_text("v1\n")
    (out / "checkpoint" / "plan").write_text("0" * 40 + "\n")
    with pytest.raises(ValueError, match="compiled again since its checkpoint was written.*--fresh"):
        run(load_job(out).JOB, None, RunSettings(out=out, input=str(tmp_path)))


def test_a_socket_feed_is_spooled_and_drained(replay, tmp_path):
    """socket://: the job reads the feed through its spool (a file per quarter second, deleted once
    committed), and `sscript stop --drain` ends it with the reference's results over every line."""
    import socket as sockets

    data, batches = replay
    lines = sorted((line for batch in batches for line in batch), key=lambda line: int(line.split(",")[1]))
    lines = lines[: len(lines) // 4]  # a minute of the fleet, in time order: nothing late
    out = tmp_path / "out"
    compiled = compile_workflows([str(f) for f in EXAMPLES], out, str(SENSORS), 2)
    server = sockets.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def serve() -> None:
        connection, _ = server.accept()
        for start in range(0, len(lines), 2000):
            connection.sendall(("\n".join(lines[start:start + 2000]) + "\n").encode())
            time.sleep(0.1)
        time.sleep(TIMEOUT)  # the feed stays open, as a live one does
        connection.close()

    threading.Thread(target=serve, daemon=True).start()
    read = set(load_job(out).JOB.sensors)
    wanted = sum(reading(line)[0] in read for line in lines)
    run = Run(out, f"socket://127.0.0.1:{port}", bounded=False)
    try:
        run.wait_for_status(lambda s: s.get("totals", {}).get("readings", 0) >= wanted, f"{wanted} readings")
        run.stop_draining()
    finally:
        run.cleanup()
        server.close()
    expected, _ = reference_rows({f.stem: f.read_text() for f in EXAMPLES}, [lines], 0, compiled.plan)
    same_rows(result_rows(out), expected)
    assert not list((out / "checkpoint" / "spool").glob("*.csv"))  # every spooled file committed and deleted
