"""The program a generated job runs: its computations as plain data.

The compiler writes these declarations into job.py (one per computation, each
commented with the script lines it came from), and the `Job` that holds them all;
the engine interprets them.
They import nothing from the compiler, so the runtime ships to executors alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Sensor:
    """A raw sensor stream; `code` is the small integer the job uses instead of the id."""

    id: str
    sensor_id: str
    code: int


@dataclass(frozen=True)
class Slices:
    """How a stream is cut into slices: cut points `offsets` within every `period` ms."""

    stream: str
    period: int
    offsets: tuple[int, ...]
    partials: tuple[str, ...]  # among sum, count, min, max


@dataclass(frozen=True)
class Window:
    id: str
    func: str  # avg max min sum count
    input: str
    length: int
    slide: int


@dataclass(frozen=True)
class Union:
    id: str
    inputs: tuple[str, ...]


@dataclass(frozen=True)
class Combine:
    """Combine-latest over `inputs`; `expression` is the compiler's canonical tuple form."""

    id: str
    inputs: tuple[str, ...]
    expression: tuple


Node = Sensor | Window | Union | Combine


@dataclass(frozen=True)
class Forward:
    """Tuples of `node` go on to stage `stage` of partition `dest`, where they enter as input `code`.

    Our plans have two stages at most; the naive placement hash by sensor id (what the
    report measures us against) has one per level of the workflow graph.
    """

    node: str
    dest: int
    code: int
    stage: int = 2


@dataclass(frozen=True)
class Program:
    """Everything one stage of one partition computes.

    `nodes` are in dependency order; in stage 1 the `Sensor` nodes are the sensors
    whose readings land here; in later stages they are the streams forwarded to it
    (`code` = the forward's code). `outputs` maps a node id to the result stream
    names (WORKFLOW.NAME) it is written under. `forwards` lists what this stage sends
    on; `senders` are the stages that send to this one (its watermark is the smallest
    of theirs), each as `sender_id` (for stage 1, the partition's number).
    """

    partition: int
    stage: int
    nodes: tuple[Node, ...]
    slices: tuple[Slices, ...]
    outputs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    forwards: tuple[Forward, ...] = ()
    senders: tuple[int, ...] = ()


def sender_id(stage: int, partition: int, partitions: int) -> int:
    """The number a stage's heartbeats carry: stage 1 of partition p is p, stage 2 is n + p, ..."""
    return (stage - 1) * partitions + partition


@dataclass(frozen=True)
class Job:
    """A compiled job: the plan as data. `sensors` maps sensor id -> (code, home partition)."""

    name: str
    workflows: tuple[str, ...]
    sensors: dict[str, tuple[int, int]]
    first_stage: tuple[Program, ...]
    second_stage: tuple[Program | None, ...]
    bucket_keys: tuple[int, ...]  # partition p's rows carry key bucket_keys[p]: Spark hashes it to task p
    watermark: str = "fixed:0"
    # Sensor id -> further partitions its readings also go to. Our plans send each reading to
    # one partition; the naive placements the report measures (hash by workflow) copy them.
    replicas: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # Stages 3, 4, ...: only the naive placement hash by sensor id (a shuffle per level) has them.
    later_stages: tuple[tuple[Program | None, ...], ...] = ()

    @property
    def partitions(self) -> int:
        return len(self.first_stage)

    @property
    def has_second_stage(self) -> bool:
        return any(p is not None for p in self.second_stage)

    def stages_after_first(self) -> list[tuple[int, tuple[Program | None, ...]]]:
        """(stage number, a program or None per partition) for stage 2 on, where any exists."""
        stages = [(2, self.second_stage)] if self.has_second_stage or self.later_stages else []
        return stages + list(enumerate(self.later_stages, start=3))

