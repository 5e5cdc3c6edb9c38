"""Slice partials before the shuffle (issue #44): stage 0 sends a sensor's slice partials, not its
readings, where the result is the same.

A sensor whose readings only windows read (directly, or through unions only windows read) needs
at its partition only each slice's partials (`Program.summed`: the cuts, partition/partials.py). So
the input's tasks may cut its readings into those slices and send one tuple per partial, slice and
block read, as Spark's own aggregations do before a shuffle: at 20 Hz and 10 s slices of avg,
3 tuples (sum, count and the sensor's latest time) instead of 200.

A reading is judged at its partition, one by one: late if below the watermark in force there
for the batch, and held out of the partition's event time if too far ahead of it
(runtime/state/watermark.py). Stage 0 may sum a reading only where that judgement is known in
advance, and the same for every reading of the sum. So:

- at the end of each batch, stage 1 of every partition publishes on a board (a folder in OUT,
  per query, the one Spark's checkpoint names) the watermark it will judge the next batch by and
  its event time N (`publish`); under the policy `fixed` both follow from the batches so far, and
  a batch run again publishes the same;
- a task of batch B reads, per partition, the newest entry of a batch before B (a partition
  whose stage 1 had no rows since kept its state, so its entry still holds: `read_board`), and
  sums only readings at or above that watermark (on time) and at most the guard's distance past
  N (never held out: the guard's reference is never below N). Every other reading, and every
  reading of a partition without an entry (the first batch, another policy, another version of
  the plan, a run that switched at an update, before the switch), goes as a reading;
- each partition's partials carry what they assumed (`ASSUMED_WATERMARK`, `ASSUMED_LARGEST`) and,
  per sensor, its latest time and the number of readings summed (`LATEST`): stage 1 checks the
  assumptions against its own state (`check`), moves N by the latest times and counts the
  readings, and adds the partials to the slices of the streams they were cut for, as it adds
  partials forwarded from another partition (engine.merge_partials).

Only under the watermark policy `fixed` and the late policies drop and log: `adaptive` and
`quality` observe every reading's arrival order or delay, and `correct` archives every reading
at stage 1. Under those, and in the naive placements that copy readings, readings cross.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sensorscript import atomic
from sensorscript.runtime.plan import program as p
from sensorscript.runtime.state.engine import Tuples, slices_partials
from sensorscript.runtime.state.watermark import FixedDelay, parse_late_policy, parse_policy

# What a row of partials from stage 0 is (its `part`): k * len(PARTIAL_KINDS) + j for slice plan k's
# partial j (as Forward.partials), or one of these.
LATEST = -1  # per sensor and block: ts its latest summed reading's, value how many readings were summed
ASSUMED_WATERMARK = -2  # per packet: ts the watermark its readings were summed under
ASSUMED_LARGEST = -3  # per packet: ts the partition's event time N the guard was judged by
KEEP_ENTRIES = 3  # a partition's newest board entries kept (a batch run again reads the one before)


@dataclass(frozen=True)
class Entry:
    """What stage 1 of a partition publishes after batch `batch`: the watermark it judges the next
    batch's readings by, its event time N (None: no reading yet) and the guard's distance."""

    batch: int
    watermark: int
    largest: int | None
    ahead_ms: int
    spec: str
    version: int


BOARD = "watermarks"  # the board's folder, in OUT/checkpoint


def with_board(job: p.Job, folder: Path) -> p.Job:
    """The job with its board (a run's). Every run publishes on it, whether its stage 0 sums or not
    (`usable`): an entry a run under other policies left behind would otherwise be the newest one a
    later run finds, and older than the state it would stand for."""
    return dataclasses.replace(job, board=str(folder.resolve()))


def without_stage_0(job: p.Job) -> p.Job:
    """The job with readings alone crossing its first shuffle (stage 0 sums nothing): to compare."""
    return dataclasses.replace(job, first_stage=tuple(
        dataclasses.replace(program, summed={}, merged={}) for program in job.first_stage))


def usable_policies(watermark: str, late: str) -> bool:
    """Whether stage 0 may send partials under these policies (see the module's docstring)."""
    try:
        return isinstance(parse_policy(watermark), FixedDelay) and parse_late_policy(late)[0] in ("drop", "log")
    except ValueError:
        return False


def usable(job: p.Job) -> bool:
    """Whether this job's stage 0 may send partials at all."""
    return (job.board is not None and usable_policies(job.watermark, job.late) and not job.replicas
            and not job.later_stages and any(program.summed for program in job.first_stage))


def summed_sensors(first_stage) -> tuple[np.ndarray, dict[int, tuple[p.Slices, ...]]]:
    """(sensor code -> the partition stage 0 may sum its readings for, or -1; code -> its slice
    plans) from the stage-1 programs."""
    # (Not under an update in mode dual: its old computations read readings; nor a sensor whose readings
    # go to several partitions, as the naive placement hash by workflow copies them.)
    homes: dict[int, int] = {}
    for program in first_stage:
        for node in program.nodes:
            if isinstance(node, p.Sensor):
                homes[node.code] = homes.get(node.code, 0) + 1
    sensors = [(node.code, program.partition, program.summed[node.id]) for program in first_stage
               if not program.retiring for node in program.nodes
               if isinstance(node, p.Sensor) and node.id in program.summed and homes[node.code] == 1]
    partition = np.full(max((code + 1 for code, _, _ in sensors), default=0), -1, np.int64)
    for code, where, _ in sensors:
        partition[code] = where
    return partition, {code: plans for code, _, plans in sensors}


def _folder(board: str, query: str, partition: int) -> Path:
    return Path(board) / query / f"p{partition}"


def publish(board: str, query: str, partition: int, entry: Entry) -> None:
    """Stage 1's entry after a batch; the partition's older ones but the newest few go."""
    folder = _folder(board, query, partition)
    folder.mkdir(parents=True, exist_ok=True)
    atomic.write_json(folder / f"{entry.batch:020d}.json", entry.__dict__)
    for old in sorted(f for f in os.listdir(folder) if f.endswith(".json"))[:-KEEP_ENTRIES]:
        (folder / old).unlink(missing_ok=True)


def read_board(board: str, query: str, partition: int, batch: int) -> Entry | None:
    """The newest entry of a batch before `batch` (None: there is none)."""
    try:
        names = sorted(f for f in os.listdir(_folder(board, query, partition)) if f.endswith(".json"))
    except FileNotFoundError:
        return None
    for name in reversed(names):
        if int(name[:-5]) < batch:
            try:
                return Entry(**json.loads((_folder(board, query, partition) / name).read_text()))
            except (OSError, ValueError, TypeError):
                return None
    return None


def task_batch() -> tuple[str | None, int]:
    """The query (its id, kept in Spark's checkpoint) and micro-batch of the task running this."""
    from pyspark import TaskContext

    task = TaskContext.get()
    return task.getLocalProperty("sql.streaming.queryId"), int(task.getLocalProperty("streaming.sql.batchId"))


class Summariser:
    """Stage 0's side (called by the Packer on every block's referenced readings): which readings
    it sums into partials, and the partials' rows per partition."""

    def __init__(self, job: p.Job):
        self.job = job
        self.marks: dict[int, tuple[int, int, int, int]] | None = None  # partition -> range_of's
        self.partition, self.plans = summed_sensors(job.first_stage)

    def read_marks(self) -> dict[int, tuple[int, int, int, int]]:
        """From the board: partition -> the ts range whose readings may be summed in this batch (`range_of`)."""
        query, batch = task_batch()
        marks = {}
        if query is not None:
            for partition in sorted(set(self.partition[self.partition >= 0].tolist())):
                entry = read_board(self.job.board, query, partition, batch)
                found = range_of(entry, self.job.watermark, self.job.version) if entry is not None else None
                if found is not None:
                    marks[partition] = found
        return marks


    def __call__(self, code: np.ndarray, ts: np.ndarray, value: np.ndarray):
        """(the readings that still go as readings, [(partition, code, ts, value, part) per partition])."""
        if self.marks is None:
            self.marks = self.read_marks()
        return summarise(code, ts, value, self.partition, self.plans, self.marks)


def range_of(entry: Entry, watermark: str, version: p.Version) -> tuple[int, int, int, int] | None:
    """(lowest, highest ts to sum, the watermark and N assumed) under an entry of this policy and
    version of the plan (None: readings). Computations an update started read from the switch on: nothing before it."""
    if entry.spec != watermark or entry.version != version.number or entry.largest is None:
        return None
    lowest = entry.watermark if version.switch_at is None else max(entry.watermark, version.switch_at)
    return lowest, entry.largest + entry.ahead_ms, entry.watermark, entry.largest


def summarise(code: np.ndarray, ts: np.ndarray, value: np.ndarray, partition_of: np.ndarray,
              plans: dict[int, tuple[p.Slices, ...]],
              marks: dict[int, tuple[int, int, int, int]]) -> tuple[np.ndarray, list[tuple]]:
    """One block's readings (sensor code, ts, value) -> (mask of those that go as readings, the rows
    of partials per partition: (partition, code, ts, value, part) arrays). `partition_of`: code ->
    the partition of a sensor stage 0 may sum (-1: none); `marks`: partition -> (lowest, highest ts
    to sum, the watermark and N assumed)."""
    keep = np.ones(len(code), bool)
    if not marks or not len(code) or not len(partition_of):
        return keep, []
    where = np.where((code >= 0) & (code < len(partition_of)),
                     partition_of[np.clip(code, 0, len(partition_of) - 1)], -1)
    lowest = np.full(len(code), p.POS_INF, np.int64)
    highest = np.full(len(code), p.NEG_INF, np.int64)
    for partition, (low, high, _, _) in marks.items():
        mine = where == partition
        lowest[mine], highest[mine] = low, high
    summed = (where >= 0) & (ts >= lowest) & (ts <= highest)
    if not summed.any():
        return keep, []
    keep = ~summed
    s_code, s_ts, s_value = code[summed], ts[summed], value[summed]
    order = np.argsort(s_code, kind="stable")
    s_code, s_ts, s_value = s_code[order], s_ts[order], s_value[order]
    firsts = np.flatnonzero(np.r_[True, s_code[1:] != s_code[:-1]])
    ends = np.r_[firsts[1:], len(s_code)]
    sensors = s_code[firsts]
    sent = slices_partials([(Tuples(s_ts[a:b], s_value[a:b], np.zeros(b - a, np.int32)), plans[int(c)])
                            for c, a, b in zip(sensors, firsts, ends)])
    latest = np.maximum.reduceat(s_ts, firsts)
    count = np.diff(np.r_[firsts, len(s_code)]).astype(np.float64)
    rows = []
    partitions = partition_of[sensors]
    for partition in np.unique(partitions).tolist():
        at = np.flatnonzero(partitions == partition)
        _, _, watermark, largest = marks[partition]
        parts = [sent[i] for i in at]
        rows.append((
            partition,
            np.concatenate([np.repeat(sensors[at], [len(t) for t in parts]), sensors[at], [-1, -1]]).astype(np.int32),
            np.concatenate([*(t.ts for t in parts), latest[at], [watermark, largest]]).astype(np.int64),
            np.concatenate([*(t.value for t in parts), count[at], [0.0, 0.0]]),
            np.concatenate([*(t.source for t in parts), np.full(len(at), LATEST),
                            [ASSUMED_WATERMARK, ASSUMED_LARGEST]]).astype(np.int32),
        ))
    return keep, rows


@dataclass
class Received:
    """A partition's partials from stage 0 in one batch, split by what each row is."""

    code: np.ndarray  # the partials' sensors
    tuples: Tuples  # their ts, value and (source) which partial of which slice plan
    latest_code: np.ndarray  # per sensor and block: the latest summed reading's time, how many were summed
    latest_ts: np.ndarray
    count: int
    rows: int  # every row that crossed
    assumed: list[tuple[int, int]]  # (watermark, N) each packet assumed

    @staticmethod
    def of(code: np.ndarray, ts: np.ndarray, value: np.ndarray, part: np.ndarray) -> "Received":
        partial = part >= 0
        latest = part == LATEST
        watermarks = ts[part == ASSUMED_WATERMARK]
        largests = ts[part == ASSUMED_LARGEST]
        return Received(code[partial].astype(np.int64), Tuples(ts[partial], value[partial], part[partial]),
                        code[latest].astype(np.int64), ts[latest], int(value[latest].sum()), len(part),
                        list(zip(watermarks.tolist(), largests.tolist())))

    def check(self, in_force: int, largest: int | None) -> None:
        """Stage 0 summed only readings that are on time and never held out here; a defect if not."""
        for watermark, assumed in self.assumed:
            if watermark < in_force or largest is None or assumed > largest:
                raise RuntimeError(
                    f"stage 0 summed readings under watermark {watermark} and event time {assumed}, but this "
                    f"partition judges the batch by watermark {in_force} and event time {largest}: its results "
                    f"would not be exact (a defect of SensorScript; run with a watermark policy other than "
                    f"fixed to send readings)")
