"""Strategy `next` (skip-till-next-match) as runs: the operator tree is a left-deep chain.

Each event that qualifies for the first element starts one run. A run waiting for a plain element
takes the earliest later event that qualifies for it: its stream, the link (`->`: after the run's
end), the window, and the conditions and negations the compiler scheduled for that element (each
is tested as soon as the variables it reads are bound). A run at a Kleene element keeps taking
qualifying events of its stream until the earliest event that qualifies for the element after it,
which ends the closure; a trailing closure ends with the window. The search for plain elements
is vectorised over all runs and their candidate events; a Kleene closure is walked event by event.
"""

from __future__ import annotations

import numpy as np

from sensorscript.runtime.state.cep.conditions import Frame, bare_kleene, holds, reads, value_of
from sensorscript.runtime.state.cep.operators import Composite
from sensorscript.runtime.state.cep.tables import (BUDGET, Table, blocks, concat, pairs_of, range_candidates, ranges,
                                                   size, take)

_I64 = np.int64
FIRST_LOOK = 16  # candidates a waiting run looks at first (then four times as many, and so on)


def advance_runs(matcher, state, new: np.ndarray, watermark: int) -> Table:
    """Start the runs the new events begin, move every run as far as the events allow; returns the
    runs that became whole matches this batch (their final conditions still to test)."""
    steps = matcher.pattern.tree.steps
    candidates = {}
    for step in steps:
        element = matcher.index[step.element]
        events = matcher.element_events(element, state, new)
        if matcher.elements[element].kleene and size(events):  # each event a closure of its own
            events[f"o{element}"] = state.closures.add([events[f"e{element}"]], np.ones(size(events), _I64))
        candidates[element] = events
    first = steps[0]
    started = _bind_first(matcher, state, candidates[matcher.index[first.element]], first)
    runs = concat([state.runs, started]) if size(state.runs) else started
    last_id = state.store.end - 1
    whole = []
    for _ in range(2 * len(steps) + 2):
        if not size(runs):
            break
        runs, done, moved = _advance_once(matcher, state, runs, candidates, steps, last_id, watermark)
        whole.append(done)
        if not moved:
            break
    # A trailing closure whose window has passed is whole.
    if size(runs) and matcher.elements[matcher.index[steps[-1].element]].kleene:
        due = (runs["at"] == len(steps) - 1) & runs["open"].astype(bool) & (runs["min"] + matcher.within <= watermark)
        if due.any():
            done = take(runs, due)
            done["open"] = np.zeros(size(done), _I64)
            whole.append(done)
            runs = take(runs, ~due)
    # Runs that can no longer be completed go; of those still waiting, at most `limit` per key stay
    # (the newest beyond it are cut, and counted: status says so). A run that completed in this
    # slice never counts against it.
    if size(runs):
        alive = runs["min"] + matcher.within > watermark
        runs = matcher.cap(take(runs, alive), {}, state)
    state.runs = runs
    whole = concat(whole)
    return matcher.check_final(_strip(whole), state) if not matcher.trailing else _strip(whole)


def _strip(table: Table) -> Table:
    return {k: v for k, v in table.items() if k not in ("at", "open", "scan")} if size(table) else {}


def _bind_first(matcher, state, events: Table, step) -> Table:
    """Runs started by the new events that qualify for the first element."""
    element = matcher.index[step.element]
    events = matcher.test(events, step.conditions, step.negations, state)
    if not size(events):
        return {}
    runs = dict(events)
    kleene = matcher.elements[element].kleene
    # Every run has a column for every element, bound or not (-1: not yet), so runs at different
    # elements stack in one table.
    for i in matcher.positives:
        runs.setdefault(f"e{i}", np.full(size(events), -1, _I64))
        if i in matcher.kleene:
            runs.setdefault(f"o{i}", np.zeros(size(events), _I64))
            runs.setdefault(f"n{i}", np.zeros(size(events), _I64))
    runs["at"] = np.zeros(size(events), _I64)
    runs["open"] = np.full(size(events), int(kleene), _I64)
    runs["scan"] = events[f"e{element}"].copy()
    return runs


