"""Communication cost: tuples per minute that cross a shuffle, for our plan and the baselines.

- lower bound: every referenced raw tuple crosses once (from the source to its partition);
- ours: that, plus the tuples on the edges the partitioner had to cut, once per stream and
  destination partition (the job forwards a stream to a partition once, however many
  computations there read it);
- naive hashing by sensor id (the paper's baseline, Storm's fieldsGrouping on sensor_id):
  raw tuples go to the hash of their sensor, where windows directly over a sensor run;
  every other edge is a shuffle: a union re-shuffles its raw inputs, and derived tuples
  are shuffled to where they are combined or windowed again;
- naive hashing by workflow: each workflow runs whole on the partition its name hashes
  to, so a sensor's tuples are sent once to every partition hosting a workflow that
  reads it, and nothing else crosses (nor is anything shared across partitions).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from sensorscript.graph.graph import Graph
from sensorscript.graph.nodes import SENSOR, WINDOW
from sensorscript.partition.greedy import PartitionPlan, node_rates


@dataclass(frozen=True)
class CommunicationCost:
    """Tuples per minute crossing a shuffle."""

    ours: float
    lower_bound: float
    naive_sensor_hash: float
    naive_workflow_hash: float

    def saving(self, baseline: float) -> float:
        """The fraction of the baseline's traffic our plan saves."""
        return 1 - self.ours / baseline if baseline else 0.0


def communication_cost(graph: Graph, frequencies: dict[str, float], plan: PartitionPlan,
                       rates: dict[str, float] | None = None) -> CommunicationCost:
    """`rates`: the graph's node rates (node_rates), when the caller has them."""
    rates = rates if rates is not None else node_rates(graph, frequencies)
    raw = sum(frequencies[s] for s in graph.sensors())
    ours = raw + sum({(c.source, c.to_partition): c.rate_per_s for c in plan.crossings}.values())
    kind = {node.id: node.kind for node in graph.nodes()}
    by_sensor = raw + sum(rates[u] for u, v in graph.edges() if not (kind[v] == WINDOW and kind[u] == SENSOR))
    return CommunicationCost(
        ours=ours * 60,
        lower_bound=raw * 60,
        naive_sensor_hash=by_sensor * 60,
        naive_workflow_hash=_by_workflow(graph, frequencies, plan.count) * 60,
    )


def hash_partition(key: str, count: int) -> int:
    """A stable hash of a name (crc32: the same on every run and machine), as a partition."""
    return zlib.crc32(key.encode()) % count


def workflow_partition(workflow: str, count: int) -> int:
    """Where hash by workflow runs a workflow."""
    return hash_partition(workflow, count)


def _by_workflow(graph: Graph, frequencies: dict[str, float], count: int) -> float:
    """A sensor's tuples go to every partition that runs a workflow with an output downstream of it:
    the partitions (a bit each) are passed from the outputs up to the sensors, consumers before
    their inputs."""
    homes: dict[str, int] = {}
    for output, node_id in graph.outputs.items():
        homes[node_id] = homes.get(node_id, 0) | 1 << workflow_partition(output.rsplit(".", 1)[0], count)
    for node in reversed(list(graph.nodes())):
        mine = homes.get(node.id)
        if mine:
            for input_id in node.inputs:
                homes[input_id] = homes.get(input_id, 0) | mine
    sensors = sorted((node.sensor_id, node.id) for node in graph.nodes() if node.kind == SENSOR)
    return sum(frequencies[sensor_id] * homes.get(node_id, 0).bit_count() for sensor_id, node_id in sensors)
