"""Which readings are late: the watermark policies written out from their definitions, the
oracle for the job's late readings.

    judged = judge("adaptive:5s,k=8", batches, partition_of)
    judged.late       # the late readings, (sensor_id, ts, value), in arrival order
    judged.on_time    # every other reading, batch by batch

`batches` are the micro-batches in arrival order, each a list of readings (sensor_id, ts, value)
of the sensors some workflow reads (the caller leaves out the others: they have no watermark).
This module imports nothing of the product: it is the rules and the decisions docs/LANGUAGE.md
("Event time and late readings") records, not the job's code (runtime/state/watermark.py).

The rule, from docs/LANGUAGE.md:

- a reading is *late* when its ts is below the watermark in force when it arrives;
- `fixed:D`: W = N − D;
- `adaptive:M[,k=K]`: over the latest k arrival timestamps, P = the share of ordered pairs
  (1 = in order), W = N − M·(1 − P), never decreasing;
- `quality:EPS,DELTA[,kp=..,kd=..]`: a K-slack buffer, W = N − K with K = α · (the largest delay
  observed), α set by the PD controller α ← α + Kp·err + Kd·(err − err_prev) (Kp 0.2, Kd 4) so that
  the coverage n_on_time / n_received meets what the error bound (ε, δ) needs.

N is the largest event time seen. The decisions LANGUAGE.md records, followed here:

- every partition has its own watermark (`partition_of`: sensor -> partition, the job's plan);
- the watermark is fixed before each micro-batch and holds for the whole batch: it is computed
  from what the partition had seen after each batch that brought it readings (a batch without
  readings of a partition changes nothing of it: Spark does not call its operator);
- adaptive: k = 100 unless given; "the latest k arrivals" are the partition's, in arrival order,
  late ones included; a pair (earlier arrival i, later arrival j) is ordered when ts_i <= ts_j;
  with fewer than two arrivals P = 1;
- quality: the coverage target for (ε, δ) is 1 − ε·δ (Markov's inequality); the controller aims
  halfway between it and 1, at 1 − ε·δ/2; it measures coverage per batch (readings on time /
  readings of the batch), smoothed over batches: older batches fade by 0.9 per batch (each
  batch's readings weigh in); err = aim − smoothed coverage; the controller's output starts at 0
  (and err_prev at 0) and is kept in [0, 2], and α is that output clamped at 1 (anti-windup; 1 is
  the max-delay K-slack buffer). A reading's delay is how far it
  arrives behind the largest event time its partition had seen before it (0 when ahead);
- the guard: a reading more than `ahead` (10 min unless `,ahead=DURATION`) past its partition's
  event time, the larger of N and the median of the batch's newest reading per sensor, does not
  move N (it is not late either, and is counted in `ahead`).

Event times are whole milliseconds while the policies' W = N − M·(1 − P) and N − α·(largest delay) are
real numbers: W is kept exact here (a Fraction for `adaptive`), and a reading is late when ts < W
(docs/LANGUAGE.md, "Whole milliseconds").
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
from dataclasses import dataclass, field
from fractions import Fraction

Reading = tuple  # (sensor_id, ts, value)

_UNITS = {"ms": 1, "s": 1_000, "min": 60_000, "h": 3_600_000}
DEFAULT_K = 100
DEFAULT_AHEAD_MS = 10 * 60_000
KP, KD = 0.2, 4.0
FADE = 0.9


def _duration(text: str) -> int:
    match = re.fullmatch(r"(\d[\d_]*)(ms|s|min|h)?", text.strip())
    if match is None:
        raise ValueError(f"not a duration: {text!r}")
    return int(match.group(1).replace("_", "")) * _UNITS[match.group(2) or "ms"]


@dataclass(frozen=True)
class Policy:
    kind: str  # fixed, adaptive, quality
    delay_ms: int = 0  # fixed: D; adaptive: M
    k: int = DEFAULT_K
    eps: float = 0.0
    delta: float = 0.0
    kp: float = KP
    kd: float = KD
    ahead_ms: int = DEFAULT_AHEAD_MS


def policy_of(spec: str) -> Policy:
    """`fixed:2s`, `adaptive:5s,k=8`, `quality:0.1,0.1,kp=0.5` (each with an optional `,ahead=D`)."""
    kind, _, rest = spec.partition(":")
    positional, options = [], {}
    for item in (i.strip() for i in rest.split(",") if i.strip()):
        name, equals, value = item.partition("=")
        if equals:
            options[name.strip()] = value.strip()
        else:
            positional.append(item)
    ahead = _duration(options["ahead"]) if "ahead" in options else DEFAULT_AHEAD_MS
    if kind == "fixed":
        return Policy("fixed", _duration(positional[0]) if positional else 0, ahead_ms=ahead)
    if kind == "adaptive":
        return Policy("adaptive", _duration(positional[0]), k=int(options.get("k", DEFAULT_K)), ahead_ms=ahead)
    if kind == "quality":
        eps, delta = (float(p) for p in positional)
        return Policy("quality", eps=eps, delta=delta, kp=float(options.get("kp", KP)),
                      kd=float(options.get("kd", KD)), ahead_ms=ahead)
    raise ValueError(f"not a watermark policy: {spec!r}")


def ordered_pairs(ts: list[int]) -> Fraction:
    """P: the share of pairs (i earlier, j later in arrival) with ts_i <= ts_j; 1 with fewer than two."""
    n = len(ts)
    if n < 2:
        return Fraction(1)
    ordered = sum(1 for i in range(n) for j in range(i + 1, n) if ts[i] <= ts[j])
    return Fraction(ordered, n * (n - 1) // 2)


@dataclass
class _Partition:
    """What one partition has seen."""

    largest: int | None = None  # N
    watermark: float | Fraction = -math.inf  # in force for the next batch
    arrivals: list[int] = field(default_factory=list)  # adaptive: the latest k arrival timestamps
    largest_delay: int = 0  # quality
    alpha: float = 0.0
    output: float = 0.0  # the controller's output, in [0, 2]: alpha before the clamp at 1
    error: float = 0.0  # err_prev
    on_time: float = 0.0  # quality: faded counts
    received: float = 0.0


@dataclass
class Judged:
    late: list[Reading]  # in arrival order
    on_time: list[list[Reading]]  # per batch, in arrival order
    # per batch: partition -> the watermark in force (exact; -inf before the partition's first batch)
    watermarks: list[dict[int, float | Fraction]]
    ahead: int  # readings the guard held out of N


def judge(spec: str, batches: list[list[Reading]], partition_of: dict[str, int] | None = None) -> Judged:
    """The late readings of `batches` under the watermark policy `spec` (see the module)."""
    policy = policy_of(spec)
    partition_of = partition_of or {}
    partitions: dict[int, _Partition] = {}
    judged = Judged([], [], [], 0)
    for batch in batches:
        judged.watermarks.append({p: state.watermark for p, state in partitions.items()})
        mine: dict[int, list[tuple[Reading, bool]]] = {}
        kept = []
        for reading in batch:
            partition = partition_of.get(reading[0], 0)
            w = partitions.setdefault(partition, _Partition()).watermark  # in force for the whole batch
            is_late = reading[1] < w
            (judged.late if is_late else kept).append(reading)
            mine.setdefault(partition, []).append((reading, is_late))
        judged.on_time.append(kept)
        for partition, readings in mine.items():
            judged.ahead += _after_batch(policy, partitions[partition], readings)
    return judged


def _after_batch(policy: Policy, state: _Partition, readings: list[tuple[Reading, bool]]) -> int:
    """Take one batch of the partition's readings (arrival order, with whether each came late) and
    set the watermark for the next batch; returns how many readings the guard held out of N."""
    stamps = [reading[1] for reading, _ in readings]
    newest: dict[str, int] = {}
    for (sensor, ts, _), _ in readings:
        newest[sensor] = max(newest.get(sensor, ts), ts)
    event_time = statistics.median(newest.values())
    if state.largest is not None:
        event_time = max(event_time, state.largest)
    held = 0
    for ts in stamps:
        if ts > event_time + policy.ahead_ms:  # the guard: this one does not move N
            held += 1
            continue
        if policy.kind == "quality" and state.largest is not None:
            state.largest_delay = max(state.largest_delay, state.largest - ts)
        state.largest = ts if state.largest is None else max(state.largest, ts)
    if policy.kind == "adaptive":
        state.arrivals = (state.arrivals + stamps)[-policy.k:]
    if policy.kind == "quality":
        came = len(readings)
        on_time = sum(1 for _, is_late in readings if not is_late)
        state.on_time = state.on_time * FADE + on_time
        state.received = state.received * FADE + came
        aim = 1 - policy.eps * policy.delta / 2
        error = aim - state.on_time / state.received
        step = policy.kp * error + policy.kd * (error - state.error)
        state.output = min(2.0, max(0.0, state.output + step))
        state.alpha = min(1.0, state.output)
        state.error = error
    if state.largest is None:  # every reading held ahead: no event time yet
        return held
    if policy.kind == "fixed":
        w = Fraction(state.largest - policy.delay_ms)
    elif policy.kind == "adaptive":
        w = state.largest - policy.delay_ms * (1 - ordered_pairs(state.arrivals))
    else:
        w = state.largest - state.alpha * state.largest_delay
    state.watermark = max(state.watermark, w)  # never decreases
    return held
