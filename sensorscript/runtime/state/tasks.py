"""One partition's work per micro-batch, for each stage: what the Spark operators run.

The Spark operators (runtime/control/operators.py) and the Spark-free `LocalRun` used by tests
both call these, so the watermark handling, the end of input and the forwarding
between stages exist once.

Stage 1 owns a watermark policy over its sensors' readings; each batch it
reports its watermark (a heartbeat) to every later stage it forwards to. A later
stage's watermark is the smallest of its senders' last heartbeats (Flink's rule
for a task with several inputs): it advances once every sender has spoken, and
it reports it onwards in the same way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from sensorscript.runtime.state.engine import NEG_INF, POS_INF, BatchResult, Engine, EngineState, Tuples
from sensorscript.runtime.plan.program import Program, Sensor, Version, sender_id
from sensorscript.runtime.state.summaries import Entry, Received, range_of, summarise, summed_sensors, usable_policies
from sensorscript.runtime.state.watermark import Policy, parse_policy

_EMPTY_I = np.empty(0, np.int64)
_EMPTY_F = np.empty(0, np.float64)


@dataclass
class Arrivals:
    """When the partition's event time reached each value: a result with event time t was ready
    to be computed once the readings up to t had arrived; its latency is from then to its emission."""

    event_time: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # non-decreasing N
    wall: np.ndarray = field(default_factory=lambda: np.empty(0, np.float64))  # seconds since the epoch

    KEEP = 10_000  # batches remembered; older results than that are measured from the oldest

    def record(self, event_time: int | None, wall: float) -> None:
        if event_time is None or (len(self.event_time) and event_time <= self.event_time[-1]):
            return
        self.event_time = np.r_[self.event_time, event_time][-self.KEEP:]
        self.wall = np.r_[self.wall, wall][-self.KEEP:]

    def latency_ms(self, ts: np.ndarray, now: float) -> np.ndarray:
        if not len(self.event_time) or not len(ts):
            return np.empty(0)
        at = np.minimum(np.searchsorted(self.event_time, ts, side="left"), len(self.event_time) - 1)
        return np.maximum(now - self.wall[at], 0.0) * 1000.0


@dataclass
class FirstStageState:
    engine: EngineState
    policy: Policy
    arrivals: Arrivals = field(default_factory=Arrivals)


@dataclass
class LaterStageState:
    engine: EngineState
    heartbeats: dict[int, int] = field(default_factory=dict)  # sender id -> its last watermark


@dataclass
class Step:
    results: list[BatchResult]
    heartbeat: int  # the watermark this stage-1 task has now applied
    in_force: int = NEG_INF  # the watermark the batch's readings were judged by (late: below it)
    gauges: dict[str, float] = field(default_factory=dict)  # the partition after the batch (metrics)
    ahead: int = 0  # readings the guard held out of the partition's event time (watermark.Frontier)


class FirstStage:
    def __init__(self, program: Program, watermark: str, version: Version = Version()):
        self.engine = Engine(program, version.switch_at)
        self.watermark = watermark
        self.version = version

    def new_state(self) -> FirstStageState:
        return FirstStageState(self.engine.new_state(self.version), parse_policy(self.watermark))

    def entry(self, state: FirstStageState, batch: int) -> Entry:
        """What this partition publishes after batch `batch` for stage 0 of the next (summaries.py):
        the watermark the next batch's readings will be judged by, and its event time."""
        return Entry(batch, max(state.engine.watermark, state.policy.current()), state.policy.frontier.largest,
                     state.policy.frontier.ahead_ms, self.watermark, self.version.number)

    def step(self, state: FirstStageState, code: np.ndarray, ts: np.ndarray, value: np.ndarray,
             end_of_input: bool, summed: Received | None = None) -> Step:
        """One batch of this partition's readings, in arrival order, and the slice partials stage 0 made
        of others (runtime/state/summaries.py)."""
        if getattr(state.policy, "spec", None) != self.watermark:  # a run that overrides the job's policy
            state.policy = parse_policy(self.watermark).resume(state.policy)
        if state.engine.version != self.version.number:  # the first batch after an update
            self.engine.migrate(state.engine, self.version)
        arrived = time.time()
        in_force = max(state.engine.watermark, state.policy.current())
        if summed is not None:
            summed.check(in_force, state.policy.frontier.largest)
        results = [self.engine.process(state.engine, code, ts, value, in_force,
                                       summed=None if summed is None else (summed.code, summed.tuples))]
        state.policy.observe(code, ts, results[0].late,
                             None if summed is None else (summed.latest_code, summed.latest_ts, summed.count))
        state.arrivals.record(state.policy.frontier.largest, arrived)
        if end_of_input:  # the watermark moves to +infinity: everything pending is emitted
            results.append(self.engine.process(state.engine, _EMPTY_I, _EMPTY_I, _EMPTY_F, POS_INF))
        emitted = [t.ts for r in results for t in r.outputs.values()]
        latency = state.arrivals.latency_ms(np.concatenate(emitted) if emitted else _EMPTY_I, time.time())
        gauges = state.policy.metrics(in_force)
        if len(latency):
            gauges.update(latency_mean_ms=float(latency.mean()), latency_max_ms=float(latency.max()))
        return Step(results, results[-1].mark, in_force, gauges, state.policy.frontier.ahead)