def _advance_once(matcher, state, runs: Table, candidates: dict, steps, last_id: int, watermark: int):
    """One step for every run: bind its next element (plain ones vectorised), or walk its open
    closure. Returns (runs still going, runs now whole, whether any run moved)."""
    final = len(steps) - 1
    at, open_ = runs["at"], runs["open"].astype(bool)
    whole_mask = (at == final) & ~open_
    done = take(runs, whole_mask)
    runs = take(runs, ~whole_mask)
    at, open_ = runs["at"], runs["open"].astype(bool) if size(runs) else np.zeros(0, bool)
    moved = False
    parts = []
    for position in range(len(steps)):
        # Runs whose last bound element is `position`: waiting for the next (plain), or open (Kleene).
        waiting = (at == position) & ~open_
        if waiting.any() and position < final:
            group = take(runs, waiting)
            group, progressed = _bind_next(matcher, state, group, candidates, steps[position + 1], last_id)
            moved |= progressed
            parts.append(group)
        opened = (at == position) & open_
        if opened.any():
            group = take(runs, opened)
            swept = _sweep_closures(matcher, state, group, candidates, steps, position, last_id)
            group, progressed = swept if swept is not None else \
                _walk_closures(matcher, state, group, candidates, steps, position, last_id)
            moved |= progressed
            parts.append(group)
    runs = concat(parts)
    return runs, done, moved


def _window_end(matcher, state, runs: Table, last_id: int) -> np.ndarray:
    """Per run, the first event id past its window (`within` of its first event) or past the batch:
    the store holds the events in time order, so a binary search finds it."""
    store = state.store
    end = np.searchsorted(store.ts, runs["min"] + matcher.within, "left") + store.base
    return np.minimum(end, last_id + 1).astype(_I64)


def _moved_on(matcher, runs: Table, events: Table, rows, chosen, element: int, start, end) -> Table:
    """The runs with the runs `rows` moved on: each bound to its event `chosen` (rows of `events`)
    for `element`, with its new interval."""
    moved = _pairs(matcher, runs, events, rows, chosen, element)
    moved["start"], moved["end"] = start, end
    moved["at"] = runs["at"][rows] + 1
    moved["open"] = np.full(len(rows), int(matcher.elements[element].kleene), _I64)
    moved["scan"] = moved[f"e{element}"].copy()
    rest = np.ones(size(runs), bool)
    rest[rows] = False
    return concat([take(runs, rest), moved])


def _bind_next(matcher, state, runs: Table, candidates: dict, step, last_id: int):
    """Each run takes the earliest later event that qualifies for the element of `step`.

    A run looks no further than `within` from its first event (the store holds the events in time
    order: a binary search bounds its candidates), and at those a few at a time: its first
    `FIRST_LOOK` candidates, then four times as many, and so on, until one qualifies. A run that
    finds its event early costs that much, however long the window or the batch; the pairs tested
    at once are at most `BUDGET`, so a window of many waiting runs costs time, never the worker's
    memory (issue #38)."""
    element = matcher.index[step.element]
    events = candidates[element]
    if not size(events):
        runs["scan"] = np.maximum(runs["scan"], last_id)
        return runs, False
    high = _window_end(matcher, state, runs, last_id)
    search = _threshold_search(matcher, step, element)
    if search is not None:
        return _bind_by_threshold(matcher, state, runs, events, step, element, search, high, last_id)
    order, first, counts = range_candidates(runs["grp"], runs["scan"], high, events["grp"], events[f"e{element}"])
    found = np.full(size(runs), -1, _I64)  # per run: the row of `events` it binds
    starts, ends = np.zeros(size(runs), _I64), np.zeros(size(runs), _I64)
    looked = np.zeros(size(runs), _I64)
    waiting, width = np.flatnonzero(counts), FIRST_LOOK
    while len(waiting):
        now = np.minimum(counts[waiting] - looked[waiting], width)
        for block in blocks(now, BUDGET):
            rows, n = waiting[block], now[block]
            li = np.repeat(rows, n)
            ri = order[np.repeat(first[rows] + looked[rows], n) + ranges(n)]
            li, ri, start, end = _qualifying(matcher, state, runs, events, li, ri, element, step)
            firsts = np.flatnonzero(np.r_[True, li[1:] != li[:-1]]) if len(li) else li
            found[li[firsts]], starts[li[firsts]], ends[li[firsts]] = ri[firsts], start[firsts], end[firsts]
        looked[waiting] += now
        waiting = waiting[(found[waiting] < 0) & (looked[waiting] < counts[waiting])]
        width *= 4
    runs["scan"] = np.maximum(runs["scan"], last_id)
    bound = np.flatnonzero(found >= 0)
    if not len(bound):
        return runs, False
    return _moved_on(matcher, runs, events, bound, found[bound], element, starts[bound], ends[bound]), True


