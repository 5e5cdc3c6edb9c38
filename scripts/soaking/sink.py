"""What the job wrote, read while it runs: OUT/job/results.db and its checkpoint.
  commit       a batch's commit time: the earliest of (a) when the job's "batch N:" line, printed
               after the sink's transaction, reaches the soak, and (b) the first poll (every
               0.1 s) of results.db that sees N in the sink's table of written batches. Result rows are
               new rowids in `results` since the previous poll; they belong to the batch(es) the same
               poll found committed (in the same transaction).
  batch        a batch's duration: its commit in the checkpoint (OUT/job/checkpoint/state/commits/N,
               modification time) minus its trigger time (batchTimestampMs in offsets/N).
  state        per partition, `state_bytes` of its latest batch (metrics table): the pickled size of
               the partition's stage-1 state (engine, watermark policy), as written to the state store.
  processed    the `readings` counters of the batches committed, which count referenced readings;
               `max_ts` and `watermark`, each partition's newest, for the lag (soaking.sampling).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .job import JobProcess

POLL_SECONDS = 0.1


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
