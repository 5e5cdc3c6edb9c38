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

from sensorscript.runtime.state.cep.conditions import Frame, holds
from sensorscript.runtime.state.cep.operators import Composite
from sensorscript.runtime.state.cep.tables import Table, concat, range_join, size, take

_I64 = np.int64


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
    # Runs that can no longer be completed go.
    if size(runs):
        alive = runs["min"] + matcher.within > watermark
        runs = take(runs, alive)
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
            group, progressed = _walk_closures(matcher, state, group, candidates, steps, position, last_id)
            moved |= progressed
            parts.append(group)
    runs = concat(parts)
    return runs, done, moved


def _bind_next(matcher, state, runs: Table, candidates: dict, step, last_id: int):
    """Each run takes the earliest later event that qualifies for the element of `step`."""
    element = matcher.index[step.element]
    events = candidates[element]
    if not size(events):
        runs["scan"] = np.maximum(runs["scan"], last_id)
        return runs, False

    within = matcher.within
    # A run looks no further than `within` from its first event: the store holds the events in time
    # order, so the first id at or past min + within bounds its candidates (without this bound every
    # run paired with every later candidate of the batch: memory grew with the square of a key's
    # events in one batch, issue #38).
    store = state.store
    high = np.minimum(np.searchsorted(store.ts, runs["min"] + within, "left") + store.base, last_id + 1)
    li, ri = range_join(runs["grp"], runs["scan"], high.astype(_I64), events["grp"], events[f"e{element}"])
    ok = events["max"][ri] - runs["min"][li] < within
    li, ri = li[ok], ri[ok]
    pairs = _pairs(matcher, runs, events, li, ri, element)
    link = matcher.links[element]
    if matcher.monotone:
        keep = runs["end"][li] < events["start"][ri]
        start, end = runs["start"][li], events["end"][ri]
    else:
        keep, start, end = _link(link, runs, events, li, ri)
    pairs = take(pairs, keep)
    li, ri, start, end = li[keep], ri[keep], start[keep], end[keep]
    pairs["start"], pairs["end"] = start, end
    pairs["_row"] = li
    pairs = matcher.test(pairs, step.conditions, step.negations, state) if size(pairs) else pairs
    runs["scan"] = np.maximum(runs["scan"], last_id)
    if not size(pairs):
        return runs, False
    # The earliest qualifying candidate per run: pairs are in (run, event id) order.
    rows = pairs["_row"]
    firsts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
    chosen = take(pairs, firsts)
    bound = chosen.pop("_row")
    kleene = matcher.elements[element].kleene
    chosen["at"] = runs["at"][bound] + 1
    chosen["open"] = np.full(len(bound), int(kleene), _I64)
    chosen["scan"] = chosen[f"e{element}"].copy()
    rest = np.ones(size(runs), bool)
    rest[bound] = False
    return concat([take(runs, rest), chosen]), True


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
    for row in range(size(runs)):
        run = take(runs, np.array([row]))
        scan, key = int(run["scan"][0]), int(run["grp"][0])
        options = []
        if size(nxt):
            mask = (nxt["grp"] == key) & (nxt[f"e{after}"] > scan)
            options += [(int(i), "next", j) for i, j in zip(nxt[f"e{after}"][mask], np.flatnonzero(mask))]
        if size(own):
            mask = (own["grp"] == key) & (own[f"e{element}"] > scan)
            options += [(int(i), "own", j) for i, j in zip(own[f"e{element}"][mask], np.flatnonzero(mask))]
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
