"""`sscript run --cluster` with the driver, the workers and the brokers on test hosts of their own
(scripts/netns.py, issue #43): Spark's master on `driver`, a worker on `w1` and on `w2` that see
neither the project nor its .venv, OUT and the input on the one folder every host mounts.

The job is run from `driver` as a user there would run it; its results are held to the reference
evaluator row for row. What it assumed of one host is what these tests found: the executors' Python
libraries (shipped with the job, sensorscript/shipping.py) and OUT seen at the driver's path (checked
at the start, runtime/control/executors.py).
"""

from __future__ import annotations

import os
import socket
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
from tests.cep_harness import reference_rows, same_rows
from tests.conftest import EXAMPLES, ROOT, need
from tests.differential import assert_same, expected_rows
from tests.test_restart import result_rows

sys.path.insert(0, str(ROOT / "scripts"))
import kafka_broker  # noqa: E402
from netns import Hosts, why_not  # noqa: E402
from cluster_faults import feed_through_faults, fleet_readings, sscript_on  # noqa: E402
from mosquitto import why_no_broker  # noqa: E402
from standalone import ClusterFailed, spark_home, standalone, tail  # noqa: E402

pytestmark = pytest.mark.cluster

WORKFLOWS = [ROOT / "workflows" / name for name in ("bridge.ss", "deck_vibration.ss")]
SENSORS = ROOT / "workflows" / "sensors.csv"
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
    """`sscript ARGUMENTS` on `driver`, as its user types it (scripts/cluster_faults.py's `sscript_on`)."""
    try:
        return sscript_on(hosts, arguments, timeout, **environment)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"sscript {' '.join(arguments[:2])} did not finish within {timeout} s on driver:\n"
                    f"{(exc.stdout or b'')[-3000:]!r}\n{(exc.stderr or b'')[-3000:]!r}")


def test_the_examples_through_kafka_on_infra_on_two_worker_hosts_agree_with_the_reference(hosts, cluster):
    """A Kafka broker on `infra`; the job submitted from `driver`, registered with the master, reads a
    topic of three partitions (a gateway's blocks of lines, bad lines among them) and writes its
    results to another topic, both through the broker's SASL listener with `--kafka-option` settings
    whose secret comes from the environment. Both workers' executors run its tasks with the libraries
    and Spark's Kafka connector it brought (neither host has the project's .venv or the jars). What a
    consumer keeps per key and version, and the quarantine, are the reference's; the secret is in no
    file of OUT, in no executor's log and not in the run's output."""
    from tests.brokers import SASL_PASSWORD, SASL_USER, need_kafka, sasl_options
    from tests.test_kafka import topic_messages, upserted

    need_kafka()
    work = hosts.shared / f"job-{uuid.uuid4().hex[:8]}"
    out, data = work / "out", work / "data"
    # A watermark a minute behind: the topic's partitions are read at different paces, and no reading may be late.
    compiled = sscript(hosts, ["compile", *map(str, WORKFLOWS), "--sensors", str(SENSORS), "-o", str(out),
                               "--partitions", "2", "--watermark", "fixed:60000"], timeout=120)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    write_readings(read_csv(SENSORS), data, seconds=300, files=1, bad_lines=3)
    lines = [line for path in sorted(data.iterdir()) for line in path.read_text().splitlines()[1:]]
    broker = kafka_broker.KafkaBroker(work / "kafka", place=hosts["infra"].place(),
                                      users={SASL_USER: SASL_PASSWORD}).start()
    try:
        for name in ("readings", "results"):
            broker.topic(name, 3)
        gateway = kafka_broker.Gateway(broker.bootstrap, "readings", per_message=50)
        gateway.send(lines)  # in time order, the bad lines among them
        gateway.flush(60)

        options, secret = sasl_options()
        done = sscript(hosts, ["run", str(out), *cluster.run_options(), "--once",
                               "--input", f"kafka://{broker.sasl_bootstrap}/readings",
                               "--sink", f"kafka://{broker.sasl_bootstrap}/results", *options,
                               "--kafka-plain-password"], **secret)  # SASL PLAIN without TLS to infra: said so
        said = done.stdout + done.stderr
        assert done.returncode == 0, f"{said[-4000:]}\nspark.log:\n{tail(out / 'spark.log', 60)}"
        assert "checking that the cluster's executors" in said and "batch 0:" in said, said
        # The run said its own lines; spark-submit's log went to OUT/spark.log.
        assert not any(w in said for w in ("log4j", "WARN", "Traceback", SASL_PASSWORD)), said
        assert "log4j" in (out / "spark.log").read_text(errors="replace")
        assert "Registering app" in (cluster.logs / "master.log").read_text(errors="replace")
        assert not [p for p in out.rglob("*") if p.is_file() and SASL_PASSWORD.encode() in p.read_bytes()]

        logs = {w.log.name: "".join(p.read_text(errors="replace") for p in w.work_dir.glob("app-*/*/stderr"))
                for w in cluster.workers}
        for name, log in logs.items():  # each worker host ran tasks, with the libraries the job shipped
            assert "Running task" in log and "Unpacking an archive" in log, f"{name}:\n{log[-3000:]}"
            assert SASL_PASSWORD not in log
        assert not (out / ".executors").exists()  # the check's markers are gone

        evaluation = evaluate(load([str(f) for f in WORKFLOWS]).workflows, [lines])
        assert len(evaluation.rows) > 50
        assert_same(sorted(row[:5] for row in upserted(topic_messages(broker.bootstrap, "results"))),
                    expected_rows(evaluation))
    finally:
        broker.stop(kill=True)
    db = sqlite3.connect(out / "results.db")  # a Kafka sink keeps the quarantine in OUT's SQLite
    try:
        assert sorted(db.execute("SELECT raw, reason FROM quarantine")) == sorted(evaluation.quarantine)
        assert len(evaluation.quarantine) == 3
    finally:
        db.close()


