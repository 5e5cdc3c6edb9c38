"""`sscript run --cluster` against a real Spark standalone master and workers (from the pyspark package).

The fixtures start a master and workers on 127.0.0.1 (free ports, logs in a tmp dir, each in its
own process group) and kill every process group afterwards, even when a test fails:
`two_workers` for a test that kills one of them. It compiles the example workflows, submits the
job with the CLI in a subprocess, kills a worker during the run and compares the results with the
reference evaluator row for row. The examples on a cluster whose workers are hosts of their own,
through Kafka on both sides, its output and Spark's log: tests/test_cluster_hosts.py.
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from sensorscript.compiler import compile_workflows
from sensorscript.registry import read_csv
from sensorscript.workload import write_readings
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
from standalone import ClusterFailed, Worker, spark_environment, standalone, stop_group, tail  # noqa: E402

pytestmark = pytest.mark.cluster

WORKFLOWS = [ROOT / "workflows" / name for name in ("bridge.ss", "deck_vibration.ss")]
SENSORS = ROOT / "workflows" / "sensors.csv"
REGISTER_TIMEOUT = 90
SUBMIT_TIMEOUT = 400
REPLAY_FILES = 6  # micro-batches of the worker-death test


@contextmanager
def _standalone(base: Path, workers: list[tuple[int, str]]):
    """scripts/standalone.py's cluster; one that does not come up fails the test with its logs."""
    try:
        with standalone(base, workers, REGISTER_TIMEOUT) as started:
            yield started
    except ClusterFailed as exc:
        pytest.fail(str(exc))


@pytest.fixture
def two_workers(tmp_path_factory):
    """A master and two workers (1 core, 2 GB each): a test may kill one of them."""
    with _standalone(tmp_path_factory.mktemp("cluster"), [(1, "2g"), (1, "2g")]) as started:
        yield started


def _start_cli(arguments: list[str], logs: Path, environment: dict[str, str] | None = None):
    """`python -m sensorscript.cli ARGUMENTS` in its own process group, its output in LOGS/submit.out
    and submit.err; returns the process and those two paths."""
    stdout, stderr = logs / "submit.out", logs / "submit.err"
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        process = subprocess.Popen([sys.executable, "-m", "sensorscript.cli", *arguments], stdout=out,
                                   stderr=err, stdin=subprocess.DEVNULL, cwd=ROOT, start_new_session=True,
                                   env=environment or spark_environment())
    return process, stdout, stderr


def _executor_log(worker: Worker) -> str:
    """The logs of every executor the worker started."""
    return "".join(p.read_text(errors="replace") for p in sorted(worker.work_dir.glob("app-*/*/stderr")))


def _tasks(worker: Worker) -> tuple[dict[str, str], dict[str, str]]:
    """The tasks the worker's executors started and those still running, {task id: "task 0.0 in stage
    7.0"} (executors log both at INFO)."""
    log = _executor_log(worker)
    started = {tid: task for task, tid in re.findall(r"Running (task \S+ in stage \S+) \(TID (\d+)\)", log)}
    ended = set(re.findall(r"(?:Finished task|Executor killed task|Exception in task) .*?\(TID (\d+)\)", log))
    return started, {tid: task for tid, task in started.items() if tid not in ended}


