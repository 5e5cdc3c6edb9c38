"""The CEP stage's matcher: one pattern's operator tree over the events of one partition.

Events reach a pattern as their streams produce them; they are matched in the pattern's total
order (event time, sensor, value, stream) once the watermark has passed them, so matches depend
neither on arrival order nor on how the input was cut into micro-batches. Each batch releases the
events below the watermark and the tree computes the partial matches they complete:

- a leaf makes one composite per event of its element (the events a unary operator keeps; for a
  Kleene element, every closure of events that ends with a new one);
- a join combines the partial matches of its left and right subtrees that its link accepts
  (`->`: left.end < right.start; `strict`: the right one starts with the event right after the
  left one's last, in the key's input), that fit `within`, and that pass the conditions and
  negations the compiler pushed down to it, tested in its order. New matches at a join are
  all-left x new-right (and new-left x old-right when a link may go back in time); a subtree keeps
  its partial matches while they may still join.

Strategy `next` runs as runs (runtime/state/cep/runs.py): one per event that can start the pattern.

State is bounded: the events and partial matches older than `within` behind the watermark are
dropped, and each node keeps at most `limit` partial matches per key alive at an event time (able
to grow by an event of that time: within their window; strict, their next event not yet past).
Those out of their window never count, however many a batch made, so the cap cuts only where
batches of one event time each would (what it cuts is counted and reported).

Identical events (a union that names a stream twice passes each of its tuples twice) are kept as
one event with a count where their copies are interchangeable (`Matcher.merges_copies`), and each
match is emitted once per assignment of copies it stands for: a Kleene closure over n times whose
events come twice is then one of 2^n closures, not of 3^n, and the cap cuts no more than it would
without the copies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sensorscript.runtime.plan import program as p
from sensorscript.runtime.state.cep.conditions import Frame, holds, rename_elements, value_of
from sensorscript.runtime.state.cep.operators import (FOLLOWED_BY, BinaryOperator, Composite, Event, registered)
from sensorscript.runtime.state.cep.runs import advance_runs
from sensorscript.runtime.state.kernels.sorting import stable_order
from sensorscript.runtime.state.cep.tables import (BUDGET, ClosureStore, EventStore, Table, blocks, concat,
                                                   equal_join, pairs_of, range_candidates, range_join, ranges,
                                                   segment_keys, size, take)

NEG_INF = np.iinfo(np.int64).min
POS_INF = np.iinfo(np.int64).max
_I64 = np.int64
_PENDING = ("ts", "value", "src", "k")
# Events a batch releases at a time (`Matcher.step`): the working memory of one slice is a few
# MB, and a slice's fixed cost (a few ms) is small beside its events'.
SLICE = 1 << 15


@dataclass
class PatternState:
    watermark: int = NEG_INF
    pending: dict = field(default_factory=dict)  # ts, value, src, k of events not yet final
    store: EventStore = field(default_factory=EventStore)
    closures: ClosureStore = field(default_factory=ClosureStore)
    next_seq: dict = field(default_factory=lambda: {"grp": np.empty(0, _I64), "seq": np.empty(0, _I64)})
    tables: dict = field(default_factory=dict)  # tree node -> its partial matches that may still join
    unary: dict = field(default_factory=dict)  # element -> {key: the unary operator's state}
    runs: dict = field(default_factory=dict)  # strategy next: the runs still going
    waiting: dict = field(default_factory=dict)  # whole matches waiting for the end of their window
    emitted: dict = field(default_factory=lambda: {"id": np.empty(0, _I64), "ts": np.empty(0, _I64)})
    tested: np.ndarray | None = None  # per condition: rows tested, rows passed (selectivity feedback)
    passed: np.ndarray | None = None
    cut: int = 0  # partial matches the cap cut, all batches
    divided: int = 0  # matches skipped for a division by zero in `yield`


@dataclass
class Matches:
    """What a batch emits: match times, values, intervals, and the bound events. `parts` hold them
    as columns, one part per positive element: (element, offsets, lengths, ts, value, sensor), the
    events of row i being [offsets[i], offsets[i] + lengths[i]) of the part's event columns; the
    per-row tuples (element, ts, value, sensor code) are made only when asked for (`events`)."""

    ts: np.ndarray
    value: np.ndarray
    start: np.ndarray
    end: np.ndarray
    parts: list = field(default_factory=list)

    @staticmethod
    def empty() -> "Matches":
        e = np.empty(0, _I64)
        return Matches(e, np.empty(0), e, e, [])

    def __len__(self) -> int:
        return len(self.ts)

    @staticmethod
    def joined(many: list["Matches"]) -> "Matches":
        """The matches of several slices of a batch as one, in time order (`Matcher.step`)."""
        many = [m for m in many if len(m)]
        if len(many) <= 1:
            return many[0] if many else Matches.empty()
        parts = []
        for at, (element, *_) in enumerate(many[0].parts):
            offsets, lengths, columns, shift = [], [], [[], [], []], 0
            for m in many:
                _, offset, length, ts, value, sensor = m.parts[at]
                offsets.append(offset + shift)
                lengths.append(length)
                for column, part in zip(columns, (ts, value, sensor)):
                    column.append(part)
                shift += len(ts)
            parts.append((element, np.concatenate(offsets), np.concatenate(lengths),
                          *(np.concatenate(column) for column in columns)))
        whole = Matches(*(np.concatenate([getattr(m, name) for m in many]) for name in ("ts", "value", "start", "end")),
                        parts)
        order = np.argsort(whole.ts, kind="stable")
        return whole if (order == np.arange(len(order))).all() else whole.take(order)

    def take(self, mask: np.ndarray) -> "Matches":
        """The matches where `mask` holds (their events stay where the parts keep them)."""
        parts = [(element, offsets[mask], lengths[mask], ts, value, sensor)
                 for element, offsets, lengths, ts, value, sensor in self.parts]
        return Matches(self.ts[mask], self.value[mask], self.start[mask], self.end[mask], parts)

    @property
    def events(self) -> list[tuple]:
        if not hasattr(self, "_events"):
            rows = [[] for _ in range(len(self.ts))]
            for element, offsets, lengths, ts, value, sensor in self.parts:
                ts, value, sensor = ts.tolist(), value.tolist(), sensor.tolist()
                for row, (offset, length) in enumerate(zip(offsets.tolist(), lengths.tolist())):
                    rows[row].extend((element, ts[j], value[j], sensor[j]) for j in range(offset, offset + length))
            self._events = [tuple(r) for r in rows]
        return self._events


class Matcher:
    """Runs one `p.Pattern` (its declaration) batch after batch over a `PatternState`.

    The declaration names elements and conditions; the matcher numbers them: an element by its
    place in the pattern (its columns in the tables), a condition by its place in `conditions`
    (its pass counts)."""

    def __init__(self, pattern: p.Pattern):
        self.pattern = pattern
        self.within = pattern.within
        self.elements = pattern.elements
        self.index = {e.var: i for i, e in enumerate(pattern.elements)}
        self.number = {c.text: n for n, c in enumerate(pattern.conditions)}
        self.expressions = [rename_elements(c.expression, self.index) for c in pattern.conditions]
        self.aggregated = [frozenset(self.index[v] for v in c.aggregates) for c in pattern.conditions]
        self.yield_ = rename_elements(pattern.yield_, self.index)
        # Events carry the number of the stream they came in on: that of the first element it feeds.
        self.stream = [-1] * len(pattern.elements)
        for feed in pattern.feeds:
            for var in feed.elements:
                self.stream[self.index[var]] = self.index[feed.elements[0]]
        self.positives = [i for i, e in enumerate(pattern.elements) if not e.negated]
        self.kleene = frozenset(i for i, e in enumerate(pattern.elements) if e.kleene)
        operators = registered()
        self.unary = {i: operators[e.operator] for i, e in enumerate(pattern.elements) if e.operator}
        self.links = {i: operators[e.link or FOLLOWED_BY] for i, e in enumerate(pattern.elements) if i}
        self.monotone = all(getattr(op, "monotone", False) for op in self.links.values()) and not self.unary
        self.strict = pattern.strategy == "strict"
        # Copies of an event are interchangeable when no match may bind two of them and nothing tells
        # them apart: every link `->` (each event strictly later than the one before; no operator of
        # the user's), not strict (copies are consecutive in the input: the one bound matters), and
        # not run by runs (strategy next: each copy starts a run, and runs take the earliest event).
        self.merges_copies = self.monotone and not self.strict and not isinstance(pattern.tree, p.Chain)
        # The codes whose events are not ordered by the code itself, sorted, and what orders them: a
        # derived stream's place by name above every raw sensor (Pattern.order), and a raw sensor's
        # place by id where an update numbered some out of that order (Pattern.sensor_order).
        by_code = sorted([*((code, p.DERIVED_CODES + place) for code, place in pattern.order), *pattern.sensor_order])
        self.ordered_codes = np.array([code for code, _ in by_code], _I64)
        self.ordered_as = np.array([key for _, key in by_code], _I64)
        self.trailing = [i for i in range(self.positives[-1] + 1, len(pattern.elements))]
        # Negated element -> (positive element before it, positive element after it or None).
        self.gaps = {}
        for i, e in enumerate(pattern.elements):
            if e.negated:
                before = max(j for j in self.positives if j < i)
                after = min((j for j in self.positives if j > i), default=None)
                self.gaps[i] = (before, after)

    # ------------------------------------------------------------------ state

    def new_state(self) -> PatternState:
        state = PatternState()
        count = len(self.pattern.conditions)
        state.tested, state.passed = np.zeros(count, _I64), np.zeros(count, _I64)
        return state

    # ------------------------------------------------------------------ a batch

    def arrivals(self, streams: dict[str, object]) -> list[tuple[int, object]]:
        """What the feeds hand the pattern, from the batch's tuples by node: (stream number,
        Tuples), a feed's once per copy."""
        return [(self.index[feed.elements[0]], streams[feed.stream])
                for feed in self.pattern.feeds for _ in range(feed.copies)]

    def step(self, state: PatternState, arrivals: list[tuple[int, object]], watermark: int) -> Matches:
        """Take this batch's events (stream number, Tuples) and the watermark in force; emit the
        matches completed by the events it makes final.

        A batch is swept in event time: the events it makes final are released `SLICE` at a time,
        each slice under a watermark of its own (the time of the first event after it), as if the
        batch had come in many. Matches do not depend on how the input is cut, so they are the same;
        memory holds one slice and what `within` keeps, whatever the size of the batch (a day
        of readings caught up at once, a backfill: issue #38)."""
        watermark = max(watermark, state.watermark)
        return Matches.joined([self._advance(state, final, mark)
                               for mark, final in self._slices(state, arrivals, watermark)])

    def _partial_matches(self, state: PatternState) -> int:
        return size(state.runs) + sum(size(t) for t in state.tables.values())

    def _advance(self, state: PatternState, final: dict, watermark: int) -> Matches:
        """One slice: number its events, match, emit, forget."""
        new = self.release(state, final)
        if isinstance(self.pattern.tree, p.Chain):  # strategy next (and what runs as it: cep/plan.py)
            whole = advance_runs(self, state, new, watermark)
        else:
            whole = self.evaluate(self.pattern.tree, "", state, new, watermark) if len(new) or self.unary else {}
            whole = self.check_final(whole, state) if not self.trailing else whole
        matches = self.complete(state, whole, watermark)
        self.forget(state, watermark)
        state.watermark = watermark
        return matches

    def holdback(self, state: PatternState) -> int:
        """The earliest time a match still to come may carry: the watermark, unless a link or unary
        operator may make a match earlier than its last event (then, the earliest partial match's
        start), or a run of strategy next still collects a trailing Kleene closure."""
        mark = state.watermark
        starts = []
        if not self.monotone:
            starts += [t["start"] for t in state.tables.values() if size(t)]
        if isinstance(self.pattern.tree, p.Chain) and self.positives[-1] in self.kleene and size(state.runs):
            starts.append(state.runs["min"])  # a trailing closure is emitted when its window ends
        for column in starts:
            if len(column):
                mark = min(mark, int(column.min()))
        return mark

    # ------------------------------------------------------------------ release

    def _slices(self, state: PatternState, arrivals: list[tuple[int, object]], watermark: int):
        """Add arrivals to the pending events; the events below the watermark, as (watermark, events)
        slices in time order, each watermark the time of the next slice's first event (the last:
        `watermark`). The events still above it stay pending. A slice holds `SLICE` events, or four
        times the partial matches kept when they are more: a slice's fixed cost is a pass over
        them, so it is spread over at least as many events (memory stays within a few times what
        `within` keeps)."""
        parts = [state.pending] if state.pending else []
        for k, tuples in arrivals:
            if len(tuples):
                parts.append({"ts": tuples.ts.astype(_I64), "value": tuples.value.astype(np.float64),
                              "src": tuples.source.astype(_I64), "k": np.full(len(tuples), k, _I64)})
        pending = {name: np.concatenate([part[name] for part in parts]) for name in _PENDING} if parts else {}
        del parts  # the arrivals' copies: the batch is held once
        state.pending = {}
        if not pending or not len(pending["ts"]):
            yield watermark, {}
            return
        final = pending["ts"] < watermark
        if not final.all():
            state.pending = take(pending, ~final)
            pending = take(pending, final)
        if len(pending["ts"]) <= SLICE:
            yield watermark, pending
            return
        order = np.argsort(pending["ts"], kind="stable")
        for name in _PENDING:  # a column at a time: the batch is not held twice
            pending[name] = pending[name][order]
        del order
        ts, begin = pending["ts"], 0
        while begin < len(ts):
            end = begin + max(SLICE, 4 * self._partial_matches(state))
            # The slice ends before the first event of a later time (and after the watermark so far).
            cut = int(np.searchsorted(ts, max(int(ts[min(end, len(ts) - 1)]), state.watermark + 1), "left"))
            if cut <= begin:
                cut = int(np.searchsorted(ts, max(int(ts[begin]), state.watermark), "right"))
            if end >= len(ts) or cut >= len(ts):
                cut, mark = len(ts), watermark
            else:
                mark = int(ts[cut])
            yield mark, {name: column[begin:cut] for name, column in pending.items()}
            begin = cut

    def release(self, state: PatternState, final: dict) -> np.ndarray:
        """Make a slice's events final: in the total order, numbered, with their places in their
        keys' input, in the store. Returns their ids."""
        if not final or not len(final["ts"]):
            return np.empty(0, _I64)
        ts, value, src, k = (final[name] for name in _PENDING)
        order = _total_order(ts, value, self._by_name(src), k)
        ts, value, src, k = ts[order], value[order], src[order], k[order]
        copies = np.ones(len(ts), np.int32)
        if self.merges_copies:
            first, copies = _identical_runs(ts, value, src, k)
            ts, value, src, k = ts[first], value[first], src[first], k[first]
        grp = src if self.pattern.by_sensor else np.zeros(len(ts), _I64)
        seq = self._sequence(state, grp)
        return state.store.append(ts, value, src, grp, seq, k, copies)

    def _by_name(self, src: np.ndarray) -> np.ndarray:
        """Sensor codes to order events by: a derived stream's code becomes its place by name (above
        every raw sensor's code, as the codes of derived streams are); a raw sensor's, where its
        codes do not follow the ids, its place by id."""
        if not len(self.ordered_codes) or not len(src):
            return src
        at = np.minimum(np.searchsorted(self.ordered_codes, src), len(self.ordered_codes) - 1)
        return np.where(self.ordered_codes[at] == src, self.ordered_as[at], src)

    def _sequence(self, state: PatternState, grp: np.ndarray) -> np.ndarray:
        """Each event's place in its key's input: the keys' counts carry on from batch to batch."""
        if not len(grp):
            return np.empty(0, _I64)
        order = stable_order(grp)
        sorted_grp = grp[order]
        starts = np.flatnonzero(np.r_[True, sorted_grp[1:] != sorted_grp[:-1]])
        counts = np.diff(np.r_[starts, len(grp)])
        keys = sorted_grp[starts]
        base = self.next_seq_of(state, keys)
        seq = np.empty(len(grp), _I64)
        seq[order] = np.repeat(base, counts) + ranges(counts)
        known = state.next_seq
        others = ~np.isin(known["grp"], keys)
        merged_grp = np.concatenate([known["grp"][others], keys])
        merged_seq = np.concatenate([known["seq"][others], base + counts])
        index = np.argsort(merged_grp)
        state.next_seq = {"grp": merged_grp[index], "seq": merged_seq[index]}
        return seq

    def next_seq_of(self, state: PatternState, grp: np.ndarray) -> np.ndarray:
        known = state.next_seq
        if not len(known["grp"]):
            return np.zeros(len(grp), _I64)
        at = np.minimum(np.searchsorted(known["grp"], grp), len(known["grp"]) - 1)
        return np.where(known["grp"][at] == grp, known["seq"][at], 0)

    # ------------------------------------------------------------------ the tree

    def evaluate(self, node: p.Leaf | p.Join, path: str, state: PatternState, new: np.ndarray, watermark: int) -> Table:
        """The new partial matches of a subtree this batch (those holding a new event)."""
        if isinstance(node, p.Leaf):
            made = self.leaf(node, path, state, new)
        else:
            new_left = self.evaluate(node.left, path + "L", state, new, watermark)
            new_right = self.evaluate(node.right, path + "R", state, new, watermark)
            link = self.links[self.index[node.right.elements[0]]]
            every_left = state.tables.get(path + "L", {})
            tests = (node.conditions, node.negations)
            made = self.join(every_left, new_right, link, state, *tests)
            if not self.monotone and size(new_left):
                old_right = _older(state.tables.get(path + "R", {}), new_right)
                made = concat([made, self.join(new_left, old_right, link, state, *tests)])
        if not path:
            return made  # whole matches: output, not state
        if path.endswith("L") or not self.monotone:  # kept while it may still join (`forget` caps it)
            state.tables[path] = concat([state.tables.get(path, {}), made])
        return made

    def leaf(self, node: p.Leaf, path: str, state: PatternState, new: np.ndarray) -> Table:
        element = self.index[node.element]
        events = self.element_events(element, state, new)
        if element not in self.kleene:
            return self.test(events, node.conditions, (), state)
        per_event = [c for c in node.conditions if element not in self.aggregated[self.number[c]]]
        per_closure = [c for c in node.conditions if element in self.aggregated[self.number[c]]]
        events = self.test(events, per_event, (), state, single=frozenset((element,)))
        closures = self.closures(element, path, state, events)
        return self.test(closures, per_closure, (), state)

    def element_events(self, element: int, state: PatternState, new: np.ndarray) -> Table:
        """One composite per new event of the element's stream (those a unary operator keeps)."""
        store = state.store
        rows = new - store.base
        mine = rows[store.k[rows] == self.stream[element]]
        if len(mine) and mine[-1] - mine[0] == len(mine) - 1:  # consecutive rows (new events come so): views
            mine = slice(int(mine[0]), int(mine[-1]) + 1)
            ids = np.arange(mine.start + store.base, mine.stop + store.base, dtype=_I64)
        else:
            ids = mine + store.base
        ts = store.ts[mine]
        start, end = ts, ts
        operator = self.unary.get(element)
        if operator is not None:
            ids, start, end = self._unary(element, operator, state, ids)
            mine, ts = ids - store.base, store.ts[ids - store.base]
        table = {"grp": store.grp[mine], "min": ts, "max": ts, "start": start, "end": end,
                 "fseq": store.seq[mine], "lseq": store.seq[mine], f"e{element}": ids}
        if element in self.kleene:
            table[f"o{element}"] = np.zeros(len(ids), _I64)
            table[f"n{element}"] = np.ones(len(ids), _I64)
        return table

    def _unary(self, element: int, operator, state: PatternState, ids: np.ndarray):
        """The unary operator over the element's events, per key and in order (its state per key)."""
        store = state.store
        states = state.unary.setdefault(element, {})
        kept, starts, ends = [], [], []
        for event_id in ids.tolist():
            row = event_id - store.base
            key = int(store.grp[row])
            seen = Event(int(store.ts[row]), float(store.value[row]), int(store.src[row]))
            current = states.get(key)
            if operator.Q(current, seen):
                start, end = operator.F(current, seen)
                kept.append(event_id)
                starts.append(start)
                ends.append(end)
            states[key] = operator.Z(current, seen)
        return np.array(kept, _I64), np.array(starts, _I64), np.array(ends, _I64)

    def closures(self, element: int, path: str, state: PatternState, events: Table) -> Table:
        """Kleene closures ending with a new event: the new events alone, and every closure kept
        (and every one made this batch) extended by a later new event (strict: by the event right
        after it), with strictly increasing times, within the window.

        The cap bounds the closures alive at each event time (`_alive_until`), as a batch of that
        time alone would: the slice's closures are made at once, a length at a time, unless some
        key would have more than `limit` alive at some time; then which the cap cuts depends on the
        order in time, and they are made time by time (`_closures_in_time`)."""
        kept_key = path + "K"
        old = state.tables.get(kept_key, {})
        singles = dict(events)
        if size(events):
            singles[f"o{element}"] = state.closures.add([events[f"e{element}"]], np.ones(size(events), _I64))
        alive_until = self._alive_until(element, state)
        made = self._closures_at_once(element, old, singles, state, alive_until)
        if made is None:
            made, state.tables[kept_key] = self._closures_in_time(element, old, singles, state, alive_until)
        else:
            state.tables[kept_key] = concat([old, made])
        return made

    def _closures_at_once(self, element: int, old: Table, singles: Table, state: PatternState,
                          alive_until) -> Table | None:
        """The slice's closures, by length: those of one more event each round. None as soon as some
        key has more than `limit` alive at the time of one of them (nothing is cut here)."""
        made = [singles]
        grown = concat([self._extend(element, old, singles, state), self._extend(element, singles, singles, state)])
        while not self._over_limit([old, *made, grown], [*made, grown], alive_until):
            if not size(grown):
                return concat(made)
            made.append(grown)
            grown = self._extend(element, grown, singles, state)
        return None

    def _closures_in_time(self, element: int, old: Table, singles: Table, state: PatternState,
                          alive_until) -> tuple[Table, Table]:
        """The slice's closures time by time, as batches of one time each make them: at each time of
        a new event the closures still alive grow by its events, those kept at most `limit` per key
        (`forget`'s cap between batches) and those made counted with them (`cap`). Returns the
        closures made, and those still alive after the last time."""
        made, kept, times = [], old, singles["min"]
        starts = np.flatnonzero(np.r_[True, times[1:] != times[:-1]])
        for begin, stop in zip(starts.tolist(), [*starts[1:].tolist(), len(times)]):
            now = take(singles, slice(begin, stop))
            kept = self.cap(take(kept, alive_until(kept) > times[begin]), {}, state) if size(kept) else {}
            grown = self.cap(self._extend(element, kept, now, state), concat([kept, now]), state)
            made += [now, grown]
            kept = concat([kept, now, grown])
        return concat(made), kept

    def _alive_until(self, element: int, state: PatternState):
        """A function giving, per closure of `element`, the time from which it is no longer alive (no
        event from then on may extend it, so the cap does not count it): its window's end, and with
        strategy strict the time just after its key's next event (it grows by that event or never)."""
        if not self.strict:
            return lambda table: table["min"] + self.within
        store = state.store
        order = stable_order(store.grp)  # each key's events in id order: its input
        after = np.full(len(order), POS_INF - 1, _I64)  # per store row: the time of its key's next event
        same = store.grp[order[1:]] == store.grp[order[:-1]]
        after[order[:-1][same]] = store.ts[order[1:][same]]
        return lambda table: np.minimum(table["min"] + self.within,
                                        after[self._last_ids(element, table, state) - store.base] + 1)

    def _over_limit(self, tables: list[Table], made: list[Table], alive_until) -> bool:
        """Whether some key has more than `limit` rows of `tables` alive at the time of a row of
        `made`: made by then (`max` at most that time) and not yet past `alive_until`. A row is past
        it only after its time, so the count is the difference of two binary searches."""
        tables, made = [t for t in tables if size(t)], [t for t in made if size(t)]
        if not made or sum(size(t) for t in tables) <= self.pattern.limit:
            return False
        rows = [t["grp"] for t in tables]
        born, over, *asked = segment_keys([np.concatenate(rows), np.concatenate(rows), *(t["grp"] for t in made)],
                                         [np.concatenate([t["max"] for t in tables]),
                                          np.concatenate([alive_until(t) for t in tables]), *(t["max"] for t in made)])
        asked = np.concatenate(asked)
        alive = np.searchsorted(np.sort(born), asked, "right") - np.searchsorted(np.sort(over), asked, "right")
        return bool(alive.max() > self.pattern.limit)

    def _extend(self, element: int, closures: Table, events: Table, state: PatternState) -> Table:
        """Each closure extended by each event that may follow it."""
        if not size(closures) or not size(events):
            return {}
        if self.strict:
            left, right = equal_join(closures["grp"], closures["lseq"] + 1, events["grp"], events["fseq"])
        else:
            left, right = range_join(closures["grp"], closures["max"], closures["min"] + self.within,
                                      events["grp"], events["min"])
        ok = (events["min"][right] > closures["max"][left]) & (events["min"][right] - closures["min"][left] < self.within)
        left, right = left[ok], right[ok]
        if not len(left):
            return {}
        lengths = closures[f"n{element}"][left]
        members = state.closures.members(closures[f"o{element}"][left], lengths)
        added = events[f"e{element}"][right]
        # Each old run, then its new event: the runs grow by one.
        new_lengths = lengths + 1
        flat = np.empty(int(new_lengths.sum()), _I64)
        ends = np.cumsum(new_lengths) - 1
        keep = np.ones(len(flat), bool)
        keep[ends] = False
        flat[keep] = members
        flat[ends] = added
        offsets = state.closures.add([flat], np.array([len(flat)], _I64))[0] + np.cumsum(new_lengths) - new_lengths
        out = take(closures, left)
        out["max"], out["end"], out["lseq"] = events["max"][right], events["end"][right], events["lseq"][right]
        out[f"o{element}"], out[f"n{element}"] = offsets.astype(_I64), new_lengths
        return out

    def join(self, left: Table, right: Table, link: BinaryOperator, state: PatternState,
             conditions: tuple[str, ...] = (), negations: tuple[str, ...] = ()) -> Table:
        """Pairs of partial matches the link accepts, within the window, that pass the conditions
        and negations given. The pairs are made and tested `BUDGET` at a time: working memory holds
        a block of them and what passes, however many the window and the batch make (issue #38)."""
        if not size(left) or not size(right):
            return {}
        within = self.within
        if self.strict:
            li, ri = equal_join(left["grp"], left["lseq"] + 1, right["grp"], right["fseq"])
            return self.test(self._paired(left, right, link, li, ri), conditions, negations, state)
        if self.monotone:
            order, first, counts = range_candidates(left["grp"], left["end"], left["min"] + within, right["grp"],
                                                    right["start"])
        else:  # any order in time: the window bounds the candidates
            order, first, counts = range_candidates(left["grp"], left["max"] - within, left["min"] + within,
                                                    right["grp"], right["min"])
        made = []
        for block in blocks(counts, BUDGET):
            li, ri = pairs_of(order, first, counts, block)
            made.append(self.test(self._paired(left, right, link, li, ri), conditions, negations, state))
        return concat(made)

    def _paired(self, left: Table, right: Table, link: BinaryOperator, li: np.ndarray, ri: np.ndarray) -> Table:
        """The candidate pairs (li, ri) the link accepts within the window, as partial matches."""
        within = self.within
        low = np.minimum(left["min"][li], right["min"][ri])
        high = np.maximum(left["max"][li], right["max"][ri])
        ok = high - low < within
        li, ri, low, high = li[ok], ri[ok], low[ok], high[ok]
        if self.monotone:
            ok = left["end"][li] < right["start"][ri]
            li, ri, low, high = li[ok], ri[ok], low[ok], high[ok]
            start, end = left["start"][li], right["end"][ri]
        else:
            start, end, ok = _apply_link(link, left, right, li, ri)
            li, ri, low, high, start, end = li[ok], ri[ok], low[ok], high[ok], start[ok], end[ok]
        out = take(left, li)
        for name, column in right.items():
            if name not in ("grp", "min", "max", "start", "end", "fseq", "lseq"):
                out[name] = column[ri]
        out["min"], out["max"], out["start"], out["end"] = low, high, start, end
        out["lseq"] = right["lseq"][ri]
        return out

    # ------------------------------------------------------------------ conditions

    def test(self, table: Table, conditions: tuple[str, ...], negations: tuple[str, ...], state: PatternState,
             single: frozenset = frozenset()) -> Table:
        """Keep the rows that pass the conditions (in the order given) and the negations. `single`:
        Kleene elements whose rows hold one event (a closure's candidates), read directly."""
        for text in conditions:
            if not size(table):
                return {}
            index = self.number[text]
            frame = Frame(table, state.store, state.closures, self.kleene)
            frame.single = set(single)
            ok = holds(self.expressions[index], frame)
            state.tested[index] += len(ok)
            state.passed[index] += int(ok.sum())
            table = take(table, ok)
        for var in negations:
            if not size(table):
                return {}
            table = take(table, self.negation_holds(var, table, state))
        return table

    def negation_holds(self, var: str, table: Table, state: PatternState) -> np.ndarray:
        """No event of the negated element's stream in its gap passes the element's conditions."""
        element = self.index[var]
        before, after = self.gaps[element]
        store = state.store
        low = self._last_ts(before, table, state)
        if after is None:
            high = table["min"] + self.within
        else:
            high = store.ts[table[f"e{after}"] - store.base]
        # The events in some gap: a binary search in the time-ordered store, not a scan of it all.
        begin = int(np.searchsorted(store.ts, low.min(), "right")) if len(low) else 0
        stop = int(np.searchsorted(store.ts, high.max(), "left")) if len(high) else 0
        rows = begin + np.flatnonzero(store.k[begin:max(begin, stop)] == self.stream[element])
        mine = [c for c, condition in enumerate(self.pattern.conditions) if condition.negation == var]
        only_here = [c for c in mine if set(self.pattern.conditions[c].reads) == {var}]
        rows = self.passing_alone(element, rows, only_here, state)  # filtered once, not per pair
        rest = [c for c in mine if c not in only_here]
        li, ri = range_join(table["grp"], low, high, store.grp[rows], store.ts[rows])
        if not rest:
            return np.bincount(li, minlength=size(table)) == 0
        pairs = take(table, li)
        pairs[f"e{element}"] = rows[ri] + store.base
        frame = Frame(pairs, store, state.closures, self.kleene)
        violates = np.ones(len(li), bool)
        for c in rest:
            violates &= holds(self.expressions[c], frame)
        return np.bincount(li[violates], minlength=size(table)) == 0

    def passing_alone(self, element: int, rows: np.ndarray, numbers: list[int], state: PatternState) -> np.ndarray:
        """The store rows whose events, bound to `element`, pass the conditions `numbers` (which
        read that element alone)."""
        if not numbers or not len(rows):
            return rows
        store = state.store
        frame = Frame({"grp": store.grp[rows], f"e{element}": rows + store.base}, store, state.closures, self.kleene)
        frame.single = {element}
        keep = np.ones(len(rows), bool)
        for c in numbers:
            keep &= holds(self.expressions[c], frame)
        return rows[keep]

    def _last_ts(self, element: int, table: Table, state: PatternState) -> np.ndarray:
        store = state.store
        return store.ts[self._last_ids(element, table, state) - store.base]

    def _last_ids(self, element: int, table: Table, state: PatternState) -> np.ndarray:
        """Per row, the id of the last event bound to `element` (a closure's last)."""
        if element in self.kleene:
            return state.closures.ids[table[f"o{element}"] + table[f"n{element}"] - 1]
        return table[f"e{element}"]

    def check_final(self, table: Table, state: PatternState) -> Table:
        return self.test(table, self.pattern.whole.conditions, self.pattern.whole.negations, state)

    def cap(self, made: Table, kept: Table, state: PatternState) -> Table:
        """At most `limit` partial matches per key (with those `kept` already, which the caller
        holds alive at the time of those `made`): the newest beyond it are cut, and counted. Applied
        to what an operator keeps for later batches (`forget`: what is still alive), and to Kleene
        closures as they are made, a time at a time (`_closures_in_time`: their number can grow
        as 2^n)."""
        limit = self.pattern.limit
        if not size(made) or size(made) + size(kept) <= limit:
            return made
        grp = made["grp"]
        order = stable_order(grp)
        sorted_grp = grp[order]
        starts = np.flatnonzero(np.r_[True, sorted_grp[1:] != sorted_grp[:-1]])
        counts = np.diff(np.r_[starts, len(grp)])
        place = np.empty(len(grp), _I64)
        place[order] = ranges(counts)
        if size(kept):
            keys, already = np.unique(kept["grp"], return_counts=True)
            at = np.minimum(np.searchsorted(keys, grp), len(keys) - 1)
            before = np.where(keys[at] == grp, already[at], 0)
        else:
            before = 0
        keep = place + before < limit
        state.cut += int((~keep).sum())
        return take(made, keep)

    # ------------------------------------------------------------------ matches

    def complete(self, state: PatternState, whole: Table, watermark: int) -> Matches:
        """Matches out: a trailing negation's wait for the end of the window, emit first, yield."""
        if self.trailing:
            waiting = concat([state.waiting, whole]) if size(state.waiting) else whole
            due = waiting["min"] + self.within <= watermark if size(waiting) else np.zeros(0, bool)
            state.waiting = take(waiting, ~due) if size(waiting) else {}
            whole = self.check_final(take(waiting, due), state) if size(waiting) else {}
            ts_column = whole["min"] + self.within - 1 if size(whole) else np.empty(0, _I64)
            start = whole["min"] if size(whole) else np.empty(0, _I64)
        else:
            ts_column = whole["end"] if size(whole) else np.empty(0, _I64)
            start = whole["start"] if size(whole) else np.empty(0, _I64)
        if not size(whole):
            return Matches.empty()
        if self.yield_ is not None:  # a match whose yield divides by zero is no match: emit first skips it
            values, divided = value_of(self.yield_, Frame(whole, state.store, state.closures, self.kleene))
            state.divided += self._assignments(take(whole, divided), state)
            keep = ~divided
            whole, ts_column, start, values = take(whole, keep), ts_column[keep], start[keep], values[keep]
            if not size(whole):
                return Matches.empty()
        else:
            values = np.ones(size(whole))
        order = self._each_copy(self._emit_order(whole, ts_column, state), whole, state)
        whole, ts_column, start, values = take(whole, order), ts_column[order], start[order], values[order]
        return Matches(ts_column.astype(_I64), values.astype(np.float64), start.astype(_I64),
                       ts_column.astype(_I64), self._bound_events(whole, state))

    def _emit_order(self, whole: Table, ts_column: np.ndarray, state: PatternState) -> np.ndarray:
        """Rows in (ts, assignment) order; with `emit first` only the first per start event, and
        none for a start event that already had its match."""
        columns = [whole[f"e{i}"] for i in reversed(self.positives)]  # a closure by its first event
        order = np.lexsort((*columns, ts_column))
        if self.kleene and size(whole) > 1:
            # Closures that start alike order by their later events: exact keys where rows tie.
            keys = np.stack([ts_column[order], *[c[order] for c in reversed(columns)]])
            tied = np.flatnonzero((keys[:, 1:] == keys[:, :-1]).all(axis=0))
            if len(tied):
                order = self._break_ties(order, tied, whole, ts_column, state)
        if self.pattern.emit != "first":
            return order
        first_ids = whole[f"e{self.positives[0]}"][order]
        fresh = ~np.isin(first_ids, state.emitted["id"])
        _, first_of = np.unique(first_ids[fresh], return_index=True)
        chosen = order[np.flatnonzero(fresh)[np.sort(first_of)]]
        state.emitted = {"id": np.concatenate([state.emitted["id"], whole[f"e{self.positives[0]}"][chosen]]),
                         "ts": np.concatenate([state.emitted["ts"], whole["min"][chosen]])}
        return chosen

    def _break_ties(self, order, tied, whole: Table, ts_column, state: PatternState) -> np.ndarray:
        """Reorder runs of rows that tie on (ts, first events) by their whole assignments."""
        order = order.copy()
        runs_start = np.flatnonzero(np.r_[True, np.diff(tied) != 1])
        for a, b in zip(runs_start, [*runs_start[1:], len(tied)]):
            low, high = int(tied[a]), int(tied[b - 1]) + 2
            segment = order[low:high]
            order[low:high] = sorted(segment, key=lambda row: self._assignment_key(whole, int(row), state))
        return order

    def _assignment_key(self, whole: Table, row: int, state: PatternState) -> tuple:
        key = []
        for i in self.positives:
            if i in self.kleene:
                offset, length = int(whole[f"o{i}"][row]), int(whole[f"n{i}"][row])
                key.append(tuple(state.closures.ids[offset:offset + length].tolist()))
            else:
                key.append((int(whole[f"e{i}"][row]),))
        return tuple(key)

    def _bound_ids(self, whole: Table, state: PatternState):
        """The ids of each match's bound events, per positive element: (element, offsets, lengths,
        ids), the events of row r being ids[offsets[r]:offsets[r] + lengths[r]] (one or more)."""
        for i in self.positives:
            if i in self.kleene:
                lengths = whole[f"n{i}"]
                ids = state.closures.members(whole[f"o{i}"], lengths)
                offsets = np.cumsum(lengths) - lengths
            else:
                ids = whole[f"e{i}"]
                lengths = np.ones(len(ids), _I64)
                offsets = np.arange(len(ids), dtype=_I64)
            yield i, offsets, lengths, ids

    def _bound_events(self, whole: Table, state: PatternState) -> list:
        """The bound events of each match, as columns per element (see `Matches`)."""
        store = state.store
        parts = []
        for i, offsets, lengths, ids in self._bound_ids(whole, state):
            rows = ids - store.base
            parts.append((i, offsets, lengths, store.ts[rows], store.value[rows], store.src[rows]))
        return parts

    # ------------------------------------------------------------------ copies

    def _copies(self, whole: Table, state: PatternState) -> np.ndarray | None:
        """Per whole match, the assignments of identical events it stands for (`merges_copies`):
        the product of its bound events' copies. None when each stands for one."""
        store = state.store
        if not self.merges_copies or not size(whole) or int(store.copies.max(initial=1)) == 1:
            return None
        product = np.ones(size(whole), _I64)
        for _, offsets, _, ids in self._bound_ids(whole, state):
            product *= np.multiply.reduceat(store.copies[ids - store.base].astype(_I64), offsets)
        return product

    def _assignments(self, whole: Table, state: PatternState) -> int:
        """How many assignments these whole matches stand for, copies counted (`_copies`)."""
        copies = self._copies(whole, state)
        return size(whole) if copies is None else int(copies.sum())

    def _each_copy(self, order: np.ndarray, whole: Table, state: PatternState) -> np.ndarray:
        """The rows `order` emits, each as often as the matches it stands for: once per assignment
        of copies (`_copies`); with `emit first`, once per copy of its start event (each copy starts
        matches of its own, and the first of each is alike)."""
        if not self.merges_copies or not len(order):
            return order
        if self.pattern.emit == "first":
            copies = state.store.copies[whole[f"e{self.positives[0]}"][order] - state.store.base]
        else:
            every = self._copies(whole, state)
            copies = None if every is None else every[order]
        return order if copies is None or (copies == 1).all() else np.repeat(order, copies)

    # ------------------------------------------------------------------ forgetting

    def forget(self, state: PatternState, watermark: int) -> None:
        """Drop what no match to come can use: partial matches and events older than the window."""
        if watermark == POS_INF:
            state.tables, state.runs, state.closures = {}, {}, ClosureStore()
            state.store.forget_before(POS_INF)
            return
        horizon = watermark - self.within
        for key, table in list(state.tables.items()):
            if size(table):
                keep = table["min"] > horizon
                if self.strict and (key.endswith("K") or (key.endswith("L") and _single_event(self, key))):
                    # Strict: a partial match whose next event has come and gone can never grow.
                    keep &= table["lseq"] + 1 >= self.next_seq_of(state, table["grp"])
                state.tables[key] = self.cap(take(table, keep), {}, state)
        emitted = state.emitted
        if self.pattern.emit == "first" and len(emitted["id"]):
            # A partial match whose start event has had its match can never be emitted: it goes, so
            # an `emit first` pattern keeps only the starts still waiting (a cost per event like next's).
            first = f"e{self.positives[0]}"
            for key, table in list(state.tables.items()):
                if size(table) and first in table:
                    state.tables[key] = take(table, ~np.isin(table[first], emitted["id"]))
        if len(emitted["id"]):
            keep = emitted["ts"] > horizon
            state.emitted = {"id": emitted["id"][keep], "ts": emitted["ts"][keep]}
        # The tree joins new events with the partial matches and events of the window, so its store
        # keeps the window. Runs (strategy next) read only their own events, none older than the run's
        # first (a pattern never starts with a negation), and take later ones from the slices
        # to come: the store keeps the events of the runs and whole matches still waiting, not the
        # window (at `within` 10 min, 2.4 M events of 400 keys at 10 Hz, where few runs wait).
        oldest = [watermark if isinstance(self.pattern.tree, p.Chain) else horizon + 1]
        for table in (state.waiting, state.runs):
            if size(table):
                oldest.append(int(table["min"].min()))
        state.store.forget_before(min(oldest))
        if len(state.closures.ids) > 4 * max(1, self._closure_members(state)):
            kept = [t for t in state.tables.values() if size(t)] + [t for t in (state.waiting, state.runs) if size(t)]
            state.closures.compact(kept, sorted(self.kleene))

    def _closure_members(self, state: PatternState) -> int:
        total = 0
        for table in list(state.tables.values()) + [state.waiting, state.runs]:
            for i in self.kleene:
                if size(table) and f"n{i}" in table:
                    total += int(table[f"n{i}"][table[f"o{i}"] >= 0].sum())
        return total