# ------------------------------------------------------------------ a threshold search

_FLIP = {">": "<", ">=": "<=", "<": ">", "<=": ">="}
_PASSES = {">": np.greater, ">=": np.greater_equal, "<": np.less, "<=": np.less_equal}


def _threshold_search(matcher, step, element: int):
    """How to find a run's next event by a search rather than pair by pair, if the step allows:
    its element is a plain one, read with its link `->`, no negation waits on it, and of its
    conditions those that read other elements are one comparison of the event's value with an
    expression of them (`b.value > a.value + 0.95`). Returns (the conditions on the event alone, the
    comparison's number, its operator with the event's value on the left, the threshold
    expression), or None."""
    if not matcher.monotone or element in matcher.kleene:
        return None
    for var in step.negations:  # a negation on the negated event alone, in the gap before this element
        negated = matcher.index[var]
        mine = [c for c in matcher.pattern.conditions if c.negation == var]
        if matcher.gaps[negated][1] != element or any(set(c.reads) != {var} for c in mine):
            return None
    unary, compared = [], []
    for text in step.conditions:
        number = matcher.number[text]
        if set(matcher.pattern.conditions[number].reads) == {step.element}:
            unary.append(text)
        else:
            compared.append(number)
    if len(compared) != 1:
        return None
    expression = matcher.expressions[compared[0]]
    operator, left, right = expression[0], expression[1], expression[2] if len(expression) > 2 else None
    if operator not in _FLIP or bare_kleene(expression, matcher.kleene):
        return None  # a closure read without an aggregate holds for each of its events: pairs decide
    mine = ("attr", element, "value")
    if left == mine and element not in reads(right)[0]:
        return tuple(unary), compared[0], operator, right
    if right == mine and element not in reads(left)[0]:
        return tuple(unary), compared[0], _FLIP[operator], left
    return None


def _bind_by_threshold(matcher, state, runs: Table, events: Table, step, element: int, search, high, last_id: int):
    """`_bind_next` for a step `_threshold_search` allows: each run's first candidate whose value
    passes its threshold, found by a binary search over range maxima (or minima) of the candidates'
    values, in about log2(candidates) vectorised steps for all runs at once. Its cost per event
    does not grow with the window or with the runs that wait in it (issue #38)."""
    unary, number, operator, threshold = search
    store = state.store
    events = matcher.test(events, unary, (), state)  # on the event alone: once per event, not per run
    if not size(events):
        runs["scan"] = np.maximum(runs["scan"], last_id)
        return runs, False
    # After the run's last event in time (`->`: equal times never follow each other), after its
    # scan, before the end of its window.
    after_end = np.searchsorted(store.ts, runs["end"], "right") + store.base - 1
    low = np.maximum(runs["scan"], after_end.astype(_I64))
    for var in step.negations:
        high = np.minimum(high, _before_violation(matcher, state, runs, var))
    order, first, counts = range_candidates(runs["grp"], low, high, events["grp"], events[f"e{element}"])
    limits, divided = value_of(threshold, Frame(runs, store, state.closures, matcher.kleene))
    values = store.value[events[f"e{element}"][order] - store.base]
    if np.isnan(values).any():  # a NaN passes no comparison: it must not stop a search
        values = np.where(np.isnan(values), -np.inf if operator in (">", ">=") else np.inf, values)
    divided = divided | np.isnan(limits)
    at = _first_passing(values, operator, limits, first, first + counts)
    found_mask = (at < first + counts) & ~divided
    state.tested[number] += size(runs)
    state.passed[number] += int(found_mask.sum())
    runs["scan"] = np.maximum(runs["scan"], last_id)
    bound = np.flatnonzero(found_mask)
    if not len(bound):
        return runs, False
    rows = order[at[bound]]
    return _moved_on(matcher, runs, events, bound, rows, element, runs["start"][bound], events["end"][rows]), True


