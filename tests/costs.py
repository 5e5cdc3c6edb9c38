"""Where the suite's time goes: per test file its wall time, its CPU time (the pytest process and every
process it started: Spark's JVMs, brokers, scripts), and how many JVMs and Spark applications it started.

A pytest plugin (loaded by tests/conftest.py). Each pytest process (each xdist worker) watches its own
descendants from a thread, a look every 0.2 s: a JVM is counted once by (pid, start time), a Spark
application is a JVM running Spark's SparkSubmit (a job's driver or the suite's session) or a standalone
master/worker. A test's CPU is what the process tree spent between its start and its end (every descendant as last
seen, alive or gone), so a module-scoped fixture is paid by the test that made it, the suite's
SparkSession by its first user, and a background run (tests/test_scripts.py starts its Spark runs in
a pool) by the tests that run meanwhile: read such a file's total, not its tests'.
Workers send their table to the controller, which prints the costliest files at the end of every run
(`--costs N` files, 15 by default, 0 for none) and writes them all as JSON to `--costs-json PATH`.
"""

from __future__ import annotations

import json
import os
import resource
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

try:
    import psutil
except ImportError:  # a development tool (pyproject's dev extra); without it only wall times are kept
    psutil = None

LOOK = 0.2  # seconds between two looks at the process tree
# Processes that make a test one of the full tier's (marked `server`, tests/conftest.py): a JVM (Spark,
# Kafka, Hadoop), a database, a broker, a browser, a proxy, a monitoring server.
SERVERS = frozenset({"java", "postgres", "mosquitto", "chromium", "chrome", "headless_shell", "nginx", "prometheus",
                     "alertmanager"})
SPARK_APPS = ("org.apache.spark.deploy.SparkSubmit", "org.apache.spark.deploy.master.Master",
              "org.apache.spark.deploy.worker.Worker")


SERVERS_BEFORE = pytest.StashKey[int]()


class Watch:
    """This process's descendants: the CPU they spent so far, and every JVM seen, by kind."""

    def __init__(self):
        self.me = psutil.Process() if psutil else None
        self.lock = threading.Lock()
        self.jvms: dict[tuple[int, float], bool] = {}  # (pid, started) -> is a Spark application
        self.spent: dict[tuple[int, float], float] = {}  # CPU seconds of every descendant seen, alive or not
        self.servers: list[str] = []  # the name of every server process seen, in the order they started
        self.stopped = threading.Event()
        if self.me is not None:
            threading.Thread(target=self._watch, name="suite-costs", daemon=True).start()

    def _watch(self) -> None:
        while not self.stopped.wait(LOOK):
            self.look()

    def look(self) -> None:
        """Note every descendant's CPU and every new JVM."""
        try:
            children = self.me.children(recursive=True)
        except psutil.Error:
            return
        for child in children:
            try:
                with child.oneshot():
                    key = (child.pid, child.create_time())
                    times = child.cpu_times()
                    with self.lock:  # a process gone keeps the CPU it was last seen to have spent
                        new = key not in self.spent
                        self.spent[key] = times.user + times.system  # its own: its children are seen themselves
                    if new:
                        self._new(key, child)
            except psutil.Error:
                continue

    def _new(self, key: tuple[int, float], child) -> None:
        name = child.name()
        try:  # a server's own children (chromium's renderers, a worker's executors) are not new servers
            spawned = child.parent().name() in SERVERS
        except (psutil.Error, AttributeError):
            spawned = False
        with self.lock:
            if name in SERVERS and not spawned:
                self.servers.append(name)
        if name == "java":
            line = " ".join(child.cmdline())
            with self.lock:
                self.jvms[key] = any(app in line for app in SPARK_APPS)

    def cpu(self) -> float:
        """CPU seconds of this process and of every descendant seen so far (each as last seen: what a
        process spent in its last 0.2 s, or one that lived less, is missed)."""
        self.look()
        own = resource.getrusage(resource.RUSAGE_SELF)
        with self.lock:
            return own.ru_utime + own.ru_stime + sum(self.spent.values())

    def counts(self) -> tuple[int, int]:
        with self.lock:
            return len(self.jvms), sum(self.jvms.values())


