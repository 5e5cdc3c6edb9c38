"""The same workflows under a naive placement, as a job our runtime can run: what the report
measures our plan against (the model of each placement is in partition/cost.py).

- hash by workflow: each workflow runs whole on the partition its name hashes to; what
  workflows share is computed once per partition that hosts one of them, and a sensor's
  readings are sent to every partition hosting a workflow that reads it. Nothing else
  crosses. This is our runtime with copies of readings and no second stage.
- hash by sensor id (the baseline of Zhou et al.: Storm's fieldsGrouping on the sensor id): a
  reading goes to the partition its sensor id hashes to, where the windows directly over
  the sensor run; every other edge of the shared graph is a shuffle of its own, to the
  partition the consuming computation's id hashes to. This is our runtime with one stage
  per level of the graph (a computation runs one stage after the latest of its inputs),
  each edge forwarded on its own, as a Storm bolt subscribes to a stream.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from sensorscript.codegen.program import programs, runtime_node
from sensorscript.graph.nodes import SENSOR, WINDOW
from sensorscript.parser import ast
from sensorscript.partition.cost import hash_partition, workflow_partition
from sensorscript.partition.plan import Plan, make_plan
from sensorscript.registry import SensorRegistry
from sensorscript.runtime.plan import program as rt
from sensorscript.runtime.plan.program import Job


def by_workflow(job: Job, workflows: Sequence[ast.Workflow], registry: SensorRegistry | None) -> Job:
    """`job` (our plan of `workflows`) with the workflows placed by the hash of their names."""
    count = job.partitions
    groups: dict[int, list[ast.Workflow]] = {}
    for workflow in workflows:
        groups.setdefault(workflow_partition(workflow.name, count), []).append(workflow)
    codes = {sensor_id: code for sensor_id, (code, _) in job.sensors.items()}
    firsts: list[rt.Program] = []
    homes: dict[str, list[int]] = {}
    for partition in range(count):
        group = groups.get(partition, [])
        if not group:
            firsts.append(rt.Program(partition=partition, stage=1, nodes=(), slices=()))
            continue
        plan = make_plan(group, registry, 1)  # one partition: everything shared within it, no cut
        (first,), _ = programs(plan)
        nodes = tuple(dataclasses.replace(n, code=codes[n.sensor_id]) if isinstance(n, rt.Sensor) else n
                      for n in first.nodes)
        firsts.append(dataclasses.replace(first, partition=partition, nodes=nodes))
        for sensor_id in plan.graph.sensors():
            homes.setdefault(sensor_id, []).append(partition)
    return dataclasses.replace(
        job, name=f"{job.name}:by-workflow", first_stage=tuple(firsts), second_stage=(None,) * count,
        sensors={s: (codes[s], places[0]) for s, places in sorted(homes.items())},
        replicas={s: tuple(places[1:]) for s, places in sorted(homes.items()) if len(places) > 1})


def by_sensor(job: Job, plan: Plan) -> Job:
    """`job` (compiled from `plan`) with the computations placed by hash (`by_sensor_stages`)."""
    stages = by_sensor_stages(plan)
    count = job.partitions
    codes = plan.codes
    return dataclasses.replace(
        job, name=f"{job.name}:by-sensor", first_stage=stages[0],
        second_stage=stages[1] if len(stages) > 1 else (None,) * count, later_stages=tuple(stages[2:]),
        sensors={s: (codes[s], hash_partition(s, count)) for s in sorted(codes)}, replicas={})


def by_sensor_stages(plan: Plan) -> list[tuple[rt.Program | None, ...]]:
    """The programs of hash by sensor id, stage by stage (a program or None per partition): a
    sensor and the windows directly over it on the partition of the sensor id's hash, every
    other computation on the partition of its own id's hash, one stage after the latest of
    its inputs."""
    graph, count = plan.graph, plan.partitions.count
    codes = plan.codes
    home: dict[str, int] = {}
    stage: dict[str, int] = {}
    for node in graph.nodes():
        if node.kind == SENSOR:
            home[node.id], stage[node.id] = hash_partition(node.sensor_id, count), 1
        elif node.kind == WINDOW and graph.node(node.inputs[0]).kind == SENSOR:
            home[node.id], stage[node.id] = home[node.inputs[0]], 1
        else:
            home[node.id], stage[node.id] = hash_partition(node.id, count), 1 + max(stage[i] for i in node.inputs)
    outputs: dict[str, list[str]] = {}
    for name, node_id in sorted(graph.outputs.items()):
        outputs.setdefault(node_id, []).append(name)
    depth = max(stage.values(), default=1)
    # Every edge that is not sensor -> window is a forward of its own: the consumer reads the
    # input under the edge's name, received as a stream at the consumer's partition and stage.
    nodes: dict[tuple[int, int], list[rt.Node]] = {(k, q): [] for k in range(1, depth + 1) for q in range(count)}
    forwards: dict[tuple[int, int], list[rt.Forward]] = {}
    senders: dict[tuple[int, int], set[int]] = {}
    received: dict[str, str] = {}  # the name of an edge's stream at its consumer -> the input's id
    for node in graph.nodes():
        where = (stage[node.id], home[node.id])
        declared = runtime_node(node, codes)
        if stage[node.id] == 1:  # a sensor, or a window directly over its sensor, beside it
            nodes[where].append(declared)
            continue
        names = {}
        for i in dict.fromkeys(node.inputs):
            names[i] = f"{i}>{node.id}"
            received[names[i]] = i
            code = sum(isinstance(n, rt.Sensor) for n in nodes[where])
            nodes[where].append(rt.Sensor(names[i], graph.node(i).label, code))
            forwards.setdefault((stage[i], home[i]), []).append(rt.Forward(i, home[node.id], code, stage[node.id]))
            senders.setdefault(where, set()).add(rt.sender_id(stage[i], home[i], count))
        if isinstance(declared, rt.Window):
            nodes[where].append(dataclasses.replace(declared, input=names[declared.input]))
        elif isinstance(declared, rt.Union):
            nodes[where].append(dataclasses.replace(declared, inputs=tuple(names[i] for i in declared.inputs)))
        else:
            nodes[where].append(dataclasses.replace(declared, inputs=tuple(names[i] for i in declared.inputs),
                                                    expression=_renamed(declared.expression, names)))
    stages = []
    for k in range(1, depth + 1):
        row = []
        for q in range(count):
            mine = nodes[k, q]
            if k > 1 and not mine:
                row.append(None)
                continue
            row.append(rt.Program(
                partition=q, stage=k, nodes=tuple(mine),
                slices=_slices_of(plan, mine, received),
                # (a received stream is named after its edge, never an output)
                outputs={n.id: tuple(outputs[n.id]) for n in mine if n.id in outputs},
                forwards=tuple(forwards.get((k, q), ())),
                senders=tuple(sorted(senders.get((k, q), ())))))
        stages.append(tuple(row))
    return stages


def _renamed(expression: tuple, names: dict[str, str]) -> tuple:
    """A combine expression reading its inputs under their edges' names."""
    if expression[0] == "in":
        return ("in", names[expression[1]])
    return tuple(_renamed(e, names) if isinstance(e, tuple) else e for e in expression)


def _slices_of(plan: Plan, nodes: list[rt.Node], received: dict[str, str]) -> tuple[rt.Slices, ...]:
    """Slice plans for the streams the windows here read, under the names they have here (a
    received stream is cut as the plan cuts the stream it carries)."""
    read = sorted({n.input for n in nodes if isinstance(n, rt.Window)})
    return tuple(rt.Slices(stream, s.period_ms, s.offsets_ms, s.partials)
                 for stream in read for s in (plan.slices[received.get(stream, stream)],))