def _before_violation(matcher, state, runs: Table, var: str) -> np.ndarray:
    """Per run, the first id its next event may not have under the negation `var` (on the negated
    event alone): past the time of the first event after the run's last that violates it (an event
    at that very time may still be bound: the gap is open at both ends)."""
    negated = matcher.index[var]
    store = state.store
    low = matcher._last_ts(matcher.gaps[negated][0], runs, state)
    begin = int(np.searchsorted(store.ts, low.min(), "right"))
    rows = begin + np.flatnonzero(store.k[begin:] == matcher.stream[negated])
    mine = [c for c, condition in enumerate(matcher.pattern.conditions) if condition.negation == var]
    rows = matcher.passing_alone(negated, rows, mine, state)
    end = np.full(size(runs), store.end, _I64)
    if not len(rows):
        return end
    top = np.full(size(runs), int(store.ts[-1]) + 1, _I64)
    order, first, counts = range_candidates(runs["grp"], low, top, store.grp[rows], store.ts[rows])
    hit = np.flatnonzero(counts)
    violation = store.ts[rows[order[first[hit]]]]
    end[hit] = np.searchsorted(store.ts, violation, "right") + store.base
    return end


def _first_passing(values: np.ndarray, operator: str, limits: np.ndarray, low: np.ndarray, high: np.ndarray):
    """Per query i, the first j in [low[i], high[i]) with `values[j] operator limits[i]` (high[i]
    where none): a jump over each block of 2^k values that holds none (its maximum, or minimum,
    says so), for k from the largest down, over a table of block extremes."""
    n = len(values)
    passes = _PASSES[operator]
    reduce = np.maximum if operator in (">", ">=") else np.minimum
    levels = [values]
    while (1 << len(levels)) <= n:
        width = 1 << (len(levels) - 1)
        previous = levels[-1]
        levels.append(reduce(previous[:-width], previous[width:]))
    at = low.copy()
    for k in range(len(levels) - 1, -1, -1):
        table = levels[k]
        fits = at + (1 << k) <= high
        index = np.minimum(at, len(table) - 1)
        none = ~passes(table[index], limits)  # no value of the block passes (its extreme does not)
        at = np.where(fits & none & (at < len(table)), at + (1 << k), at)
    return at


