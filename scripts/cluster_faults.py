"""A job on test hosts through four faults under an MQTT feed, and the time it took to resume after each.

    .venv/bin/python scripts/cluster_faults.py [--seconds 60] [--cut 30]     # as root (issue #43)

Makes test hosts (scripts/netns.py): Spark's master and the driver on `driver`, a one-core worker
on `w1` and on `w2` (neither has the project), mosquitto on `infra`; compiles the example workflows
into OUT on the folder the hosts share, and runs `sscript run OUT --cluster ... --input mqtt://infra...`
from `driver` while this script publishes the readings of the example fleet in five parts, in time
order. Between the parts: (a) w2's link cut for `--cut` seconds, then restored; (b) w1 killed with
everything on it, not restarted; (c) the driver SIGKILLed and the run started again from `driver`;
(d) the broker stopped and started again. Each is waited out through `sscript status`, which must
say it while it lasts. At the end the run is drained (`sscript stop --drain`). Prints, for each
fault, the seconds from its end (the link restored, the worker killed, the run started again, the
broker started) until every reading published so far was in the job's totals.

As a library (tests/test_cluster_hosts.py, which holds the results to the reference evaluator's):
`feed_through_faults(hosts, cluster, work, lines)`, and `sscript_on`, `status_says`, `HostRun`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from sensorscript.compiler import compile_workflows
from sensorscript.registry import read_csv
from sensorscript.runtime.plan.loading import load_job
from sensorscript.workload import write_readings

ROOT = Path(__file__).resolve().parent.parent

PYTHON = ROOT / ".venv" / "bin" / "python"  # the project's, on `driver` (the one host that has it)
EXAMPLES = sorted((ROOT / "workflows").glob("*.ss"))
SENSORS = ROOT / "workflows" / "sensors.csv"
WAIT_S = 420.0  # for a run to reach a point waited for (a Spark start on a busy machine)


def driver_environment(hosts, **more) -> dict[str, str]:
    """The environment of a user's shell on `driver`: the project's environment not activated (the
    system's Python 3.11 first on the PATH), Spark's driver on the host's address."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8",
            "SPARK_LOCAL_IP": hosts["driver"].address, **more}


def sscript_on(hosts, arguments: list[str], timeout: float = WAIT_S, **environment) -> subprocess.CompletedProcess:
    """`sscript ARGUMENTS` on `driver` (the project's Python by its path), waited for."""
    return hosts["driver"].run([str(PYTHON), "-m", "sensorscript.cli", *arguments], timeout=timeout,
                               env=driver_environment(hosts, **environment))


def status_says(hosts, out: Path, words: str, timeout: float = 120) -> str:
    """`sscript status OUT` on `driver` once its text (`running.status_text`, read here every 0.5 s:
    a command on `driver` is a Python start, 1-2 CPU seconds) says `words`, again until it says them
    too; what it said."""
    from sensorscript import running
    from sensorscript.errors import SensorScriptError

    deadline = time.monotonic() + timeout
    said = ""
    while True:
        try:
            here = running.status_text(out)
        except SensorScriptError as exc:  # status.json not written yet
            here = str(exc)
        if words in here:
            said = sscript_on(hosts, ["status", str(out)], timeout=60).stdout
            if words in said:
                return said
        assert time.monotonic() < deadline, \
            f"`sscript status` did not say {words!r} within {timeout} s:\n{said or here}"
        time.sleep(0.5)


def totals(out: Path) -> dict:
    status = out / "status.json"
    return json.loads(status.read_text()).get("totals", {}) if status.exists() else {}


class HostRun:
    """`sscript ARGUMENTS` started on `driver` in the background, its output appended to `log`."""

    def __init__(self, hosts, arguments: list[str], log: Path):
        self.log = log
        with open(log, "ab") as output:
            self.process = hosts["driver"].start([str(PYTHON), "-m", "sensorscript.cli", *arguments],
                                                 env=driver_environment(hosts), stdout=output,
                                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self, out: Path) -> None:
        """SIGKILL the job (its driver's JVM and Python, in a session of their own) and `sscript` itself."""
        pid = json.loads((out / "status.json").read_text())["pid"]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        self.process.kill()
        self.process.wait(30)


@dataclass
class Outcome:
    out: Path
    compiled: object  # the compiler's result (its plan places the sensors)
    lines: list[str]  # the readings published, in order
    output: str  # what the runs said
    resumed_s: dict[str, float] = field(default_factory=dict)  # fault -> seconds to resume
    said: dict[str, str] = field(default_factory=dict)  # fault -> what `sscript status` said while it lasted