class LaterStage:
    """Stage 2 (and, under the naive placement hash by sensor id, stages 3, 4, ...) of a partition."""

    def __init__(self, program: Program, version: Version = Version()):
        self.engine = Engine(program, version.switch_at)
        self.senders = program.senders
        self.version = version

    def new_state(self) -> LaterStageState:
        return LaterStageState(self.engine.new_state(self.version))

    def step(self, state: LaterStageState, forwarded: list[tuple[int, Tuples]],
             heartbeats: dict[int, int]) -> BatchResult:
        """`forwarded`: (input code, tuples) received this batch; `heartbeats`: sender id -> watermark.
        The stage's own heartbeat onwards is the result's `mark`."""
        if state.engine.version != self.version.number:  # the first batch after an update
            self.engine.migrate(state.engine, self.version)
            state.heartbeats = {s: w for s, w in state.heartbeats.items() if s in self.senders}
        for sender, watermark in heartbeats.items():
            state.heartbeats[sender] = max(state.heartbeats.get(sender, NEG_INF), watermark)
        watermark = min((state.heartbeats.get(s, NEG_INF) for s in self.senders), default=NEG_INF)
        parts = [(code, t) for code, t in forwarded if len(t)]
        code = np.concatenate([np.full(len(t), c, np.int64) for c, t in parts]) if parts else _EMPTY_I
        ts = np.concatenate([t.ts for _, t in parts]) if parts else _EMPTY_I
        value = np.concatenate([t.value for _, t in parts]) if parts else _EMPTY_F
        source = np.concatenate([t.source for _, t in parts]) if parts else np.empty(0, np.int32)
        return self.engine.process(state.engine, code, ts, value, watermark, source)


