"""Exact from when: the rule by which a computation an update started writes only exact rows.

A result row is exact or absent. A computation that ran before the update holds its whole past;
one that the update started (added, or restarted: moved, sliced anew) has seen the readings only
from the switch T on, and everything downstream of it sees only what it has emitted since. Each
node therefore has an *exact-from* time E: from E on, its output holds every tuple the workflows
compute over all the readings (tuples before E may be missing, never wrong). Nodes that ran
before the update, and every node of a job that never switched, have E = -infinity.

A node reads each input i only from s_i = max(E_i, T if the update started the node): what came
before was not seen whole. Then, by kind:

    sensor     a sensor first read here at the update: T (every reading from T on arrives after
               the switch, T being past every reading seen before it); a stream first forwarded
               to a later stage: the event time of the first tuple it receives (the stage that
               sends it forwards only tuples from its own E on)
    union      max s_i: every input is whole from there
    window     the first window starting at s or later (s = s_input): a window is emitted only if
               it starts at s or later, so it holds every tuple of its span; E is that window's ts
    pattern    s + within - 1 (s = max s_i, every input read from s): a match whose last event is
               there or later started at s or later, and every match that did is found
    combine    the first timestamp at which every input has had a tuple since its s_i (its first
               row, written or skipped for a division by zero): from then on the latest value of
               each is the true one (combine-latest, docs/LANGUAGE.md); known once the inputs' watermark
               has passed it, whether the combine emits anything or not

E is UNKNOWN (a combine whose inputs have not all had a tuple yet, a forwarded stream not
received yet) until it is known; a node reading an input of unknown E reads none of it, and once
it is known reads only after the newest tuple it let go of meanwhile (of any input: a union whose
other inputs went on).
"""

from __future__ import annotations

from sensorscript.runtime.plan import program as p
from sensorscript.runtime.plan.program import NEG_INF, UNKNOWN


def reads_from(node_started: int | None, input_exact: int, dropped: int | None = None) -> int:
    """s_i: from when a node reads one input; `dropped`: the newest event time among the tuples the
    node let go of while an input was not known whole (they will not come again)."""
    start = input_exact if node_started is None else max(input_exact, node_started)
    if dropped is not None and start != UNKNOWN:
        start = max(start, dropped + 1)
    return start


def window_from(start: int, window: p.Window) -> int:
    """The ts of the first window of `window` that starts at `start` or later (windows are aligned
    to the epoch: window k covers [k * slide, k * slide + length))."""
    if start in (NEG_INF, UNKNOWN):
        return start
    first = -((-start) // window.slide) * window.slide
    return first + window.length - 1


def pattern_from(start: int, pattern: p.Pattern) -> int:
    if start in (NEG_INF, UNKNOWN):
        return start
    return start + pattern.within - 1


def union_from(starts: list[int]) -> int:
    return max(starts, default=NEG_INF)


def combine_from(known: int, complete_from: int) -> int:
    """A combine's E: `known` once set, else the first final timestamp at which every input had
    had a tuple (`complete_from`, engine.CombineState's; UNKNOWN until then). Not the ts of its
    first value: a combine whose every row is a division by zero has none, and is whole all the
    same (it writes nothing, as the workflows compute over all the readings)."""
    return known if known != UNKNOWN else complete_from