def feed_through_faults(hosts, cluster, work: Path, readings: list[str], cut_s: float = 30.0) -> Outcome:
    """The run of the module's text over `readings` (sensor,ts,value lines: those of the sensors
    the examples read are published, in time order, so that none is late); AssertionError when a
    run fails or the status does not say a fault in time. w2's link stays cut until the status says
    so, and `cut_s` seconds at least."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from mosquitto import Broker, Publisher

    out = work / "out"
    compiled = compile_workflows([str(f) for f in EXAMPLES], out, str(SENSORS), 2)
    read = set(load_job(out).JOB.sensors)
    lines = sorted((line for line in readings if line.split(",")[0] in read), key=lambda line: int(line.split(",")[1]))
    parts = [lines[i * len(lines) // 5:(i + 1) * len(lines) // 5] for i in range(5)]
    broker = Broker(work / "mosquitto", place=hosts["infra"].place()).start()
    publisher = Publisher(broker, "bridge-gateway")
    published = 0
    outcome = Outcome(out, compiled, lines, "")

    def publish(part: list[str]) -> None:
        nonlocal published
        for number, line in enumerate(part):
            sensor, ts, value = line.split(",")
            publisher.publish(f"bridge/deck/{sensor}", f"{ts},{value}")
            if number % 500 == 499:
                time.sleep(0.05)
        publisher.wait()
        published += len(part)

    def resumed(fault: str, since: float) -> None:
        """Wait until every reading published is in the totals; the seconds since `since`."""
        deadline = time.monotonic() + WAIT_S
        while totals(out).get("readings", 0) < published:
            assert time.monotonic() < deadline, f"after {fault}, not every reading read within {WAIT_S} s"
            time.sleep(0.2)
        outcome.resumed_s[fault] = time.monotonic() - since

    arguments = ["run", str(out), *cluster.run_options(), "--input", f"{broker.url}/bridge/#",
                 "--sensor-from-topic", "-1"]
    run = HostRun(hosts, arguments, work / "run.log")
    w1, w2 = hosts["w1"].address, hosts["w2"].address
    try:
        status_says(hosts, out, "cluster: 2 executors", WAIT_S)
        publish(parts[0])
        resumed("the start", time.monotonic())

        hosts["w2"].cut()  # (a)
        cut = time.monotonic()
        try:
            publish(parts[1])
            outcome.said["a"] = status_says(hosts, out, f"cluster: the executor at {w2} has not answered since", 25)
            time.sleep(max(0.0, cut_s - (time.monotonic() - cut)))
        finally:
            hosts["w2"].restore()
        resumed("(a) w2's link restored", time.monotonic())
        said = sscript_on(hosts, ["status", str(out)]).stdout
        assert "has not answered" not in said and "cluster: 2 executors" in said, said

        hosts["w1"].kill()  # (b)
        killed = time.monotonic()
        publish(parts[2])
        status_says(hosts, out, f"cluster: lost the executor at {w1} at", 60)
        outcome.said["b"] = status_says(hosts, out, f"cluster: 1 executor ({w2}), 1 fewer than it had", 60)
        resumed("(b) w1 killed", killed)

        run.kill(out)  # (c)
        outcome.said["c"] = sscript_on(hosts, ["status", str(out)]).stdout
        assert "not running: the process that ran it" in outcome.said["c"], outcome.said["c"]
        publish(parts[3])  # while the job is down: the broker keeps them in the job's session
        started = time.monotonic()
        run = HostRun(hosts, arguments, work / "run.log")
        status_says(hosts, out, f"cluster: 1 executor ({w2})", WAIT_S)
        resumed("(c) the driver started again", started)

        broker.stop()  # (d)
        outcome.said["d"] = status_says(hosts, out, "MQTT: lost the broker of mqtt://", 60)
        broker.start()
        back = time.monotonic()
        publisher.connected()
        status_says(hosts, out, "MQTT: the broker of mqtt://", 60)
        publish(parts[4])
        resumed("(d) the broker started again", back)

        sentinel = lines[-1].split(",")[1]
        publisher.publish("bridge/deck/NO-WORKFLOW-READS-ME", f"{sentinel},0")  # published last: read last
        publisher.wait()
        deadline = time.monotonic() + WAIT_S
        while totals(out).get("unread", 0) < 1:
            assert time.monotonic() < deadline, f"the last message not read within {WAIT_S} s"
            time.sleep(0.2)
        stopped = sscript_on(hosts, ["stop", str(out), "--drain"])
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert run.process.wait(120) == 0, run.output()[-4000:]
    finally:
        run.process.kill()
        publisher.close()
        broker.stop(kill=True)
        outcome.output = run.output()
    return outcome


def fleet_readings(folder: Path, seconds: float) -> list[str]:
    """`seconds` of the example fleet's readings (workflows/sensors.csv), as sensor,ts,value lines."""
    write_readings(read_csv(SENSORS), folder, seconds=seconds, files=1)
    return [line for path in sorted(folder.iterdir()) for line in path.read_text().splitlines() if line]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60, help="seconds of the example fleet's readings")
    parser.add_argument("--cut", type=float, default=30, help="seconds w2's link stays cut")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from mosquitto import why_no_broker
    from netns import Hosts, why_not
    from standalone import spark_home, standalone

    for reason in (why_not(), why_no_broker()):
        if reason is not None:
            raise SystemExit(f"cluster_faults.py: {reason}")
    with Hosts(spark=spark_home()) as hosts:
        base = hosts.shared / "cluster"
        base.mkdir()
        with standalone(base, [(1, "2g"), (1, "2g")], 120, hosts["driver"].place(),
                        [hosts["w1"].place(), hosts["w2"].place()]) as cluster:
            feed = hosts.shared / "feed"
            feed.mkdir()
            outcome = feed_through_faults(hosts, cluster, feed, fleet_readings(hosts.shared / "data", args.seconds),
                                          args.cut)
    print(f"{len(outcome.lines):,} readings published in five parts; the run drained at the end")
    for fault, seconds in outcome.resumed_s.items():
        print(f"  resumed after {fault}: {seconds:.1f} s")


if __name__ == "__main__":
    main()
