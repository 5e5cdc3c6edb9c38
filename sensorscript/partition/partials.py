"""Slice partials across partitions (issue #44): what crosses when a window's input lives elsewhere.

A sensor's readings cross to another partition when computations there read them. Where all
that reads them there are windows, directly over the sensor or over a union of sensors that
nothing but windows reads, the windows only need the sensor's share of each slice: its partial
aggregates (SPEC §5). The sensor's partition then cuts its readings into those slices and sends
one tuple per partial, slice and micro-batch instead of every reading (Spark's partial
aggregation before a shuffle); the other partition adds them to the slices as it would have added
the readings, so every window comes out the same.

Partials cross where they are fewer: a sensor at 20 Hz under 5 s slices of avg and max sends 3
partials per slice (0.6 a second) instead of 20 readings a second. The model counts a slice plan's
partials at one per slice and partial (a batch shorter than a slice sends a slice's partials once
per batch it touches: the model's rate is what batches as long as the slices cost).
"""

from __future__ import annotations

import dataclasses

from sensorscript.graph.graph import Graph
from sensorscript.graph.nodes import SENSOR, UNION, WINDOW
from sensorscript.graph.slicing import SlicePlan
from sensorscript.partition.greedy import PARTIALS, Crossing


def sliced_for(graph: Graph, sensor: str, readers: list[str], slices: dict[str, SlicePlan],
               outputs: set[str]) -> tuple[str, ...] | None:
    """The streams whose slices are all that `readers` (computations on one partition reading the
    sensor node `sensor`) make of its readings, or None when one of them needs the readings: a
    window directly over the sensor (its own slices), a union that is no output and that only
    windows read (the union's slices); anything else (a combine, a pattern) reads readings."""
    into = set()
    for reader in readers:
        node = graph.node(reader)
        if node.kind == WINDOW:
            into.add(sensor)
        elif (node.kind == UNION and reader not in outputs and reader in slices
              and all(graph.node(c).kind == WINDOW for c in graph.consumers(reader))):
            into.add(reader)
        else:
            return None
    return tuple(sorted(into))


def partial_rate(into: tuple[str, ...], slices: dict[str, SlicePlan], frequency: float) -> float:
    """Tuples per second the partials of one sensor for these streams' slices come to: a slice
    without a reading sends none, so never more slices than readings."""
    return sum(len(slices[s].partials) * min(slices[s].slices_per_minute / 60, frequency) for s in into)


def cheaper(graph: Graph, sensor: str, readers: list[str], slices: dict[str, SlicePlan], outputs: set[str],
            frequency: float) -> tuple[str, ...] | None:
    """`sliced_for`, where its partials come to fewer tuples than the readings (else None)."""
    into = sliced_for(graph, sensor, readers, slices, outputs)
    return into if into and partial_rate(into, slices, frequency) < frequency else None


def with_partials(crossings: tuple[Crossing, ...], graph: Graph, placement: dict[str, int],
                  slices: dict[str, SlicePlan], frequencies: dict[str, float],
                  outputs: set[str]) -> tuple[Crossing, ...]:
    """The crossings of a placement, those of a sensor's readings that partials replace marked so
    (kind PARTIALS, the streams they are cut for, their rate: the sensor's to that partition)."""
    readers: dict[tuple[str, int], list[str]] = {}
    for c in crossings:
        if graph.node(c.source).kind == SENSOR:
            readers.setdefault((c.source, c.to_partition), []).append(c.target)
    found = {}
    for (sensor, dest), targets in readers.items():
        frequency = frequencies[graph.node(sensor).sensor_id]
        # Everything that reads the sensor on that partition: every such edge is cut.
        everyone = [r for r in graph.consumers(sensor) if placement[r] == dest]
        into = cheaper(graph, sensor, everyone, slices, outputs, frequency)
        if into:
            found[sensor, dest] = (into, partial_rate(into, slices, frequency))
    return tuple(dataclasses.replace(c, kind=PARTIALS, into=found[key][0], rate_per_s=found[key][1])
                 if (key := (c.source, c.to_partition)) in found else c for c in crossings)
