"""Strategy `next` (skip-till-next-match) as runs: the operator tree is a left-deep chain.

Each event that qualifies for the first element starts one run. A run waiting for a plain element
takes the earliest later event that qualifies for it: its stream, the link (`->`: after the run's
end), the window, and the conditions and negations the compiler scheduled for that element (each
is tested as soon as the variables it reads are bound). A run at a Kleene element keeps taking
qualifying events of its stream until the earliest event that qualifies for the element after it,
which ends the closure; a trailing closure ends with the window. The search for plain elements
is vectorised over all runs and their candidate events; a Kleene closure is swept for all runs at
once (`_sweep_closures`: its events counted by binary searches where its conditions read its event
alone, tested as (run, event) pairs where they read other elements; `_closed_by_reading` where the
next step reads it); it is walked event by event under a registered link other than `->`, or where
the event that ends a closure swept as a range shares a time with one the closure took.

A closure swept on its event alone is kept open as a range, not as its events (`o{i}` = -1): its first event
`e{i}`, its last `l{i}` and its length `n{i}`; its events are its first, then each qualifying event
of its stream after it up to its last (the first of each time). The runs of one key that wait at
a closure hold suffixes of one sequence of events, so ranges keep a run's state constant in the
closure's length; the events are written to the closure store when the match is whole (or a later
step reads the closure), from the event store, which keeps them while a run needs them (issue #38).
"""

from __future__ import annotations

import numpy as np

from sensorscript.runtime.state.cep.conditions import Frame, bare_kleene, holds, reads, value_of
from sensorscript.runtime.state.cep.operators import Composite
from sensorscript.runtime.state.cep.tables import (BUDGET, Table, blocks, concat, pairs_of, range_candidates, ranges,
                                                   segment_keys, size, take)
from sensorscript.runtime.state.kernels.sorting import stable_order

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
    for i in matcher.kleene:  # runs saved before closures were kept as ranges
        if size(state.runs) and f"l{i}" not in state.runs:
            state.runs[f"l{i}"] = state.runs[f"e{i}"].copy()
    first = steps[0]
    started = _bind_first(matcher, state, candidates[matcher.index[first.element]], first)
    runs = concat([state.runs, started]) if size(state.runs) else started
    if size(started) and size(state.runs):  # in key order, oldest first within a key: the searches
        runs = take(runs, stable_order(runs["grp"]))  # below look up the runs' keys in that order
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
        runs = take(runs, runs["min"] + matcher.within > watermark)
        if size(runs) > matcher.pattern.limit:  # oldest first within a key (by start event): the cap keeps those
            runs = take(runs, np.lexsort((runs[f"e{matcher.index[steps[0].element]}"], runs["grp"])))
        runs = matcher.cap(runs, {}, state)
    state.runs = runs
    whole = _stripped(matcher, _stored(matcher, state, concat(whole)))
    return matcher.check_final(whole, state) if not matcher.trailing else whole


def _stripped(matcher, table: Table) -> Table:
    """A whole match as the other strategies make it: without the columns of runs."""
    drop = {"at", "open", "scan", *(f"l{i}" for i in matcher.kleene)}
    return {k: v for k, v in table.items() if k not in drop} if size(table) else {}


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
            runs[f"l{i}"] = runs[f"e{i}"].copy()
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
    # A run that has looked at every event so far (it waited this step through) has nothing to do.
    looked = runs["scan"] >= last_id if size(runs) else np.zeros(0, bool)
    parts = [take(runs, looked)]
    for position in range(len(steps)):
        # Runs whose last bound element is `position`: waiting for the next (plain), or open (Kleene).
        waiting = (at == position) & ~open_ & ~looked
        if waiting.any() and position < final:
            group = take(runs, waiting)
            group, progressed = _bind_next(matcher, state, group, candidates, steps[position + 1], last_id)
            moved |= progressed
            parts.append(group)
        opened = (at == position) & open_ & ~looked
        if opened.any():
            group = take(runs, opened)
            swept = _sweep_closures(matcher, state, group, candidates, steps, position, last_id)
            group, progressed = swept if swept is not None else \
                _walk_closures(matcher, state, _stored(matcher, state, group), candidates, steps, position, last_id)
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


