"""Communication cost: tuples per minute that cross a shuffle, for our plan and the baselines.

- lower bound: every referenced raw tuple crosses once (from the source to its partition);
- ours with stage 0 summing: the same, but a sensor only windows read crosses as the slice
  partials of their slices (partition/stages.py `summed`; the job sends them where the readings
  are on time, once per slice and input task of a micro-batch: the model counts one per slice);
- ours: that, plus the tuples on the edges the partitioner had to cut, once per stream and
  destination partition (the job forwards a stream to a partition once, however many
  computations there read it); a sensor read there by windows only costs its slice partials
  where they are fewer than its readings (partition/partials.py);
- naive hashing by sensor id (the baseline of Zhou et al., Storm's fieldsGrouping on sensor_id):
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
    # Each baseline's most loaded partition over the average, as a placement the job runs
    # (refine.py), and the plan's bound on it: a baseline over the bound is no alternative.
    naive_sensor_peak: float = 1.0
    naive_workflow_peak: float = 1.0
    bound: float = float("inf")
    # The greedy placement of Zhou et al. as it was before refinement and choice (issue #44's "old greedy").
    greedy: float = 0.0
    # Ours with stage 0 sending slice partials instead of the readings of sensors only windows read
    # (partition/stages.py `summed`), where they are on time: the readings' one crossing becomes theirs.
    summed: float = 0.0

    def saving(self, baseline: float) -> float:
        """The fraction of the baseline's traffic our plan saves."""
        return 1 - self.ours / baseline if baseline else 0.0

    def over_bound(self, baseline: str) -> float | None:
        """A baseline ("sensor" or "workflow") that ours does not beat because it breaks the balance
        bound: its most loaded partition over the average (None: ours costs no more than it)."""
        tuples, peak = ((self.naive_sensor_hash, self.naive_sensor_peak) if baseline == "sensor"
                        else (self.naive_workflow_hash, self.naive_workflow_peak))
        return peak if peak > self.bound + 1e-9 and self.ours > tuples else None

    def versus(self, baseline: str) -> str:
        """Ours against a baseline in words: what ours saves, or, for a baseline over the balance
        bound that costs less, that (never a negative saving: ours keeps the bound)."""
        peak = self.over_bound(baseline)
        if peak is not None:
            return f"over the balance bound: one partition at {peak:.2f} x the average, the bound {self.bound:.2f}"
        return f"ours saves {self.saving_of(baseline):.1%}"

    def saving_of(self, baseline: str) -> float:
        return self.saving(self.naive_sensor_hash if baseline == "sensor" else self.naive_workflow_hash)


def communication_cost(graph: Graph, frequencies: dict[str, float], plan: PartitionPlan,
                       rates: dict[str, float] | None = None) -> CommunicationCost:
    """`rates`: the graph's node rates (node_rates), when the caller has them."""
    rates = rates if rates is not None else node_rates(graph, frequencies)
    raw = sum(frequencies[s] for s in graph.sensors())
    ours = raw + forwarded(plan.crossings)
    kind = {node.id: node.kind for node in graph.nodes()}
    by_sensor = raw + sum(rates[u] for u, v in graph.edges() if not (kind[v] == WINDOW and kind[u] == SENSOR))
    peaks = {name: peak for name, _, peak, _ in plan.considered}
    return CommunicationCost(
        ours=ours * 60,
        lower_bound=raw * 60,
        naive_sensor_hash=by_sensor * 60,
        naive_workflow_hash=_by_workflow(graph, frequencies, plan.count) * 60,
        naive_sensor_peak=peaks.get("hash by sensor id", 1.0),
        naive_workflow_peak=peaks.get("hash by workflow", 1.0),
        bound=1 + plan.epsilon,
        greedy=(ours if plan.greedy is None else raw + plan.greedy) * 60,
    )


def forwarded(crossings) -> float:
    """Tuples/s on cut edges: a node's tuples once to each partition that reads them, however many
    computations there do (the job forwards a stream to a partition once)."""
    return sum({(c.source, c.to_partition): c.rate_per_s for c in crossings}.values())


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
