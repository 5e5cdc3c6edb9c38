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
class Program:
    """Everything one partition of the job computes.

    `nodes` are in dependency order. `outputs` maps a node id to the result stream
    names (WORKFLOW.NAME) it is written under. `home_sensors` are the sensor codes
    whose readings belong to this partition (lateness is counted there only; other
    sensors may be replicated here for a computation that reads them).
    """

    partition: int
    nodes: tuple[Node, ...]
    slices: tuple[Slices, ...]
    outputs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    home_sensors: frozenset[int] = frozenset()
