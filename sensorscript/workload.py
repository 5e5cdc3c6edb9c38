"""A seeded generator of bridge-like workloads, modelled on the evaluation of Zhou et al.

1,000 sensors of 21 types, most sampling at 20 Hz or more; workflows shaped like
their example (two windowed points and a union of two sensors, merged and
windowed again); popular sensors (a Zipf draw) are shared by many workflows,
as engineers of different teams watch the same critical points. The same seed
always gives the same sensors, scripts and data.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path

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

    As in the example of Zhou et al. (union("8MD2-A", "8MD3-A")), a union joins adjacent
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
    """Seven statements in the shape of the example of Zhou et al., with drawn parameters.

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


def write_workflows(folder, workflows: int, sensors: int, examples=None, flags: int = 0,
                    seed: int = 7, shared: int = 0) -> list[Sensor]:
    """Write what `sscript compile` takes: `workflows` generated bridge workflows over `sensors`
    generated sensors (folder/workflows/wfNNNN.ss), beside the workflows of `examples` (a folder of
    .ss files and their sensors.csv, as workflows/ in the repository) if given, and `flags`
    threshold workflows (flagNNNN.ss: a 0/1 flag, 1 while a generated sensor's 10-second maximum is
    above 9, which write_readings' values reach on about a quarter of the sensors); the sensors of
    all into folder/sensors.csv (an example sensor keeps its line where a generated one has its
    name). With `shared` K, K more sensors at 20 Hz (SH01-A, ...) that every generated workflow reads
    besides its own: workflow i joins SH(i mod K) with its single point in a union and adds a
    window over it (`out_shared`), as teams that each watch a common reference point (a
    temperature, a datum) beside their own; a union per workflow, so no placement keeps all of
    a shared sensor's readers on one partition under the balance bound. Returns the sensors, as
    write_readings takes them."""
    from sensorscript.registry import read_csv

    folder = Path(folder)
    scripts = folder / "workflows"
    scripts.mkdir(parents=True, exist_ok=True)
    fleet = read_csv(Path(examples) / "sensors.csv") if examples else []
    for path in sorted(Path(examples).glob("*.ss")) if examples else ():
        (scripts / path.name).write_text(path.read_text())
    generated = bridge_workload(workflows, sensors, seed)
    common = [Sensor(f"SH{k + 1:02d}-A", 20.0, "shared") for k in range(shared)]
    for index, (name, text) in enumerate(generated.workflows.items()):
        if common:
            point = re.match(r'P1 = \w+\(("[^"]+"), ([\d_]+), ([\d_]+)\)', text)
            text += (f'SHU = union("{common[index % shared].sensor_id}", {point[1]});\n'
                     f"out_shared = avg(SHU, {point[2]}, {point[3]});\n")
        (scripts / f"{name}.ss").write_text(text)
    for i in range(flags):
        sensor = generated.sensors[i * 7 % len(generated.sensors)].sensor_id
        (scripts / f"flag{i:04d}.ss").write_text(f'PEAK = max("{sensor}", 10s, 10s);\nHIGH = PEAK > 9;\n')
    known = {s.sensor_id for s in fleet}
    fleet += [s for s in generated.sensors + common if s.sensor_id not in known]
    (folder / "sensors.csv").write_text("sensor_id,frequency_hz,type\n" + "".join(
        f"{s.sensor_id},{s.frequency_hz!r},{s.type}\n" for s in fleet))
    return fleet


def write_readings(sensors: list[Sensor], folder, seconds: float, start_ms: int = 1_767_225_600_000,
                   files: int = 4, seed: int = 7, bad_lines: int = 0, disorder_ms: int = 0) -> int:
    """Write CSV files of readings, each sensor at its frequency, in event-time order per file.

    Values are a slow sine plus noise per sensor, so windows have something to show.
    `bad_lines` malformed lines are mixed in (for the quarantine); `disorder_ms` shifts
    each reading's position in the file by up to that much event time (out-of-order
    arrival). Returns the number of good readings written.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ids, ts, values = [], [], []
    for index, sensor in enumerate(sensors):
        count = max(1, int(seconds * sensor.frequency_hz))
        t = start_ms + (np.arange(count) * (1000.0 / sensor.frequency_hz)).astype(np.int64) \
            + int(rng.integers(0, max(1, int(1000 / sensor.frequency_hz))))
        phase = rng.uniform(0, 2 * np.pi)
        v = 10 * np.sin(2 * np.pi * (t - start_ms) / 600_000 + phase) + rng.normal(0, 1, count)
        ids.append(np.full(count, index, np.int32))
        ts.append(t)
        values.append(np.round(v, 4))
    ids, ts, values = np.concatenate(ids), np.concatenate(ts), np.concatenate(values)
    arrival = ts + (rng.integers(0, disorder_ms + 1, len(ts)) if disorder_ms else 0)
    order = np.argsort(arrival, kind="stable")
    names = np.array([s.sensor_id for s in sensors], dtype=object)
    lines = (names[ids[order]] + "," + ts[order].astype(str).astype(object) + ","
             + values[order].astype(str).astype(object))
    bad = ["8MD1-AZ,not-a-time,1.0", ",1767225600000,2.0", "8MD1-AZ,1767225600000", '{"sensor_id": "8MD1-AZ"}',
           "8MD1-AZ,1767225600000,NaN"]
    lines = list(lines)
    for i in range(bad_lines):
        lines.insert(int(rng.integers(0, len(lines) + 1)), bad[i % len(bad)])
    per_file = -(-len(lines) // files)
    for f in range(files):
        chunk = lines[f * per_file:(f + 1) * per_file]
        (folder / f"readings-{f:03d}.csv").write_text("sensor_id,ts,value\n" + "\n".join(chunk) + "\n")
    return len(ts)