def _bind_next(matcher, state, runs: Table, candidates: dict, step, last_id: int, grown: dict | None = None):
    """Each run takes the earliest later event that qualifies for the element of `step`.

    A run looks no further than `within` from its first event (the store holds the events in time
    order: a binary search bounds its candidates), and at those a few at a time: its first
    `FIRST_LOOK` candidates, then four times as many, and so on, until one qualifies. A run that
    finds its event early costs that much, however long the window or the batch; the pairs tested
    at once are at most `BUDGET`, so a window of many waiting runs costs time, never the worker's
    memory (issue #38). `grown`: the runs' open closure has grown past some candidates (see
    `_grown_before`); each candidate is tested with the closure as it stood before it."""
    element = matcher.index[step.element]
    events = candidates[element]
    if not size(events):
        runs["scan"] = np.maximum(runs["scan"], last_id)
        return runs, False
    high = _window_end(matcher, state, runs, last_id)
    search = _threshold_search(matcher, step, element) if grown is None else None
    if search is not None:
        return _bind_by_threshold(matcher, state, runs, events, step, element, search, high, last_id)
    events = _plausible(matcher, state, runs, events, step.conditions, element)
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
            li, ri, start, end = _qualifying(matcher, state, runs, events, li, ri, element, step, grown)
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
    if bare_kleene(expression, matcher.kleene):
        return None  # a closure read without an aggregate holds for each of its events: pairs decide
    comparison = _comparison(expression, element)
    return None if comparison is None else (tuple(unary), compared[0], *comparison)


def _comparison(expression: tuple, element: int):
    """(operator, other side) if `expression` compares the value of `element`'s event with an
    expression that does not read it, the operator read with the event's value on the left; else
    None."""
    if expression[0] not in _FLIP or len(expression) != 3:
        return None
    mine, (operator, left, right) = ("attr", element, "value"), expression
    if left == mine and element not in reads(right)[0]:
        return operator, right
    if right == mine and element not in reads(left)[0]:
        return _FLIP[operator], left
    return None


