"""Sustained load (issue #15): the compiled job fed in real time for minutes, through the file or the socket source.

    .venv/bin/python scripts/soak.py [--source file|socket] [--rate 40000] [--minutes 10] [--sensors 1000]
                                     [--workflows 1024] [--partitions 2] [--out DIR] [--json PATH]
    .venv/bin/python scripts/soak.py --find-max [--source file|socket] [--start-rate 20000] [--step-factor 1.25]
                                     [--step-seconds 60] [--minutes 15] ...

Not part of the test suite. The machine should be otherwise idle while it runs.

Workload: the bundled example workflows (workflows/*.ss: windows of 30 s to 1 h, unions, arithmetic,
thresholds, patterns) and `--workflows` generated bridge workflows (sensorscript/workload.py: windows of
10 s to 10 min over unions of neighbouring sensors), over a fleet of `--sensors` sensors: the 13
example sensors and generated bridge sensors. Every sensor reads at rate / sensors Hz (40 Hz for
40,000 readings/s over 1,000 sensors, twice the paper's 20 Hz), so the rate fed is exact. The job is
compiled (compile_workflows, as `sscript compile`) into OUT/job and run as `python OUT/job/job.py
--input SOURCE --out OUT/job` in a child process of its own process group (local[2], trigger 1 s,
SQLite sink OUT/job/results.db); at the end it gets SIGINT (the run loop stops the query at a batch
boundary), then SIGTERM and SIGKILL to its process group if it lingers.

Feed, paced by the wall clock: a reading's event time is the wall-clock time (ms) at which it is
generated; sensor i reads at ts = (k + phase_i) * period, period = 1000 * sensors / rate ms.
  file:   every second, the readings of the last second ([k s + 0.5 s, k s + 1.5 s): Spark triggers on
          whole seconds, so a file lands half a trigger interval from one) go into a new CSV file in
          OUT/input, written as a dot-file and renamed (os.replace), which Spark's file source ignores
          until the rename. Files more than a minute behind what the job has processed are deleted.
  socket: a TCP server on 127.0.0.1 (`--input socket://127.0.0.1:PORT`); every 100 ms the readings of
          the last 100 ms, as CSV lines, written with sendall. Spark's socket source reads every line
          into the driver as it comes, so a send blocked for 60 s means the job stopped reading: the
          run ends there.
Each chunk's wall time once written (the rename done, sendall returned) is recorded with the newest
event time in it. The job is started on a priming chunk (one second of readings); the paced feed
begins once that first batch is committed, and runs `--minutes`. The first `--warmup` seconds of the
feed (60) are left out of the verdict (the state's trend starts later, below). A run whose job stops
(or stops reading the socket) is reported up to there, with the job's first error line (Spark's
errors are in OUT/job.log: SSCRIPT_SPARK_LOG=ERROR), and the script exits with 1.

What is measured (every figure comes from what the job writes: OUT/job/results.db, its checkpoint,
its printed batch lines, and the processes' /proc entries through psutil):
  commit       a batch's commit time: the earliest of (a) when the job's "batch N:" line, printed
               after the sink's transaction, reaches this script, and (b) the first poll (every
               0.1 s) of results.db that sees N in the sink's table of written batches. Result rows are
               new rowids in `results` since the previous poll; they belong to the batch(es) the same
               poll found committed (in the same transaction).
  latency      per window result (a row with window_end): commit time of its batch minus the wall time
               at which the reading that closed its window was written: the first chunk holding a
               reading with ts >= window_end. The partition's watermark passes window_end only after
               such a reading of one of its sensors, and every sensor reads in every chunk, so the chunk
               is the same for every partition (at rate / sensors >= 1 Hz for files, >= 10 Hz for the
               socket). p50 and p99 over the results whose closing chunk was written after the warm-up.
               `from window end` is the same with window_end itself (event time = wall time) in place of
               the write: it adds the feed's own buffering (up to a chunk).
  lag          every second: the newest event time written to the source minus the job's newest
               processed event time, the smallest over partitions of the `max_ts` gauge of their
               latest committed batch (metrics table). Event time is wall time, so this is how far in
               seconds the job's processing is behind the feed (in steps of a chunk: 1 s for files).
               `watermark lag` is the same with the partitions' watermark gauges (what a window waits
               for). The lag's trend is taken at each commit (the lag then, without the saw-tooth of
               the time until the next commit).
  batch        a batch's duration: its commit in the checkpoint (OUT/job/checkpoint/state/commits/N,
               modification time) minus its trigger time (batchTimestampMs in offsets/N).
  state        per partition, `state_bytes` of its latest batch (metrics table): the pickled size of
               the partition's stage-1 state (engine, watermark policy), as written to the state store.
  memory       every 5 s, RSS (and PSS) of the driver (the job's Python process), of its JVM, and of
               the Python workers (every Python process under the JVM: pyspark.daemon and its forks);
               CPU % of the job's processes and of this script (the feed and the polling).
  rates        fed: lines written per second; referenced: those of sensors the job reads (the rest
               are filtered out in Spark SQL); processed: the `readings` counters of the batches
               committed, which count referenced readings.

Per-minute table and verdict against the targets:
  memory flat     from the end of the warm-up: the least-squares line through the driver's, the JVM's
                  and the workers' RSS samples rises by at most 10 % of its mean over that span (the
                  workers' PSS is shown beside it: forked workers share pages). Needs 2 minutes of
                  samples, else shown but not judged.
  state flat      the same rule for the state of all partitions, from `--state-from` seconds of feed on
                  (default: warm-up + the job's fill time, the longest chain of window lengths and
                  pattern `within`s from a sensor to an output, windows over pattern matches left out
                  as they hold a few rows: until then the state grows by design; 20 min for the
                  default workload, whose bridge workflows chain a window of up to 10 min over windows
                  of up to 10 min). Memory is judged from the warm-up on: the state is small next
                  to the processes' memory (the report shows both).
  lag bounded     after the warm-up, the lag's least-squares trend at the commits is at most 0.01 s per s
                  (1 % of the feed left behind) and its largest sample at most `--max-lag` (30 s).
  latency         p99 under 5 s.
                  Each target is judged on at least 2 minutes of feed after the warm-up (shorter runs
                  show the figures, "not judged"), and none for a run that ended early.
  CPU             the job's processes and this script, in % of one core, and the machine's load average
                  (figures from a busy machine are not the ones to record).
--find-max: one job, fed at `--start-rate` for the warm-up and then in steps of `--step-seconds`, each
`--step-factor` times the rate before (the result's resolution); a step passes when, over its last two
thirds, the lag's trend at the commits is at most 0.03 s per s and its largest sample at most `--max-lag`
(10 s here). It stops at the first
step that fails (or at `--minutes`) and reports the highest rate that passed: run the full soak at it
with --rate. Results: the report on stdout and in OUT/report.txt, everything in OUT/soak.json (or --json).
"""