def test_out_and_input_that_the_workers_do_not_see_are_refused_together_before_any_batch(hosts, cluster):
    """OUT and the input in the driver's own /tmp (the workers have a /tmp of their own, without
    them): the executors find neither, and the run says both before any batch, a sentence each."""
    name = uuid.uuid4().hex[:8]
    out, shared, data = Path(f"/tmp/out-{name}"), hosts.shared / f"data-{name}", Path(f"/tmp/data-{name}")
    compiled = sscript(hosts, ["compile", str(WORKFLOWS[0]), "--sensors", str(SENSORS), "-o", str(out)], timeout=120)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    write_readings(read_csv(SENSORS), shared, seconds=60, files=1)
    hosts["driver"].run(["cp", "-r", str(shared), str(data)]).check_returncode()

    done = sscript(hosts, ["run", str(out), *cluster.run_options(), "--input", str(data), "--once"])
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert f"does not see the driver's {out}: OUT must be one folder every worker mounts at the same path" in said, said
    assert f"does not see the input folder {data}: the input must be a folder every worker mounts" in said, said
    assert "batch 0:" not in said and "Traceback" not in said, said


def test_workers_without_the_python_the_job_runs_are_refused_in_one_sentence(hosts, cluster):
    """The executors told to run a Python no worker has: the run says so before any batch."""
    work = hosts.shared / f"job-{uuid.uuid4().hex[:8]}"
    compiled = sscript(hosts, ["compile", str(WORKFLOWS[0]), "--sensors", str(SENSORS), "-o", str(work / "out")],
                       timeout=120)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    write_readings(read_csv(SENSORS), work / "data", seconds=60, files=1)

    done = sscript(hosts, ["run", str(work / "out"), *cluster.run_options(), "--input", str(work / "data"), "--once"],
                   PYSPARK_PYTHON="/usr/bin/python3.11-nowhere")
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert ("error: the cluster's executors cannot start the job's Python (/usr/bin/python3.11-nowhere): every "
            "worker needs a Python of the driver's version on its PATH") in said, said
    assert "batch 0:" not in said and "Traceback" not in said, said


def test_a_feed_from_infra_through_a_cut_link_a_dead_worker_a_killed_driver_and_a_restarted_broker(hosts, cluster):
    """The example workflows fed by mosquitto on `infra` (its spool in OUT, on the shared folder),
    the job on both worker hosts (scripts/cluster_faults.py). Mid-stream, one after another: (a)
    w2's link cut until the status says its executor does not answer, then restored; (b) w1 killed with everything on it, not restarted; (c)
    the driver SIGKILLed and the run started again from `driver`; (d) the broker stopped and started
    again. `sscript status` says each while it lasts (the scenario waits for it); at the end the
    results equal the reference over every reading published, nothing doubled."""
    need(why_no_broker(), "the MQTT tests")
    work = hosts.shared / f"feed-{uuid.uuid4().hex[:8]}"
    work.mkdir()
    outcome = feed_through_faults(hosts, cluster, work, fleet_readings(work / "data", 60), cut_s=0)
    assert set(outcome.resumed_s) == {"the start", "(a) w2's link restored", "(b) w1 killed",
                                      "(c) the driver started again", "(d) the broker started again"}
    said = outcome.output
    assert "lost the broker" in said and "connected again" in said, said[-4000:]
    assert "the broker kept this job's session" in said, said[-4000:]  # the run started again after (c)
    assert "Traceback" not in said, said[-4000:]
    expected, _ = reference_rows({f.stem: f.read_text() for f in EXAMPLES}, [outcome.lines], 0, outcome.compiled.plan)
    same_rows(result_rows(outcome.out), expected)
    assert not list((outcome.out / "checkpoint" / "spool").glob("*.csv"))  # every spooled file committed and deleted


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
