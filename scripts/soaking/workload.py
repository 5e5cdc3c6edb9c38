"""The soak's workload: the bundled example workflows (workflows/*.ss: windows of 30 s to 1 h, unions,
arithmetic, thresholds, patterns) and `--workflows` generated bridge workflows (sensorscript/workload.py:
windows of 10 s to 10 min over unions of neighbouring sensors), over a fleet of `--sensors` sensors: the
13 example sensors and generated bridge sensors. Every sensor reads at rate / sensors Hz (40 Hz for
40,000 readings/s over 1,000 sensors, twice the 20 Hz of Zhou et al.), so the rate fed is exact. `prepare`
compiles the job (compile_workflows, as `sscript compile`) into OUT/job; `fill_ms` says how long its
state grows by design once its input starts.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from sensorscript.compiler import compile_workflows
from sensorscript.graph.nodes import PATTERN, WINDOW
from sensorscript.registry import Sensor, SensorRegistry, read_csv
from sensorscript.workload import bridge_workload

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLES = ROOT / "workflows"


@dataclass
class Workload:
    sensors: list[str]  # the fleet, every one fed
    referenced: frozenset[str]  # those the job reads
    workflows: int  # files compiled
    fill_ms: int  # the job's state grows for this long after its input starts (see the module's doc)


def prepare(args, work: Path) -> Workload:
    """Write the workflows and the sensor registry, compile the job into work/job."""
    examples = read_csv(EXAMPLES / "sensors.csv")
    generated = bridge_workload(args.workflows, max(args.sensors - len(examples), 1)) if args.workflows else None
    known = {s.sensor_id for s in examples}
    fleet = examples + [s for s in (generated.sensors if generated else []) if s.sensor_id not in known]
    fleet += [Sensor(f"SOAK{i}", 1.0, "spare") for i in range(args.sensors - len(fleet))]
    fleet = fleet[:args.sensors] if len(fleet) > args.sensors else fleet
    hz = args.rate / len(fleet)
    scripts = work / "workflows"
    shutil.rmtree(scripts, ignore_errors=True)
    scripts.mkdir(parents=True)
    for path in sorted(EXAMPLES.glob("*.ss")):
        shutil.copy(path, scripts / path.name)
    for name, text in (generated.workflows.items() if generated else ()):
        (scripts / f"{name}.ss").write_text(text)
    registry = work / "sensors.db"
    registry.unlink(missing_ok=True)
    sensors = SensorRegistry.create(registry)
    sensors.put([Sensor(s.sensor_id, hz, s.type) for s in fleet])
    sensors.close()
    files = sorted(str(p) for p in scripts.glob("*.ss"))
    compiled = compile_workflows(files, work / "job", str(registry), args.partitions)
    graph = compiled.plan.graph
    missing = set(graph.sensors()) - {s.sensor_id for s in fleet}
    if missing:
        raise SystemExit(f"the workflows read sensors outside the fleet: {sorted(missing)[:5]}")
    return Workload([s.sensor_id for s in fleet], frozenset(graph.sensors()), len(files), fill_ms(graph))


def fill_ms(graph) -> int:
    """The longest chain of window lengths and pattern `within`s from a sensor to an output, leaving
    out windows over pattern matches (a few rows): how long the job's state grows after its input starts."""
    memo: dict[str, tuple[int, bool]] = {}

    def walk(node_id: str) -> tuple[int, bool]:  # (fill, fed by a pattern)
        if node_id not in memo:
            node = graph.node(node_id)
            inputs = [walk(i) for i in node.inputs]
            longest = max((f for f, _ in inputs), default=0)
            from_pattern = any(p for _, p in inputs)
            if node.kind == WINDOW and not from_pattern:
                longest += node.length
            elif node.kind == PATTERN:
                longest += node.key[1][2]  # the description's `within`, ms (graph/build.py)
                from_pattern = True
            memo[node_id] = (longest, from_pattern)
        return memo[node_id]

    return max((walk(n.id)[0] for n in graph.nodes()), default=0)