# ------------------------------------------------------------------------------ links


def _apply_link(link: BinaryOperator, left: Table, right: Table, li, ri):
    """A registered link's Q and F on each candidate pair (in Python)."""
    start = np.empty(len(li), _I64)
    end = np.empty(len(li), _I64)
    ok = np.zeros(len(li), bool)
    for n, (a, b) in enumerate(zip(li.tolist(), ri.tolist())):
        one = Composite(int(left["start"][a]), int(left["end"][a]), int(left["min"][a]), int(left["max"][a]))
        two = Composite(int(right["start"][b]), int(right["end"][b]), int(right["min"][b]), int(right["max"][b]))
        if link.Q(one, two):
            ok[n] = True
            start[n], end[n] = link.F(one, two)
    return start, end, ok


def _older(every: Table, new: Table) -> Table:
    """The rows of `every` not among the `new` ones at its end."""
    if not size(every):
        return {}
    return take(every, np.arange(size(every) - size(new)))


def _single_event(matcher: Matcher, key: str) -> bool:
    """Whether the subtree right of the left child `key` (its sibling) is one plain event."""
    if key.endswith("K"):  # a Kleene leaf's closures: they grow by the next event or never
        return True
    sibling = key[:-1] + "R"
    node = matcher.pattern.tree
    for step in sibling:
        node = node.left if step == "L" else node.right
    return isinstance(node, p.Leaf) and matcher.index[node.element] not in matcher.kleene


