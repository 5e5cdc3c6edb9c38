"""The same workflows under a naive placement, as a job our runtime can run: what the report
measures our plan against (SPEC §5; the model of each placement is in partition/cost.py).

- hash by workflow: each workflow runs whole on the partition its name hashes to; what
  workflows share is computed once per partition that hosts one of them, and a sensor's
  readings are sent to every partition hosting a workflow that reads it. Nothing else
  crosses. This is our runtime with copies of readings and no second stage.

Hash by sensor id (every union and every derived edge a shuffle of its own) needs a shuffle
per level of the workflow graph, which one Spark query of ours does not have; the report
gives its model only.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from sensorscript.codegen.program import programs
from sensorscript.parser import ast
from sensorscript.partition.cost import workflow_partition
from sensorscript.partition.plan import make_plan
from sensorscript.registry import SensorRegistry
from sensorscript.runtime import program as rt
from sensorscript.runtime.job import Job


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
