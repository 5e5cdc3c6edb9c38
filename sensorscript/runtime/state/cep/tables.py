"""The matcher's data: the events a pattern has seen, and partial matches as column tables.

Events are numbered in the order they become final (event time, then sensor, value and stream:
the pattern's total order), so an event's id also orders it; the store keeps those still within
`within` of the watermark. A partial match (a composite event) is a row of a `Table`: its key
(`grp`), the smallest and largest bound event times (`min`, `max`), the interval its operators
gave it (`start`, `end`), the sequence numbers of its first and last events in its key's input
(`fseq`, `lseq`: strict contiguity), and per bound element i the event id `e{i}`; a Kleene
element's events are a run in the closure store (`o{i}` offset, `n{i}` length).

An event of the store may stand for several identical ones (`copies`: a union that names a stream
twice passes each of its tuples twice): where copies are interchangeable in every match, the
matcher keeps them as one event and emits each match once per assignment of copies it stands for
(runtime/state/cep/matcher.py `Matcher.merges_copies`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sensorscript.runtime.state.kernels.sorting import stable_order

Table = dict  # column name -> numpy array, all of one length

_I64 = np.int64
_EMPTY = np.empty(0, _I64)


def size(table: Table) -> int:
    return len(table["grp"]) if table else 0


def take(table: Table, index) -> Table:
    """The rows `index` selects (a mask or positions). A mask that keeps every row gives the same
    columns, not copies (most runs go on from slice to slice): no column is written in place."""
    if isinstance(index, np.ndarray) and index.dtype == bool and index.all():
        return dict(table)
    return {name: column[index] for name, column in table.items()}


def concat(tables: list[Table]) -> Table:
    tables = [t for t in tables if size(t)]
    if not tables:
        return {}
    if len(tables) == 1:
        return tables[0]
    names = tables[0].keys()
    return {name: np.concatenate([t[name] for t in tables]) for name in names}


def ranges(counts: np.ndarray) -> np.ndarray:
    """[0..c0-1, 0..c1-1, ...] for counts c."""
    counts = np.asarray(counts, _I64)
    total = int(counts.sum())
    if not total:
        return _EMPTY
    return np.arange(total, dtype=_I64) - np.repeat(np.cumsum(counts) - counts, counts)


def segment_keys(groups: list[np.ndarray], values: list[np.ndarray]) -> list[np.ndarray]:
    """One sortable int64 per (group, value) pair, the same scale for every array given: for
    searchsorted over (group, value) in one call."""
    every_group = np.concatenate(groups) if groups else _EMPTY
    every_value = np.concatenate(values) if values else _EMPTY
    if not len(every_value):
        return [np.empty(0, _I64) for _ in groups]
    low, high = int(every_value.min()), int(every_value.max())
    span = high - low + 2
    first, last = int(every_group.min()), int(every_group.max())
    if (last - first + 1) * span < 1 << 62:  # keys (sensor codes) close together: as they are
        return [(g.astype(_I64) - first) * span + (v.astype(_I64) - low) for g, v in zip(groups, values)]
    ranks = np.unique(every_group)
    return [np.searchsorted(ranks, g).astype(_I64) * span + (v.astype(_I64) - low) for g, v in zip(groups, values)]


_COLUMNS = ("ts", "value", "src", "grp", "seq", "k", "copies")


@dataclass
class EventStore:
    """The final events still needed, in id order. Columns by id - base.

    The columns are views of buffers with room to grow: an append writes after the last event
    (doubling a buffer when it is full) and forgetting moves the views' start, so a batch swept in
    many slices copies each event about twice, not once per slice (issue #38). What a view shows
    is never written again, so tables may keep views of the columns.

    Sensor codes, keys and copies are int32 (codes stay below 2**31: plan/program.py's DERIVED_CODES)
    and stream numbers int16: 38 bytes an event, not 56, as a window of minutes holds millions."""

    base: int = 0
    ts: np.ndarray = field(default_factory=lambda: _EMPTY)
    value: np.ndarray = field(default_factory=lambda: np.empty(0, np.float64))
    src: np.ndarray = field(default_factory=lambda: np.empty(0, np.int32))
    grp: np.ndarray = field(default_factory=lambda: np.empty(0, np.int32))
    seq: np.ndarray = field(default_factory=lambda: _EMPTY)
    k: np.ndarray = field(default_factory=lambda: np.empty(0, np.int16))
    copies: np.ndarray = field(default_factory=lambda: np.empty(0, np.int32))  # identical events it stands for
    # The buffers behind the columns and where the columns start in them (not pickled).
    room: dict | None = field(default=None, repr=False, compare=False)
    start: int = field(default=0, repr=False, compare=False)

    def __getstate__(self) -> dict:
        return {"base": self.base, **{name: np.array(getattr(self, name)) for name in _COLUMNS}}

    def __setstate__(self, values: dict) -> None:
        if "copies" not in values:  # a state of an older release: each event was one
            values = {**values, "copies": np.ones(len(values["ts"]), np.int32)}
        self.__dict__.update(values, room=None, start=0)

    def __len__(self) -> int:
        return len(self.ts)

    @property
    def end(self) -> int:
        """The id the next event gets."""
        return self.base + len(self.ts)

    def append(self, ts, value, src, grp, seq, k, copies) -> np.ndarray:
        ids = np.arange(self.end, self.end + len(ts), dtype=_I64)
        added = dict(zip(_COLUMNS, (ts, value, src, grp, seq, k, copies)))
        count, more = len(self.ts), len(ts)
        stop = self.start + count
        if self.room is None or stop + more > len(self.room["ts"]):
            capacity = max(2 * (count + more), 1024)
            room = {name: np.empty(capacity, getattr(self, name).dtype) for name in _COLUMNS}
            for name in _COLUMNS:
                room[name][:count] = getattr(self, name)
            self.room, self.start, stop = room, 0, count
        for name in _COLUMNS:
            self.room[name][stop:stop + more] = added[name]
            setattr(self, name, self.room[name][self.start:stop + more])
        return ids

    def forget_before(self, ts: int) -> None:
        """Drop the events older than `ts` (they are a prefix: ids follow event time)."""
        cut = int(np.searchsorted(self.ts, ts, side="left"))
        if cut:
            self.base += cut
            if self.room is not None:
                self.start += cut
            for name in _COLUMNS:
                setattr(self, name, getattr(self, name)[cut:])
            if not len(self.ts):  # let go of the buffers
                self.room, self.start = None, 0
                for name in _COLUMNS:
                    setattr(self, name, getattr(self, name).copy())

    def column(self, attr: str, ids: np.ndarray) -> np.ndarray:
        rows = ids - self.base
        if attr == "ts":
            return self.ts[rows].astype(np.float64)
        if attr == "value":
            return self.value[rows]
        return self.src[rows].astype(np.float64)  # sensor: its code


@dataclass
class ClosureStore:
    """The events of Kleene closures: each closure a run [offset, offset + length) of event ids.

    `ids` is a view of a buffer with room to grow, as the event store's columns are: an add writes
    after the last id (doubling the buffer when it is full), so a slice that adds closures time by
    time (matcher.py `_closures_in_time`) copies each id about twice, not once per add."""

    ids: np.ndarray = field(default_factory=lambda: _EMPTY)
    room: np.ndarray | None = field(default=None, repr=False, compare=False)  # the buffer (not pickled)

    def __getstate__(self) -> dict:
        return {"ids": np.array(self.ids)}

    def __setstate__(self, values: dict) -> None:
        self.__dict__.update(values, room=None)

    def add(self, runs: list[np.ndarray], lengths: np.ndarray) -> np.ndarray:
        """Append runs given flat (`runs` concatenated); returns their offsets."""
        flat = np.concatenate(runs) if runs else _EMPTY
        count, stop = len(self.ids), len(self.ids) + len(flat)
        if self.room is None or stop > len(self.room):
            room = np.empty(max(2 * stop, 1024), _I64)
            room[:count] = self.ids
            self.room = room
        self.room[count:stop] = flat
        self.ids = self.room[:stop]
        return (count + np.cumsum(lengths) - lengths).astype(_I64)

    def members(self, offsets: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Every closure's event ids, concatenated in closure order."""
        return self.ids[np.repeat(offsets, lengths) + ranges(lengths)]

    def compact(self, tables: list[Table], kleene: list[int]) -> None:
        """Keep only the runs the live tables still point to (their offsets are rewritten). A
        closure with offset -1 is not in the store (strategy next's open closures: runtime/state/cep/runs.py)."""
        pieces, total = [], 0
        for table in tables:
            for i in kleene:
                name = f"o{i}"
                if table and name in table and size(table):
                    stored = table[name] >= 0
                    lengths = np.where(stored, table[f"n{i}"], 0)
                    pieces.append(self.members(np.where(stored, table[name], 0), lengths))
                    table[name] = np.where(stored, total + np.cumsum(lengths) - lengths, -1)
                    total += int(lengths.sum())
        self.ids, self.room = (np.concatenate(pieces) if pieces else _EMPTY), None


# ------------------------------------------------------------------------------ joins


def range_join(left_grp, low, high, right_grp, right_value):
    """Index pairs (l, r) with equal keys and low[l] < right_value[r] < high[l]."""
    order, first, counts = range_candidates(left_grp, low, high, right_grp, right_value)
    return pairs_of(order, first, counts)


def range_candidates(left_grp, low, high, right_grp, right_value):
    """The pairs of `range_join` before they are made: the right rows of left row l are
    order[first[l]:first[l] + counts[l]], in (key, value) order. For callers that take them a
    part at a time (`pairs_of`, `blocks`)."""
    if not len(left_grp) or not len(right_grp):
        return _EMPTY, np.zeros(len(left_grp), _I64), np.zeros(len(left_grp), _I64)
    low_key, high_key, right_key = segment_keys([left_grp, left_grp, right_grp], [low, high, right_value])
    order = stable_order(right_key)
    sorted_keys = right_key[order]
    first = np.searchsorted(sorted_keys, low_key, side="right")
    last = np.searchsorted(sorted_keys, high_key, side="left")
    return order, first.astype(_I64), np.maximum(last - first, 0).astype(_I64)


def pairs_of(order, first, counts, rows=None):
    """Index pairs (l, r) for left rows `rows` (all: None), counts[l] candidates from first[l]."""
    rows = np.arange(len(first), dtype=_I64) if rows is None else rows
    counts = counts[rows]
    li = np.repeat(rows, counts)
    ri = order[np.repeat(first[rows], counts) + ranges(counts)]
    return li, ri


BUDGET = 1 << 18  # candidate pairs a join makes and tests at once (`blocks`)


def blocks(counts: np.ndarray, budget: int):
    """Left rows in consecutive blocks of at most `budget` pairs each (a row with more alone): a
    join made a block at a time holds `budget` pairs at once, whatever the batch."""
    total = np.cumsum(counts)
    if not len(counts) or int(total[-1]) <= budget:
        yield np.arange(len(counts), dtype=_I64)
        return
    begin = 0
    while begin < len(counts):
        done = int(total[begin - 1]) if begin else 0
        end = max(int(np.searchsorted(total, done + budget, side="right")), begin + 1)
        yield np.arange(begin, end, dtype=_I64)
        begin = end


def equal_join(left_grp, left_value, right_grp, right_value):
    """Index pairs (l, r) with equal keys and equal values."""
    if not len(left_grp) or not len(right_grp):
        return np.empty(0, _I64), np.empty(0, _I64)
    left_key, right_key = segment_keys([left_grp, right_grp], [left_value, right_value])
    order = stable_order(right_key)
    sorted_keys = right_key[order]
    first = np.searchsorted(sorted_keys, left_key, side="left")
    last = np.searchsorted(sorted_keys, left_key, side="right")
    counts = last - first
    li = np.repeat(np.arange(len(left_grp), dtype=_I64), counts)
    ri = order[np.repeat(first, counts) + ranges(counts)]
    return li, ri