from __future__ import annotations

import argparse
import bisect
import io
import json
import math
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.csv as pa_csv

from sensorscript.compiler import compile_workflows
from sensorscript.graph.nodes import PATTERN, WINDOW
from sensorscript.registry import Sensor, SensorRegistry, read_csv
from sensorscript.workload import bridge_workload

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "workflows"
HEADER = b"sensor_id,ts,value\n"
FILE_CHUNK_MS, FILE_PHASE_MS = 1000, 500
SOCKET_CHUNK_MS = 100
POLL_SECONDS = 0.1
SEND_TIMEOUT = 60.0
LAG_EVERY, MEMORY_EVERY = 1.0, 5.0
FLAT_GROWTH = 0.10  # memory and state: fitted rise over the judged span, share of its mean
LAG_TREND = 0.01  # s of lag per s of feed: at most 1 % of the feed left behind
STEP_LAG_TREND = 0.03  # the same for --find-max's short steps (their lag trend is noisier)
P99_TARGET = 5.0
JUDGE_AT_LEAST = 120.0  # seconds of samples needed to judge a trend
BATCH_LINE = re.compile(r"^batch (\d+):")


# ------------------------------------------------------------------ the workload

@dataclass
class Workload:
    sensors: list[str]  # the fleet, every one fed
    referenced: frozenset[str]  # those the job reads
    workflows: int  # files compiled
    fill_ms: int  # the job's state grows for this long after its input starts (see the module's doc)


def prepare(args, work: Path) -> Workload:
    """Write the workflows and the sensor registry, compile the job into work/job."""
    examples = read_csv(EXAMPLES / "sensors.csv")
    generated = bridge_workload(args.workflows, max(args.sensors - len(examples), 1)) if args.workflows else None
    known = {s.sensor_id for s in examples}
    fleet = examples + [s for s in (generated.sensors if generated else []) if s.sensor_id not in known]
    fleet += [Sensor(f"SOAK{i}", 1.0, "spare") for i in range(args.sensors - len(fleet))]
    fleet = fleet[:args.sensors] if len(fleet) > args.sensors else fleet
    hz = args.rate / len(fleet)
    scripts = work / "workflows"
    shutil.rmtree(scripts, ignore_errors=True)
    scripts.mkdir(parents=True)
    for path in sorted(EXAMPLES.glob("*.ss")):
        shutil.copy(path, scripts / path.name)
    for name, text in (generated.workflows.items() if generated else ()):
        (scripts / f"{name}.ss").write_text(text)
    registry = work / "sensors.db"
    registry.unlink(missing_ok=True)
    sensors = SensorRegistry.create(registry)
    sensors.put([Sensor(s.sensor_id, hz, s.type) for s in fleet])
    sensors.close()
    files = sorted(str(p) for p in scripts.glob("*.ss"))
    compiled = compile_workflows(files, work / "job", str(registry), args.partitions)
    graph = compiled.plan.graph
    missing = set(graph.sensors()) - {s.sensor_id for s in fleet}
    if missing:
        raise SystemExit(f"the workflows read sensors outside the fleet: {sorted(missing)[:5]}")
    return Workload([s.sensor_id for s in fleet], frozenset(graph.sensors()), len(files), fill_ms(graph))


def fill_ms(graph) -> int:
    """The longest chain of window lengths and pattern `within`s from a sensor to an output, leaving
    out windows over pattern matches (a few rows): how long the job's state grows after its input starts."""
    memo: dict[str, tuple[int, bool]] = {}

    def walk(node_id: str) -> tuple[int, bool]:  # (fill, fed by a pattern)
        if node_id not in memo:
            node = graph.node(node_id)
            inputs = [walk(i) for i in node.inputs]
            longest = max((f for f, _ in inputs), default=0)
            from_pattern = any(p for _, p in inputs)
            if node.kind == WINDOW and not from_pattern:
                longest += node.length
            elif node.kind == PATTERN:
                longest += node.key[1][2]  # the description's `within`, ms (graph/build.py)
                from_pattern = True
            memo[node_id] = (longest, from_pattern)
        return memo[node_id]

    return max((walk(n.id)[0] for n in graph.nodes()), default=0)


# ------------------------------------------------------------------ the feed

class Readings:
    """The fleet's readings, paced by the wall clock: sensor i at ts = (k + phase_i) * period."""

    def __init__(self, sensors: list[str], referenced: frozenset[str], rate: float, seed: int = 7):
        rng = np.random.default_rng(seed)
        self.names = pa.array(sensors, pa.string())
        self.phase = rng.random(len(sensors))
        self.wave = rng.uniform(0, 2 * np.pi, len(sensors))
        self.is_referenced = np.array([s in referenced for s in sensors])
        self.rng = rng
        self.rate = rate

    def between(self, start_ms: int, end_ms: int) -> tuple[bytes, int, int, int]:
        """CSV lines of the readings with start_ms <= ts < end_ms: (text, readings, referenced, newest ts)."""
        period = 1000.0 * len(self.phase) / self.rate
        k = np.arange(math.floor(start_ms / period) - 1, math.ceil(end_ms / period) + 1)
        times = (k[:, None] + self.phase[None, :]) * period
        ts = np.floor(times).astype(np.int64)
        inside = (ts >= start_ms) & (ts < end_ms)
        row, sensor = np.nonzero(inside)
        ts = ts[row, sensor]
        order = np.argsort(ts, kind="stable")
        ts, sensor = ts[order], sensor[order]
        value = np.round(10 * np.sin(2 * np.pi * ts / 600_000 + self.wave[sensor])
                         + self.rng.normal(0, 1, len(ts)), 3)
        table = pa.table({"sensor_id": self.names.take(pa.array(sensor)), "ts": pa.array(ts), "value": value})
        buffer = io.BytesIO()
        pa_csv.write_csv(table, buffer, pa_csv.WriteOptions(include_header=False, quoting_style="none"))
        return (buffer.getvalue(), len(ts), int(self.is_referenced[sensor].sum()),
                int(ts[-1]) if len(ts) else start_ms - 1)


@dataclass
class Chunk:
    written: float  # wall time once written (s since the epoch)
    newest_ts: int  # ms
    readings: int
    referenced: int
    rate: float  # the rate it was fed at
    lateness: float  # written - end of the chunk's event time (s): the feed's own delay
    span: float  # the event time it covers (s)