def _qualifying(matcher, state, runs: Table, events: Table, li, ri, element: int, step):
    """The (run, candidate) pairs whose event qualifies for `step`: in the window, after the run
    (its link), passing the step's conditions and negations. Conditions read the bound events
    only, so they are tested on those columns alone. Returns li, ri and the pairs' intervals."""
    ok = events["max"][ri] - runs["min"][li] < matcher.within
    li, ri = li[ok], ri[ok]
    if matcher.monotone:
        keep = runs["end"][li] < events["start"][ri]
        start, end = runs["start"][li], events["end"][ri]
    else:
        keep, start, end = _link(matcher.links[element], runs, events, li, ri)
    li, ri, start, end = li[keep], ri[keep], start[keep], end[keep]
    if not len(li) or not (step.conditions or step.negations):
        return li, ri, start, end
    bound = {"grp": runs["grp"][li], "min": np.minimum(runs["min"][li], events["min"][ri]),
             "max": np.maximum(runs["max"][li], events["max"][ri])}
    for i in matcher.positives:
        names = (f"e{i}", f"o{i}", f"n{i}") if i in matcher.kleene else (f"e{i}",)
        for name in names:
            bound[name] = runs[name][li]
    bound[f"e{element}"] = events[f"e{element}"][ri]
    if element in matcher.kleene:
        bound[f"o{element}"] = events[f"o{element}"][ri] if f"o{element}" in events else np.zeros(len(ri), _I64)
        bound[f"n{element}"] = np.ones(len(ri), _I64)
    bound["_pair"] = np.arange(len(li), dtype=_I64)
    passed = matcher.test(bound, step.conditions, step.negations, state)
    kept = passed["_pair"] if size(passed) else np.empty(0, _I64)
    return li[kept], ri[kept], start[kept], end[kept]


def _pairs(matcher, runs: Table, events: Table, li, ri, element: int) -> Table:
    """Each (run, candidate event) as a partial match with the event bound to `element`."""
    pairs = take(runs, li)
    pairs[f"e{element}"] = events[f"e{element}"][ri]
    if matcher.elements[element].kleene:
        pairs[f"o{element}"] = events[f"o{element}"][ri] if f"o{element}" in events else np.zeros(len(ri), _I64)
        pairs[f"n{element}"] = np.ones(len(ri), _I64)
    pairs["min"] = np.minimum(runs["min"][li], events["min"][ri])
    pairs["max"] = np.maximum(runs["max"][li], events["max"][ri])
    pairs["lseq"] = events["lseq"][ri]
    return pairs


def _link(link, runs: Table, events: Table, li, ri):
    keep = np.zeros(len(li), bool)
    start = np.empty(len(li), _I64)
    end = np.empty(len(li), _I64)
    for n, (a, b) in enumerate(zip(li.tolist(), ri.tolist())):
        left = Composite(int(runs["start"][a]), int(runs["end"][a]), int(runs["min"][a]), int(runs["max"][a]))
        right = Composite(int(events["start"][b]), int(events["end"][b]), int(events["min"][b]),
                          int(events["max"][b]))
        if link.Q(left, right):
            keep[n] = True
            start[n], end[n] = link.F(left, right)
    return keep, start, end


