"""`sscript run --cluster` with the driver, the workers and the brokers on test hosts of their own
(scripts/netns.py, issue #43): Spark's master on `driver`, a worker on `w1` and on `w2` that see
neither the project nor its .venv, OUT and the input on the one folder every host mounts.

The job is run from `driver` as a user there would run it; its results are held to the reference
evaluator row for row. What it assumed of one host is what these tests found: the executors' Python
libraries (shipped with the job, sensorscript/shipping.py) and OUT seen at the driver's path (checked
at the start, runtime/control/executors.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from oracles.streams import evaluate
from sensorscript.compiler import compile_workflows
from sensorscript.parser import load
from sensorscript.registry import read_csv
from sensorscript.runtime.control import jars
from sensorscript.runtime.plan.loading import load_job
from sensorscript.workload import write_readings
from tests.cep_harness import reference_rows, same_rows
from tests.conftest import EXAMPLES, ROOT, need
from tests.differential import assert_same, disordered_replay, expected_rows
from tests.test_mqtt_source import Publisher, wait_until
from tests.test_restart import result_rows

sys.path.insert(0, str(ROOT / "scripts"))
import kafka_broker  # noqa: E402
from netns import Hosts, why_not  # noqa: E402
from mosquitto import Broker, why_no_broker  # noqa: E402
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
    """`sscript ARGUMENTS` on `driver`, as its user types it (the project's Python by its path, its
    environment not activated: the system's Python 3.11 first on the PATH), Spark's driver on the
    host's address."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/root", "LANG": "C.UTF-8",
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


def test_out_or_input_that_the_workers_do_not_see_is_refused_in_one_sentence(hosts, cluster):
    """OUT in the driver's own /tmp, then the input there: the executors find no such folder, and
    the run says so before any batch, in one sentence."""
    out, data = Path(f"/tmp/out-{uuid.uuid4().hex[:8]}"), hosts.shared / f"data-{uuid.uuid4().hex[:8]}"
    compiled = sscript(hosts, ["compile", str(WORKFLOWS[0]), "--sensors", str(SENSORS), "-o", str(out)], timeout=120)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    write_readings(read_csv(SENSORS), data, seconds=60, files=1)

    done = sscript(hosts, ["run", str(out), "--cluster", cluster.url, "--input", str(data), "--once"])
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert f"does not see the driver's {out}: OUT must be one folder every worker mounts at the same path" in said, said
    assert "batch 0:" not in said and "Traceback" not in said, said

    # OUT shared, the input in the driver's /tmp (the workers have a /tmp of their own, without it).
    shared_out, local_data = hosts.shared / f"out-{uuid.uuid4().hex[:8]}", Path(f"/tmp/data-{uuid.uuid4().hex[:8]}")
    compiled = sscript(hosts, ["compile", str(WORKFLOWS[0]), "--sensors", str(SENSORS), "-o", str(shared_out)],
                       timeout=120)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    hosts["driver"].run(["cp", "-r", str(data), str(local_data)]).check_returncode()
    done = sscript(hosts, ["run", str(shared_out), "--cluster", cluster.url, "--input", str(local_data), "--once"])
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert f"does not see the input folder {local_data}: the input must be a folder every worker mounts" in said, said
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


def status_says(hosts, out: Path, words: str, timeout: float = 120) -> str:
    """`sscript status OUT` on `driver`, again until it says `words`; what it said."""
    deadline = time.monotonic() + timeout
    while True:
        said = sscript(hosts, ["status", str(out)], timeout=60).stdout
        if words in said:
            return said
        assert time.monotonic() < deadline, f"`sscript status` did not say {words!r} within {timeout} s:\n{said}"
        time.sleep(1)


def totals(out: Path) -> dict:
    status = out / "status.json"
    return json.loads(status.read_text()).get("totals", {}) if status.exists() else {}


class HostRun:
    """`sscript run` started on `driver` in the background, its output in a file of the machine."""

    def __init__(self, hosts, arguments: list[str], log: Path):
        self.hosts, self.log = hosts, log
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/root", "LANG": "C.UTF-8",
               "SPARK_LOCAL_IP": hosts["driver"].address}
        with open(log, "ab") as output:
            self.process = hosts["driver"].start([str(PYTHON), "-m", "sensorscript.cli", *arguments], env=env,
                                                 stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self, out: Path) -> None:
        """SIGKILL the job (its driver's JVM and Python, in a session of their own) and `sscript` itself."""
        pid = json.loads((out / "status.json").read_text())["pid"]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        self.process.kill()
        self.process.wait(30)