class Feed(threading.Thread):
    """Writes the fleet's readings in chunks paced by the wall clock, and records every chunk."""

    chunk_ms = FILE_CHUNK_MS
    phase_ms = 0

    def __init__(self, readings: Readings):
        super().__init__(daemon=True, name=type(self).__name__)
        self.readings = readings
        self.chunks: list[Chunk] = []
        self.started_at: float | None = None  # wall time the paced feed began
        self.until: float = math.inf
        self.go = threading.Event()
        self.done = threading.Event()
        self.error: str | None = None
        self.cursor_ms = 0

    def prime(self) -> None:
        """One second of readings before the paced feed, to start the job on."""
        now = int(time.time() * 1000)
        self.write_chunk(now - 1000, now)

    def write_chunk(self, start_ms: int, end_ms: int) -> None:
        text, count, referenced, newest = self.readings.between(start_ms, end_ms)
        self.emit(text, newest)
        written = time.time()
        self.chunks.append(Chunk(written, newest, count, referenced, self.readings.rate, written - end_ms / 1000,
                                 (end_ms - start_ms) / 1000))
        self.cursor_ms = end_ms

    def run(self) -> None:
        self.go.wait()
        try:
            self.started_at = time.time()
            start = self._boundary(self.started_at * 1000)
            self.cursor_ms = start - self.chunk_ms  # the first chunk ends at the first boundary
            while not self.done.is_set():
                end = self._boundary(max(time.time() * 1000, self.cursor_ms + 1))
                if end / 1000 > self.until:
                    break
                time.sleep(max(0.0, end / 1000 - time.time()))
                self.write_chunk(self.cursor_ms, end)
        except TimeoutError:
            self.error = f"the job read nothing from the socket for {SEND_TIMEOUT:.0f} s"
        except (OSError, ValueError) as exc:
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.done.set()

    def _boundary(self, ms: float) -> int:
        """The next chunk boundary at or after `ms`."""
        return int(math.ceil((ms - self.phase_ms) / self.chunk_ms) * self.chunk_ms + self.phase_ms)

    def emit(self, text: bytes, newest_ts: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.done.set()

    # Read by the watcher and the sampler (lists only grow; a snapshot of their length is safe).
    def newest_written(self, at: float | None = None) -> int | None:
        chunks = self.chunks[:]
        if at is None:
            return chunks[-1].newest_ts if chunks else None
        index = bisect.bisect_right([c.written for c in chunks], at)  # written times only grow
        return chunks[index - 1].newest_ts if index else None


class FileFeed(Feed):
    chunk_ms, phase_ms = FILE_CHUNK_MS, FILE_PHASE_MS

    def __init__(self, readings: Readings, folder: Path):
        super().__init__(readings)
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.files: list[tuple[Path, int]] = []  # (file, newest ts), until deleted
        self.written = 0

    @property
    def source(self) -> str:
        return str(self.folder)

    def emit(self, text: bytes, newest_ts: int) -> None:
        name = f"readings-{self.written:06d}.csv"
        temporary = self.folder / f".{name}"
        temporary.write_bytes(HEADER + text)
        os.replace(temporary, self.folder / name)
        self.written += 1
        self.files.append((self.folder / name, newest_ts))

    def clean(self, processed_ms: int) -> None:
        """Delete files more than a minute of event time behind what every partition has processed:
        Spark read them in a committed batch (files are read in modification-time order, whole)."""
        while self.files and self.files[0][1] < processed_ms - 60_000:
            path, _ = self.files.pop(0)
            path.unlink(missing_ok=True)


class SocketFeed(Feed):
    chunk_ms, phase_ms = SOCKET_CHUNK_MS, 0

    def __init__(self, readings: Readings):
        super().__init__(readings)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.connection: socket.socket | None = None

    @property
    def source(self) -> str:
        return f"socket://127.0.0.1:{self.port}"

    def accept(self, job: "JobProcess", timeout: float) -> None:
        """Wait for the job's socket source to connect (while the job lives)."""
        self.server.settimeout(1.0)
        deadline = time.time() + timeout
        while self.connection is None:
            try:
                self.connection, _ = self.server.accept()
            except TimeoutError:
                if not job.alive() or time.time() > deadline:
                    raise SystemExit("the job did not connect to the socket:\n" + "\n".join(job.tail[-20:]))
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # Spark's socket source reads every line into the driver as it comes; a send that blocks this
        # long means the job has stopped reading.
        self.connection.settimeout(SEND_TIMEOUT)

    def emit(self, text: bytes, newest_ts: int) -> None:
        self.connection.sendall(text)

    def close(self) -> None:
        super().close()
        for end in (self.connection, self.server):
            if end is not None:
                try:
                    end.close()
                except OSError:
                    pass


# ------------------------------------------------------------------ the job

class JobProcess:
    """`python OUT/job/job.py --input SOURCE --out OUT/job` in its own process group; its output is
    timestamped into OUT/job.log, and the arrival of each "batch N:" line recorded."""

    def __init__(self, job_dir: Path, source: str, log: Path):
        environment = {**os.environ, "PYTHONUNBUFFERED": "1",
                       # Spark's errors (an OutOfMemoryError in the JVM, say) into the job's log
                       "SSCRIPT_SPARK_LOG": os.environ.get("SSCRIPT_SPARK_LOG", "ERROR"),
                       "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
                       "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        self.command = [sys.executable, str(job_dir / "job.py"), "--input", source, "--out", str(job_dir)]
        self.process = subprocess.Popen(self.command, env=environment, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, bufsize=1, start_new_session=True)
        self.lines_at: dict[int, float] = {}  # batch id -> when its line arrived
        self.tail: list[str] = []
        self.errors: list[str] = []  # the first lines that name an error
        self.log = log.open("w")
        self.reader = threading.Thread(target=self._read, daemon=True, name="job-output")
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            now = time.time()
            line = line.rstrip("\n")
            found = BATCH_LINE.match(line)
            if found:
                self.lines_at.setdefault(int(found.group(1)), now)
            self.log.write(f"{now:.3f} {line}\n")
            self.log.flush()
            self.tail = (self.tail + [line])[-40:]
            if len(self.errors) < 20 and ("Error" in line or "Exception" in line):
                self.errors.append(line.strip())

    def error(self) -> str:
        """What the job's output says went wrong: an OutOfMemoryError first, else the first error line."""
        found = [e for e in self.errors if "OutOfMemoryError" in e] or self.errors or self.tail[-1:]
        return found[0][:300] if found else f"exit code {self.process.poll()}"

    def alive(self) -> bool:
        return self.process.poll() is None

    def processes(self) -> dict[str, list[psutil.Process]]:
        """The job's processes: driver (its Python, and anything else outside the JVM), jvm, workers
        (the Python processes under the JVM)."""
        found: dict[str, list[psutil.Process]] = {"driver": [], "jvm": [], "workers": []}
        try:
            driver = psutil.Process(self.process.pid)
            children = driver.children(recursive=True)
        except psutil.Error:
            return found
        found["driver"].append(driver)
        for child in children:
            try:  # a child may end while it is looked at
                if child.name() == "java":
                    found["jvm"].append(child)
                elif any(parent.name() == "java" for parent in child.parents()):
                    found["workers"].append(child)
                else:
                    found["driver"].append(child)
            except psutil.Error:
                continue
        return found

    def stop(self, echo) -> int | None:
        """SIGINT to the driver (the run loop stops the query at a batch boundary), then SIGTERM and
        SIGKILL to the job's process group if it lingers."""
        group = self.process.pid  # its own session and process group (start_new_session)
        for sent, wait in ((signal.SIGINT, 60), (signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            if not self.alive():
                break
            try:
                if sent == signal.SIGINT:
                    os.kill(self.process.pid, sent)
                else:
                    echo(f"the job did not stop: {signal.Signals(sent).name} to its process group")
                    os.killpg(group, sent)
            except ProcessLookupError:
                break
            try:
                self.process.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # what the driver's exit leaves behind (a JVM, a worker daemon) goes too
            os.killpg(group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.reader.join(5)
        self.log.close()
        return self.process.returncode


# ------------------------------------------------------------------ what the job wrote

@dataclass
class Batch:
    batch_id: int
    committed: float
    readings: int = 0
    results: int = 0
    state: dict[int, float] = field(default_factory=dict)  # partition -> state bytes
    max_ts: dict[int, float] = field(default_factory=dict)
    watermark: dict[int, float] = field(default_factory=dict)
    duration: float | None = None  # from the checkpoint


@dataclass
class Result:
    """A window result: when its batch was committed, and its window's end (ms)."""

    committed: float
    closing_ms: int


class SinkWatcher(threading.Thread):
    """Polls the job's results.db: committed batches, their metrics, new result rows."""

    GAUGES = ("readings", "state_bytes", "max_ts", "watermark")

    def __init__(self, database: Path, job: JobProcess):
        super().__init__(daemon=True, name="sink-watcher")
        self.database = database
        self.job = job
        self.batches: dict[int, Batch] = {}
        self.results: list[Result] = []
        self.other_results = 0  # rows without a window (combine, patterns): no latency measured
        self.last_batch = -1
        self.last_rowid = 0
        self.partitions: dict[int, dict[str, float]] = {}  # the newest gauges of each partition
        self.stopped = threading.Event()
        self.db: sqlite3.Connection | None = None

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                self.poll()
            except sqlite3.Error:
                self.db = None  # not there yet, or busy: try again
            time.sleep(POLL_SECONDS)

    def poll(self) -> None:
        if self.db is None:
            if not self.database.exists():
                return
            self.db = sqlite3.connect(f"file:{self.database}?mode=ro", uri=True, timeout=5, isolation_level=None,
                                      check_same_thread=False)
        db = self.db
        db.execute("BEGIN")  # one snapshot: the batches, their rows and their metrics together
        try:
            new = [b for (b,) in db.execute("SELECT batch_id FROM sscript_batches WHERE batch_id > ? ORDER BY batch_id",
                                            (self.last_batch,))]
            if not new:
                return
            now = time.time()
            rows = db.execute("SELECT rowid, window_end FROM results WHERE rowid > ? ORDER BY rowid",
                              (self.last_rowid,)).fetchall()
            metrics = db.execute(
                f"SELECT batch_id, partition, name, value FROM metrics WHERE batch_id > ? AND batch_id <= ? "
                f"AND name IN ({', '.join('?' * len(self.GAUGES))})",
                (self.last_batch, new[-1], *self.GAUGES)).fetchall()
        finally:
            db.execute("COMMIT")
        for batch_id in new:
            line = self.job.lines_at.get(batch_id)
            self.batches[batch_id] = Batch(batch_id, min(now, line) if line else now)
        for batch_id, partition, name, value in metrics:
            batch = self.batches[batch_id]
            if partition is None:
                continue
            partition = int(partition)
            if name == "readings":
                batch.readings += int(value)
            elif name == "state_bytes":
                batch.state[partition] = value
            elif name == "max_ts":
                batch.max_ts[partition] = value
            elif name == "watermark":
                batch.watermark[partition] = value
            self.partitions.setdefault(partition, {})[name] = value
        # Rows of one poll belong to the batches it found; with one batch a poll (batches are a second
        # apart, polls 0.1 s) their commit is that batch's.
        committed = self.batches[new[-1]].committed if len(new) == 1 else now
        self.batches[new[-1]].results += len(rows)
        for rowid, window_end in rows:
            if window_end is None:
                self.other_results += 1
            else:
                self.results.append(Result(committed, int(window_end)))
        self.last_batch = new[-1]
        if rows:
            self.last_rowid = rows[-1][0]

    def committed(self) -> list[Batch]:
        """The batches seen so far, in order (a copy: this thread adds to them)."""
        return sorted(list(self.batches.values()), key=lambda b: b.batch_id)

    def processed_ms(self, name: str = "max_ts") -> float | None:
        """The job's newest processed event time (or watermark): the smallest over partitions."""
        found = [g[name] for g in list(self.partitions.values()) if name in g]
        return min(found) if found else None

    def stop(self) -> None:
        self.stopped.set()
        self.join(5)
        try:
            self.poll()
        except sqlite3.Error:
            pass


def checkpoint_durations(checkpoint: Path, batches: dict[int, Batch]) -> None:
    """Fill in batch durations from Spark's checkpoint: commits/N's modification time minus the
    batch's trigger time (offsets/N: batchTimestampMs). Spark keeps the last 100 of each."""
    offsets, commits = checkpoint / "offsets", checkpoint / "commits"
    if not commits.is_dir():
        return
    for path in commits.iterdir():
        if not path.name.isdigit():
            continue
        batch = batches.get(int(path.name))
        if batch is None or batch.duration is not None:
            continue
        try:
            lines = (offsets / path.name).read_text().splitlines()
            triggered = json.loads(lines[1])["batchTimestampMs"] / 1000
            batch.duration = path.stat().st_mtime - triggered
        except (OSError, IndexError, KeyError, ValueError):
            continue


# ------------------------------------------------------------------ sampling

@dataclass
class Sample:
    at: float  # s since the feed began
    lag: float | None  # s
    watermark_lag: float | None
    rss: dict[str, float] | None = None  # MiB: driver, jvm, workers
    pss: dict[str, float] | None = None
    workers: int | None = None
    cpu: dict[str, float] | None = None  # % of one core: job, soak
    load: float | None = None  # the machine's load average over 1 minute
    state_total: float | None = None  # bytes, over partitions
    state_max: float | None = None


class Sampler:
    def __init__(self, job: JobProcess, feed: Feed, watcher: SinkWatcher, checkpoint: Path, echo):
        self.job, self.feed, self.watcher, self.checkpoint, self.echo = job, feed, watcher, checkpoint, echo
        self.samples: list[Sample] = []
        self.cpu_seen: dict[int, float] = {}
        self.own = psutil.Process()
        self.own_cpu = self._cpu(self.own)
        self.cpu_at = time.time()
        self.next_memory = 0.0

    @staticmethod
    def _cpu(process: psutil.Process) -> float:
        """CPU seconds of the process's own threads (not of its children: a worker counted while it
        ran would be counted again in its parent's once it ends)."""
        times = process.cpu_times()
        return times.user + times.system

    def lags(self) -> tuple[float | None, float | None]:
        fed = self.feed.newest_written()
        if fed is None:
            return None, None
        processed, watermark = self.watcher.processed_ms("max_ts"), self.watcher.processed_ms("watermark")
        return (None if processed is None else (fed - processed) / 1000,
                None if watermark is None else (fed - watermark) / 1000)

    def sample(self) -> Sample:
        now = time.time()
        lag, watermark_lag = self.lags()
        sample = Sample(now - self.feed.started_at, lag, watermark_lag)
        if now >= self.next_memory:
            self.next_memory = now + MEMORY_EVERY
            self._memory(sample, now)
            state = [g["state_bytes"] for g in self.watcher.partitions.values() if "state_bytes" in g]
            if state:
                sample.state_total, sample.state_max = float(sum(state)), float(max(state))
            checkpoint_durations(self.checkpoint, self.watcher.batches)
            if isinstance(self.feed, FileFeed):
                processed = self.watcher.processed_ms()
                if processed is not None:
                    self.feed.clean(int(processed))
            self.echo(self.progress(sample))
        self.samples.append(sample)
        return sample

    def _memory(self, sample: Sample, now: float) -> None:
        groups = self.job.processes()
        sample.rss, sample.pss = {}, {}
        job_cpu = 0.0
        for name, processes in groups.items():
            rss = pss = 0.0
            for process in processes:
                try:
                    info = process.memory_full_info()
                    rss += info.rss
                    pss += getattr(info, "pss", info.rss)
                    total = self._cpu(process)
                    job_cpu += total - self.cpu_seen.get(process.pid, total)
                    self.cpu_seen[process.pid] = total
                except psutil.Error:
                    continue
            sample.rss[name], sample.pss[name] = rss / 2**20, pss / 2**20
        sample.workers = len(groups["workers"])
        sample.load = os.getloadavg()[0]
        own = self._cpu(self.own)
        if self.samples:  # the first sample only sets the baselines
            elapsed = max(now - self.cpu_at, 1e-6)
            sample.cpu = {"job": 100 * job_cpu / elapsed, "soak": 100 * (own - self.own_cpu) / elapsed}
        self.own_cpu, self.cpu_at = own, now

    def progress(self, s: Sample) -> str:
        batches = self.watcher.committed()
        last = batches[-1] if batches else None
        window = min(10.0, max(s.at, 1.0))
        fed = sum(c.readings for c in self.feed.chunks if c.written >= time.time() - window) / window
        text = [f"{s.at:6.0f} s", f"fed {fed:,.0f}/s"]
        if last is not None:
            text.append(f"batch {last.batch_id}" + (f" {last.duration:.1f} s" if last.duration else ""))
        if s.lag is not None:
            text.append(f"lag {s.lag:.1f} s")
        if s.state_total is not None:
            text.append(f"state {s.state_max / 2**20:.1f}/{s.state_total / 2**20:.1f} MiB (max/total)")
        if s.rss:
            text.append(f"RSS driver {s.rss['driver']:.0f} MiB, JVM {s.rss['jvm']:.0f} MiB, "
                        f"workers {s.rss['workers']:.0f} MiB ({s.workers})")
        if s.cpu:
            text.append(f"CPU job {s.cpu['job']:.0f} % soak {s.cpu['soak']:.0f} %")
        return "  " + ", ".join(text)


# ------------------------------------------------------------------ figures

def percentile(values, q: float) -> float | None:
    return float(np.percentile(values, q)) if len(values) else None


def trend(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """(slope per s, mean) of the least-squares line through (t, y)."""
    if len(points) < 3:
        return None
    t, y = np.array(points, dtype=float).T
    if t.max() - t.min() <= 0:
        return None
    return float(np.polyfit(t, y, 1)[0]), float(y.mean())


def batch_lags(watcher: SinkWatcher, feed: Feed) -> list[tuple[float, float]]:
    """(commit time s since the feed began, lag at that commit in s) per batch: the lag sampled right
    after each commit, without the saw-tooth of the lag between commits (which grows by the time
    until the next commit); what its trend is judged on."""
    newest: dict[int, float] = {}
    out = []
    for batch in watcher.committed():
        newest.update(batch.max_ts)
        fed = feed.newest_written(batch.committed)
        if newest and fed is not None and batch.committed >= feed.started_at:
            out.append((batch.committed - feed.started_at, (fed - min(newest.values())) / 1000))
    return out


def latencies(results: list[Result], feed: Feed, since: float) -> list[tuple[float, float, float]]:
    """(commit time s since the feed began, latency from the write, latency from the window's end)
    of the window results whose closing chunk was written after `since` (s since the feed began)."""
    chunks = feed.chunks
    newest = np.array([c.newest_ts for c in chunks], np.int64)
    written = np.array([c.written for c in chunks])
    newest = np.maximum.accumulate(newest)
    out = []
    for result in results:
        at = int(np.searchsorted(newest, result.closing_ms, side="left"))
        if at >= len(chunks):
            continue
        if written[at] - feed.started_at < since:
            continue
        out.append((result.committed - feed.started_at, result.committed - written[at],
                    result.committed - result.closing_ms / 1000))
    return out


def minute_rows(feed: Feed, watcher: SinkWatcher, samples: list[Sample], lat, observed_s: float) -> list[dict]:
    """Per minute of feed (the drain after it included): the figures of the module's doc."""
    start = feed.started_at
    rows = []
    for minute in range(int(math.ceil(observed_s / 60))):
        lo, hi = minute * 60.0, (minute + 1) * 60.0
        observing = min(hi, observed_s) - lo
        chunks = [c for c in feed.chunks if lo <= c.written - start < hi]
        covered = sum(c.span for c in chunks)
        batches = [b for b in watcher.committed() if lo <= b.committed - start < hi]
        mine = [s for s in samples if lo <= s.at < hi]
        memory = [s for s in mine if s.rss]
        cpu = [s for s in memory if s.cpu]
        stateful = [s for s in mine if s.state_total is not None]
        durations = [b.duration for b in batches if b.duration is not None]
        lags = [s.lag for s in mine if s.lag is not None]
        here = [x for x in lat if lo <= x[0] < hi]
        if observing <= 0:
            continue
        rows.append({
            "minute": minute + 1, "seconds": observing,
            # per second of the event time the minute's chunks cover (a chunk may end a minute)
            "fed_per_s": sum(c.readings for c in chunks) / covered if covered else 0.0,
            "referenced_per_s": sum(c.referenced for c in chunks) / covered if covered else 0.0,
            "processed_per_s": sum(b.readings for b in batches) / observing,
            "driver_mib": _mean([s.rss["driver"] for s in memory]),
            "jvm_mib": _mean([s.rss["jvm"] for s in memory]),
            "workers_mib": _mean([s.rss["workers"] for s in memory]),
            "workers_pss_mib": _mean([s.pss["workers"] for s in memory]),
            "workers": max((s.workers for s in memory), default=None),
            "state_max_bytes": stateful[-1].state_max if stateful else None,
            "state_total_bytes": stateful[-1].state_total if stateful else None,
            "batches": len(batches),
            "batch_p50_s": percentile(durations, 50),
            "batch_max_s": max(durations) if durations else None,
            "lag_mean_s": _mean(lags),
            "lag_max_s": max(lags) if lags else None,
            "latency_p50_s": percentile([x[1] for x in here], 50),
            "latency_p99_s": percentile([x[1] for x in here], 99),
            "results": len(here),
            "cpu_job": _mean([s.cpu["job"] for s in cpu]),
            "cpu_soak": _mean([s.cpu["soak"] for s in cpu]),
        })
    return rows


def _mean(values) -> float | None:
    return float(np.mean(values)) if len(values) else None


def _f(value, fmt: str, scale: float = 1.0) -> str:
    return "-" if value is None else format(value / scale, fmt)


def minute_table(rows: list[dict]) -> str:
    head = ("min", "fed/s", "ref fed/s", "processed/s", "driver MiB", "JVM MiB", "workers MiB (n)",
            "state KiB max/total", "batches", "batch s p50/max", "lag s mean/max", "latency s p50/p99", "CPU % job/soak")
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in rows:
        lines.append(" | ".join((
            str(r["minute"]) + (f" ({r['seconds']:.0f} s)" if r["seconds"] < 59.5 else ""), _f(r["fed_per_s"], ",.0f"), _f(r["referenced_per_s"], ",.0f"),
            _f(r["processed_per_s"], ",.0f"), _f(r["driver_mib"], ".0f"), _f(r["jvm_mib"], ".0f"),
            f"{_f(r['workers_mib'], '.0f')} ({_f(r['workers'], '.0f')})",
            f"{_f(r['state_max_bytes'], ',.0f', 1024)}/{_f(r['state_total_bytes'], ',.0f', 1024)}",
            str(r["batches"]), f"{_f(r['batch_p50_s'], '.2f')}/{_f(r['batch_max_s'], '.2f')}",
            f"{_f(r['lag_mean_s'], '.1f')}/{_f(r['lag_max_s'], '.1f')}",
            f"{_f(r['latency_p50_s'], '.2f')}/{_f(r['latency_p99_s'], '.2f')}",
            f"{_f(r['cpu_job'], '.0f')}/{_f(r['cpu_soak'], '.0f')}")))
    return "\n".join("| " + line + " |" for line in lines)


def flatness(samples: list[Sample], name: str, value, since: float, unit: str, scale: float) -> tuple[str, dict | None]:
    """The least-squares trend of `value` over the samples from `since` on: judged flat when its rise over
    that span is at most FLAT_GROWTH of the mean, given at least JUDGE_AT_LEAST seconds of samples."""
    points = [(s.at, value(s)) for s in samples if s.at >= since and s.rss and value(s) is not None]
    fitted = trend(points)
    if fitted is None:
        return f"  {name}: too few samples from {since:.0f} s of feed on", None
    slope, mean = fitted
    span = points[-1][0] - points[0][0]
    growth = slope * span / mean if mean else 0.0
    edge = min(60.0, span / 2)  # the first and last minute (of a shorter span, its halves)
    first = float(np.mean([y for t, y in points if t <= points[0][0] + edge]))
    last = float(np.mean([y for t, y in points if t >= points[-1][0] - edge]))
    judged = span >= JUDGE_AT_LEAST
    flat = growth <= FLAT_GROWTH if judged else None
    line = (f"  {name}: {first * scale:,.1f} -> {last * scale:,.1f} {unit} (mean of the first and last "
            f"{edge:.0f} s from {since:.0f} s of feed on), trend {slope * 60 * scale:+,.2f} {unit}/min, "
            f"{growth:+.1%} over {span:.0f} s"
            + ("" if judged else f" (not judged: under {JUDGE_AT_LEAST:.0f} s of samples)"))
    return line, {"since_s": since, "first_minute": first * scale, "last_minute": last * scale,
                  "trend_per_min": slope * 60 * scale, "growth": growth, "span_s": span, "flat": flat}


def verdict(samples: list[Sample], lags: list[tuple[float, float]], lat, warmup: float, state_from: float,
            fill_s: float, max_lag: float, failure: str | None) -> tuple[list[str], dict]:
    """The run against the targets of issue #15 (see the module's doc for each rule). A target is
    judged on at least JUDGE_AT_LEAST seconds of feed after the warm-up, and never for a failed run."""
    lines, found = [], {}
    memory = []
    for name, value in (("driver RSS", lambda s: s.rss["driver"]), ("JVM RSS", lambda s: s.rss["jvm"]),
                        ("workers RSS", lambda s: s.rss["workers"]), ("workers PSS", lambda s: s.pss["workers"])):
        line, found[name] = flatness(samples, name, value, warmup, "MiB", 1.0)
        lines.append(line)
        if name != "workers PSS":  # shown beside RSS: forked workers share pages
            memory.append(found[name]["flat"] if found[name] else None)
    line, found["state"] = flatness(samples, "state, all partitions", lambda s: s.state_total, state_from,
                                    "KiB", 1 / 1024)
    lines.append(line)
    memory_flat = None if None in memory else all(memory)
    state_flat = found["state"]["flat"] if found["state"] else None
    after = [(t, lag) for t, lag in lags if t >= warmup]
    fed_after = max((s.at for s in samples), default=0.0) - warmup
    judged = fed_after >= JUDGE_AT_LEAST and failure is None
    fitted = trend(after)
    largest = max((s.lag for s in samples if s.at >= warmup and s.lag is not None), default=None)
    lag_ok = (fitted is not None and fitted[0] <= LAG_TREND and largest <= max_lag) if judged else None
    found["lag"] = {"trend_s_per_s": fitted[0] if fitted else None, "max_s": largest, "commits": len(after),
                    "bounded": lag_ok}
    lines.append(f"  lag: trend at the {len(after)} commits after the warm-up "
                 + (f"{fitted[0]:+.4f} s/s" if fitted else "-") + f" (at most {LAG_TREND}), "
                 f"largest sampled {_f(largest, '.1f')} s (at most {max_lag:.0f} s)")
    p50, p99 = percentile([x[1] for x in lat], 50), percentile([x[1] for x in lat], 99)
    p99_end = percentile([x[2] for x in lat], 99)
    latency_ok = (p99 is not None and p99 < P99_TARGET) if judged else None
    found["latency"] = {"p50_s": p50, "p99_s": p99, "p99_from_window_end_s": p99_end, "results": len(lat),
                        "under_target": latency_ok}
    lines.append(f"  latency from the write, {len(lat):,} window results: p50 {_f(p50, '.2f')} s, "
                 f"p99 {_f(p99, '.2f')} s (from the window's end: p99 {_f(p99_end, '.2f')} s)")
    busy = [s for s in samples if s.at >= warmup and s.cpu]
    if busy:
        found["cpu"] = {"job_percent": _mean([s.cpu["job"] for s in busy]),
                        "soak_percent": _mean([s.cpu["soak"] for s in busy]),
                        "load_mean": _mean([s.load for s in busy]), "load_max": max(s.load for s in busy)}
        lines.append(f"  CPU after the warm-up: the job {found['cpu']['job_percent']:.0f} % of one core, this script "
                     f"{found['cpu']['soak_percent']:.0f} %; the machine's load average {found['cpu']['load_mean']:.1f} "
                     f"(largest {found['cpu']['load_max']:.1f}) on {os.cpu_count()} cores")
    if failure is not None:
        memory_flat = state_flat = None
    found.update(memory_flat=memory_flat, state_flat=state_flat, lag_bounded=lag_ok, latency_under_target=latency_ok)
    marks = {True: "yes", False: "NO", None: "not judged"}
    state_note = f" (the state fills for {fill_s / 60:.1f} min: feed longer)" if state_flat is None and not failure else ""
    head = [f"verdict: memory flat after warm-up: {marks[memory_flat]}; state flat: {marks[state_flat]}{state_note}; "
            f"lag bounded: {marks[lag_ok]}; p99 latency under {P99_TARGET:.0f} s: {marks[latency_ok]}"
            + ("" if judged or failure else f" (under {JUDGE_AT_LEAST:.0f} s of feed after the warm-up)")]
    return head + lines, found


# ------------------------------------------------------------------ the run

@dataclass
class Soak:
    """A finished run: what was fed, what the job wrote, and how it ended."""

    feed: Feed
    watcher: SinkWatcher
    sampler: Sampler
    steps: list[dict]
    fed_s: float  # seconds of paced feed
    observed_s: float  # seconds from the feed's start to the job's stop
    drained_s: float
    exit_code: int | None
    failure: str | None  # why the run ended early, if it did


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", choices=("file", "socket"), default="file")
    parser.add_argument("--rate", type=float, default=40_000, help="readings per second, all sensors")
    parser.add_argument("--minutes", type=float, default=None, help="feed for this long (default 10; "
                                                                    "--find-max: at most this long, default 15)")
    parser.add_argument("--sensors", type=int, default=1000)
    parser.add_argument("--workflows", type=int, default=1024, help="generated bridge workflows beside the examples")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--out", help="work folder (default: a new one under /tmp); emptied first")
    parser.add_argument("--json", help="also write the results here (they are always in OUT/soak.json)")
    parser.add_argument("--warmup", type=float, default=60, help="seconds of feed left out of the figures")
    parser.add_argument("--state-from", type=float, help="judge the state from this second of feed on "
                                                         "(default: warm-up + the job's fill time)")
    parser.add_argument("--max-lag", type=float, help="largest lag allowed, s (default 30; --find-max 10)")
    parser.add_argument("--find-max", action="store_true", help="raise the rate in steps while the lag stays bounded")
    parser.add_argument("--start-rate", type=float, default=20_000)
    parser.add_argument("--step-factor", type=float, default=1.25)
    parser.add_argument("--step-seconds", type=float, default=60)
    args = parser.parse_args()
    args.minutes = args.minutes if args.minutes is not None else (15 if args.find_max else 10)
    args.max_lag = args.max_lag if args.max_lag is not None else (10 if args.find_max else 30)
    if args.find_max:
        args.rate = args.start_rate
    return args


def main() -> None:
    args = arguments()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    out = Path(args.out or tempfile.mkdtemp(prefix=f"sscript-soak-{args.source}-"))
    for stale in ("job", "input", "workflows"):
        shutil.rmtree(out / stale, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    workload = prepare(args, out)
    print(f"soak: {workload.workflows} workflows over {len(workload.referenced)} referenced sensors of "
          f"{len(workload.sensors)} fed; compiled in {time.time() - started:.1f} s into {out / 'job'}; the state "
          f"fills for {workload.fill_ms / 60_000:.1f} min", flush=True)
    soak = run(args, out, workload, lambda line: print(line, flush=True))
    lines, document = report(args, out, workload, soak)
    print("\n".join(lines), flush=True)
    (out / "report.txt").write_text("\n".join(lines) + "\n")
    text = json.dumps(document, indent=1, default=float)
    (out / "soak.json").write_text(text)
    if args.json:
        Path(args.json).write_text(text)
    if soak.failure:
        raise SystemExit(1)


def run(args, out: Path, workload: Workload, echo) -> Soak:
    """Start the job, feed it for `args.minutes` (or --find-max's steps) while sampling, stop it."""
    started = time.time()
    readings = Readings(workload.sensors, workload.referenced, args.rate)
    feed = FileFeed(readings, out / "input") if args.source == "file" else SocketFeed(readings)
    if isinstance(feed, FileFeed):
        feed.prime()
    job = JobProcess(out / "job", feed.source, out / "job.log")
    echo(f"job: {' '.join(job.command)} (log: {out / 'job.log'})")
    watcher = SinkWatcher(out / "job" / "results.db", job)
    steps: list[dict] = []
    failure = None
    try:
        if isinstance(feed, SocketFeed):
            feed.accept(job, timeout=600)
            feed.prime()
        watcher.start()
        deadline = time.time() + 600
        while not watcher.batches:
            if not job.alive() or time.time() > deadline:
                raise SystemExit("the job did not commit its first batch:\n" + "\n".join(job.tail[-20:]))
            time.sleep(0.2)
        echo(f"first batch committed {watcher.committed()[0].committed - started:.1f} s after the start; feeding "
             f"{args.rate:,.0f} readings/s ({args.rate / len(workload.sensors):g} Hz per sensor) "
             f"for {args.minutes:g} min through the {args.source} source")
        feed.until = time.time() + args.minutes * 60
        feed.go.set()
        feed.start()
        while feed.started_at is None:
            time.sleep(0.01)
        sampler = Sampler(job, feed, watcher, out / "job" / "checkpoint" / "state", echo)
        step_end = feed.started_at + args.warmup + args.step_seconds
        while not feed.done.is_set():
            if not job.alive():
                failure = f"the job stopped after {time.time() - feed.started_at:.0f} s of feed: {job.error()}"
                break
            sampler.sample()
            if args.find_max and time.time() >= step_end:
                lo = step_end - args.step_seconds - feed.started_at if steps else args.warmup
                step = judge_step(sampler.samples, feed, lo, step_end - feed.started_at, readings.rate,
                                  args.max_lag, watcher)
                steps.append(step)
                echo(f"step at {step['rate']:,.0f} readings/s: lag trend {step['lag_trend']:+.4f} s/s, "
                     f"largest {step['lag_max']:.1f} s -> {'passes' if step['passed'] else 'fails'}")
                if not step["passed"]:
                    break
                readings.rate *= args.step_factor
                step_end += args.step_seconds
            time.sleep(LAG_EVERY)
        fed_until = time.time()
        feed.close()
        if feed.error and failure is None:
            failure = f"the feed stopped after {fed_until - feed.started_at:.0f} s: {feed.error}"
        # Let the job take what was fed (up to 30 s) before stopping it.
        newest = feed.newest_written()
        while failure is None and time.time() < fed_until + 30 and job.alive():
            processed = watcher.processed_ms()
            if processed is not None and newest is not None and processed >= newest - 100:
                break
            sampler.sample()
            time.sleep(LAG_EVERY)
        drained = time.time() - fed_until
    finally:
        stopped = time.time()
        feed.close()
        code = job.stop(echo)
        watcher.stop()
    if failure:
        echo(failure)
    checkpoint_durations(out / "job" / "checkpoint" / "state", watcher.batches)
    echo(f"job stopped (exit code {code}); {len(watcher.batches)} batches")
    return Soak(feed, watcher, sampler, steps, fed_until - feed.started_at, stopped - feed.started_at, drained,
                code, failure)


def report(args, out: Path, workload: Workload, soak: Soak) -> tuple[list[str], dict]:
    """The report's lines and the JSON document of a run."""
    feed, watcher, sampler = soak.feed, soak.watcher, soak.sampler
    lat = latencies(watcher.results, feed, args.warmup)
    state_from = args.state_from if args.state_from is not None else args.warmup + workload.fill_ms / 1000
    rows = minute_rows(feed, watcher, sampler.samples, latencies(watcher.results, feed, 0.0), soak.observed_s)
    lines = ["", f"soak through the {args.source} source: {len(workload.sensors):,} sensors, {workload.workflows} "
                 f"workflows ({len(workload.referenced)} sensors read), {args.partitions} partitions, "
             + (f"find-max from {args.start_rate:,.0f} readings/s" if args.find_max else f"{args.rate:,.0f} readings/s")
             + f"; fed {soak.fed_s / 60:.1f} min; drained in {soak.drained_s:.1f} s; work folder {out}",
             "", minute_table(rows), "",
             "(per minute of feed, the warm-up's included; latency per minute is by commit time; the verdict "
             "leaves the warm-up out)"]
    found: dict = {}
    if soak.failure:
        lines.append(f"the run FAILED: {soak.failure}")
    if args.find_max:
        best = max((s["rate"] for s in soak.steps if s["passed"]), default=None)
        lines += [step_table(soak.steps),
                  f"highest rate sustained: {_f(best, ',.0f')} readings/s"
                  + (" (no step failed: raise --minutes or --start-rate)"
                     if soak.steps and soak.steps[-1]["passed"] else "")]
        found["highest_sustained_rate"] = best
    else:
        judged, found = verdict(sampler.samples, batch_lags(watcher, feed), lat, args.warmup, state_from,
                                workload.fill_ms / 1000, args.max_lag, soak.failure)
        lines += [f"warm-up {args.warmup:.0f} s; the state judged from {state_from:.0f} s of feed on "
                  f"(it fills for {workload.fill_ms / 1000:.0f} s)", *judged]
    document = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]), "source": args.source, "rate": args.rate,
        "minutes": args.minutes, "sensors": len(workload.sensors), "referenced": len(workload.referenced),
        "workflows": workload.workflows, "partitions": args.partitions, "fill_s": workload.fill_ms / 1000,
        "warmup_s": args.warmup, "state_from_s": state_from, "fed_s": soak.fed_s, "drained_s": soak.drained_s,
        "exit_code": soak.exit_code, "failure": soak.failure, "minutes_table": rows, "verdict": found,
        "steps": soak.steps, "samples": [asdict(s) for s in sampler.samples],
        "batches": [asdict(b) for b in watcher.committed()],
        "batch_lags": batch_lags(watcher, feed),
        "chunks": {"count": len(feed.chunks), "lateness_p99_s": percentile([c.lateness for c in feed.chunks], 99),
                   "written_newest_ts_readings": [(c.written, c.newest_ts, c.readings) for c in feed.chunks]},
        "window_results": len(watcher.results), "other_results": watcher.other_results,
        "latency_from_write_s": [x[1] for x in lat],
    }
    return lines, document


def judge_step(samples: list[Sample], feed: Feed, lo: float, hi: float, rate: float, max_lag: float,
               watcher: SinkWatcher) -> dict:
    """A step of --find-max over [lo, hi) s of feed: judged on its last two thirds."""
    settle = lo + (hi - lo) / 3
    fitted = trend([(t, lag) for t, lag in batch_lags(watcher, feed) if settle <= t < hi])
    largest = max((s.lag for s in samples if settle <= s.at < hi and s.lag is not None), default=math.inf)
    batches = [b for b in watcher.committed() if lo <= b.committed - feed.started_at < hi]
    durations = [b.duration for b in batches if b.duration is not None]
    fed = [c for c in feed.chunks if lo <= c.written - feed.started_at < hi]
    passed = fitted is not None and fitted[0] <= STEP_LAG_TREND and largest <= max_lag
    return {"rate": rate, "from_s": lo, "to_s": hi,
            "fed_per_s": sum(c.referenced for c in fed) / max(sum(c.span for c in fed), 1e-9),
            "processed_per_s": sum(b.readings for b in batches) / (hi - lo),
            "lag_trend": fitted[0] if fitted else math.inf, "lag_max": largest,
            "batch_p50_s": percentile(durations, 50), "batch_max_s": max(durations) if durations else None,
            "passed": passed}


def step_table(steps: list[dict]) -> str:
    head = ("rate", "ref fed/s", "processed/s", "batch s p50/max", "lag trend s/s", "lag max s", "")
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for s in steps:
        lines.append(" | ".join((f"{s['rate']:,.0f}", f"{s['fed_per_s']:,.0f}", f"{s['processed_per_s']:,.0f}",
                                 f"{_f(s['batch_p50_s'], '.2f')}/{_f(s['batch_max_s'], '.2f')}",
                                 f"{s['lag_trend']:+.4f}", f"{s['lag_max']:.1f}",
                                 "passes" if s["passed"] else "fails")))
    return "\n".join("| " + line + " |" for line in lines)


if __name__ == "__main__":
    main()
