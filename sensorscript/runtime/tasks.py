"""One partition's work per micro-batch, for each stage: what the Spark operators run.

The Spark processors (runtime/job.py) and the Spark-free `LocalRun` used by tests
both call these, so the watermark handling, the end of input and the forwarding
between stages exist once.

Stage 1 owns a watermark policy over its sensors' readings; each batch it
reports its watermark (a heartbeat) to every stage 2 it forwards to. Stage 2's
watermark is the smallest of its senders' last heartbeats (Flink's rule for a
task with several inputs): it advances once every sender has spoken.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sensorscript.runtime.engine import NEG_INF, POS_INF, BatchResult, Engine, EngineState, Tuples
from sensorscript.runtime.program import Program
from sensorscript.runtime.watermark import parse_policy

_EMPTY_I = np.empty(0, np.int64)
_EMPTY_F = np.empty(0, np.float64)


@dataclass
class FirstStageState:
    engine: EngineState
    policy: object


@dataclass
class SecondStageState:
    engine: EngineState
    heartbeats: dict[int, int] = field(default_factory=dict)  # sender partition -> its last watermark


@dataclass
class Step:
    results: list[BatchResult]
    heartbeat: int  # the watermark this stage-1 task has now applied


class FirstStage:
    def __init__(self, program: Program, watermark: str):
        self.engine = Engine(program)
        self.watermark = watermark

    def new_state(self) -> FirstStageState:
        return FirstStageState(self.engine.new_state(), parse_policy(self.watermark))

    def step(self, state: FirstStageState, code: np.ndarray, ts: np.ndarray, value: np.ndarray,
             end_of_input: bool) -> Step:
        results = [self.engine.process(state.engine, code, ts, value, state.policy.current())]
        state.policy.observe(ts)
        if end_of_input:  # the watermark moves to +infinity: everything pending is emitted
            results.append(self.engine.process(state.engine, _EMPTY_I, _EMPTY_I, _EMPTY_F, POS_INF))
        return Step(results, state.engine.watermark)


class SecondStage:
    def __init__(self, program: Program):
        self.engine = Engine(program)
        self.senders = program.senders

    def new_state(self) -> SecondStageState:
        return SecondStageState(self.engine.new_state())

    def step(self, state: SecondStageState, forwarded: list[tuple[int, Tuples]],
             heartbeats: dict[int, int]) -> BatchResult:
        """`forwarded`: (input code, tuples) received this batch; `heartbeats`: sender -> watermark."""
        for sender, watermark in heartbeats.items():
            state.heartbeats[sender] = max(state.heartbeats.get(sender, NEG_INF), watermark)
        watermark = min((state.heartbeats.get(s, NEG_INF) for s in self.senders), default=NEG_INF)
        parts = [(code, t) for code, t in forwarded if len(t)]
        code = np.concatenate([np.full(len(t), c, np.int64) for c, t in parts]) if parts else _EMPTY_I
        ts = np.concatenate([t.ts for _, t in parts]) if parts else _EMPTY_I
        value = np.concatenate([t.value for _, t in parts]) if parts else _EMPTY_F
        return self.engine.process(state.engine, code, ts, value, watermark)


class LocalRun:
    """Runs a compiled job's stages in this process, batch by batch: the job without Spark.

    Readings are routed to their sensor's partition as the shuffle would; forwards
    and heartbeats go from stage 1 to stage 2 as the second shuffle would.
    """

    def __init__(self, firsts: tuple[Program, ...], seconds: tuple[Program | None, ...], watermark: str):
        self.firsts = [FirstStage(p, watermark) for p in firsts]
        self.seconds = [SecondStage(p) if p is not None else None for p in seconds]
        self.first_states = [t.new_state() for t in self.firsts]
        self.second_states = [t.new_state() if t is not None else None for t in self.seconds]
        self.partition_of_code = {n.code: p.partition for p in firsts for n in p.nodes if hasattr(n, "code")}

    def batch(self, code: np.ndarray, ts: np.ndarray, value: np.ndarray,
              end_of_input: bool = False) -> list[tuple[Program, BatchResult]]:
        emitted: list[tuple[Program, BatchResult]] = []
        forwarded: dict[int, list[tuple[int, Tuples]]] = {}
        heartbeats: dict[int, dict[int, int]] = {}
        home = np.array([self.partition_of_code.get(int(c), -1) for c in code], np.int64)
        for task, state in zip(self.firsts, self.first_states):
            mine = home == task.engine.program.partition
            if not mine.any() and not end_of_input:
                continue  # Spark calls a partition's operator only when it has rows
            step = task.step(state, code[mine], ts[mine], value[mine], end_of_input)
            for result in step.results:
                emitted.append((task.engine.program, result))
                for forward, tuples in result.forwards:
                    forwarded.setdefault(forward.dest, []).append((forward.code, tuples))
            for forward in task.engine.program.forwards:
                heartbeats.setdefault(forward.dest, {})[task.engine.program.partition] = step.heartbeat
        for task, state in zip(self.seconds, self.second_states):
            if task is None:
                continue
            partition = task.engine.program.partition
            if partition in forwarded or partition in heartbeats:
                emitted.append((task.engine.program,
                                task.step(state, forwarded.get(partition, []), heartbeats.get(partition, {}))))
        return emitted