class LocalRun:
    """Runs a compiled job's stages in this process, batch by batch: the job without Spark.

    Readings are routed to their sensor's partition (and its copies) as the shuffle would;
    forwards and heartbeats go from stage to stage as the later shuffles would.
    """

    def __init__(self, firsts: tuple[Program, ...], seconds: tuple[Program | None, ...], watermark: str,
                 later: tuple[tuple[Program | None, ...], ...] = (), version: Version = Version(),
                 summarise: bool = False):
        """`summarise`: stage 0 sends slice partials where it can, as the Spark job does when its run
        gives it a board (runtime/state/summaries.py), from each partition's entry after its last batch."""
        self.watermark = watermark
        self.summarise = summarise
        self._tasks(firsts, seconds, later, version)
        self.first_states = [t.new_state() for t in self.firsts]
        self.later_states = [[t.new_state() if t is not None else None for t in stage] for stage in self.later]

    def _tasks(self, firsts, seconds, later, version: Version) -> None:
        self.firsts = [FirstStage(p, self.watermark, version) for p in firsts]
        self.later = [[LaterStage(p, version) if p is not None else None for p in stage] for stage in (seconds, *later)]
        # A reading goes to every partition whose stage 1 reads its sensor (several, under hash by workflow).
        self.codes = [np.array([n.code for n in p.nodes if isinstance(n, Sensor)], np.int64) for p in firsts]
        self.partitions = len(firsts)
        self.summed = summed_sensors(firsts)
        self.entries: dict[int, Entry] = {}  # partition -> its entry after the last batch it ran
        self.batches = 0
        self.summed_readings = 0  # readings stage 0 sent as slice partials, so far

    def switch(self, firsts: tuple[Program, ...], seconds: tuple[Program | None, ...], version: Version) -> None:
        """Run another version of the plan from the next batch on, keeping the states (an update at
        a batch boundary, as the Spark job switches); a stage that had no program gets a new state."""
        self._tasks(firsts, seconds, (), version)
        states = []
        for k, stage in enumerate(self.later):
            old = self.later_states[k] if k < len(self.later_states) else [None] * len(stage)
            states.append([None if t is None else old[i] if old[i] is not None else t.new_state()
                           for i, t in enumerate(stage)])
        self.later_states = states

    def batch(self, code: np.ndarray, ts: np.ndarray, value: np.ndarray,
              end_of_input: bool = False) -> list[tuple[Program, BatchResult]]:
        emitted: list[tuple[Program, BatchResult]] = []
        forwarded: dict[tuple[int, int], list[tuple[int, Tuples]]] = {}  # (stage, partition) -> inputs
        heartbeats: dict[tuple[int, int], dict[int, int]] = {}

        def send(program: Program, result: BatchResult, watermark: int) -> None:
            for forward, tuples in result.forwards:
                forwarded.setdefault((forward.stage, forward.dest), []).append((forward.code, tuples))
            for forward in program.forwards:
                heartbeats.setdefault((forward.stage, forward.dest), {})[
                    sender_id(program.stage, program.partition, self.partitions)] = watermark

        received: dict[int, Received] = {}
        if self.summarise and usable_policies(self.watermark, "log"):
            partition_of, plans = self.summed
            marks = {k: found for k, entry in self.entries.items()
                     if (found := range_of(entry, self.watermark, self.firsts[k].version)) is not None}
            keep, rows = summarise(code, ts, value, partition_of, plans, marks)
            code, ts, value = code[keep], ts[keep], value[keep]
            received = {partition: Received.of(*arrays) for partition, *arrays in rows}
            self.summed_readings += sum(r.count for r in received.values())
        for k, (task, state, codes) in enumerate(zip(self.firsts, self.first_states, self.codes)):
            mine = np.isin(code, codes)
            if not mine.any() and not end_of_input and k not in received:
                continue  # Spark calls a partition's operator only when it has rows
            step = task.step(state, code[mine], ts[mine], value[mine], end_of_input, received.get(k))
            self.entries[k] = task.entry(state, self.batches)
            for result in step.results:
                emitted.append((task.engine.program, result))
                send(task.engine.program, result, step.heartbeat)
        for number, (tasks, states) in enumerate(zip(self.later, self.later_states), start=2):
            for task, state in zip(tasks, states):
                if task is None:
                    continue
                key = (number, task.engine.program.partition)
                if key in forwarded or key in heartbeats:
                    result = task.step(state, forwarded.get(key, []), heartbeats.get(key, {}))
                    emitted.append((task.engine.program, result))
                    send(task.engine.program, result, result.mark)
        self.batches += 1
        return emitted