def _identical_runs(ts: np.ndarray, value: np.ndarray, src: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Events in the total order as runs of identical ones (time, source, value to the bit,
    stream): the place of each run's first event, and the run's length (its copies)."""
    if len(ts) < 2:
        return np.arange(len(ts)), np.ones(len(ts), np.int32)
    bits = value.view(np.int64)
    differs = (ts[1:] != ts[:-1]) | (src[1:] != src[:-1]) | (bits[1:] != bits[:-1]) | (k[1:] != k[:-1])
    first = np.flatnonzero(np.r_[True, differs])
    return first, np.diff(np.r_[first, len(ts)]).astype(np.int32)


def _total_order(ts: np.ndarray, value: np.ndarray, src: np.ndarray, k: np.ndarray) -> np.ndarray:
    """The order of events by time, then source, value and stream (np.lexsort of the four). Events
    seldom share a time and a source, so one int64 key of (time, source) sorts them alone (a
    stable sort: fast on events that arrive nearly in time order); where two share both, or the key
    would not fit in 63 bits, the four keys decide."""
    if len(ts) > 1:
        t0, s0 = int(ts.min()), int(src.min())
        times, sources = int(ts.max()) - t0 + 1, int(src.max()) - s0 + 1
        if times * sources < 2**62:
            key = (ts - t0) * sources + (src - s0)
            order = np.argsort(key, kind="stable")
            ordered = key[order]
            if not (ordered[1:] == ordered[:-1]).any():
                return order
    return np.lexsort((k, value, src, ts))
