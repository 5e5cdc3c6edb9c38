"""The program a generated job runs: its computations as plain data.

The compiler writes these declarations into job.py (one per computation, each
commented with the script lines it came from); the engine interprets them.
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