class Costs:
    """The plugin: a row per test file, {wall, cpu, jvms, spark, tests}."""

    def __init__(self, config):
        self.config = config
        self.watch = Watch()
        self.files: dict[str, dict[str, float]] = defaultdict(Costs.row)
        self.tests: dict[str, dict[str, float]] = defaultdict(Costs.row)  # the same by test, for --costs-json

    @staticmethod
    def row() -> dict[str, float]:
        return dict(wall=0.0, cpu=0.0, jvms=0, spark=0, tests=0)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        started, cpu = time.monotonic(), self.watch.cpu() if psutil else 0.0
        jvms, spark = self.watch.counts()
        item.stash[SERVERS_BEFORE] = len(self.watch.servers)
        yield
        cost = dict(wall=time.monotonic() - started, cpu=0.0, jvms=0, spark=0, tests=1)
        if psutil:
            now_jvms, now_spark = self.watch.counts()
            cost.update(cpu=self.watch.cpu() - cpu, jvms=now_jvms - jvms, spark=now_spark - spark)
        for row in (self.files[Path(str(item.path)).name], self.tests[item.nodeid]):
            for key, value in cost.items():
                row[key] += value

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        """A test not marked `server` that started a JVM or a server fails at its teardown: the quick
        tier (`-m "not server"`) must hold only tests that need none."""
        outcome = yield
        report = outcome.get_result()
        if call.when != "teardown" or self.watch.me is None or item.get_closest_marker("server"):
            return
        self.watch.look()
        started = self.watch.servers[item.stash.get(SERVERS_BEFORE, len(self.watch.servers)):]
        if started and report.passed:
            report.outcome = "failed"
            report.longrepr = (f"{item.nodeid} started {', '.join(sorted(set(started)))} but is not marked `server`, so "
                               f"the quick tier would run it: mark it (pytest.mark.server, or a fixture of "
                               f"SERVER_FIXTURES in tests/conftest.py)")

    def pytest_sessionfinish(self, session):
        self.watch.stopped.set()
        if hasattr(self.config, "workeroutput"):  # an xdist worker: the controller prints
            self.config.workeroutput["sscript_costs"] = json.dumps({"files": self.files, "tests": self.tests})

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):
        sent = json.loads(getattr(node, "workeroutput", {}).get("sscript_costs", "{}"))
        for kind, mine in (("files", self.files), ("tests", self.tests)):
            for name, row in sent.get(kind, {}).items():
                for key, value in row.items():
                    mine[name][key] += value

    def pytest_terminal_summary(self, terminalreporter):
        if hasattr(self.config, "workeroutput") or not self.files:
            return
        rows = sorted(self.files.items(), key=lambda kv: -kv[1]["wall"])
        path = self.config.getoption("--costs-json")
        if path:
            tests = dict(sorted(self.tests.items(), key=lambda kv: -kv[1]["wall"]))
            Path(path).write_text(json.dumps({"files": dict(rows), "tests": tests}, indent=1) + "\n")
        shown = self.config.getoption("--costs")
        if not shown:
            return
        write = terminalreporter.write_line
        total = {key: sum(row[key] for _, row in rows) for key in ("wall", "cpu", "jvms", "spark", "tests")}
        terminalreporter.section(f"the {min(shown, len(rows))} costliest test files (of {len(rows)})")
        write(f"{'file':<28} {'tests':>5} {'wall s':>8} {'CPU s':>8} {'JVMs':>5} {'Spark':>5}")
        for name, row in rows[:shown]:
            write(f"{name:<28} {row['tests']:>5} {row['wall']:>8.1f} {row['cpu']:>8.1f} {row['jvms']:>5} "
                  f"{row['spark']:>5}")
        write(f"{'all files':<28} {total['tests']:>5} {total['wall']:>8.1f} {total['cpu']:>8.1f} "
              f"{total['jvms']:>5} {total['spark']:>5}")
        if not psutil:
            write("(CPU and JVMs not counted: psutil is not installed)")


def add_options(parser) -> None:
    """The plugin's options (tests/conftest.py's pytest_addoption)."""
    group = parser.getgroup("sensorscript costs")
    group.addoption("--costs", type=int, default=15, metavar="N",
                    help="print the N costliest test files (wall, CPU, JVMs, Spark applications); 0: none")
    group.addoption("--costs-json", default=os.environ.get("SSCRIPT_TEST_COSTS"), metavar="PATH",
                    help="write every test file's costs as JSON to PATH")


def register(config) -> None:
    """Start counting (tests/conftest.py's pytest_configure)."""
    config.pluginmanager.register(Costs(config), "sscript-costs")