def _sweep_closures(matcher, state, runs: Table, candidates: dict, steps, position: int, last_id: int):
    """`_walk_closures` for all runs at once, where the event that ends a closure does not depend
    on the closure (the next step's conditions do not read the closure's element, and no negation
    waits there) and the closure's own conditions read its event alone: then a run's closure ends
    at the first event that qualifies for the next step (`_bind_next`: a search, or pairs), and takes
    every qualifying event of its stream before that, one per time. None where that does not hold,
    or where an event that ends a closure comes at the time of one the closure took (the walk
    decides those, event by event)."""
    element = matcher.index[steps[position].element]
    step = steps[position]
    following = steps[position + 1] if position + 1 < len(steps) else None
    var = steps[position].element
    reads = {c.text: set(c.reads) for c in matcher.pattern.conditions}
    if not matcher.monotone or (following is not None and (
            following.negations or any(var in reads[text] for text in following.conditions))):
        return None
    if any(reads[text] != {var} for text in step.closure):
        return None
    store, closures = state.store, state.closures
    # The closure's conditions, on each event of its stream once.
    own = matcher.test(candidates[element], step.closure, (), state, single=frozenset((element,)))
    high = _window_end(matcher, state, runs, last_id)
    ended = np.full(size(runs), -1, _I64)
    if following is not None:
        after = matcher.index[following.element]
        trial = dict(runs)
        trial["_row"] = np.arange(size(runs), dtype=_I64)
        bound, _ = _bind_next(matcher, state, trial, candidates, following, last_id)
        closed = bound["at"] > runs["at"][bound["_row"]] if size(bound) else np.zeros(0, bool)
        ended[bound["_row"][closed]] = bound[f"e{after}"][closed]
        high = np.where(ended >= 0, np.minimum(high, ended), high)
    # The closure's new events: its stream's qualifying events after the scan, before the end.
    if size(own):
        order, first, counts = range_candidates(runs["grp"], runs["scan"], high, own["grp"], own[f"e{element}"])
        li, ri = pairs_of(order, first, counts)
    else:
        li = ri = np.empty(0, _I64)
    ids = own[f"e{element}"][ri] if len(ri) else ri
    ts = store.ts[ids - store.base]
    later = ts > runs["max"][li]
    later[1:] &= ~((li[1:] == li[:-1]) & (ts[1:] == ts[:-1]))  # one event per time
    li, ids, ts = li[later], ids[later], ts[later]
    counts = np.bincount(li, minlength=size(runs)).astype(_I64)
    # An end at the time of the closure's last new event: not after it; the walk decides.
    last_at = np.cumsum(counts) - 1
    grew = counts > 0
    if following is not None and size(runs):
        end_ts = np.where(ended >= 0, store.ts[np.maximum(ended, store.base) - store.base], -1)
        if (grew & (ended >= 0) & (ts[np.maximum(last_at, 0)] == end_ts)).any() if len(ts) else False:
            return None
    moved = bool(grew.any())
    grown = dict(runs)
    if moved:
        lengths = runs[f"n{element}"]
        old = closures.members(runs[f"o{element}"], lengths)
        # Each run's closure, then its new events, laid out one run after another.
        total = lengths + counts
        flat = np.empty(int(total.sum()), _I64)
        starts = np.cumsum(total) - total
        flat[np.repeat(starts, lengths) + ranges(lengths)] = old
        flat[np.repeat(starts + lengths, counts) + ranges(counts)] = ids
        offsets = closures.add([flat], np.array([len(flat)], _I64))[0] + starts
        grown[f"o{element}"] = np.where(grew, offsets, runs[f"o{element}"]).astype(_I64)
        grown[f"n{element}"] = total.astype(_I64)
        last = ids[np.maximum(last_at, 0)] if len(ids) else np.zeros(size(runs), _I64)
        rows = last - store.base
        grown["max"] = np.where(grew, store.ts[rows] if len(ids) else runs["max"], runs["max"])
        grown["end"] = np.where(grew, store.ts[rows] if len(ids) else runs["end"], runs["end"])
        grown["lseq"] = np.where(grew, store.seq[rows] if len(ids) else runs["lseq"], runs["lseq"])
    grown["scan"] = np.maximum(runs["scan"], last_id)
    if following is None or not (ended >= 0).any():
        return grown, moved
    # Closed: the ending event bound to the next element, as _bind_next bound it (a step's
    # candidates are in id order: element_events keeps the store's).
    closing = np.flatnonzero(ended >= 0)
    events = candidates[after]
    at = np.searchsorted(events[f"e{after}"], ended[closing])
    return _moved_on(matcher, grown, events, closing, at, after, grown["start"][closing], events["end"][at]), True