def test_a_feed_from_infra_through_a_cut_link_a_dead_worker_a_killed_driver_and_a_restarted_broker(hosts, cluster):
    """The example workflows fed by mosquitto on `infra` (its spool in OUT, on the shared folder),
    the job on both worker hosts. Mid-stream, one after another: (a) w2's link cut for 30 s, then
    restored; (b) w1 killed with everything on it, not restarted; (c) the driver SIGKILLed and the
    run started again from `driver`; (d) the broker restarted. `sscript status` says each while it
    lasts; at the end the results equal the reference over every reading published, nothing doubled."""
    need(why_no_broker(), "the MQTT tests")
    work = hosts.shared / f"feed-{uuid.uuid4().hex[:8]}"
    work.mkdir()
    batches = disordered_replay(work / "replay", seed=5, files=1)
    out = work / "out"
    compiled = compile_workflows([str(f) for f in EXAMPLES], out, str(SENSORS), 2)
    read = set(load_job(out).JOB.sensors)
    lines = sorted((line for line in batches[0] if line.split(",")[0] in read), key=lambda line: int(line.split(",")[1]))
    lines = lines[: len(lines) // 4]  # a minute of the fleet, in time order: nothing late
    parts = [lines[i * len(lines) // 5:(i + 1) * len(lines) // 5] for i in range(5)]
    broker = Broker(work / "mosquitto", place=hosts["infra"].place()).start()
    publisher = Publisher(broker, "bridge-gateway")
    published = 0

    def publish(part: list[str]) -> None:
        nonlocal published
        for number, line in enumerate(part):
            sensor, ts, value = line.split(",")
            publisher.publish(f"bridge/deck/{sensor}", f"{ts},{value}")
            if number % 500 == 499:
                time.sleep(0.05)
        publisher.wait()
        published += len(part)

    def all_read(what: str) -> None:
        wait_until(lambda: totals(out).get("readings", 0) >= published, RUN_TIMEOUT, what)

    arguments = ["run", str(out), "--cluster", cluster.url, "--input", f"{broker.url}/bridge/#",
                 "--sensor-from-topic", "-1"]
    run = HostRun(hosts, arguments, work / "run.log")
    w1, w2 = hosts["w1"].address, hosts["w2"].address
    try:
        status_says(hosts, out, "cluster: 2 executors", RUN_TIMEOUT)
        publish(parts[0])
        all_read("part 0 read")

        hosts["w2"].cut()  # (a)
        cut = time.monotonic()
        try:
            publish(parts[1])
            status_says(hosts, out, f"cluster: the executor at {w2} has not answered since", 25)
            time.sleep(max(0.0, 30 - (time.monotonic() - cut)))
        finally:
            hosts["w2"].restore()
        all_read("part 1 read after w2's link came back")
        said = sscript(hosts, ["status", str(out)]).stdout
        assert "has not answered" not in said and "cluster: 2 executors" in said, said

        hosts["w1"].kill()  # (b)
        status_says(hosts, out, f"cluster: lost the executor at {w1} at", 60)
        said = status_says(hosts, out, f"cluster: 1 executor ({w2}), 1 fewer than it had", 60)
        publish(parts[2])
        all_read("part 2 read on w2 alone")

        run.kill(out)  # (c)
        assert "not running: the process that ran it" in sscript(hosts, ["status", str(out)]).stdout
        publish(parts[3])  # while the job is down: the broker keeps them in the job's session
        run = HostRun(hosts, arguments, work / "run.log")
        status_says(hosts, out, f"cluster: 1 executor ({w2})", RUN_TIMEOUT)
        all_read("part 3 read by the run started again")

        broker.stop()  # (d)
        status_says(hosts, out, "MQTT: lost the broker of mqtt://", 60)
        broker.start()
        publisher.connected()
        status_says(hosts, out, "MQTT: the broker of mqtt://", 60)
        publish(parts[4])
        sentinel = lines[-1].split(",")[1]
        publisher.publish("bridge/deck/NO-WORKFLOW-READS-ME", f"{sentinel},0")  # published last: read last
        publisher.wait()
        wait_until(lambda: totals(out).get("unread", 0) >= 1, RUN_TIMEOUT, "the last message read")
        stopped = sscript(hosts, ["stop", str(out), "--drain"])
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert run.process.wait(120) == 0, run.output()[-4000:]
    finally:
        run.process.kill()
        publisher.close()
        broker.stop(kill=True)
    said = run.output()
    assert "lost the broker" in said and "connected again" in said, said[-4000:]
    assert "Traceback" not in said, said[-4000:]
    expected, _ = reference_rows({f.stem: f.read_text() for f in EXAMPLES}, [lines], 0, compiled.plan)
    same_rows(result_rows(out), expected)
    assert not list((out / "checkpoint" / "spool").glob("*.csv"))  # every spooled file committed and deleted


def test_the_status_tells_the_cluster_and_the_broker_in_sentences():
    """What the watch and the feed keep in the status, as `sscript status` says it (no Spark)."""
    from sensorscript.runtime.output.status import describe_broker, describe_cluster

    running = {"state": "running", "pid": os.getpid(), "host": socket.gethostname()}
    at = 1_795_000_000.0
    cluster = {"executors": ["10.0.0.12"], "most": 2, "silent": {"10.0.0.12": at + 5}, "failed_tasks": 3,
               "lost": [{"address": "10.0.0.11", "at": at, "reason": "Worker lost"}], "running_since": at, "at": at + 45}
    said = describe_cluster({**running, "cluster": cluster})
    assert said == [
        "cluster: 1 executor (10.0.0.12), 1 fewer than it had: the job goes on with the others, slower",
        "cluster: the executor at 10.0.0.12 has not answered since 2026-11-18 11:06:45.000 UTC: its worker is down "
        "or cut off from the network; its tasks wait, or run again on the others once Spark gives it up",
        "cluster: lost the executor at 10.0.0.11 at 2026-11-18 11:06:40.000 UTC (Worker lost); Spark runs its tasks "
        "again on the others",
        "cluster: 3 tasks failed and ran again",
        "cluster: a batch has been running for 45 s (since 2026-11-18 11:06:40.000 UTC): it waits on an executor "
        "that is slow or out of reach"], said
    assert describe_cluster({**running, "cluster": {**cluster, "running_since": at + 30}})[-1] == \
        "cluster: 3 tasks failed and ran again"  # 15 s: a batch, not a wait
    assert describe_cluster({"state": "running"}) == []  # local Spark: nothing said

    broker = {"source": "mqtt://gateway@infra:1883/bridge/#", "lost_since": at, "reason": "Unspecified error",
              "back_at": None}
    assert describe_broker({**running, "broker": broker}) == [
        "MQTT: lost the broker of mqtt://gateway@infra:1883/bridge/# at 2026-11-18 11:06:40.000 UTC (Unspecified "
        "error); reconnecting: what it publishes meanwhile waits there"]
    assert describe_broker({**running, "broker": {**broker, "lost_since": None, "back_at": at + 9}}) == [
        "MQTT: the broker of mqtt://gateway@infra:1883/bridge/# was lost and came back at 2026-11-18 "
        "11:06:49.000 UTC; it sent what it kept meanwhile"]
