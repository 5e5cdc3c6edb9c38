"""What the page shows of OUT/plan.json, boiled down once per compile (`PlanSummary`): plan.json is
28 MB at 10,240 workflows and takes 0.5 s to parse; the page needs the workflows' output streams and
their kinds, which streams can have alarms, counts, the partitions' loads and the busiest edges.
"""

from __future__ import annotations

from dataclasses import dataclass

from sensorscript.dashboard import figures
from sensorscript.graph.nodes import SENSOR
from sensorscript.runtime.output import alarms as alarm_rule

CROSSINGS_SHOWN = 10  # the plan names the busiest edges between partitions, and counts the rest


@dataclass(frozen=True)
class PlanSummary:
    """What the page shows of plan.json, kept from one compile to the next."""

    mtime: float
    workflows: dict[str, dict[str, str]]  # workflow -> {WORKFLOW.STREAM: kind of the node computing it}
    kinds: dict[str, str]  # WORKFLOW.STREAM -> kind
    alarm_kinds: dict[str, str]  # WORKFLOW.STREAM -> match or flag, for those that have alarms (alarms.py)
    nodes: int
    shared: int  # computations shared by several workflows
    sensors: int  # sensors the job reads
    partitions: int
    balance: float
    loads_hz: list[float]  # per partition, planned
    sensors_placed: list[int]  # per partition
    crossings: int  # edges between partitions
    crossing_rate: float  # tuples per second over them, planned
    busiest_crossings: list[dict]  # CROSSINGS_SHOWN of plan.json's crossings, the highest rate first
    cost: dict  # tuples per minute over the network: ours, lower_bound, naive_sensor_hash, naive_workflow_hash
    drawable: dict | None  # plan.json's nodes and workflows when the DAG is small enough to draw

    @classmethod
    def of(cls, plan: dict, mtime: float) -> "PlanSummary":
        partitions = plan["partitions"]
        placed = [0] * partitions["count"]
        for partition in partitions["sensors"].values():
            placed[partition] += 1
        crossings = partitions["crossings"]
        workflows = figures.output_streams(plan)
        small = len(plan["nodes"]) <= figures.DAG_NODES_DRAWN
        kinds = {s: k for outputs in workflows.values() for s, k in outputs.items()}
        return cls(mtime, workflows, kinds, alarm_rule.alarm_kinds_of_plan(plan),
                   len(plan["nodes"]), len(plan.get("shared", {})),
                   sum(1 for node in plan["nodes"] if node["kind"] == SENSOR), partitions["count"],
                   partitions["balance"], list(partitions["loads_hz"]), placed, len(crossings),
                   sum(c["rate_per_s"] for c in crossings),
                   sorted(crossings, key=lambda c: (-c["rate_per_s"], c["from"], c["to"]))[:CROSSINGS_SHOWN],
                   plan["cost_tuples_per_minute"],
                   {"nodes": plan["nodes"], "workflows": plan["workflows"]} if small else None)

    def workflow_of(self, stream: str) -> str:
        return stream.rsplit(".", 1)[0]
