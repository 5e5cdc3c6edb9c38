"""`sscript run --cluster` against a real Spark standalone master and worker (from the pyspark package).

The module fixture starts a master and one worker on 127.0.0.1 (free ports, logs in a tmp
dir, each in its own process group) and kills both process groups afterwards, even when the
test fails. The test compiles the example workflows, submits the job with the CLI in a
subprocess, and compares its SQLite results with the reference evaluator row for row.
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sensorscript.compiler import compile_workflows
from sensorscript.parser import load
from sensorscript.reference import evaluate
from sensorscript.registry import read_csv
from sensorscript.workload import write_readings
from tests.conftest import ROOT
from tests.differential import assert_same, expected_rows

pytestmark = pytest.mark.cluster

WORKFLOWS = [ROOT / "workflows" / name for name in ("bridge.ss", "deck_vibration.ss")]
SENSORS = ROOT / "workflows" / "sensors.csv"
REGISTER_TIMEOUT = 90
SUBMIT_TIMEOUT = 400


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _free_ports(count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        port = _free_port()
        if port not in ports:
            ports.append(port)
    return ports


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return f"(no {path})"


def _spark_environment(spark_home: Path) -> dict[str, str]:
    return {**os.environ, "SPARK_HOME": str(spark_home), "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable}


def _stop_group(process: subprocess.Popen, grace: float = 20) -> None:
    """SIGTERM the process group of `process`, wait, then SIGKILL whatever is left of it."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    # The group may outlive its leader (executors, Python workers): kill what remains.
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


class Cluster:
    def __init__(self, url: str, work_dir: Path, logs: Path):
        self.url = url
        self.work_dir = work_dir
        self.logs = logs


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A standalone Spark master and one worker (2 cores, 2 GB) on 127.0.0.1; yields a Cluster."""
    import pyspark

    spark_home = Path(pyspark.__file__).resolve().parent
    spark_class = spark_home / "bin" / "spark-class"
    assert spark_class.exists(), f"{spark_class} missing from the pyspark package"
    base = tmp_path_factory.mktemp("cluster")
    work_dir = base / "work"
    work_dir.mkdir()
    port, master_ui, worker_ui = _free_ports(3)
    url = f"spark://127.0.0.1:{port}"
    environment = _spark_environment(spark_home)
    master_log, worker_log = base / "master.log", base / "worker.log"

    processes: list[subprocess.Popen] = []

    def start(command: list[str], log: Path) -> subprocess.Popen:
        with open(log, "wb") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env=environment, cwd=base, start_new_session=True)
        processes.append(process)
        return process

    try:
        master = start([str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                        "--port", str(port), "--webui-port", str(master_ui)], master_log)
        worker = start([str(spark_class), "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                        "--cores", "2", "--memory", "2g", "--webui-port", str(worker_ui),
                        "--work-dir", str(work_dir)], worker_log)
        deadline = time.monotonic() + REGISTER_TIMEOUT
        while "Registering worker" not in master_log.read_text(errors="replace"):
            for name, process, log in (("master", master, master_log), ("worker", worker, worker_log)):
                if process.poll() is not None:
                    pytest.fail(f"Spark {name} exited with {process.returncode} before the worker "
                                f"registered; {log}:\n{_tail(log)}")
            if time.monotonic() > deadline:
                pytest.fail(f"no worker registered with {url} within {REGISTER_TIMEOUT} s;\n"
                            f"{master_log}:\n{_tail(master_log)}\n{worker_log}:\n{_tail(worker_log)}")
            time.sleep(0.5)
        yield Cluster(url, work_dir, base)
    finally:
        for process in reversed(processes):  # the worker (and its executors) first, then the master
            _stop_group(process)


def _run_cli(arguments: list[str], logs: Path, timeout: float) -> tuple[int, str]:
    """`python -m sensorscript.cli ARGUMENTS` in its own process group; the group is killed afterwards."""
    import pyspark

    stdout, stderr = logs / "submit.out", logs / "submit.err"
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        process = subprocess.Popen([sys.executable, "-m", "sensorscript.cli", *arguments], stdout=out,
                                   stderr=err, stdin=subprocess.DEVNULL, cwd=ROOT, start_new_session=True,
                                   env=_spark_environment(Path(pyspark.__file__).resolve().parent))
    try:
        code = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        _stop_group(process, grace=5)  # spark-submit's driver JVM must not outlive the test
    output = f"stdout:\n{_tail(stdout)}\nstderr:\n{_tail(stderr, 60)}"
    if code is None:
        pytest.fail(f"sscript run did not finish within {timeout} s;\n{output}")
    return code, output


def test_examples_on_a_standalone_cluster_agree_with_the_reference(cluster, tmp_path):
    out, data = tmp_path / "out", tmp_path / "data"
    compile_workflows([str(f) for f in WORKFLOWS], out, str(SENSORS), 2)
    write_readings(read_csv(SENSORS), data, seconds=600, files=1, bad_lines=3)
    lines = [line for path in sorted(data.iterdir()) for line in path.read_text().splitlines()]

    code, output = _run_cli(["run", str(out), "--cluster", cluster.url, "--input", str(data), "--once"],
                            tmp_path, SUBMIT_TIMEOUT)
    assert code == 0, f"sscript run --cluster exited with {code};\n{output}"

    # The application ran on the cluster: the worker launched its executors in an app-* directory.
    apps = sorted(p.name for p in cluster.work_dir.glob("app-*"))
    assert apps, f"no app-* directory in the worker's work dir {cluster.work_dir};\n" \
                 f"master log:\n{_tail(cluster.logs / 'master.log')}"
    assert "Registering app" in (cluster.logs / "master.log").read_text(errors="replace")
    executor_logs = "".join(p.read_text(errors="replace") for p in cluster.work_dir.glob("app-*/*/stderr"))
    assert "Running task" in executor_logs, "the cluster's executors ran no tasks"

    evaluation = evaluate(load([str(f) for f in WORKFLOWS]).workflows, [lines])
    assert len(evaluation.rows) > 100
    db = sqlite3.connect(out / "results.db")
    try:
        actual = sorted(db.execute("SELECT stream, ts, window_start, window_end, value FROM results"))
        assert_same(actual, expected_rows(evaluation))
        quarantine = sorted(db.execute("SELECT raw, reason FROM quarantine"))
    finally:
        db.close()
    assert len(quarantine) == len(evaluation.quarantine) == 3
    assert quarantine == sorted(evaluation.quarantine)
