"""Smoke runs of every script under scripts/, so that a refactor breaks a test and not a benchmark nobody
runs: each `scripts/*.py` runs as its own process (`python scripts/NAME.py ARGS`, from the repository's
root) on a tiny input and must exit 0 and print what SMOKE says it prints; each `scripts/*.sh` must
parse (`bash -n`: running them installs things or runs the whole suite).

The scripts are found by globbing: a new script without an entry in SMOKE fails `test_script`. Scripts
that need an external peer run without it and must say so (bench_flink.py --without-flink,
bench_flink_cep.py --skip-flink: CI has no Flink). Scripts that use Spark use it for real (local[2]);
their runs start together, two at a time, when the first of them is asked for (a Spark start is about
10 s, and soak.py mostly waits on the wall clock), and each test waits for its own.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT, need_browser

SCRIPTS = ROOT / "scripts"
PARALLEL = 2  # Spark runs at once: the machine has 2 cores, and each job's JVM takes its whole heap
OTHER = re.compile(r"\{work:([\w.]+)\}")  # in a case's arguments: the folder of another script's first case


@dataclass(frozen=True)
class Case:
    """One run of a script: its arguments ("{work}" is a fresh folder of its own; "{work:NAME}" the folder
    of NAME's first case, run before it), the patterns (re.search) its output must hold and the files
    it must write (not empty)."""

    args: tuple[str, ...]
    says: tuple[str, ...]
    writes: tuple[str, ...] = ()
    spark: bool = False  # starts Spark (marked `spark`; run in the background pool)
    browser: bool = False  # drives chromium (skipped where there is none, as the dashboard's tests are)
    timeout: float = 300.0  # a busy machine makes a Spark start several times slower
    code: int = 0  # its exit code (a script that needs a peer: its error without one; a test runs it with one)


SMOKE: dict[str, tuple[Case, ...]] = {
    "bench_alerts.py": (Case(("--rate", "20", "--seconds", "3"),
                             (r'"alarms": 60', r'"waiting_at_end": 0', r'"http_p99_ms": [\d.]+')),),
    "bench_alarm_storm.py": (Case(("--matches", "20", "--receivers", "failing"),
                                  (r'"alarms_received_unique": 20', r'"matches_written": 20', r'"repeats": 0'),
                                  spark=True),),
    "bench_alarm_latency.py": (Case(("--", "--rate", "400", "--sensors", "20", "--workflows", "4", "--minutes", "0.2",
                                     "--warmup", "4", "--out", "{work}"),
                                    (r'"reading_to_receipt_after_warmup"',), spark=True),),
    "bench_cep_scaling.py": (Case(("--keys", "2", "--per-key", "2000", "--within", "1s,1min", "--patterns", "ab,neg"),
                                  (r"\| ab \| next \| 1min \| 2 x 2,000 \| [\d.]+ \| [\d,]+ \| \d+ \| [\d,]+ \| 0 \|",
                                   r"\| neg \| any \| 1s \| 2 x 2,000 \|")),),
    # Esper and Flink themselves: `--fetch` (Maven Central, PyPI) and bench_cep_scaling.py --rivals, by hand.
    "cep_rivals.py": (Case(("--make-events", "{work}/ev.csv"), (r"400,000 events in .*ev\.csv",), ("{work}/ev.csv",)),),
    "bench_archive.py": (Case(("--rate", "2000", "--sensors", "40", "--hours", "0.02"),
                              (r"small files: 144 files, .* bytes a reading", r"merged: +2 files, .* in [\d.]+ s",
                               r"a correction's read of 4 sensors", r"GiB a day; with the default horizon of 7 days")),),
    "alarm_receiver.py": (Case(("--port", "0", "--for", "1"),
                               (r"receiving alarms on http://127\.0\.0\.1:\d+/", r"0 alarms received, 0 repeats")),),
    # Against a broker: tests/test_mqtt_source.py (test_the_gateway_script_feeds_the_spool).
    "gateway.py": (Case(("docs", "--broker", "mqtt://127.0.0.1:9"), (r"gateway: no readings in docs",),
                        code=1),
                   Case(("{work:generate_data.py}/data", "--broker", "mqtt://127.0.0.1:9"),
                        (r"gateway: cannot connect to 127\.0\.0\.1:9",), code=1)),
    "fetch_jars.py": (Case(("--check",), (r"kafka-connector: 4 jars in .*kafka-connector",
                                          r"kafka-broker: \d+ jars in .*kafka-broker")),),
    "kafka_broker.py": (Case(("--for", "1", "--dir", "{work}"),
                             (r"bootstrap: 127\.0\.0\.1:\d+", r"the Kafka broker stopped"), ("{work}/server.properties",)),),
    "bench_grafana.py": (Case(("--rows", "20000", "--streams", "80", "--runs", "1"),
                              (r"store: [\d,]+ result rows of 80 streams", r"\nResults +[\d.,]+ +[1-9][\d,]*\n",
                               r"\nNewest alarms, all workflows +[\d.,]+ +[1-9][\d,]*\n")),),
    # Parquet: two job runs (SQLite's third, the batch at once, is SSCRIPT_DRIVER_ROWS, which
    # tests/test_large_batches.py sets too).
    "bench_large_batch.py": (Case(("--workflows", "4", "--seconds", "50", "--sinks", "parquet"),
                                   (r"parquet batch +: +2,000 rows", r"parquet twice +: +4,000 rows",
                                    r"parquet: driver peak twice/batch \d"), spark=True),),
    "postgres_server.py": (Case(("--for", "1", "--tls"),
                                (r"sink: postgresql://sensors@127\.0\.0\.1:\d+/sensors\?sslmode=verify-full",
                                 r"PGPASSWORD=pg-", r"PostgreSQL stopped")),),
    "mosquitto.py": (Case(("--for", "1", "--dir", "{work}"),
                          (r"mosquitto listens on mqtt://127\.0\.0\.1:\d+", r"mosquitto stopped"),
                          ("{work}/mosquitto.conf",)),),
    "bench_mqtt.py": (Case(("--messages", "2000", "--lines-per-message", "5"),
                           (r"broker memory: .* bytes a queued message",
                            r"the spool took the backlog in [\d.]+ s: [\d,]+ messages/s, [\d,]+ readings/s")),),
    "bench_backfill.py": (Case(("--workflows", "2", "--sensors", "20", "--archive-minutes", "15", "--live-seconds", "5",
                                "--pairs", "1", "--no-warm-up", "--keep", "{work}"),
                               (r"backfill alone: [\d,]+ archived readings .* [1-9][\d,]* rows written",
                                r"live job with a backfill / alone: \d"),
                               spark=True),),
    "bench_dashboard.py": (Case(("--workflows", "16", "--sensors", "30", "--seconds", "5", "--runs", "1", "--pick", "wf0003",
                                 "--work", "{work}"),
                                (r"16 workflows \(0 flags\) compiled in [\d.]+ s; .* run with --once in",
                                 r"median of 1: title [\d.]+ s, health [\d.]+ s, alarms [\d.]+ s, usable [\d.]+ s, .*"
                                 r"picked [\d.]+ s, address [\d.]+ s", r"one look at OUT, median: first [\d.]+ ms"),
                                spark=True, browser=True),),
    "bench_cep.py": (Case(("--events", "300", "--batches", "2", "--sizes", "2,3"),
                          (r"pushdown speedup", r"\n   3 .* of 2 ")),),
    "bench_flink.py": (Case(("--without-flink", "--sensors", "8", "--rows", "3000", "--windows", "2", "--files", "1",
                             "--no-warm-up", "--keep", "{work}"),
                            (r"Flink: NOT RUN \(--without-flink\)", r"ours  \(--once, SQLite sink\): .* [1-9][\d,]* results"),
                            spark=True),),
    "bench_flink_cep.py": (Case(("--skip-flink", "--sensors", "30", "--rows", "6000", "--files", "1", "--compare-sinks",
                                 "--no-warm-up", "--keep", "{work}"),
                                (r"Flink: NOT RUN \(--skip-flink\)", r"events/s .*; [1-9][\d,]* matches;",
                                 r"ours, postgresql sink: [\d.]+ s, [1-9][\d,]* result rows",
                                 r"ours, sqlite sink: [\d.]+ s, [1-9][\d,]* result rows"),
                                spark=True),),
    "bench_compile.py": (Case(("--points", "16:40", "32:60", "--repeat", "1", "--load"),
                              (r"\n +16 +40 .*1\.00\n", r"\n +32 +60 ", r"load_job: job.py of .* from the byte code")),),
    "bench_frontend.py": (Case(("--workflows", "8", "--repeat", "1"), (r"workflows: 8  statements: 56",)),),
    "bench_input_files.py": (Case(("--files", "40,80", "--per-batch", "10", "--keep", "{work}"),
                                  (r"\n +40 +\d+ .*Mi +\d+ ", r"\n +80 +\d+ .*Mi +\d+ "), spark=True),),
    "bench_job.py": (Case(("--workflows", "2", "--sensors", "20", "--shared", "2", "--seconds", "5", "--files", "1",
                           "--check", "2", "--rounds", "1", "--no-warm-up",
                           "--profile", "--source", "kafka", "--compare-sinks", "--compare-partials",
                           "--compare-stage-0", "--keep", "{work}"),
                          (r"\(20 in the fleet, 2 shared by all\)",
                           r"limit \(pyarrow, 2 processes\): +[\d,]+ readings/s", r"raw \(stage 0, noop sink\): ",
                           r"job / raw: \d[\d.]*; job / limit: \d", r"peak memory \(RSS\): .*driver JVM",
                           r"stage-0 partials / readings alone: rate \d[\d.]*, tuples across the first shuffle \d",
                           r"profile of the job's [\d.]+ s: query start and planning [\d.]+ s\n  Spark stage 0: ",
                           r"check: the results of 2 workflows .* equal the reference evaluator's",
                           r"job through Kafka \(--once, SQLite sink\): +[1-9][\d,]* readings/s .* [1-9][\d,]* results",
                           r"Kafka / files: \d[\d.]* \(target: at least 0\.8\)",
                           r"partials / readings: rate \d[\d.]*, tuples to other partitions \d[\d.]*, shuffle "
                           r"records \d[\d.]*, shuffle bytes \d[\d.]*",
                           r"job, postgresql sink: +[1-9][\d,]* readings/s .* results: [\d,]+ rows/s; peak driver",
                           r"PostgreSQL / SQLite: \d[\d.]* \(best of 1 each\)"),
                          spark=True),),
    "bench_kafka_catchup.py": (Case(("--minutes", "0.3", "--rate", "2000", "--sensors", "30", "--workflows", "4",
                                     "--lines-per-message", "20", "--max-readings-per-batch", "10000", "--out", "{work}"),
                                    (r"backlog: 36,000 readings \(0\.3 min at 2,000/s of 30 sensors\) in 1,800 messages",
                                     r"caught up 36,000 readings in \d+ s from the job's start .*the job's totals: 36,000 "
                                     r"readings taken",
                                     r"batches: \d+, readings each: median [\d,]+, largest [\d,]+;",
                                     r"driver memory \(RSS\): Python peak [\d,]+ MiB"),
                                    writes=("{work}/catchup.json",), spark=True),),
    "bench_naive.py": (Case(("--workflows", "1", "--sensors", "20", "--seconds", "5", "--files", "1", "--timeout", "600",
                             "--keep", "{work}"),
                            (r"\n +1 +[\d,]+ +[\d,]+ +[\d.]+  yes  \(",),
                            spark=True),),
    # Made for real by scripts/test.sh before the suite (about 40 s): here only asked whether one is there.
    "jvm_archive.py": (Case(("--check", "--archive", "{work}/none.jsa"),
                            (r"archive missing or made for another pyspark or Java: .*none\.jsa",)),),
    "bench_plan.py": (Case(("--workflows", "8", "--sensors", "60", "--partitions", "2"),
                           (r"tuples/minute at n=2: ours",)),),
    "bench_sources.py": (Case(("--readings", "20000", "--files", "2", "--rounds", "1", "--no-warm-up", "--keep", "{work}"),
                              tuple(rf"\n  {way} +[\d,]+ readings/s \(batches" for way in
                                    ("text", "content", "paths", "datasource", "datasource-alone")),
                              spark=True),),
    "bench_corrections.py": (Case(("--rows", "20000,40000", "--streams", "50"),
                                   (r"a correction's comparison: 50 window streams, 1\.0% of values changed",
                                    r"\n +20,000 +\d[\d,]* +[\d.]+ +[\d,]+ +[\d,]+\n +40,000 ")),),
    "bench_stores.py": (Case(("--rows", "30000", "--streams", "40", "--runs", "1", "--compare", "--dir", "{work}"),
                             (r"[\d,]+ rows loaded in \d+ s", r"the sink opened the store \(its index built\)",
                              r"\nlatest, a stream +[\d.]+ +[\d.]+\n", r"\nbatch written +[\d.]+ +[\d.]+\n")),),
    "bench_watermark.py": (Case(("--sensors", "5", "--seconds", "20", "--levels", "3"),
                                (r"target: adaptive E >= fixed E at every level: met", r"target \(long tail\)")),),
    "generate_data.py": (Case(("{work}/data", "--seconds", "30", "--files", "2", "--bad-lines", "2"),
                              (r"wrote 7,830 readings of 12 sensors \(30 s\) and 2 bad line\(s\)",),
                              writes=("{work}/data/readings-000.csv", "{work}/data/readings-001.csv")),),
    "generate_parser.py": (Case(("--check",), (r"generated parser is up to date",)),),
    # On the pattern job bench_flink_cep.py ran (its matches are alarms), into a file of its own.
    "screenshot_dashboard.py": (Case(("{work:bench_flink_cep.py}/out", "--to", "{work}/dashboard.png", "--height", "600"),
                                     (r"wrote .*dashboard\.png",), writes=("{work}/dashboard.png",), browser=True),),
    "standalone.py": (Case(("--workers", "1", "--memory", "1g", "--for", "1", "--dir", "{work}"),
                           (r"master: spark://127\.0\.0\.1:\d+ \(1 worker", r"stopping the cluster"),
                           writes=("{work}/master.log",), spark=True),),
    # Its scenario runs whole in tests/test_cluster_hosts.py (hosts, a cluster, four faults: minutes).
    "cluster_faults.py": (Case(("--help",), (r"usage: cluster_faults\.py", r"--cut CUT")),),
    "netns.py": (Case(("--sweep",), (r"left behind by killed runs, removed: ",)),),
    "repeat_tests.py": (Case(("2", "tests/test_times.py::test_utc_by_default_and_a_named_zone_on_request"),
                             (r"\| `tests/test_times\.py::test_utc_by_default_and_a_named_zone_on_request` \| 2/2 \| 0 \| 0 \|",
                              r"2 runs, \d+-\d+ s each")),),
    "show_results.py": (Case(("{work:bench_flink_cep.py}/out/results.db", "--alarms", "2"),
                             (r"cep\.P +[1-9]", r"alarms \(pattern matches\): [1-9][\d,]*, the newest 2:")),),
    "soak.py": (
        Case(("--source", "socket", "--find-max", "--start-rate", "400", "--step-seconds", "12", "--warmup", "4",
              "--minutes", "0.3", "--sensors", "20", "--workflows", "4", "--out", "{work}"),
             (r"job stopped \(exit code 0\)", r"step at 400 readings/s: ", r"\| 400 \| \d+ \| ",
              r"highest rate sustained: "),
             spark=True),
        Case(("--source", "kafka", "--sink", "parquet", "--rate", "400", "--sensors", "20", "--workflows", "4",
              "--minutes", "0.3", "--warmup", "5", "--out", "{work}"),
             (r"job stopped \(exit code 0\)", r"soak through the kafka source", r"\| 1 \(\d+ s\) \| 400 \|",
              r"; sink parquet:\S+/job/results;", r"latency from the write, [1-9][\d,]* window results"),
             spark=True),
        Case(("--source", "mqtt", "--sink", "postgresql", "--days", "3", "--day-seconds", "6", "--rate", "400",
              "--sensors", "20", "--workflows", "4", "--warmup", "5", "--retain", "results=1d", "--out", "{work}"),
             (r"job stopped \(exit code 0\)", r"soak through the mqtt source", r"\| 1 \(\d+ s\) \| 400 \|",
              r"; sink postgresql://sensors@127\.0\.0\.1:\d+/sensors;", r"  bytes:postgresql +\d",
              r"  rows:results partitions +\d", r"  memory MiB: driver +\d",
              r"verdict: memory flat after warm-up: ", r"  lag: trend at the \d+ commits",
              r"3 days of event time, a day every 6 s",
              r"per store, at the end of simulated day 1, 2, 3", r"  bytes:archive +\d", r"  rows:results +\d",
              r"batch duration over \d+ batches timed: "),
             spark=True),
    ),
}


def _discovered(pattern: str) -> list[str]:
    return sorted(p.name for p in SCRIPTS.glob(pattern))


def _reads(name: str) -> set[str]:
    """The scripts whose folders the cases of `name` read ("{work:NAME}")."""
    return {found for case in SMOKE.get(name, ()) for arg in case.args for found in OTHER.findall(arg)}


def _uses_spark(name: str) -> bool:
    """Whether running the cases of `name` starts Spark, in them or in a script they read from."""
    return any(c.spark for c in SMOKE.get(name, ())) or any(_uses_spark(other) for other in _reads(name))


def _params(names: list[str]) -> list:
    return [pytest.param(name, marks=[pytest.mark.spark] if _uses_spark(name) else []) for name in names]


class Runs:
    """Every case's run, started once: Spark cases in a pool of PARALLEL workers, the rest when asked."""

    def __init__(self, base: Path):
        self.base = base
        self.futures: dict[tuple[str, int], Future] = {}
        self.lock = threading.Lock()
        self.pool = ThreadPoolExecutor(PARALLEL, thread_name_prefix="smoke")

    def folder(self, name: str, index: int) -> Path:
        return self.base / f"{name.removesuffix('.py')}-{index}"

    def start(self, names) -> None:
        """Start the Spark cases of these scripts in the background: those other cases read first."""
        read = set().union(*map(_reads, SMOKE))
        with self.lock:
            for name in sorted(names, key=lambda n: n not in read):
                for index, case in enumerate(SMOKE.get(name, ())):
                    if case.spark and (name, index) not in self.futures:
                        self.futures[(name, index)] = self.pool.submit(self._run, name, index)

    def result(self, name: str, index: int) -> tuple[list[str], subprocess.CompletedProcess]:
        """(the command, its run) of a case, run here and now unless it was started before."""
        with self.lock:
            future = self.futures.get((name, index))
            if future is None:
                future = self.futures[(name, index)] = Future()
                mine = True
            else:
                mine = False
        if mine:
            try:
                future.set_result(self._run(name, index))
            except BaseException as exc:
                future.set_exception(exc)
        return future.result()

    def fill(self, name: str, index: int, arg: str) -> str:
        """A case's argument with its folders in place; a script it reads from runs first."""
        def other(found: re.Match) -> str:
            self.result(found.group(1), 0)
            return str(self.folder(found.group(1), 0))
        return OTHER.sub(other, arg).replace("{work}", str(self.folder(name, index)))

    def _run(self, name: str, index: int):
        case = SMOKE[name][index]
        self.folder(name, index).mkdir(parents=True, exist_ok=True)
        command = [sys.executable, str(SCRIPTS / name), *(self.fill(name, index, a) for a in case.args)]
        environment = {**os.environ, "PYSPARK_PYTHON": sys.executable,
                       "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")}
        with subprocess.Popen(command, cwd=ROOT, env=environment, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True) as process:
            try:
                output, _ = process.communicate(timeout=case.timeout)
            except subprocess.TimeoutExpired:  # Ctrl-C first: soak.py then stops its job; then everything
                output = f"(stopped after {case.timeout:.0f} s)\n"
                for sent, wait in ((signal.SIGINT, 60), (signal.SIGKILL, 30)):
                    try:
                        os.killpg(process.pid, sent)
                        output = process.communicate(timeout=wait)[0] + output
                        break
                    except ProcessLookupError:
                        break
                    except subprocess.TimeoutExpired:
                        continue
        return command, subprocess.CompletedProcess(command, process.returncode, output)


