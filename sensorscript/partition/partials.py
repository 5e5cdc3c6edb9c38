"""Slice partials across partitions (issue #44): what crosses when a window's input lives elsewhere.

A sensor's readings cross to another partition when computations there read them. Where all
that reads them there are windows, directly over the sensor or over a union of sensors that
nothing but windows reads, the windows only need the sensor's share of each slice: its partial
aggregates. The sensor's partition then cuts its readings into those slices and sends
one tuple per partial, slice and micro-batch instead of every reading (Spark's partial
aggregation before a shuffle); the other partition adds them to the slices as it would have added
the readings, so every window comes out the same.

Partials cross where they are fewer: a sensor at 20 Hz under 5 s slices of avg and max sends 3
partials per slice (0.6 a second) instead of 20 readings a second. The model counts a slice plan's
partials at one per slice and partial (a batch shorter than a slice sends a slice's partials once
per batch it touches: the model's rate is what batches as long as the slices cost).

One set of partials serves several streams there (`cuts_for`): streams cut alike share their
slices' partials (four unions of one sensor with others, all in 10 s slices, take one count and sum
per 10 s, not four), and streams cut differently may share the partials of a cut finer than each
(10 s partials add up to 1 min slices), where that comes to fewer tuples.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from sensorscript.graph.graph import Graph
from sensorscript.graph.nodes import SENSOR, UNION, WINDOW
from sensorscript.graph.slicing import SlicePlan
from sensorscript.parser.printer import format_ms
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
        if node.inputs.count(sensor) > 1:  # union(S, S): each reading twice, which one set of partials is not
            return None
        if node.kind == WINDOW:
            into.add(sensor)
        elif (node.kind == UNION and reader not in outputs and reader in slices
              and all(graph.node(c).kind == WINDOW for c in graph.consumers(reader))):
            into.add(reader)
        else:
            return None
    return tuple(sorted(into))


@dataclass(frozen=True)
class Cut:
    """Slices a sensor's readings are cut into for another partition, and the partials sent per
    slice: they serve every stream of `streams`, whose slices are each a union of these."""

    period_ms: int
    offsets_ms: tuple[int, ...]  # cut points within one period, sorted, starting at 0
    partials: tuple[str, ...]
    streams: tuple[str, ...]

    def rate(self, frequency: float) -> float:
        """Tuples per second: a slice without a reading sends none, so never more than the readings."""
        return len(self.partials) * min(len(self.offsets_ms) * 1000 / self.period_ms, frequency)


def cut_text(period_ms: int, offsets_ms: tuple[int, ...]) -> str:
    """One slice of a cut of partials, in words (plan.txt, job.py): `10s slice`, or for a cut of
    several points (a finer common cut may have thousands) `slice cut at 6 points of every 1min`."""
    return (f"{format_ms(period_ms)} slice" if len(offsets_ms) == 1 else
            f"slice cut at {len(offsets_ms)} points of every {format_ms(period_ms)}")


MAX_CUTS_PER_PERIOD = 4096  # a finer cut of several would need more: they stay apart


def _finer(a: Cut, b: Cut) -> Cut | None:
    """The coarsest cut finer than both (every cut point of either, over the least common multiple
    of their periods), sending the partials of both; None where it has too many cut points."""
    period = math.lcm(a.period_ms, b.period_ms)
    if (period // a.period_ms) * len(a.offsets_ms) + (period // b.period_ms) * len(b.offsets_ms) > MAX_CUTS_PER_PERIOD:
        return None
    offsets = sorted({k * c.period_ms + o for c in (a, b) for k in range(period // c.period_ms) for o in c.offsets_ms})
    if len(offsets) > 1 and period % offsets[1] == 0 and offsets == list(range(0, period, offsets[1])):
        # evenly spaced over the whole period: one step of it is the period
        period, offsets = offsets[1], [0]
    return Cut(period, tuple(offsets), tuple(sorted({*a.partials, *b.partials})), a.streams + b.streams)


def cuts_for(into: tuple[str, ...], slices: dict[str, SlicePlan], frequency: float) -> tuple[Cut, ...]:
    """The cuts whose partials one sensor sends for the slices of the streams `into` on another
    partition: one per distinct way they are cut (the union of their partials), then, while it
    lowers the tuples sent, the two whose finer common cut saves most replaced by it."""
    alike: dict[tuple[int, tuple[int, ...]], list[str]] = {}
    for stream in into:
        alike.setdefault((slices[stream].period_ms, slices[stream].offsets_ms), []).append(stream)
    cuts = [Cut(period, offsets, tuple(sorted({k for s in streams for k in slices[s].partials})), tuple(streams))
            for (period, offsets), streams in alike.items()]
    while len(cuts) > 1:
        best, saving = None, 1e-12
        for i in range(len(cuts)):
            for j in range(i + 1, len(cuts)):
                finer = _finer(cuts[i], cuts[j])
                gain = finer and cuts[i].rate(frequency) + cuts[j].rate(frequency) - finer.rate(frequency)
                if finer and gain > saving:
                    best, saving = (i, j, finer), gain
        if best is None:
            break
        i, j, finer = best
        cuts[i] = finer
        del cuts[j]
    return tuple(cuts)


def partial_rate(into: tuple[str, ...], slices: dict[str, SlicePlan], frequency: float) -> float:
    """Tuples per second the partials of one sensor for these streams' slices come to (`cuts_for`)."""
    return sum(cut.rate(frequency) for cut in cuts_for(into, slices, frequency))


def cheaper(graph: Graph, sensor: str, readers: list[str], slices: dict[str, SlicePlan], outputs: set[str],
            frequency: float) -> tuple[str, ...] | None:
    """`sliced_for`, where its partials come to fewer tuples than the readings (else None)."""
    into = sliced_for(graph, sensor, readers, slices, outputs)
    return into if into and partial_rate(into, slices, frequency) < frequency else None


def all_cuts(graph: Graph, sensor: str, slices: dict[str, SlicePlan], outputs: set[str],
             frequency: float) -> tuple[Cut, ...] | None:
    """The cuts of a sensor every reader of which, wherever it runs, takes slice partials (`sliced_for`
    over all its readers), where they come to fewer tuples than its readings; else None. Stage 0 sends
    these instead of its on-time readings (partition/stages.py), and each partition they are forwarded
    to gets those of them that serve its streams (`serving`)."""
    into = cheaper(graph, sensor, list(graph.consumers(sensor)), slices, outputs, frequency)
    return cuts_for(into, slices, frequency) if into else None


def serving(cuts: tuple[Cut, ...], into: tuple[str, ...]) -> tuple[Cut, ...]:
    """Those of a sensor's cuts that serve any of these streams, in order."""
    wanted = set(into)
    return tuple(c for c in cuts if wanted.intersection(c.streams))


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
        cuts = all_cuts(graph, sensor, slices, outputs, frequency)  # cut once for every reader (stage 0)
        if cuts:  # (then every reader takes partials, and those that serve these streams cost less than readings)
            into = sliced_for(graph, sensor, everyone, slices, outputs)
            found[sensor, dest] = (into, sum(c.rate(frequency) for c in serving(cuts, into)))
        elif into := cheaper(graph, sensor, everyone, slices, outputs, frequency):
            found[sensor, dest] = (into, partial_rate(into, slices, frequency))
    return tuple(dataclasses.replace(c, kind=PARTIALS, into=found[key][0], rate_per_s=found[key][1])
                 if (key := (c.source, c.to_partition)) in found else c for c in crossings)
