"""`sscript run --cluster` with the driver, the workers and the brokers on test hosts of their own
(tests/hosts.py, issue #43): Spark's master on `driver`, a worker on `w1` and on `w2` that see
neither the project nor its .venv, OUT and the input on the one folder every host mounts.

The job is run from `driver` as a user there would run it; its results are held to the reference
evaluator row for row. What it assumed of one host is what these tests found: the executors' Python
libraries (shipped with the job, sensorscript/shipping.py) and OUT seen at the driver's path (checked
at the start, runtime/control/executors.py).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from oracles.streams import evaluate
from sensorscript.parser import load
from sensorscript.registry import read_csv
from sensorscript.runtime.control import jars
from sensorscript.workload import write_readings
from tests.conftest import ROOT, need
from tests.differential import assert_same, expected_rows
from tests.hosts import Hosts, why_not

sys.path.insert(0, str(ROOT / "scripts"))
import kafka_broker  # noqa: E402
from standalone import ClusterFailed, spark_home, standalone, tail  # noqa: E402

pytestmark = pytest.mark.cluster

WORKFLOWS = [ROOT / "workflows" / name for name in ("bridge.ss", "deck_vibration.ss")]
SENSORS = ROOT / "workflows" / "sensors.csv"
PYTHON = ROOT / ".venv" / "bin" / "python"  # the project's, on `driver` (the one host that has it)
RUN_TIMEOUT = 420


@pytest.fixture(scope="module")
def hosts():
    need(why_not(), "the tests of a job on test hosts (network namespaces)")
    with Hosts(spark=spark_home(), kafka=jars.folder(kafka_broker.PART)) as made:
        yield made


@pytest.fixture(scope="module")
def cluster(hosts):
    """A master on `driver`, a worker (1 core, 2 GB) on `w1` and on `w2`, logs on the shared folder."""
    base = hosts.shared / "cluster"
    base.mkdir()
    try:
        with standalone(base, [(1, "2g"), (1, "2g")], 120, hosts["driver"].place(),
                        [hosts["w1"].place(), hosts["w2"].place()]) as started:
            yield started
    except ClusterFailed as exc:
        pytest.fail(str(exc))


def sscript(hosts, arguments: list[str], timeout: float = RUN_TIMEOUT, **environment) -> subprocess.CompletedProcess:
    """`sscript ARGUMENTS` on `driver`, as its user types it: the project's Python, Java and the
    system's tools on the PATH, Spark's driver on the host's address."""
    env = {"PATH": f"{PYTHON.parent}:/usr/local/bin:/usr/bin:/bin", "HOME": "/root", "LANG": "C.UTF-8",
           "SPARK_LOCAL_IP": hosts["driver"].address, **environment}
    try:
        return hosts["driver"].run([str(PYTHON), "-m", "sensorscript.cli", *arguments], timeout=timeout, env=env)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"sscript {' '.join(arguments[:2])} did not finish within {timeout} s on driver:\n"
                    f"{(exc.stdout or b'')[-3000:]!r}\n{(exc.stderr or b'')[-3000:]!r}")


def executor_logs(cluster) -> str:
    return "".join(p.read_text(errors="replace") for w in cluster.workers for p in sorted(w.work_dir.glob("app-*/*/stderr")))


def test_the_examples_on_two_worker_hosts_agree_with_the_reference(hosts, cluster):
    """OUT and the input on the shared folder; the job submitted from `driver`; both workers' executors
    run its tasks with the libraries it brought (neither host has the project's .venv)."""
    work = hosts.shared / f"job-{uuid.uuid4().hex[:8]}"
    out, data = work / "out", work / "data"
    compiled = sscript(hosts, ["compile", *map(str, WORKFLOWS), "--sensors", str(SENSORS), "-o", str(out),
                               "--partitions", "2"], timeout=120)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    write_readings(read_csv(SENSORS), data, seconds=600, files=1, bad_lines=3)
    lines = [line for path in sorted(data.iterdir()) for line in path.read_text().splitlines()]

    done = sscript(hosts, ["run", str(out), "--cluster", cluster.url, "--input", str(data), "--once"])
    said = done.stdout + done.stderr
    assert done.returncode == 0, f"{said[-4000:]}\nspark.log:\n{tail(out / 'spark.log', 60)}"
    assert "checking that the cluster's executors" in said and "batch 0:" in said, said
    assert "Traceback" not in said, said

    logs = {w.log.name: "".join(p.read_text(errors="replace") for p in w.work_dir.glob("app-*/*/stderr"))
            for w in cluster.workers}
    for name, log in logs.items():  # each worker host ran tasks, with the libraries the job shipped
        assert "Running task" in log and "Unpacking an archive" in log, f"{name}:\n{log[-3000:]}"
    assert not (out / ".executors").exists()  # the check's markers are gone

    evaluation = evaluate(load([str(f) for f in WORKFLOWS]).workflows, [lines])
    assert len(evaluation.rows) > 100
    db = sqlite3.connect(out / "results.db")
    try:
        assert_same(sorted(db.execute("SELECT stream, ts, window_start, window_end, value FROM results")),
                    expected_rows(evaluation))
        assert sorted(db.execute("SELECT raw, reason FROM quarantine")) == sorted(evaluation.quarantine)
    finally:
        db.close()


def test_out_that_the_workers_do_not_see_is_refused_in_one_sentence(hosts, cluster):
    """OUT in the driver's own /tmp: the executors find no such folder, and the run says so before
    any batch, in one sentence."""
    out, data = Path(f"/tmp/out-{uuid.uuid4().hex[:8]}"), hosts.shared / f"data-{uuid.uuid4().hex[:8]}"
    compiled = sscript(hosts, ["compile", str(WORKFLOWS[0]), "--sensors", str(SENSORS), "-o", str(out)], timeout=120)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    write_readings(read_csv(SENSORS), data, seconds=60, files=1)

    done = sscript(hosts, ["run", str(out), "--cluster", cluster.url, "--input", str(data), "--once"])
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert f"does not see the driver's {out}: OUT must be one folder every worker mounts at the same path" in said, said
    assert "batch 0:" not in said and "Traceback" not in said, said


def test_workers_without_the_python_the_job_runs_are_refused_in_one_sentence(hosts, cluster):
    """The executors told to run a Python no worker has: the run says so before any batch."""
    work = hosts.shared / f"job-{uuid.uuid4().hex[:8]}"
    compiled = sscript(hosts, ["compile", str(WORKFLOWS[0]), "--sensors", str(SENSORS), "-o", str(work / "out")],
                       timeout=120)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    write_readings(read_csv(SENSORS), work / "data", seconds=60, files=1)

    done = sscript(hosts, ["run", str(work / "out"), "--cluster", cluster.url, "--input", str(work / "data"), "--once"],
                   PYSPARK_PYTHON="/usr/bin/python3.11-nowhere")
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert ("error: the cluster's executors cannot start the job's Python (/usr/bin/python3.11-nowhere): every "
            "worker needs a Python of the driver's version on its PATH") in said, said
    assert "batch 0:" not in said and "Traceback" not in said, said