def _descendants(pid: int) -> list[int]:
    """PID and every process below it (from /proc), parents first."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):  # gone meanwhile
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, stack = [], [pid]
    while stack:
        found.append(stack.pop(0))
        stack.extend(sorted(children.get(found[-1], ())))
    return found


def _command_line(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _living(pids: list[int]) -> list[str]:
    """`ps` lines of those PIDS that still run (a zombie is dead: it only waits to be reaped)."""
    listed = subprocess.run(["ps", "-o", "pid=,stat=,args=", "-p", ",".join(map(str, pids))],
                            capture_output=True, text=True).stdout
    return [line.strip()[:200] for line in listed.splitlines() if not line.split()[1].startswith("Z")]


def _kill_worker(worker: Worker) -> dict[int, str]:
    """SIGKILL a worker as a machine's crash would: the Worker JVM, its executor JVMs and their Python
    workers (PySpark's daemon puts those in a process group of their own). Returns {pid: command line}."""
    os.killpg(worker.process.pid, signal.SIGSTOP)  # the JVMs start nothing new while their tree is read
    victims = {pid: _command_line(pid) for pid in _descendants(worker.process.pid)}
    groups = set()
    for pid in victims:
        try:
            groups.add(os.getpgid(pid))
        except ProcessLookupError:
            pass
    for group in sorted(groups):
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass
    worker.process.wait(timeout=30)
    return victims


# A driver of anyone's on the cluster's master without its secret, as an intruder on the master's port
# submits; the master refuses it at once (and would take the application only after its handshake).
INTRUDER = """
import sys
from pyspark.sql import SparkSession
SparkSession.builder.master(sys.argv[1]).config("spark.ui.enabled", "false").getOrCreate()
print("admitted", flush=True)
"""


def _refused_without_the_secret(cluster, tmp_path: Path) -> None:
    """A driver without the cluster's secret is refused by its master, and no application of it registers."""
    log = tmp_path / "intruder.log"
    with open(log, "wb") as out:
        intruder = subprocess.Popen([sys.executable, "-c", INTRUDER, cluster.url], stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True, env=spark_environment())
    try:
        deadline = time.monotonic() + REGISTER_TIMEOUT
        while "Expected SaslMessage" not in log.read_text(errors="replace"):
            assert intruder.poll() is None and time.monotonic() < deadline, tail(log)
            time.sleep(0.2)
    finally:
        stop_group(intruder, grace=1)
    assert "admitted" not in log.read_text(errors="replace")
    assert "Registered app" not in (cluster.logs / "master.log").read_text(errors="replace")


def test_a_worker_killed_during_a_run_the_job_finishes_on_the_other_exactly(two_workers, tmp_path):
    """Every example workflow (both stateful operators: a cut edge gives a second stage) over a replay
    of several micro-batches on two workers. Once batches are written and both executors run tasks,
    one worker is killed with everything it started while its executor runs a task. The run goes on
    with the product's own settings on the other worker: exit 0, and the results are the reference
    evaluator's, row for row (a lost or repeated batch would show as missing or duplicate rows).

    The cluster admits only its own: a driver without its secret is refused first; the job, given
    the secret's file, runs authenticated and encrypted, and the secret is in no process's command
    line while it runs, nor in what the run, its executors and Spark write."""
    from sensorscript.codegen.program import programs
    from sensorscript.runtime.control.run_input import order_by_name
    from tests.cep_harness import reference_rows, same_rows
    from tests.conftest import EXAMPLES

    out, data = tmp_path / "out", tmp_path / "data"
    compiled = compile_workflows([str(f) for f in EXAMPLES], out, str(SENSORS), 2)
    assert any(second is not None for second in programs(compiled.plan)[1])  # transformWithStateInPandas too
    write_readings(read_csv(SENSORS), data, seconds=600, files=REPLAY_FILES, bad_lines=3)
    order_by_name(data)  # one file per micro-batch, in name (and event-time) order
    batches = [path.read_text().splitlines() for path in sorted(data.iterdir())]

    # The product as a user runs it, with Spark's warnings and errors in its output (the driver's
    # account of the lost executor), and without this sandbox's PYTHONUNBUFFERED: progress must
    # come through as it happens on its own.
    environment = {key: value for key, value in spark_environment().items()
                   if key != "PYTHONUNBUFFERED"}
    environment["SSCRIPT_SPARK_LOG"] = "WARN"
    survivor, victim = two_workers.workers
    master_log = two_workers.logs / "master.log"
    _refused_without_the_secret(two_workers, tmp_path)
    secret = two_workers.secret.read_text().strip()
    process, stdout, stderr = _start_cli(["run", str(out), *two_workers.run_options(), "--input", str(data),
                                          "--once", "--max-files-per-trigger", "1"], tmp_path, environment)

    def output() -> str:
        parts = [f"sscript run's stdout:\n{tail(stdout, 80)}", f"its stderr:\n{tail(stderr, 40)}",
                 f"{master_log}:\n{tail(master_log)}"]
        for worker in two_workers.workers:
            parts.append(f"{worker.log}:\n{tail(worker.log, 15)}\nits executors:\n"
                         + "\n".join(_executor_log(worker).splitlines()[-25:]))
        return "\n".join(parts)

    def written() -> list[str]:
        # Not anchored: the JVM's log lines share the stream and may run into a line of ours.
        return re.findall(r"batch (\d+): [\d,]+ readings", stdout.read_text(errors="replace"))

    try:
        # The kill: after the first batches, while both executors have run tasks and the victim's
        # runs one now (its shuffle files, its state stores' instances and that task die with it).
        deadline = time.monotonic() + SUBMIT_TIMEOUT
        while not (len(written()) >= 2 and _tasks(survivor)[0] and _tasks(victim)[1]):
            if process.poll() is not None:
                pytest.fail(f"the run ended (exit {process.returncode}) before a worker could be killed "
                            f"during it;\n{output()}")
            if time.monotonic() > deadline:
                pytest.fail(f"no point to kill a worker within {SUBMIT_TIMEOUT} s;\n{output()}")
            time.sleep(0.1)
        before = len(written())
        shown = [pid for pid in os.listdir("/proc") if pid.isdigit() and secret in _command_line(int(pid))]
        assert not shown, f"the cluster's secret is on the command line of {shown}"
        survivor_tasks = len(_tasks(survivor)[0])
        in_flight = sorted(_tasks(victim)[1].values())
        killed_at = time.monotonic()
        victims = _kill_worker(victim)
        executors = [pid for pid, command in victims.items() if "CoarseGrainedExecutorBackend" in command]
        pythons = [pid for pid, command in victims.items() if Path(command.split(" ", 1)[0]).name.startswith("python")]
        assert executors and pythons, f"the victim worker had no executor or Python worker running: {victims}"
        deadline = time.monotonic() + 30
        while _living(list(victims)):
            assert time.monotonic() < deadline, f"still alive 30 s after SIGKILL: {_living(list(victims))}"
            time.sleep(0.2)

        # Spark's account of the loss, then the end of the run.
        noticed = batch_after = None
        deadline = time.monotonic() + SUBMIT_TIMEOUT
        while process.poll() is None:
            text = stdout.read_text(errors="replace")
            if noticed is None and "Lost executor" in text:
                noticed = time.monotonic() - killed_at
            if batch_after is None and len(written()) > before:
                batch_after = time.monotonic() - killed_at
            if time.monotonic() > deadline:
                pytest.fail(f"sscript run did not finish within {SUBMIT_TIMEOUT} s of the kill;\n{output()}")
            time.sleep(0.1)
        finished = time.monotonic() - killed_at
        assert process.returncode == 0, f"sscript run --cluster exited with {process.returncode};\n{output()}"
    finally:
        stop_group(process, grace=5)  # spark-submit's driver JVM must not outlive the test

    text = stdout.read_text(errors="replace")
    assert "(authenticated by its secret, encrypted)" in text, output()
    written_by_the_run = [stdout, stderr, master_log, *(w.log for w in two_workers.workers),
                          *(path for w in two_workers.workers for path in w.work_dir.rglob("std*")),
                          *(path for path in out.rglob("*") if path.is_file() and path.suffix in (".json", ".log", ""))]
    assert not [path for path in written_by_the_run if secret in path.read_text(errors="replace")]
    # Spark noticed (the master lost the worker, the driver its executor) and the run went on
    # without it: the surviving executor ran the rest, and every batch was written.
    assert "Telling app of lost worker" in master_log.read_text(errors="replace"), output()
    assert "Lost executor" in text, output()
    assert len(_tasks(survivor)[0]) > survivor_tasks, output()
    assert {int(b) for b in written()} == set(range(REPLAY_FILES + 1)), output()  # and the end of input
    print(f"killed worker {victim.work_dir.name} ({len(victims)} processes: executor {executors}, Python "
          f"{pythons}) after batch {before - 1} with {in_flight} running on it; the driver noticed after "
          f"{noticed if noticed is None else round(noticed, 2)} s, wrote the next batch after "
          f"{batch_after if batch_after is None else round(batch_after, 1)} s, finished {finished:.1f} s after the kill")
    print("\n".join(re.findall(r"batch \d+: [^\n]*? to write\)", text)))

    expected, evaluation = reference_rows({f.stem: f.read_text() for f in EXAMPLES}, batches, plan=compiled.plan)
    assert len(expected) > 100
    db = sqlite3.connect(out / "results.db")
    try:
        rows = [tuple(r) for r in db.execute("SELECT stream, ts, window_start, window_end, value, start_ts, end_ts, "
                                             "events FROM results")]
        quarantine = sorted(db.execute("SELECT raw, reason FROM quarantine"))
    finally:
        db.close()
    same_rows(rows, expected)
    assert any(r[7] for r in rows)  # pattern matches among them
    assert quarantine == sorted(evaluation.quarantine) and len(quarantine) == 3


def test_an_executor_killed_while_archiving_leaves_nothing_the_archive_reader_trips_over(tmp_path, monkeypatch):
    """Late policy correct: stage 1 archives readings on the executors. One killed between writing a
    file and moving it into place leaves the file behind, hidden; the archive's reader (a
    correction's, a backfill's) must neither fail on it nor count it."""
    import numpy as np

    from sensorscript.runtime.ingest import archive

    folder, hour = tmp_path / "archive", archive.HOUR_MS

    def killed(*_):
        raise SystemExit("killed before the rename")

    monkeypatch.setattr(archive.os, "replace", killed)
    with pytest.raises(SystemExit):
        archive.write(str(folder), 0, 0, np.array([1]), np.array([hour + 5]), np.array([9.0]))
    monkeypatch.undo()
    assert [p for p in folder.rglob("*") if p.is_file()]  # what the dead writer left
    archive.write(str(folder), 1, 0, np.array([2, 2]), np.array([hour + 1, hour + 2]), np.array([1.0, 2.0]))

    code, ts, value = archive.read(folder, {1: "a", 2: "b"}, hour, 2 * hour)
    assert (list(code), list(ts), list(value)) == ([2, 2], [hour + 1, hour + 2], [1.0, 2.0])
    assert archive.earliest(folder) == hour
