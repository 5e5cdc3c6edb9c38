"""The stateful engine that runs one partition's computations, batch by batch.

Spark hands each partition's readings of a micro-batch to `Engine.process`
together with the watermark in force. Every node then emits exactly its tuples
with event time in [previous watermark, watermark): windows whose end has
passed, combine-latest rows whose inputs are complete; unions pass tuples on at
once. At the end of the input the watermark is +infinity, so everything
pending is emitted, and the union of all batches is what docs/LANGUAGE.md ("Semantics") defines.

State is a small picklable object per partition: per sliced stream the partial
aggregates of the slices still needed, per window how far it has emitted, per
combine the latest value of each input and the tuples not yet final.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from sensorscript.runtime.plan import program as p
from sensorscript.runtime.state import exactness
from sensorscript.runtime.state.kernels.expressions import evaluate
from sensorscript.runtime.state.kernels.sorting import stable_order

NEG_INF, POS_INF = p.NEG_INF, p.POS_INF


@dataclass
class Tuples:
    """A column batch of stream tuples: event time, value, and (window outputs) the window bounds.

    `source` is the sensor code of a raw tuple, and the code of the stream that made a derived one
    (`program.derived_code`): what a pattern reads as an event's `sensor`.
    """

    ts: np.ndarray
    value: np.ndarray
    source: np.ndarray
    start: np.ndarray | None = None
    end: np.ndarray | None = None
    match: object | None = None  # a pattern's own output: its matches' intervals and bound events

    @staticmethod
    def empty() -> "Tuples":
        return Tuples(np.empty(0, np.int64), np.empty(0, np.float64), np.empty(0, np.int32))

    def __len__(self) -> int:
        return len(self.ts)

    def take(self, mask: np.ndarray, matches: bool = False) -> "Tuples":
        """The tuples where `mask` holds: as input to a computation (a pattern's matches stay
        behind), or with `matches` as rows to write (a pattern's matches taken too)."""
        if mask.all():
            return self
        pick = (lambda a: None if a is None else a[mask])
        match = self.match.take(mask) if matches and self.match is not None else None
        return Tuples(self.ts[mask], self.value[mask], self.source[mask], pick(self.start), pick(self.end), match)

    @staticmethod
    def concat(parts: list["Tuples"]) -> "Tuples":
        """The multiset union; window bounds are not carried (a union is no window)."""
        parts = [t for t in parts if len(t)]
        if not parts:
            return Tuples.empty()
        return Tuples(np.concatenate([t.ts for t in parts]), np.concatenate([t.value for t in parts]),
                      np.concatenate([t.source for t in parts]))


@dataclass
class SliceState:
    """Partial aggregates of the non-empty slices of one stream, by slice index (sorted)."""

    index: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    partials: dict[str, np.ndarray] = field(default_factory=dict)
    cut: tuple | None = None  # (period, offsets) the slices were cut by; None in a state of an older release


@dataclass
class CombineState:
    latest: np.ndarray  # one value per input, NaN until the input has had a tuple
    pending_ts: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    pending_input: np.ndarray = field(default_factory=lambda: np.empty(0, np.int32))
    pending_value: np.ndarray = field(default_factory=lambda: np.empty(0, np.float64))
    # The first final timestamp at which every input had had a tuple: the combine's first row, whether
    # written or skipped for a division by zero (UNKNOWN until then; also in a state of an older
    # release, which did not keep it). After an update, its exact-from time (exactness.py).
    complete_from: int = p.UNKNOWN


@dataclass
class EngineState:
    watermark: int = NEG_INF  # the watermark of the last batch: everything below it has been emitted
    slices: dict[str, SliceState] = field(default_factory=dict)
    combines: dict[str, CombineState] = field(default_factory=dict)
    patterns: dict[str, object] = field(default_factory=dict)  # node id -> its matcher's state
    # Per window: the watermark of its input it has emitted up to. A node's input may lag the
    # partition's watermark: a pattern whose matches can be earlier than its last event holds its
    # output back until no partial match can produce an earlier one.
    marks: dict[str, int] = field(default_factory=dict)
    # The plan version this state belongs to and its nodes (an update carries it into the next:
    # `Engine.migrate`), the event time each node an update started starts from (T, the switch),
    # and each node's exact-from time where it is not -infinity (runtime/state/exactness.py).
    version: int = 1
    nodes: frozenset = frozenset()
    since: dict[str, int] = field(default_factory=dict)
    exact: dict[str, int] = field(default_factory=dict)
    # Per node: the newest event time of the tuples it let go of while an input was not known whole.
    dropped: dict[str, int] = field(default_factory=dict)

    def __setstate__(self, values: dict) -> None:
        """A state pickled before a field existed (a checkpoint of an older release) gets its default."""
        self.__dict__.update({"version": 1, "nodes": frozenset(), "since": {}, "exact": {}, "dropped": {},
                              **values})


@dataclass
class BatchResult:
    outputs: dict[str, Tuples]  # node id -> tuples emitted this batch (output nodes only)
    forwards: list[tuple[p.Forward, Tuples]] = field(default_factory=list)
    late: int = 0
    # The late readings themselves (stage 1): sensor codes, event times, values.
    late_readings: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    division_by_zero: dict[str, int] = field(default_factory=dict)
    mark: int = NEG_INF  # the watermark this stage's forwarded streams have reached (its heartbeat)
    patterns: dict[str, dict[str, int]] = field(default_factory=dict)  # node id -> counters this batch
    # Output nodes whose exact-from time (runtime/state/exactness.py) was set or moved this batch.
    exact: dict[str, int] = field(default_factory=dict)
    # Mode dual: each handover's new computation -> its exact-from time (Handover.cut).
    handovers: dict[str, int] = field(default_factory=dict)


# ------------------------------------------------------------------ slicing

def slice_of(ts: np.ndarray, slices: p.Slices) -> np.ndarray:
    cycle, offset = np.divmod(ts, slices.period)
    position = np.searchsorted(np.asarray(slices.offsets, np.int64), offset, side="right") - 1
    return cycle * len(slices.offsets) + position


def slice_start(index: np.ndarray, slices: p.Slices) -> np.ndarray:
    cycle, position = np.divmod(index, len(slices.offsets))
    return cycle * slices.period + np.asarray(slices.offsets, np.int64)[position]


_REDUCE = {"sum": np.add, "count": np.add, "min": np.minimum, "max": np.maximum}


_IDENTITY = {"sum": 0.0, "count": 0.0, "min": np.inf, "max": -np.inf}


def add_to_slices(state: SliceState, slices: p.Slices, tuples: Tuples) -> None:
    """Add each tuple to exactly one slice (vectorised group-by on the slice index)."""
    if not len(tuples):
        return
    new_index, new_partials, _ = _partials_of(slices, tuples)
    _merge(state, slices, new_index, new_partials)


def _partials_of(slices: p.Slices, tuples: Tuples) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """The tuples' slices (sorted), each one's partials and the ts of its earliest tuple."""
    index = slice_of(tuples.ts, slices)
    value, ts = tuples.value, tuples.ts
    if len(index) > 1 and (index[1:] < index[:-1]).any():  # readings mostly arrive in time order
        order = stable_order(index)
        index, value, ts = index[order], value[order], ts[order]
    changes = np.empty(len(index), bool)  # (np.r_ costs more than the work on small arrays)
    changes[0] = True
    np.not_equal(index[1:], index[:-1], out=changes[1:])
    firsts = np.flatnonzero(changes)
    new_partials = {}
    for name in slices.partials:
        if name == "count":
            new_partials[name] = np.diff(np.append(firsts, len(index))).astype(np.float64)
        else:
            with np.errstate(over="ignore"):  # sums past the double range are infinite, as in IEEE arithmetic
                new_partials[name] = _REDUCE[name].reduceat(value, firsts)
    return index[firsts], new_partials, np.minimum.reduceat(ts, firsts)


def slice_partials(tuples: Tuples, plans: tuple[p.Slices, ...]) -> Tuples:
    """What a forward with slice partials sends of these tuples (program.Forward.partials): per slice
    plan, per slice and partial one tuple, at the slice's earliest tuple's ts (a receiver first
    sent the stream takes its first ts as where the stream starts: exactness.py)."""
    return slices_partials([(tuples, plans)])[0]


def slices_partials(forwards: list[tuple[Tuples, tuple[p.Slices, ...]]]) -> list[Tuples]:
    """`slice_partials` of several forwards' tuples at once: a batch forwards hundreds of sensors'
    partials, mostly cut alike, so each distinct cut groups the tuples of all that use it in one
    pass (slice index, group by (forward, slice), reduce), not one small pass per forward."""
    kinds = len(p.PARTIAL_KINDS)
    users: dict[tuple, list[tuple[int, int]]] = {}  # (period, offsets, partials) -> (forward, plan k)
    for i, (tuples, plans) in enumerate(forwards):
        if len(tuples):
            for k, plan in enumerate(plans):
                users.setdefault((plan.period, plan.offsets, plan.partials), []).append((i, k))
    sent: list[dict[int, Tuples]] = [{} for _ in forwards]  # per forward: plan k -> its partials
    for using in users.values():
        cut = forwards[using[0][0]][1][using[0][1]]  # the first user's plan: all of them cut alike
        partials = cut.partials
        parts = [forwards[i][0] for i, _ in using]
        owner = np.repeat(np.arange(len(using), dtype=np.int64), [len(t) for t in parts])
        ts = np.concatenate([t.ts for t in parts])
        value = np.concatenate([t.value for t in parts])
        index = slice_of(ts, cut)
        same_owner = owner[1:] == owner[:-1]
        if (same_owner & (index[1:] < index[:-1])).any():  # readings mostly arrive in time order
            order = np.lexsort((index, owner))  # stable: by forward, then by slice
            index, ts, value, owner = index[order], ts[order], value[order], owner[order]
            same_owner = owner[1:] == owner[:-1]
        changes = np.empty(len(index), bool)
        changes[0] = True
        changes[1:] = ~same_owner | (index[1:] != index[:-1])
        firsts = np.flatnonzero(changes)
        reduced = {}
        for name in partials:
            if name == "count":
                reduced[name] = np.diff(np.append(firsts, len(index))).astype(np.float64)
            else:
                with np.errstate(over="ignore"):  # sums past the double range are infinite, as in IEEE arithmetic
                    reduced[name] = _REDUCE[name].reduceat(value, firsts)
        # One row per partial and slice, laid out forward by forward and in each, partial by partial:
        # a forward's rows of this cut are then one stretch of the arrays.
        group_owner = owner[firsts]
        bounds = np.searchsorted(group_owner, np.arange(len(using) + 1))
        count = np.diff(bounds)[group_owner]
        within = np.arange(len(firsts)) - bounds[:-1][group_owner]
        plan_k = np.array([k for _, k in using], np.int64)[group_owner]
        width = len(partials)
        out_ts, out_value = np.empty(width * len(firsts), np.int64), np.empty(width * len(firsts))
        out_source = np.empty(width * len(firsts), np.int32)
        first_ts = np.minimum.reduceat(ts, firsts)
        for j, name in enumerate(partials):
            at = width * bounds[:-1][group_owner] + j * count + within
            out_ts[at], out_value[at] = first_ts, reduced[name]
            out_source[at] = plan_k * kinds + p.PARTIAL_KINDS.index(name)
        for u, (i, k) in enumerate(using):
            a, b = width * bounds[u], width * bounds[u + 1]
            sent[i][k] = Tuples(out_ts[a:b], out_value[a:b], out_source[a:b])
    return [by_plan[0] if len(by_plan) == 1 and 0 in by_plan else Tuples.concat([by_plan[k] for k in sorted(by_plan)])
            for by_plan in sent]


def merge_partials(state: SliceState, slices: p.Slices, k: int, tuples: Tuples) -> None:
    """Add the slice partials a forward sent for its k-th slice plan (`slice_partials`) to the slices
    `slices` of a stream, each a union of that plan's, as if its tuples had been added there
    (`add_to_slices`): a partial's ts, its slice's earliest reading's, lies in the stream's slice."""
    kinds = len(p.PARTIAL_KINDS)
    mine = (tuples.source // kinds) == k
    if not mine.any():
        return
    source, index, value = tuples.source[mine], slice_of(tuples.ts[mine], slices), tuples.value[mine]
    new_index = np.unique(index)
    new_partials = {}
    for name in slices.partials:
        of_kind = source == k * kinds + p.PARTIAL_KINDS.index(name)
        values = np.full(len(new_index), _IDENTITY[name])
        with np.errstate(over="ignore", invalid="ignore"):
            _REDUCE[name].at(values, np.searchsorted(new_index, index[of_kind]), value[of_kind])
        new_partials[name] = values
    _merge(state, slices, new_index, new_partials)


def _merge(state: SliceState, slices: p.Slices, new_index: np.ndarray, new_partials: dict[str, np.ndarray]) -> None:
    """Add partials of slices `new_index` (sorted, distinct) to the state's."""
    if not len(state.index):
        state.index, state.partials = new_index, new_partials
        return
    merged = np.union1d(state.index, new_index)
    old_at = np.searchsorted(merged, state.index)
    new_at = np.searchsorted(merged, new_index)
    for name in slices.partials:
        values = np.full(len(merged), _IDENTITY[name])
        values[old_at] = state.partials[name]
        with np.errstate(over="ignore", invalid="ignore"):
            _REDUCE[name].at(values, new_at, new_partials[name])
        state.partials[name] = values
    state.index = merged


def emit_windows(state: SliceState, slices: p.Slices, window: p.Window, after: int, upto: int) -> Tuples:
    """The windows over these slices with after < end <= upto that hold at least one tuple."""
    if not len(state.index) or upto <= after:
        return Tuples.empty()
    L, S = window.length, window.slide
    # Windows k are due when after < k*S + L <= upto, and can hold a tuple when they overlap the
    # slices' span [first start, last end): k*S < last end and k*S + L > first start. Worked out in
    # Python's integers first (after and upto may be the +-2^63 sentinels): most calls, a window
    # none of whose ends the watermark passed since the last batch, end here.
    first, last = _slice_start(int(state.index[0]), slices), _slice_start(int(state.index[-1]) + 1, slices)
    k_lo = max((after - L) // S, (first - L) // S) + 1
    k_hi = min((upto - L) // S, (last - 1) // S)
    if k_hi < k_lo:
        return Tuples.empty()
    if k_hi - k_lo < 4 * len(state.index) * (L // S + 2):
        k = np.arange(k_lo, k_hi + 1, dtype=np.int64)
    else:  # slices far apart: the windows of each slice rather than every window of the span
        starts = slice_start(state.index, slices)
        ends = slice_start(state.index + 1, slices)
        lows = np.maximum(np.floor_divide(starts - L, S) + 1, k_lo)
        counts = np.maximum(np.minimum(np.floor_divide(ends - 1, S), k_hi) - lows + 1, 0)
        k = np.unique(np.repeat(lows, counts) + _ranges(counts))
    window_start, window_end = k * S, k * S + L
    lo = np.searchsorted(state.index, slice_of(window_start, slices))
    hi = np.searchsorted(state.index, slice_of(window_end, slices))
    nonempty = hi > lo
    lo, hi = lo[nonempty], hi[nonempty]
    window_start, window_end = window_start[nonempty], window_end[nonempty]
    value = _compose(state, window.func, lo, hi)
    return Tuples(window_end - 1, value, np.full(len(value), -1, np.int32), window_start, window_end)


def _slice_start(index: int, slices: p.Slices) -> int:
    """slice_start of one slice index, in Python's integers."""
    cycle, position = divmod(index, len(slices.offsets))
    return cycle * slices.period + slices.offsets[position]


def _ranges(counts: np.ndarray) -> np.ndarray:
    """[0..c0-1, 0..c1-1, ...] for counts c."""
    total = int(counts.sum())
    offsets = np.repeat(np.cumsum(counts) - counts, counts)
    return np.arange(total) - offsets


def _compose(state: SliceState, func: str, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Aggregate slices [lo, hi) of the sorted slice arrays for every window at once.

    Each window reduces its own slices (reduceat over lo0, hi0, lo1, hi1, ...: the even results
    are the windows). Differences of prefix sums would be cheaper, but one huge or infinite value
    would spoil every later window's sum (inf - inf, or 1e308 + x - 1e308 = 0)."""
    bounds = np.column_stack([lo, hi]).ravel()

    def reduce(name: str, ufunc, identity: float) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore"):  # sums past the double range are infinite
            return ufunc.reduceat(np.append(state.partials[name], identity), bounds)[::2]

    if func in ("sum", "count"):
        return reduce(func, np.add, 0.0)
    if func == "avg":
        with np.errstate(invalid="ignore"):
            return reduce("sum", np.add, 0.0) / reduce("count", np.add, 0.0)
    if func == "max":
        return reduce("max", np.maximum, -np.inf)
    return reduce("min", np.minimum, np.inf)


def forget_slices(state: SliceState, slices: p.Slices, windows: list[p.Window], watermark: int) -> None:
    """Drop slices no window still to be emitted can need: those before the earliest open window."""
    if watermark == NEG_INF or not len(state.index):
        return
    if watermark == POS_INF:
        state.index = state.index[:0]
        state.partials = {k: v[:0] for k, v in state.partials.items()}
        return
    # The earliest window not yet emitted starts at the smallest k*S with k*S + L > watermark.
    keep_from = min(((watermark - w.length) // w.slide + 1) * w.slide for w in windows)
    keep = state.index >= slice_of(np.array([keep_from], np.int64), slices)[0]
    state.index = state.index[keep]
    state.partials = {k: v[keep] for k, v in state.partials.items()}


# ----------------------------------------------------------------- combine

def combine_latest(state: CombineState, node: p.Combine, arrivals: list[Tuples], watermark: int,
                   dbz: dict[str, int]) -> Tuples:
    """Emit combine-latest rows for every final timestamp (< watermark); keep the rest pending."""
    ts = np.concatenate([state.pending_ts] + [t.ts for t in arrivals])
    which = np.concatenate([state.pending_input] + [np.full(len(t), i, np.int32) for i, t in enumerate(arrivals)])
    value = np.concatenate([state.pending_value] + [t.value for t in arrivals])
    final = ts < watermark
    state.pending_ts, state.pending_input, state.pending_value = ts[~final], which[~final], value[~final]
    if not final.any():
        return Tuples.empty()
    frame = pd.DataFrame({"ts": ts[final], "input": which[final], "value": value[final]})
    # One value per input and timestamp: the mean when it has several tuples there.
    wide = frame.groupby(["ts", "input"], sort=True)["value"].mean().unstack("input")
    wide = wide.reindex(columns=range(len(node.inputs)))
    carried = pd.DataFrame([state.latest], columns=range(len(node.inputs)))
    filled = pd.concat([carried, wide]).ffill().iloc[1:]
    state.latest = filled.iloc[-1].to_numpy(np.float64)
    complete = filled.notna().all(axis=1).to_numpy()
    filled = filled[complete]
    if filled.empty:
        return Tuples.empty()
    if state.complete_from == p.UNKNOWN:
        state.complete_from = int(filled.index[0])
    columns = {input_id: filled[i].to_numpy(np.float64) for i, input_id in enumerate(node.inputs)}
    result, bad = evaluate(node.expression, columns, len(filled))
    if bad.any():
        dbz[node.id] = dbz.get(node.id, 0) + int(bad.sum())
    out_ts = filled.index.to_numpy(np.int64)[~bad]
    return Tuples(out_ts, result[~bad], np.full(len(out_ts), -1, np.int32))


# ------------------------------------------------------------------ engine

def _node_of(key: str) -> str:
    """The node a key of the state's maps is of ("forward:NODE", "handover:NODE" or NODE)."""
    kind, _, node = key.partition(":")
    return node if kind in ("forward", "handover") else key


def _inputs(node: p.Node) -> tuple[str, ...]:
    return (node.input,) if isinstance(node, p.Window) else node.inputs


def _from(starts: dict[str, int], streams: dict[str, Tuples]) -> dict[str, Tuples]:
    """Each input stream from its own event time on (exactness.reads_from)."""
    return {name: streams[name] if start == NEG_INF else streams[name].take(streams[name].ts >= start)
            for name, start in starts.items()}


class Engine:
    """Runs one partition's `Program` over successive batches of readings."""

    def __init__(self, program: p.Program, switch_at: int | None = None):
        """`switch_at`: the event time the run switched to this version of the plan (an update)."""
        from sensorscript.runtime.state.cep.matcher import Matcher

        self.program = program
        # Mode dual: the previous version's computations that run beside this one's until handed over.
        self.retiring = frozenset(program.retiring)
        self.switch_at = switch_at
        self.sensors = {n.code: n.id for n in program.nodes if isinstance(n, p.Sensor)}
        self.codes_of = {n.id: n.code for n in program.nodes if isinstance(n, p.Sensor) and n.id in program.summed}
        # A forward of a sensor stage 0 sums: plan k of stage 0's partials -> the forward's plan (-1: not sent).
        self.passed = {(f.node, f.dest): np.array([f.partials.index(c) if c in f.partials else -1
                                                   for c in program.summed[f.node]], np.int64)
                       for f in program.forwards if f.node in program.summed}
        self.slices = {s.stream: s for s in program.slices}
        self.windows_by_stream: dict[str, list[p.Window]] = {}
        for node in program.nodes:
            if isinstance(node, p.Window):
                self.windows_by_stream.setdefault(node.input, []).append(node)
        # What a derived tuple carries as its sensor: its stream's code.
        self.codes = {n.id: p.derived_code(n.id) for n in program.nodes if not isinstance(n, p.Sensor)}
        self.matchers = {n.id: Matcher(n) for n in program.nodes if isinstance(n, p.Pattern)}
        # Received streams of slice partials -> (stream, slice plan k). A job.py compiled by the
        # first release with partials named the streams alone, the k-th from the k-th plan.
        self.merged = {node_id: tuple((entry, k) if isinstance(entry, str) else tuple(entry)
                                      for k, entry in enumerate(into))
                       for node_id, into in program.merged.items()}

    def new_state(self, version: p.Version = p.Version()) -> EngineState:
        """A partition's state before its first batch. In a run that switched to this version (an
        update), every computation here is new and starts at the switch."""
        state = EngineState(version=version.number, nodes=frozenset(n.id for n in self.program.nodes))
        for node in self.program.nodes:
            self._start(state, node)
            if version.switch_at is not None:
                self._started_at(state, node, version.switch_at)
        return state

    def start_at(self, state: EngineState, started: dict[str, int]) -> None:
        """A new state as the job's: each node an update started (node id -> its switch time,
        runtime/plan/versions.py `started`) starting there, every other one whole from the start
        (a correction recomputes so)."""
        state.since, state.exact, state.dropped = {}, {}, {}
        for node in self.program.nodes:
            if node.id in started:
                self._started_at(state, node, started[node.id])

    def _started_at(self, state: EngineState, node: p.Node, switch_at: int) -> None:
        """A node an update started (runtime/state/exactness.py): a computation reads its inputs from
        the switch on; a sensor first read here is exact from the switch, a stream first forwarded
        here from its first tuple."""
        if isinstance(node, p.Sensor):
            state.exact[node.id] = switch_at if self.program.stage == 1 else exactness.UNKNOWN
        else:
            state.since[node.id] = switch_at

    def _start(self, state: EngineState, node: p.Node) -> None:
        """A computation's state before its first tuple (combines and patterns hold one up front)."""
        if isinstance(node, p.Combine):
            state.combines[node.id] = CombineState(np.full(len(node.inputs), np.nan))
        elif isinstance(node, p.Pattern):
            state.patterns[node.id] = self.matchers[node.id].new_state()

    def migrate(self, state: EngineState, version: p.Version) -> None:
        """Carry the state of an earlier version of the plan into this one (`sscript update`).

        A computation of both versions (the same node: node ids are what a node computes) keeps
        its state: slices, how far its windows have emitted, a combine's latest values, a pattern's
        partial matches. One this version no longer runs here is dropped. One that is new here, or
        that the update restarts (`version.restarted`: moved to a partition, or its stream sliced
        anew), starts empty at the switch (`version.switch_at`): it reads tuples from that event
        time on, and a window of it is emitted only if it starts there or later, so none holds
        part of what came before (mode `clear` of `sscript update`)."""
        current = {n.id: n for n in self.program.nodes}
        # (A state of an older release does not list its nodes: those it holds state of.)
        had = state.nodes or {*state.slices, *state.combines, *state.patterns, *state.marks}
        fresh = {n for n in current if n not in had or version.restarted.get(n, 0) > state.version}
        # A stream's slices go when no window here reads it any more, or when the update cuts it anew
        # (restarted, or cut otherwise now that the windows that read it are others); the windows that
        # read slices cut anew start at the switch.
        recut = {k for k, kept in state.slices.items() if k in self.slices and (
            version.restarted.get(f"slices:{k}", 0) > state.version
            or kept.cut not in (None, (self.slices[k].period, self.slices[k].offsets)))}
        for stream in [k for k in state.slices if k not in self.slices or k in recut]:
            del state.slices[stream]
        fresh |= {n.id for n in self.program.nodes if isinstance(n, p.Window) and n.input in recut}
        # A combine or pattern that reads, at any depth, what the update started starts anew too: its
        # latest values and partial matches hold what the restarted input no longer gives (a window
        # keeps its slices and emits only the windows its input holds whole: `process`). At any
        # depth: through the unions and windows between (a combine over a union of a sensor and a
        # restarted window kept its pending rows and claimed to be whole from the first of them).
        downstream = fresh | set(state.exact)  # what does not hold the readings whole from the start
        for node in self.program.nodes:
            if not isinstance(node, p.Sensor) and any(i in downstream for i in _inputs(node)):
                downstream.add(node.id)
                if isinstance(node, (p.Combine, p.Pattern)):
                    fresh.add(node.id)
        for mapping in (state.combines, state.patterns, state.marks, state.since, state.exact, state.dropped):
            for key in [k for k in mapping if _node_of(k) not in current or _node_of(k) in fresh]:
                del mapping[key]
        for node_id in sorted(fresh):
            node = current[node_id]
            self._start(state, node)
            if version.switch_at is not None:
                self._started_at(state, node, version.switch_at)
        # A stream whose slices carry over may need a partial its new windows read: unknown (NaN)
        # in the slices before the switch, which only windows of the old version read.
        for stream, slices in self.slices.items():
            kept = state.slices.get(stream)
            if kept is not None:
                for name in slices.partials:
                    kept.partials.setdefault(name, np.full(len(kept.index), np.nan))
                for name in [n for n in kept.partials if n not in slices.partials]:
                    del kept.partials[name]
        state.nodes = frozenset(current)
        state.version = version.number

    def process(self, state: EngineState, code: np.ndarray, ts: np.ndarray, value: np.ndarray,
                watermark: int, source: np.ndarray | None = None,
                summed: tuple[np.ndarray, Tuples] | None = None) -> BatchResult:
        """One batch: readings (sensor code, ts, value) and the watermark in force for it.

        Readings below the watermark are late: left out and handed back (`late_readings`). (Stage 1 receives only
        its own sensors, so each reading is judged once; forwarded tuples reaching stage 2
        are never below its watermark, the smallest of its senders'.) Everything below the
        watermark is then final and is emitted.
        `watermark` = POS_INF means the end of the input: emit everything pending.
        In a later stage `code` is the forward's input code and `source` what the tuples carry.
        `summed` (stage 1): slice partials stage 0 made of readings on time (runtime/state/summaries.py),
        the sensor code of each and the partials (`source`: which one, as Forward.partials').
        """
        current = max(state.watermark, watermark)
        source = code if source is None else source
        exact_before, handovers_before = dict(state.exact), self._handovers(state)
        retire_at = self.program.retired_at(self.switch_at, handovers_before) if self.retiring else None
        # Stage 2 receives tuples forwarded from stage 1, where lateness was decided already;
        # they lie below its new watermark by construction, never below the previous one.
        late_mask = ts < current if self.program.stage == 1 else np.zeros(len(ts), bool)
        late = int(late_mask.sum())
        late_readings = None
        if late:
            late_readings = (code[late_mask], ts[late_mask], value[late_mask])
            code, ts, value, source = code[~late_mask], ts[~late_mask], value[~late_mask], source[~late_mask]
        streams: dict[str, Tuples] = {}
        marks: dict[str, int] = {}  # the watermark each node's output has reached this batch
        dbz: dict[str, int] = {}
        counters: dict[str, dict[str, int]] = {}
        if len(code):
            order = stable_order(code)
            code, ts, value, source = code[order], ts[order], value[order], source[order]
            firsts = np.flatnonzero(np.diff(code, prepend=code[0] - 1))
            for start, end in zip(firsts, [*firsts[1:], len(code)]):
                node_id = self.sensors.get(int(code[start]))
                if node_id is not None:
                    streams[node_id] = Tuples(ts[start:end], value[start:end], source[start:end].astype(np.int32))
                    if state.exact.get(node_id) == exactness.UNKNOWN:  # a stream first forwarded here
                        state.exact[node_id] = int(ts[start:end].min())
        # Dependency order: a stream's tuples of this batch are in its slices before any window
        # over it is emitted, which matters for derived inputs (their new tuples lie below the
        # watermark and belong to windows that close in this very batch).
        # No update started anything here: every node reads every input whole, from the start (the
        # common case, worked out once per batch rather than per node and input).
        whole = not (state.since or state.exact or state.dropped)
        empty = Tuples.empty()
        summed_by_code: dict[int, Tuples] = {}
        if summed is not None and len(summed[0]):
            s_code, s_tuples = summed
            order = stable_order(s_code)
            s_code, s_tuples = s_code[order], Tuples(s_tuples.ts[order], s_tuples.value[order], s_tuples.source[order])
            firsts = np.flatnonzero(np.diff(s_code, prepend=s_code[0] - 1))
            for start, end in zip(firsts, [*firsts[1:], len(s_code)]):
                summed_by_code[int(s_code[start])] = Tuples(s_tuples.ts[start:end], s_tuples.value[start:end],
                                                            s_tuples.source[start:end])
        for node in self.program.nodes:
            if isinstance(node, p.Sensor):
                tuples = streams.get(node.id, empty)
                marks[node.id] = current
                into = self.merged.get(node.id)
                if into and self.program.stage == 1:  # stage 0's partials of on-time readings; the rest as readings
                    partials = summed_by_code.get(node.code)
                    if partials is not None:
                        for stream, k in into:
                            kept = state.slices.setdefault(stream, SliceState())
                            kept.cut = (self.slices[stream].period, self.slices[stream].offsets)
                            merge_partials(kept, self.slices[stream], k, partials)
                elif into:  # slice partials: into the slices of the streams they were cut for, read by nothing else
                    for stream, k in into:
                        kept = state.slices.setdefault(stream, SliceState())
                        kept.cut = (self.slices[stream].period, self.slices[stream].offsets)
                        merge_partials(kept, self.slices[stream], k, tuples)
                    tuples = empty
            else:
                inputs_of = _inputs(node)
                mark = min(marks[i] for i in inputs_of)
                if whole:
                    starts, inputs = None, streams
                else:
                    started = state.since.get(node.id)
                    starts = {i: exactness.reads_from(started, state.exact.get(i, NEG_INF),
                                                      state.dropped.get(node.id)) for i in inputs_of}
                    if isinstance(node, p.Pattern):  # every input from the latest of them (exactness.py)
                        starts = dict.fromkeys(starts, max(starts.values()))
                    inputs = _from(starts, streams)
                    if not isinstance(node, p.Window):  # what it lets go of while an input is not known whole
                        self._let_go(state, node.id, [streams[i] for i, start in starts.items()
                                                      if start == exactness.UNKNOWN])
                # Handed over once the last batch emitted everything before the handover (its watermark).
                if node.id in self.retiring and (retire_at is None or state.watermark >= retire_at):
                    for held in (state.combines, state.patterns, state.marks):  # no longer run
                        held.pop(node.id, None)
                    tuples = Tuples.empty()
                elif isinstance(node, p.Union):
                    tuples = Tuples.concat([inputs[i] for i in node.inputs])
                elif isinstance(node, p.Window):
                    after = state.marks.get(node.id, NEG_INF)
                    tuples = emit_windows(state.slices.get(node.input, SliceState()), self.slices[node.input],
                                          node, after, mark)
                    state.marks[node.id] = max(after, mark)
                    if whole:
                        pass
                    elif starts[node.input] == exactness.UNKNOWN:
                        self._let_go(state, node.id, [tuples])
                        tuples = Tuples.empty()
                    elif starts[node.input] != NEG_INF and len(tuples):  # only windows its input holds whole
                        tuples = tuples.take(tuples.start >= starts[node.input])
                elif isinstance(node, p.Pattern):
                    tuples, mark = self._match(state, node, inputs, marks, counters)
                else:
                    tuples = combine_latest(state.combines[node.id], node, [inputs[i] for i in node.inputs],
                                            mark, dbz)
                if not isinstance(node, p.Union) and len(tuples):
                    tuples.source = np.full(len(tuples), self.codes[node.id], np.int32)
                marks[node.id] = mark
                if not whole and any(start != NEG_INF for start in starts.values()):
                    state.exact[node.id] = self._exact_from(state, node, starts)
            streams[node.id] = tuples
            if node.id in self.slices:
                kept = state.slices.setdefault(node.id, SliceState())
                kept.cut = (self.slices[node.id].period, self.slices[node.id].offsets)
                add_to_slices(kept, self.slices[node.id], tuples)
        for stream, slices in self.slices.items():
            forget_slices(state.slices.setdefault(stream, SliceState()), slices, self.windows_by_stream[stream],
                          marks[stream])
        state.watermark = current
        outputs = {node_id: streams[node_id] for node_id in self.program.outputs if node_id in streams}
        forwards = [(f, self._exact_part(state, f.node, streams[f.node])) for f in self.program.forwards]
        cut = [n for n, (f, _) in enumerate(forwards) if f.partials]  # slice partials go instead of the tuples
        for n, partials in zip(cut, slices_partials([(forwards[n][1], forwards[n][0].partials) for n in cut])):
            forwards[n] = (forwards[n][0], self._passed_on(forwards[n][0], partials, summed_by_code))
        forwards = [(f, tuples) for f, tuples in forwards if len(tuples)]
        mark = min([current] + [marks[f.node] for f in self.program.forwards])
        # The rows of a handover's new computation: written from `handovers` on (Handover.cut).
        handovers = {h.new: self._released(state, f"handover:{h.new}", h.new, streams.get(h.new))
                     for h in self.program.handovers}
        exact = {n: e for n, e in {**state.exact, **handovers}.items()
                 if n in self.program.outputs and {**exact_before, **handovers_before}.get(n) != e}
        return BatchResult(outputs, forwards, late, late_readings, dbz, mark, counters, exact, handovers)

    def _passed_on(self, forward: p.Forward, partials: Tuples, summed_by_code: dict[int, Tuples]) -> Tuples:
        """A forward's slice partials of this batch's readings, and those stage 0 sent of the sensor's
        on-time readings that serve the destination (its plans are among stage 0's: renumbered)."""
        received = summed_by_code.get(self.codes_of.get(forward.node)) if summed_by_code else None
        if received is None:
            return partials
        kinds = len(p.PARTIAL_KINDS)
        plan = self.passed[forward.node, forward.dest][received.source // kinds]
        sent = received.take(plan >= 0)
        sent = Tuples(sent.ts, sent.value, (plan[plan >= 0] * kinds + sent.source % kinds).astype(np.int32))
        return Tuples.concat([partials, sent])

    def _handovers(self, state: EngineState) -> dict[str, int]:
        """Mode dual, as the last batch left it: each handover's new computation -> from when its rows
        are written (`_released`)."""
        return {h.new: self._released(state, f"handover:{h.new}", h.new) for h in self.program.handovers}

    def _released(self, state: EngineState, held: str, node_id: str, tuples: Tuples | None = None) -> int:
        """From when a node's tuples leave by way `held` (a forward, the rows of a handover's new
        computation): its exact-from time, and after the tuples held back while that was not known
        (`tuples`, this batch's, are held back if it still is not: then UNKNOWN). A later stage takes
        the first tuple it receives as where the stream is whole, so none may come before it."""
        exact = state.exact.get(node_id, NEG_INF)
        if exact == exactness.UNKNOWN and tuples is not None:
            self._let_go(state, held, [tuples])
        return exactness.reads_from(None, exact, state.dropped.get(held))

    @staticmethod
    def _let_go(state: EngineState, node_id: str, dropped: list[Tuples]) -> None:
        """Tuples a node did not take because an input was not known whole yet: once it is, the node
        reads from after the newest of them (exactness.reads_from), since those will not come again."""
        newest = [int(t.ts.max()) for t in dropped if len(t)]
        if newest:
            state.dropped[node_id] = max(state.dropped.get(node_id, NEG_INF), *newest)

    @staticmethod
    def _exact_from(state: EngineState, node: p.Node, starts: dict[str, int]) -> int:
        """The node's exact-from time after this batch (runtime/state/exactness.py)."""
        if isinstance(node, p.Union):
            return exactness.union_from(list(starts.values()))
        if isinstance(node, p.Window):
            return exactness.window_from(starts[node.input], node)
        if isinstance(node, p.Pattern):
            return exactness.pattern_from(max(starts.values()), node)
        combine = state.combines.get(node.id)  # none once handed over (mode dual: no longer run)
        return exactness.combine_from(state.exact.get(node.id, exactness.UNKNOWN),
                                      exactness.UNKNOWN if combine is None else combine.complete_from)

    def _exact_part(self, state: EngineState, node_id: str, tuples: Tuples) -> Tuples:
        """What a stage forwards of a node: its tuples from where they are released (`_released`)."""
        start = self._released(state, f"forward:{node_id}", node_id, tuples)
        if start == NEG_INF or not len(tuples):
            return tuples
        return tuples.take(tuples.ts >= start, matches=True)

    def _match(self, state: EngineState, node: p.Pattern, streams: dict[str, Tuples], marks: dict[str, int],
               counters: dict) -> tuple[Tuples, int]:
        """A pattern's batch: its streams' tuples in, its matches out, and how far its output has come."""
        matcher, pattern_state = self.matchers[node.id], state.patterns[node.id]
        arrivals = matcher.arrivals(streams)
        mark = min(marks[node_id] for node_id in node.inputs)
        before = (pattern_state.cut, pattern_state.divided, pattern_state.tested.copy(), pattern_state.passed.copy())
        matches = matcher.step(pattern_state, arrivals, mark)
        counters[node.id] = {"cut": pattern_state.cut - before[0], "divided": pattern_state.divided - before[1],
                             **{f"tested:{i}": int(t) for i, t in enumerate(pattern_state.tested - before[2]) if t},
                             **{f"passed:{i}": int(t) for i, t in enumerate(pattern_state.passed - before[3]) if t}}
        tuples = Tuples(matches.ts, matches.value, np.empty(0, np.int32), match=matches)
        return tuples, min(mark, matcher.holdback(pattern_state))