def _walk_closures(matcher, state, runs: Table, candidates: dict, steps, position: int, last_id: int):
    """Runs at an open Kleene closure, event by event: the earliest event that qualifies for the
    next element ends the closure (and is bound to it); a qualifying event of the closure's own
    stream joins it; any other event is passed over."""
    element = matcher.index[steps[position].element]
    following = steps[position + 1] if position + 1 < len(steps) else None
    store, within = state.store, matcher.within
    own = candidates[element]
    after = matcher.index[following.element] if following is not None else None
    nxt = candidates[after] if after is not None else {}
    out, moved = [], False
    # Each run's options: the events of its key after its scan and within `within` of its first
    # (binary searches in the candidates sorted by key and id, not a pass over them all per run).
    high = _window_end(matcher, state, runs, last_id)
    sides = []
    for kind, table, at in (("next", nxt, after), ("own", own, element)):
        if size(table):
            order, first, counts = range_candidates(runs["grp"], runs["scan"], high, table["grp"], table[f"e{at}"])
            sides.append((kind, table[f"e{at}"], order, first, counts))
    for row in range(size(runs)):
        run = take(runs, np.array([row]))
        options = []
        for kind, ids, order, first, counts in sides:
            mine = order[first[row]:first[row] + counts[row]]
            options += [(i, kind, j) for i, j in zip(ids[mine].tolist(), mine.tolist())]
        options.sort(key=lambda option: (option[0], option[1] != "next"))
        closed = False
        for event_id, kind, index in options:
            ts = int(store.ts[event_id - store.base])
            if ts - int(run["min"][0]) >= within:
                break
            if kind == "next":
                ended = _closed_then_bound(matcher, state, run, nxt, index, following)
                if ended is not None:
                    run, moved, closed = ended, True, True
                    break
                continue
            if ts <= int(run["max"][0]):
                continue
            grown = _grow(matcher, state, run, own, index, element, steps[position].closure)
            if grown is not None:
                run = grown
                moved = True
        if not closed:  # every new event of its key was looked at
            run["scan"] = np.array([max(int(run["scan"][0]), last_id)], _I64)
        out.append(run)
    return concat(out), moved


def _closed_then_bound(matcher, state, run: Table, events: Table, index: int, step) -> Table | None:
    """The run with its closure closed and the event `index` of `events` bound to the next
    element, if the event qualifies for it."""
    element = matcher.index[step.element]
    li, ri = np.array([0]), np.array([index])
    if events["max"][index] - run["min"][0] >= matcher.within:
        return None
    pair = _pairs(matcher, run, events, li, ri, element)
    if matcher.monotone:
        if not run["end"][0] < events["start"][index]:
            return None
        pair["start"], pair["end"] = run["start"], events["end"][ri]
    else:
        keep, start, end = _link(matcher.links[element], run, events, li, ri)
        if not keep[0]:
            return None
        pair["start"], pair["end"] = start, end
    pair = matcher.test(pair, step.conditions, step.negations, state)
    if not size(pair):
        return None
    pair["at"] = run["at"] + 1
    pair["open"] = np.array([int(matcher.elements[element].kleene)], _I64)
    pair["scan"] = pair[f"e{element}"].copy()
    return pair


def _grow(matcher, state, run: Table, events: Table, index: int, element: int,
          conditions: tuple[str, ...]) -> Table | None:
    """The run with event `index` appended to its open closure, if it passes the closure's conditions
    (tested on the new event: the closure's earlier events passed them already)."""
    single = dict(run)
    single[f"e{element}"] = events[f"e{element}"][[index]]
    single[f"o{element}"] = np.zeros(1, _I64)
    single[f"n{element}"] = np.ones(1, _I64)
    if conditions:
        frame_table = dict(single)
        frame = Frame(frame_table, state.store, state.closures, matcher.kleene)
        frame.single = {element}
        for c in (matcher.number[text] for text in conditions):
            ok = holds(matcher.expressions[c], frame)
            state.tested[c] += 1
            state.passed[c] += int(ok[0])
            if not ok[0]:
                return None
    offset, length = int(run[f"o{element}"][0]), int(run[f"n{element}"][0])
    members = state.closures.ids[offset:offset + length]
    added = events[f"e{element}"][index]
    new_offset = state.closures.add([np.r_[members, added]], np.array([length + 1], _I64))
    grown = dict(run)
    grown[f"o{element}"], grown[f"n{element}"] = new_offset, np.array([length + 1], _I64)
    grown["max"], grown["end"], grown["lseq"] = events["max"][[index]], events["end"][[index]], events["lseq"][[index]]
    return grown
