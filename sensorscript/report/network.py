"""Network cost as the model gives it (`partition/cost.py`): for given workflows, and for the
two sweeps of Zhou et al., against the number of sensors n and the number of shared sensors n_s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from sensorscript.parser import load
from sensorscript.partition.cost import CommunicationCost
from sensorscript.partition.plan import make_plan
from sensorscript.registry import Sensor, SensorRegistry
from sensorscript.workload import bridge_workload

SWEEP_SENSORS = (16, 32, 64, 128, 256, 512, 1_000)
SWEEP_PARTITIONS = 4
SWEEP_SHARED = tuple(range(0, 17, 2))


@dataclass(frozen=True)
class MeasuredPoint:
    """Tuples per minute that crossed in real runs of one sweep point (`measure_sweeps`)."""

    ours: float  # the compiled job: the raw readings and the tuples on cut edges
    lower_bound: float  # the readings of referenced sensors
    by_sensor: float
    by_workflow: float
    same: bool  # both placements gave the compiled job's results, row for row


@dataclass(frozen=True)
class CostPoint:
    x: int
    cost: CommunicationCost
    measured: MeasuredPoint | None = None


def plan_cost(texts: dict[str, str], sensors: list[Sensor], partitions: int) -> CommunicationCost:
    registry = SensorRegistry.of(sensors)
    loaded = load(list(texts), registry.ids(), texts=texts)
    return make_plan(loaded.workflows, registry, partitions).cost


def sweep(kind: str, xs: Sequence[int], partitions: int = SWEEP_PARTITIONS) -> list[CostPoint]:
    """The model at every point of a sweep: "sensors" (128 generated bridge workflows over n
    sensors, popular sensors shared, Zipf) or "shared" (`shared_workflows`)."""
    return [CostPoint(x, plan_cost(texts, fleet, partitions)) for x, texts, fleet in sweep_workloads(kind, xs)]


def shared_workflows(shared: int, sensors: int = 16, workflows: int = 8) -> tuple[dict[str, str], list[Sensor]]:
    """`sensors` sensors at 20 Hz; every workflow reads the first `shared` of them, the rest are
    dealt out privately. Each workflow: the union of its sensors, two windows, their difference."""
    fleet = [Sensor(f"S{i:02d}", 20.0, "equal") for i in range(sensors)]
    common = [s.sensor_id for s in fleet[:shared]]
    private = [s.sensor_id for s in fleet[shared:]]
    texts = {}
    for w in range(workflows):
        mine = common + private[w::workflows]
        names = ", ".join(f'"{s}"' for s in mine)
        source = f"union({names})" if len(mine) > 1 else f'"{mine[0]}"'
        texts[f"w{w}.ss"] = (f"U = {source};\nA = avg(U, 10s, 5s);\nM = max(U, 10s, 5s);\nD = M - A;\n"
                             if len(mine) > 1 else
                             f"A = avg({source}, 10s, 5s);\nM = max({source}, 10s, 5s);\nD = M - A;\n")
    return texts, fleet


def sweep_workloads(kind: str, xs: Sequence[int]) -> list[tuple[int, dict[str, str], list[Sensor]]]:
    """The workflows and sensors of each point of a sweep: (x, {file name: text}, sensors)."""
    if kind == "shared":
        return [(x, *shared_workflows(x)) for x in xs]
    points = []
    for n in xs:
        workload = bridge_workload(128, n)
        points.append((n, {f"{name}.ss": text for name, text in workload.workflows.items()}, workload.sensors))
    return points