def _plausible(matcher, state, runs: Table, events: Table, conditions, element: int) -> Table:
    """The candidates for `element` that some run may take: for each of the `conditions` that
    compares the event's value with an expression of other plain elements (`c.value > a.value +
    0.95` beside `count(b) >= 3`), those whose value passes at least the loosest run's threshold.
    The pairs then test every condition as before; the others could pass with no run."""
    store = state.store
    for text in conditions:
        comparison = _comparison(matcher.expressions[matcher.number[text]], element)
        if comparison is None or reads(comparison[1])[0] & matcher.kleene:
            continue
        operator, other = comparison
        limits, divided = value_of(other, Frame(runs, store, state.closures, matcher.kleene))
        live = limits[~(divided | np.isnan(limits))]
        values = store.value[events[f"e{element}"] - store.base]
        if not len(live):
            return take(events, np.zeros(len(values), bool))
        events = take(events, _PASSES[operator](values, live.min() if operator in (">", ">=") else live.max()))
    return events


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
    # scan, before the end of its window. Only a run whose scan is not past its end's time needs
    # the search (a run that waited a slice is past it: slices end where a time does).
    low = runs["scan"].copy()
    near = np.flatnonzero(store.ts[low - store.base] <= runs["end"])
    after_end = np.searchsorted(store.ts, runs["end"][near], "right") + store.base - 1
    low[near] = np.maximum(low[near], after_end.astype(_I64))
    for var in step.negations:
        high = np.minimum(high, _before_violation(matcher, state, runs, var))
    limits, divided = value_of(threshold, Frame(runs, store, state.closures, matcher.kleene))
    divided = divided | np.isnan(limits)
    # A candidate that passes no run's threshold (nor a NaN, which passes no comparison) is no
    # run's next event: only the others are searched (a spike's few, not the slice's every event).
    live = limits[~divided]
    values = store.value[events[f"e{element}"] - store.base]
    if len(live):
        passing = _PASSES[operator](values, live.min() if operator in (">", ">=") else live.max())
    else:
        passing = np.zeros(len(values), bool)
    events, values = take(events, passing), values[passing]
    order, first, counts = range_candidates(runs["grp"], low, high, events["grp"], events[f"e{element}"])
    at = _first_passing(values[order], operator, limits, first, first + counts)
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
    widest = int((high - low).max()) if len(low) else 0  # blocks no wider than the widest range
    passes = _PASSES[operator]
    reduce = np.maximum if operator in (">", ">=") else np.minimum
    levels = [values]
    while (1 << len(levels)) <= min(len(values), widest):
        width = 1 << (len(levels) - 1)
        previous = levels[-1]
        levels.append(reduce(previous[:-width], previous[width:]))
    # First the queries whose whole range holds a passing value (its extreme, from two blocks that
    # cover it): most runs wait for a value that never comes, and cost two lookups a slice.
    width = high - low
    some = np.flatnonzero(width > 0)
    k = np.zeros(len(some), np.int64)
    if len(some):
        k = np.floor(np.log2(width[some])).astype(np.int64)
    hit = np.zeros(len(some), bool)
    for level in np.unique(k).tolist():
        mine = np.flatnonzero(k == level)
        rows = some[mine]
        table = levels[level]
        extreme = reduce(table[low[rows]], table[high[rows] - (1 << level)])
        hit[mine] = passes(extreme, limits[rows])
    at = high.copy()
    rows = some[hit]
    found, top, limit = low[rows], high[rows], limits[rows]
    for level in range(len(levels) - 1, -1, -1):
        table = levels[level]
        fits = found + (1 << level) <= top
        index = np.minimum(found, len(table) - 1)
        none = ~passes(table[index], limit)  # no value of the block passes (its extreme does not)
        found = np.where(fits & none & (found < len(table)), found + (1 << level), found)
    at[rows] = found
    return at


