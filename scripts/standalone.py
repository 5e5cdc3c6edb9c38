"""A Spark standalone cluster on this machine, from the pyspark package: a master and workers on
127.0.0.1, for trying `sscript run --cluster` and for the cluster tests and benchmarks.

    .venv/bin/python scripts/standalone.py [--workers 2] [--cores 1] [--memory 2g] [--dir DIR] [--for SECONDS]

prints the master's URL and its secret's file (`sscript run OUT --cluster URL --cluster-secret DIR/secret ...`)
and runs until Ctrl-C (or for SECONDS), then stops every process it started. As a library: `with standalone(folder, [(cores, memory), ...]) as cluster:`.
Each process runs in a process group of its own, logging into the folder (master.log,
worker-N.log; executors' logs under work-N/app-*/N/stderr), and every group is killed on the way out.
The cluster admits only its own: its master and workers share a secret made for it (FOLDER/secret, the
owner's alone), and a job is submitted with it (`sscript run OUT --cluster URL --cluster-secret FOLDER/secret`);
RPC and spill files are encrypted (sensorscript/runtime/control/cluster_security.py).
A `Place` puts the master or a worker elsewhere than this machine's 127.0.0.1: the test hosts of
scripts/netns.py (their address, Spark's home there, and how a command runs there); the folder must
then be one every host sees at the same path.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sensorscript.hosts import Place, free_ports
from sensorscript.runtime.control import cluster_security
from sensorscript.runtime.control.session import extra_jvm_options

REGISTER_TIMEOUT = 90  # seconds for every worker to register with the master


class ClusterFailed(RuntimeError):
    """The cluster did not come up; the message holds the logs' tails."""


@dataclass
class Worker:
    process: subprocess.Popen  # spark-class execs the Worker JVM: this is its pid and process group
    work_dir: Path  # where it starts executors: app-*/N/stderr are their logs
    log: Path


@dataclass
class Cluster:
    url: str
    logs: Path
    workers: list[Worker]
    secret: Path  # the file of the secret its master and workers share

    def run_options(self) -> list[str]:
        """`sscript run`'s options that submit to this cluster."""
        return ["--cluster", self.url, "--cluster-secret", str(self.secret)]


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def spark_environment(place: Place = Place()) -> dict[str, str]:
    """What Spark's scripts and the jobs submitted to the cluster need: its home, the address
    (loopback by default), and this Python for the workers."""
    environment = {**os.environ, "SPARK_HOME": str(place.spark_home or spark_home()), "SPARK_LOCAL_IP": place.address,
                   "PYSPARK_PYTHON": sys.executable}
    extra = extra_jvm_options()  # the jobs' extra JVM options (SSCRIPT_JVM_OPTIONS), the master's and workers' too
    if extra:
        environment["SPARK_DAEMON_JAVA_OPTS"] = extra
    return environment


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return f"(no {path})"


def stop_group(process: subprocess.Popen, grace: float = 20) -> None:
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


@contextmanager
def standalone(base: Path, workers: list[tuple[int, str]], register_timeout: float = REGISTER_TIMEOUT,
               master_at: Place = Place(), workers_at: list[Place] | None = None):
    """A standalone master and WORKERS (cores, memory) on 127.0.0.1 (or at `master_at` and
    `workers_at`, a Place per worker), each in its own process group with its own work dir and log
    under BASE; every group is killed on the way out. Raises ClusterFailed when they do not come up.
    The master and workers admit only who holds the secret made in BASE/secret."""
    workers_at = workers_at or [Place()] * len(workers)
    secret, conf = base / "secret", base / "spark-daemons.conf"
    made = secrets.token_hex(32)
    for path, text in ((secret, made + "\n"),
                       (conf, "".join(f"{k} {v}\n" for k, v in cluster_security.settings(made).items()))):
        path.unlink(missing_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(text)
    properties = ["--properties-file", str(conf)]
    here = spark_home() / "bin" / "spark-class"
    if any(place.spark_home is None for place in (master_at, *workers_at)) and not here.exists():
        raise ClusterFailed(f"{here} missing from the pyspark package")
    port, master_ui, *worker_uis = free_ports(2 + len(workers))
    url = f"spark://{master_at.address}:{port}"
    master_log = base / "master.log"
    processes: list[subprocess.Popen] = []

    def start(place: Place, arguments: list[str], log: Path) -> subprocess.Popen:
        environment = spark_environment(place)
        spark_class = Path(environment["SPARK_HOME"]) / "bin" / "spark-class"
        with open(log, "wb") as out:
            process = subprocess.Popen(place.wrap([str(spark_class), *arguments]), stdout=out,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env=environment, cwd=base, start_new_session=True)
        processes.append(process)
        return process

    try:
        master = start(master_at, ["org.apache.spark.deploy.master.Master", "--host", master_at.address,
                                   "--port", str(port), "--webui-port", str(master_ui), *properties], master_log)
        started: list[Worker] = []
        for number, ((cores, memory), ui, place) in enumerate(zip(workers, worker_uis, workers_at)):
            suffix = "" if len(workers) == 1 else f"-{number}"
            work_dir, log = base / f"work{suffix}", base / f"worker{suffix}.log"
            work_dir.mkdir()
            process = start(place, ["org.apache.spark.deploy.worker.Worker", url, "--host", place.address,
                                    "--cores", str(cores), "--memory", memory, "--webui-port", str(ui),
                                    "--work-dir", str(work_dir), *properties], log)
            started.append(Worker(process, work_dir, log))
        deadline = time.monotonic() + register_timeout
        # Each worker says so itself (the master may log a worker's registration twice when it retries).
        while not all("Successfully registered with master" in w.log.read_text(errors="replace") for w in started):
            for name, process, log in [("master", master, master_log),
                                       *(("worker", w.process, w.log) for w in started)]:
                if process.poll() is not None:
                    raise ClusterFailed(f"Spark {name} exited with {process.returncode} before the workers "
                                        f"registered; {log}:\n{tail(log)}")
            if time.monotonic() > deadline:
                raise ClusterFailed(f"not all {len(workers)} workers registered with {url} within "
                                    f"{register_timeout} s;\n{master_log}:\n{tail(master_log)}\n"
                                    + "\n".join(f"{w.log}:\n{tail(w.log)}" for w in started))
            time.sleep(0.5)
        yield Cluster(url, base, started, secret)
    finally:
        for process in reversed(processes):  # the workers (and their executors) first, then the master
            stop_group(process)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1, help="cores of each worker")
    parser.add_argument("--memory", default="2g", help="memory of each worker")
    parser.add_argument("--dir", help="folder for the logs and work dirs (default: a new temporary one)")
    parser.add_argument("--for", dest="seconds", type=float, help="stop after this many seconds")
    args = parser.parse_args()
    base = Path(args.dir or tempfile.mkdtemp(prefix="sscript-cluster-"))
    base.mkdir(parents=True, exist_ok=True)
    with standalone(base, [(args.cores, args.memory)] * args.workers) as cluster:
        print(f"master: {cluster.url} ({args.workers} worker(s) of {args.cores} core(s), {args.memory}); logs in {base}")
        print(f"run a job on it: sscript run OUT {' '.join(cluster.run_options())} --input DATA; Ctrl-C stops the "
              f"cluster")
        until = time.monotonic() + args.seconds if args.seconds is not None else float("inf")
        try:
            while all(w.process.poll() is None for w in cluster.workers) and time.monotonic() < until:
                time.sleep(min(1.0, max(until - time.monotonic(), 0.0)))
        except KeyboardInterrupt:
            pass
        print("stopping the cluster")


if __name__ == "__main__":
    main()
