"""Window slicing: every stream that feeds windows is cut into slices once.

Each tuple lands in exactly one slice, which keeps partial aggregates (only the
ones its windows need among sum, count, min, max); every window is composed
from the slices it covers, so no tuple is copied per window.

Two ways to cut are compared per stream, and the one with fewer slices per
unit of time is kept:

- `gcd`: slices of equal width, the GCD of all lengths and slides (Zhou et al.);
- `edges`: slices cut only where some window starts or ends (as Scotty does);
  the cut points repeat with period lcm(slides), so slices are described by
  that period and the sorted offsets of the cuts within it.

Both are described the same way, a period and offsets within it (`gcd` is
period g with the single offset 0), so the runtime needs one code path.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from dataclasses import dataclass

from sensorscript.graph.graph import Graph
from sensorscript.graph.nodes import WINDOW

# Partial aggregates each window function needs from its slices.
PARTIALS = {"avg": ("sum", "count"), "sum": ("sum",), "count": ("count",), "max": ("max",), "min": ("min",)}
# Cutting at window edges is considered only while one period has at most this many cuts.
MAX_EDGE_CUTS = 100_000


@dataclass(frozen=True)
class SlicePlan:
    stream: str  # node id of the sliced stream
    mode: str  # "gcd", "edges", or "kept" (an update: the running job's cuts, which every window fits)
    period_ms: int
    offsets_ms: tuple[int, ...]  # cut points within one period, sorted, starting at 0
    windows: tuple[str, ...]  # node ids of the windows composed from these slices
    partials: tuple[str, ...]
    gcd_slices_per_minute: float
    edge_slices_per_minute: float | None  # None when not considered (too many cuts)

    @property
    def slices_per_minute(self) -> float:
        return len(self.offsets_ms) * 60_000 / self.period_ms


def plan_slices(graph: Graph, previous: dict[str, tuple[int, tuple[int, ...]]] | None = None) -> dict[str, SlicePlan]:
    """A slice plan for every stream that feeds at least one window, by stream node id.

    `previous` (an update): how the running job slices its streams (period, offsets). A stream it
    slices keeps its cuts when every window now over it starts and ends on them (mode `kept`): its
    slices, and the windows composed from them, then carry over into the new plan."""
    windows: dict[str, list[tuple[str, str, int, int]]] = {}
    for node in graph.nodes():
        if node.kind == WINDOW:
            windows.setdefault(node.inputs[0], []).append((node.id, node.func, node.length, node.slide))
    plans = {}
    for stream, over in sorted(windows.items()):
        plans[stream] = slice_stream(stream, over)
        if previous and stream in previous and (plans[stream].period_ms, plans[stream].offsets_ms) != previous[stream]:
            period, offsets = previous[stream]
            if all(on_cuts(length, slide, period, offsets) for _, _, length, slide in over):
                plans[stream] = dataclasses.replace(plans[stream], mode="kept", period_ms=period, offsets_ms=offsets)
    return plans


def on_cuts(length: int, slide: int, period: int, offsets: tuple[int, ...], limit: int = 1_000_000) -> bool:
    """Whether every window of this length and slide starts and ends on a cut point (cuts at `offsets`
    within every `period`). The windows' edges repeat with period lcm(slide, period); when that holds
    more than `limit` of them, the answer is no."""
    cycle = math.lcm(slide, period)
    if cycle // slide > limit:
        return False
    cuts = set(offsets)
    return all(start % period in cuts and (start + length) % period in cuts for start in range(0, cycle, slide))


def slice_stream(stream: str, windows: list[tuple[str, str, int, int]]) -> SlicePlan:
    """`windows` are (node id, function, length ms, slide ms) over one stream."""
    gcd = math.gcd(*(v for _, _, length, slide in windows for v in (length, slide)))
    gcd_rate = 60_000 / gcd
    period = math.lcm(*(slide for _, _, _, slide in windows))
    edges = _edge_offsets(windows, period)
    edge_rate = None if edges is None else len(edges) * 60_000 / period
    partials = tuple(sorted({p for _, func, _, _ in windows for p in PARTIALS[func]}))
    ids = tuple(sorted(w[0] for w in windows))
    if edge_rate is not None and edge_rate < gcd_rate:
        return SlicePlan(stream, "edges", period, edges, ids, partials, gcd_rate, edge_rate)
    return SlicePlan(stream, "gcd", gcd, (0,), ids, partials, gcd_rate, edge_rate)


def _edge_offsets(windows, period: int) -> tuple[int, ...] | None:
    """Every window start and end, modulo the period; None when there would be too many."""
    if sum(period // slide for _, _, _, slide in windows) * 2 > MAX_EDGE_CUTS:
        return None
    cuts = {0}
    for _, _, length, slide in windows:
        for start in range(0, period, slide):
            cuts.add(start % period)
            cuts.add((start + length) % period)
    return tuple(sorted(cuts))


def slice_index(plan: SlicePlan, ts: int) -> int:
    """The slice a timestamp falls in (slices are numbered from the epoch)."""
    cycle, offset = divmod(ts, plan.period_ms)
    position = bisect.bisect_right(plan.offsets_ms, offset) - 1
    return cycle * len(plan.offsets_ms) + position


def slice_start(plan: SlicePlan, index: int) -> int:
    cycle, position = divmod(index, len(plan.offsets_ms))
    return cycle * plan.period_ms + plan.offsets_ms[position]