def _qualifying(matcher, state, runs: Table, events: Table, li, ri, element: int, step, grown: dict | None = None):
    """The (run, candidate) pairs whose event qualifies for `step`: in the window, after the run
    (its link), passing the step's conditions and negations. Conditions read the bound events
    only, so they are tested on those columns alone. Returns li, ri and the pairs' intervals.
    `grown`: the runs' open closure as it stood before each candidate (`_grown_before`)."""
    ok = events["max"][ri] - runs["min"][li] < matcher.within
    li, ri = li[ok], ri[ok]
    if grown is not None:  # the closure up to the candidate: its length, its last event's time
        lengths, last = _grown_before(state, grown, runs["_row"][li], events[f"e{element}"][ri])
        keep = state.store.ts[last - state.store.base] < events["start"][ri]
        start, end = runs["start"][li], events["end"][ri]
    elif matcher.monotone:
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
    if grown is not None:
        bound[f"n{grown['element']}"] = lengths[keep]
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
        pairs[f"l{element}"] = pairs[f"e{element}"].copy()
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
    waits there): then a run's closure ends at the first event that qualifies for the next step
    (`_bind_next`: a search, or pairs), and takes every qualifying event of its stream before that,
    one per time. None where that does not hold, or where an event that ends a closure comes at
    the time of one the closure took (the walk decides those, event by event).

    Where the closure's conditions read its event alone, its events do not depend on the run: the
    closure is kept as a range (see the module's notes). Where they read the run's other elements
    too (`c.value > a.value`), each run's new events are tested as (run, event) pairs, `BUDGET` at
    a time, and the closure is kept as its events."""
    element = matcher.index[steps[position].element]
    step = steps[position]
    following = steps[position + 1] if position + 1 < len(steps) else None
    var = steps[position].element
    reads = {c.text: set(c.reads) for c in matcher.pattern.conditions}
    if not matcher.monotone:
        return None
    alone = [text for text in step.closure if reads[text] == {var}]
    others = [text for text in step.closure if reads[text] != {var}]
    store = state.store
    # The closure's conditions on its event alone, on each event of its stream once.
    own = matcher.test(candidates[element], alone, (), state, single=frozenset((element,)))
    high = _window_end(matcher, state, runs, last_id)
    if following is not None and (following.negations or any(var in reads[text] for text in following.conditions)):
        return _closed_by_reading(matcher, state, runs, candidates, steps, position, last_id, own, others, high)
    ended = np.full(size(runs), -1, _I64)
    if following is not None:
        after = matcher.index[following.element]
        trial = dict(runs)
        trial["_row"] = np.arange(size(runs), dtype=_I64)
        bound, _ = _bind_next(matcher, state, trial, candidates, following, last_id)
        closed = bound["at"] > runs["at"][bound["_row"]] if size(bound) else np.zeros(0, bool)
        ended[bound["_row"][closed]] = bound[f"e{after}"][closed]
        high = np.where(ended >= 0, np.minimum(high, ended), high)
    if others:
        grew, last, grown = _grown_by_pairs(matcher, state, runs, own, element, others, high)
    else:
        grew, last, grown, _ = _grown_as_range(state, runs, own, element, high)
    # An end at the time of the closure's last new event: not after it; the walk decides.
    if following is not None and grew.any():
        end_ts = np.where(ended >= 0, store.ts[np.maximum(ended, store.base) - store.base], -1)
        if (grew & (ended >= 0) & (store.ts[last - store.base] == end_ts)).any():
            return None
    moved = bool(grew.any())
    grown["scan"] = np.maximum(runs["scan"], last_id)
    if following is None or not (ended >= 0).any():
        return grown, moved
    # Closed: the ending event bound to the next element, as _bind_next bound it (a step's
    # candidates are in id order: element_events keeps the store's). A closure a later step
    # reads is written out now; else it stays a range until the match is whole.
    closing = np.flatnonzero(ended >= 0)
    events = candidates[after]
    at = np.searchsorted(events[f"e{after}"], ended[closing])
    runs = _moved_on(matcher, grown, events, closing, at, after, grown["start"][closing], events["end"][at])
    if _read_later(matcher, steps, position):
        runs = _stored(matcher, state, runs)
    return runs, True


def _grown_as_range(state, runs: Table, own: Table, element: int, high: np.ndarray):
    """Closures whose events are their stream's qualifying events (`own`: the closure's conditions
    read the event alone), grown as ranges: per run, the events of `own` after its scan and its
    last event's time (the first of each time), before `high`, counted by binary searches among
    them sorted by key and id (a key's ids follow time), never paired with the runs. Returns
    whether each run grew, its new last event, the runs with their closures as ranges, and the new
    events (for `_grown_before`: run i's are ids[starts[i]:starts[i] + counts[i]])."""
    store = state.store
    ids, grp = (own[f"e{element}"], own["grp"]) if size(own) else (np.empty(0, _I64), np.empty(0, _I64))
    order = stable_order(grp)
    ids, grp = ids[order], grp[order]
    ts = store.ts[ids - store.base]
    first_of_time = _first_of_each_time(grp, ts)
    ids, grp, ts = ids[first_of_time], grp[first_of_time], ts[first_of_time]
    by_id, after_scan, before_end = segment_keys([grp, runs["grp"], runs["grp"]], [ids, runs["scan"], high])
    by_ts, after_last = segment_keys([grp, runs["grp"]], [ts, runs["max"]])
    low = np.maximum(np.searchsorted(by_id, after_scan, "right"), np.searchsorted(by_ts, after_last, "right"))
    top = np.searchsorted(by_id, before_end, "left")
    counts = np.maximum(top - low, 0)
    grew = counts > 0
    last = ids[np.where(grew, top - 1, 0)] if len(ids) else np.zeros(size(runs), _I64)
    grown = _with_last(store, runs, grew, last)
    # Every closure here a range (o = -1): its last event, then its new ones counted.
    previous = _closure_last(state, runs, element)
    grown[f"o{element}"] = np.full(size(runs), -1, _I64)
    grown[f"l{element}"] = np.where(grew, last, previous).astype(_I64)
    grown[f"n{element}"] = (runs[f"n{element}"] + counts).astype(_I64)
    new = {"ids": ids, "groups": grp, "starts": low, "counts": counts, "group": runs["grp"],
           "n": runs[f"n{element}"], "last": previous}
    return grew, last, grown, new


def _grown_by_pairs(matcher, state, runs: Table, own: Table, element: int, conditions: list[str],
                    high: np.ndarray):
    """Closures whose conditions read the run's other elements, grown by `_new_events` (kept as
    their events). Returns whether each run grew, its new last event, and the runs grown."""
    return _grown_by(state, runs, element, *_new_events(matcher, state, runs, own, element, conditions, high))


def _new_events(matcher, state, runs: Table, own: Table, element: int, conditions: list[str], high: np.ndarray):
    """Each run's new closure events: its candidates (the events of `own` after its scan and its
    last event's time, before `high`) that pass `conditions` (which read the run's other elements
    too), tested as (run, event) pairs `BUDGET` at a time; the first passing event of each time.
    Returns (run rows, event ids), in run, then id order."""
    store = state.store
    taken_runs, taken_ids = [], []
    own = _plausible(matcher, state, runs, own, conditions, element) if size(own) else own
    if size(own):
        order, first, counts = range_candidates(runs["grp"], runs["scan"], high, own["grp"], own[f"e{element}"])
        for block in blocks(counts, BUDGET):
            li, ri = pairs_of(order, first, counts, block)
            ids = own[f"e{element}"][ri]
            later = store.ts[ids - store.base] > runs["max"][li]
            li, ids = li[later], ids[later]
            if not len(li):
                continue
            if conditions:
                pairs = take(runs, li)
                pairs[f"e{element}"] = ids
                pairs["_pair"] = np.arange(len(li), dtype=_I64)
                passed = matcher.test(pairs, tuple(conditions), (), state, single=frozenset((element,)))
                kept = passed["_pair"] if size(passed) else np.empty(0, _I64)
                li, ids = li[kept], ids[kept]
            taken_runs.append(li)
            taken_ids.append(ids)
    li = np.concatenate(taken_runs) if taken_runs else np.empty(0, _I64)
    ids = np.concatenate(taken_ids) if taken_ids else np.empty(0, _I64)
    first_of_time = _first_of_each_time(li, store.ts[ids - store.base])
    return li[first_of_time], ids[first_of_time]


def _grown_by(state, runs: Table, element: int, li: np.ndarray, ids: np.ndarray):
    """The runs' closures (kept as their events) with the new events `ids` of runs `li` appended.
    Returns whether each run grew, its new last event, and the runs grown."""
    closures = state.closures
    counts = np.bincount(li, minlength=size(runs)).astype(_I64)
    grew = counts > 0
    last_at = np.cumsum(counts) - 1
    last = ids[np.maximum(last_at, 0)] if len(ids) else np.zeros(size(runs), _I64)
    grown = _with_last(state.store, runs, grew, last)
    if grew.any():
        # Each run's closure, then its new events, laid out one run after another.
        lengths = runs[f"n{element}"]
        old = closures.members(runs[f"o{element}"], lengths)
        total = lengths + counts
        flat = np.empty(int(total.sum()), _I64)
        starts = np.cumsum(total) - total
        flat[np.repeat(starts, lengths) + ranges(lengths)] = old
        flat[np.repeat(starts + lengths, counts) + ranges(counts)] = ids
        offsets = closures.add([flat], np.array([len(flat)], _I64))[0] + starts
        grown[f"o{element}"] = np.where(grew, offsets, runs[f"o{element}"]).astype(_I64)
        grown[f"n{element}"] = total.astype(_I64)
        grown[f"l{element}"] = np.where(grew, last, runs[f"l{element}"]).astype(_I64)
    return grew, last, grown


def _closed_by_reading(matcher, state, runs: Table, candidates: dict, steps, position: int, last_id: int,
                       own: Table, others: list[str], high: np.ndarray):
    """The sweep where the next step reads the closure (`count(b) >= 3`) or a negation waits
    after it, so the event that ends a closure depends on it: every run's closure is first grown
    to the end of its window in the slice (kept as its events), then the next step's candidates
    are tested as pairs, each with the closure as it stood before it (a prefix of the grown one:
    its length and last event, `_grown_before`). A run's closure ends at its first candidate that
    qualifies so; the events the closure took after it are dropped with the prefix."""
    element = matcher.index[steps[position].element]
    following = steps[position + 1]
    after = matcher.index[following.element]
    store = state.store
    counted = not others and not following.negations and all(
        _counted_only(matcher.expressions[matcher.number[text]], element) for text in following.conditions)
    if counted:  # its conditions on its event alone, and the next step reads its length alone: a range
        grew, last, grown, grown_before = _grown_as_range(state, runs, own, element, high)
    else:
        runs = _stored(matcher, state, runs)
        li, ids = _new_events(matcher, state, runs, own, element, others, high)
        counts = np.bincount(li, minlength=size(runs)).astype(_I64)
        grown_before = {"ids": ids, "groups": li, "starts": np.cumsum(counts) - counts, "counts": counts,
                        "group": np.arange(size(runs), dtype=_I64), "n": runs[f"n{element}"],
                        "last": _closure_last(state, runs, element)}
        grew, last, grown = _grown_by(state, runs, element, li, ids)
    grown_before["element"] = element
    grown["_row"] = np.arange(size(runs), dtype=_I64)
    bound, closed = _bind_next(matcher, state, grown, candidates, following, last_id, grown_before)
    moved = bound["at"] > runs["at"][bound["_row"]]
    if moved.any():  # the closed runs keep the closure as it stood before their event, which is their last
        lengths, ended = _grown_before(state, grown_before, bound["_row"][moved], bound[f"e{after}"][moved])
        latest = store.ts[bound[f"e{after}"][moved] - store.base]
        for name, column in ((f"n{element}", lengths), (f"l{element}", ended), ("max", latest)):
            bound[name] = bound[name].copy()
            bound[name][moved] = column
        if counted and _read_later(matcher, steps, position):
            bound = concat([take(bound, ~moved), _stored(matcher, state, take(bound, moved))])
    del bound["_row"]
    return bound, bool(grew.any() or closed)


def _counted_only(expression, element: int) -> bool:
    """Whether `expression` reads `element` only as `count(element)`."""
    if not isinstance(expression, tuple) or not expression:
        return True
    if expression[0] == "call" and expression[1] == "count":
        return True
    if expression[0] in ("attr", "var"):
        return expression[1] != element
    return all(_counted_only(e, element) for e in expression[1:])


def _grown_before(state, grown: dict, rows: np.ndarray, before: np.ndarray):
    """Per (run row, event id): the length and the last event of the run's open closure as it
    stood before that event (`_closed_by_reading`: its old events, then its new ones before it).
    The new events are `ids`, sorted by (`groups`, id); run i's are ids[starts[i]:starts[i] +
    counts[i]], of group `group[i]` (its row, or its key for closures kept as ranges)."""
    ids, starts, counts = grown["ids"], grown["starts"], grown["counts"]
    keys, queries = segment_keys([grown["groups"], grown["group"][rows]], [ids, before])
    taken = np.clip(np.searchsorted(keys, queries, "left") - starts[rows], 0, counts[rows])
    last = np.where(taken > 0, ids[np.maximum(starts[rows] + taken - 1, 0)] if len(ids) else 0, grown["last"][rows])
    return grown["n"][rows] + taken, last


def _first_of_each_time(groups: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """Over events sorted by group (a key, a run) then id: whether each is the first of its group
    at its time (a closure takes one event per time)."""
    return np.r_[True, (groups[1:] != groups[:-1]) | (ts[1:] != ts[:-1])] if len(ts) else np.zeros(0, bool)


def _closure_last(state, runs: Table, element: int) -> np.ndarray:
    """Per run, the last event of its closure at `element`, kept as its events or as a range."""
    stored = runs[f"o{element}"] >= 0
    held = np.where(stored, runs[f"o{element}"] + runs[f"n{element}"] - 1, 0)
    return np.where(stored, state.closures.ids[held] if len(state.closures.ids) else 0, runs[f"l{element}"])


def _with_last(store, runs: Table, grew: np.ndarray, last: np.ndarray) -> Table:
    """The runs (a copy of the table) with the time and sequence number of each grown run's new
    last event."""
    grown = dict(runs)
    if grew.any():
        rows = last - store.base
        grown["max"] = np.where(grew, store.ts[rows], runs["max"])
        grown["end"] = np.where(grew, store.ts[rows], runs["end"])
        grown["lseq"] = np.where(grew, store.seq[rows], runs["lseq"])
    return grown


def _read_later(matcher, steps, position: int) -> bool:
    """Whether a later step reads the element of the closure at `position` (the step that closes
    it does not, or the closure would not be swept; its own closure's conditions may)."""
    var = steps[position].element
    texts = [t for step in steps[position + 1:] for t in (*step.conditions, *step.closure)]
    negated = {v for step in steps[position + 1:] for v in step.negations}
    return any(var in c.reads for c in matcher.pattern.conditions if c.text in texts or c.negation in negated)


def _stored(matcher, state, table: Table) -> Table:
    """The table with its closures kept as ranges (`o{i}` = -1) written to the closure store: each
    the range's first event, then the events of its element's stream from its first's time to its
    last that pass the closure's conditions (the first of each time), as the sweep took them."""
    for i in sorted(matcher.kleene):
        if not size(table) or f"o{i}" not in table:
            continue
        lazy = np.flatnonzero(table[f"o{i}"] < 0)
        if not len(lazy):
            continue
        store, closures = state.store, state.closures
        first, last = table[f"e{i}"][lazy], table[f"l{i}"][lazy]
        begin, stop = int(first.min()) - store.base + 1, int(last.max()) - store.base + 1
        rows = begin + np.flatnonzero(store.k[begin:max(begin, stop)] == matcher.stream[i])
        step = next(s for s in matcher.pattern.tree.steps if matcher.index[s.element] == i)
        rows = matcher.passing_alone(i, rows, [matcher.number[t] for t in step.closure], state)
        grp = store.grp[rows]
        rows = rows[stable_order(grp)]
        grp, ts = store.grp[rows], store.ts[rows]
        first_of_time = _first_of_each_time(grp, ts)
        ids, grp, ts = rows[first_of_time] + store.base, grp[first_of_time], ts[first_of_time]
        key = table["grp"][lazy]
        by_ts, after_first = segment_keys([grp, key], [ts, store.ts[first - store.base]])
        by_id, up_to_last = segment_keys([grp, key], [ids, last])
        low = np.searchsorted(by_ts, after_first, "right")
        counts = np.maximum(np.searchsorted(by_id, up_to_last, "right") - low, 0)
        lengths = counts + 1
        flat = np.empty(int(lengths.sum()), _I64)
        starts = np.cumsum(lengths) - lengths
        flat[starts] = first
        flat[np.repeat(starts + 1, counts) + ranges(counts)] = ids[np.repeat(low, counts) + ranges(counts)]
        table = dict(table)
        table[f"o{i}"], table[f"n{i}"] = table[f"o{i}"].copy(), table[f"n{i}"].copy()
        table[f"o{i}"][lazy] = closures.add([flat], np.array([len(flat)], _I64))[0] + starts
        table[f"n{i}"][lazy] = lengths
    return table


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
