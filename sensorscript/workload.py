"""A seeded generator of bridge-like workloads, modelled on the source paper's evaluation.

1,000 sensors of 21 types, most sampling at 20 Hz or more; workflows shaped like
the paper's example (two windowed points and a union of two sensors, merged and
windowed again); popular sensors (a Zipf draw) are shared by many workflows,
as engineers of different teams watch the same critical points. The same seed
always gives the same sensors, scripts and data.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from sensorscript.registry import Sensor

# Type code, unit-ish name, sampling frequency in Hz.
SENSOR_TYPES: tuple[tuple[str, str, float], ...] = (
    ("MD", "displacement", 20), ("AC", "acceleration", 50), ("ST", "strain", 20),
    ("TL", "tilt", 20), ("CR", "crack", 20), ("DF", "deflection", 20), ("VB", "vibration", 100),
    ("CF", "cable_force", 20), ("BR", "bearing", 20), ("EJ", "expansion_joint", 20),
    ("GP", "gnss", 20), ("SR", "stress", 20), ("PR", "pressure", 20), ("SG", "settlement", 20),
    ("TM", "temperature", 1), ("HU", "humidity", 1), ("WS", "wind_speed", 10),
    ("WD", "wind_direction", 10), ("RN", "rainfall", 1), ("WL", "water_level", 5), ("TR", "traffic", 10),
)
AXES = ("AZ", "AX", "AY", "A")
# (length, slide) pairs engineers use; few distinct values so windows are shared.
WINDOWS_MS: tuple[tuple[int, int], ...] = (
    (600_000, 300_000), (300_000, 60_000), (60_000, 30_000), (60_000, 60_000), (30_000, 10_000),
    (600_000, 600_000), (120_000, 60_000), (10_000, 5_000),
)
AGGREGATES = ("avg", "max", "min", "sum")


@dataclass(frozen=True)
class Workload:
    sensors: list[Sensor]
    workflows: dict[str, str]  # workflow name -> script text

    @property
    def frequencies(self) -> dict[str, float]:
        return {s.sensor_id: s.frequency_hz for s in self.sensors}


def bridge_sensors(count: int = 1_000, seed: int = 7) -> list[Sensor]:
    rng = random.Random(seed)
    sensors = []
    for i in range(count):
        code, kind, hz = SENSOR_TYPES[i % len(SENSOR_TYPES)] if i < len(SENSOR_TYPES) else rng.choice(SENSOR_TYPES)
        section = i // 100 + 1
        sensors.append(Sensor(f"{section}{code}{i % 100 + 1}-{AXES[i % len(AXES)]}", float(hz), kind))
    return sensors


def _zipf_pick(rng: random.Random, sensors: list[Sensor], weights: list[float], k: int) -> list[str]:
    chosen: list[str] = []
    while len(chosen) < k:
        sensor = rng.choices(sensors, weights)[0].sensor_id
        if sensor not in chosen:
            chosen.append(sensor)
    return chosen


def neighbours(sensors: list[Sensor]) -> dict[str, str]:
    """Each sensor's neighbour: the next sensor of the same type in its bridge section.

    As in the paper's example (union("8MD2-A", "8MD3-A")), a union joins adjacent
    measuring points of one kind, not sensors from anywhere on the bridge.
    """
    groups: dict[tuple[str, str], list[str]] = {}
    for sensor in sensors:
        section = re.match(r"[0-9]+", sensor.sensor_id).group()
        groups.setdefault((section, sensor.type), []).append(sensor.sensor_id)
    pairs = {}
    for members in groups.values():
        for i, sensor_id in enumerate(members):
            pairs[sensor_id] = members[(i + 1) % len(members)]
    return pairs


def bridge_workflow(rng: random.Random, picks: list[str]) -> str:
    """Seven statements in the shape of the paper's example, with drawn parameters.

    `picks` are four sensors: a single point, a pair of neighbours for the union, a single point.
    """
    a, b, c, d = (f'"{p}"' for p in picks)
    inner = rng.choice(WINDOWS_MS[:5])
    outer = rng.choice([w for w in WINDOWS_MS if w[0] % inner[1] == 0] or [inner])
    f1, f2, f3 = (rng.choice(AGGREGATES) for _ in range(3))
    o1, o2 = rng.sample(AGGREGATES, 2)
    return (
        f"P1 = {f1}({a}, {inner[0]:_}, {inner[1]:_});\n"
        f"UNI = union({b}, {c});\n"
        f"P23 = {f2}(UNI, {inner[0]:_}, {inner[1]:_});\n"
        f"P4 = {f3}({d}, {inner[0]:_}, {inner[1]:_});\n"
        f"UNIF = union(P1, P23, P4);\n"
        f"out_{o1} = {o1}(UNIF, {outer[0]:_}, {outer[1]:_});\n"
        f"out_{o2} = {o2}(UNIF, {outer[0]:_}, {outer[1]:_});\n"
    )


def bridge_workload(workflows: int = 1_024, sensors: int = 1_000, seed: int = 7,
                    zipf_s: float = 1.1) -> Workload:
    rng = random.Random(seed)
    fleet = bridge_sensors(sensors, seed)
    # Popularity: rank r gets weight 1 / r^s, over a seeded shuffle of the fleet.
    order = list(fleet)
    rng.shuffle(order)
    weights = [1.0 / (rank + 1) ** zipf_s for rank in range(len(order))]
    scripts = {}
    pairs = neighbours(fleet)
    for i in range(workflows):
        a, b, d = _zipf_pick(rng, order, weights, 3)
        c = pairs[b] if pairs[b] not in (a, b, d) else next(s.sensor_id for s in fleet if s.sensor_id not in (a, b, d))
        scripts[f"wf{i:04d}"] = bridge_workflow(rng, [a, b, c, d])
    return Workload(fleet, scripts)