@pytest.fixture(scope="module")
def runs(request):
    """The runs of this module; the Spark cases of the tests selected start at once, in the background.
    Their folders are in a temporary folder of their own, not under pytest's: another pytest run on the
    machine removes pytest's older numbered folders while these scripts may still be writing there."""
    base = Path(tempfile.mkdtemp(prefix="sscript-smoke-"))
    started = Runs(base)
    selected = [item.callspec.params["script"] for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec") and "script" in item.callspec.params]
    started.start(selected)
    yield started
    started.pool.shutdown(wait=True, cancel_futures=True)
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("script", _params(_discovered("*.py")))
def test_script(script, runs):
    cases = SMOKE.get(script)
    assert cases, f"scripts/{script} has no smoke case: add its tiny arguments to SMOKE in {Path(__file__).name}"
    if any(c.browser for c in cases):
        need_browser()
    for index, case in enumerate(cases):
        command, done = runs.result(script, index)
        shown = " ".join(command[1:])
        output = done.stdout
        assert done.returncode == case.code, f"{shown} exited with {done.returncode}:\n{output[-4000:]}"
        for pattern in case.says:
            assert re.search(pattern, output), f"{shown} did not print /{pattern}/:\n{output[-4000:]}"
        for written in (Path(runs.fill(script, index, w)) for w in case.writes):
            assert written.is_file() and written.stat().st_size, f"{shown} did not write {written}"


def test_smoke_table_names_only_scripts_that_exist():
    assert sorted(set(SMOKE) - set(_discovered("*.py"))) == []


@pytest.mark.parametrize("script", _discovered("*.sh"))
def test_shell_script_parses(script):
    done = subprocess.run(["bash", "-n", str(SCRIPTS / script)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr

