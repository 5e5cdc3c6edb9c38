"""Watermark policies (docs/LANGUAGE.md): from the event times a partition has seen to the watermark in force.

A policy is asked once per batch, before the batch's readings are applied, for the watermark in
force during that batch (`current`); it then observes the batch in arrival order, with how many of
its readings came late. Its state lives in the partition's stage-1 state, so it survives restarts.
Every policy's watermark is per partition and never decreases.

    fixed:D              N - D: bounded out-of-orderness (Spark's and Flink's watermark)
    adaptive:M[,k=K]     N - M * (1 - P): P is the share of ordered pairs among the latest K
                         arrivals (the micro-cluster of Lv et al. 2023; 1 = in order), so the watermark
                         waits up to M only while the feed is out of order
    quality:EPS,DELTA    N - alpha * (largest delay seen): a K-slack buffer sized by a PD controller
                         (Yang et al. 2019) so that coverage meets 1 - EPS * DELTA (see `Quality`)

N is the largest event time seen on the partition, guarded: a reading more than `ahead` (default
10 min) past the partition's event time (the larger of N and the median of the batch's latest
reading per sensor) does not move N. A sensor with a wrong clock therefore cannot carry the
watermark past every other sensor and make their readings late. The reading itself is processed
as usual (its windows wait until event time reaches them, or the input ends) and counted as
`ahead`. All options take `,ahead=DURATION`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from sensorscript.times import duration_ms

NONE_YET = -(2**63)  # no watermark before the first reading: nothing is late
DEFAULT_AHEAD_MS = 10 * 60_000
ADAPTIVE_K = 100  # the micro-cluster: the latest arrivals whose order gives the disorder P
QUALITY_KP, QUALITY_KD = 0.2, 4.0  # the PD gains of Yang et al. 2019


def _latest_per_code(code: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """The largest ts of each code present (in the order of the codes)."""
    low, high = int(code.min()), int(code.max())
    if high - low < 1 << 22:  # codes are the job's sensors: a dense table, no sort
        latest = np.full(high - low + 1, np.iinfo(np.int64).min, np.int64)
        np.maximum.at(latest, code - low, ts)
        return latest[np.bincount(code - low, minlength=high - low + 1) > 0]
    order = np.lexsort((ts, code))
    return ts[order][np.flatnonzero(np.r_[code[order][1:] != code[order][:-1], True])]


@dataclass
class Frontier:
    """N, the partition's event time, with the guard against readings far ahead of it."""

    ahead_ms: int = DEFAULT_AHEAD_MS
    largest: int | None = None
    ahead: int = 0  # readings of the last batch held out of N

    def advance(self, code: np.ndarray, ts: np.ndarray) -> np.ndarray:
        """Take a batch; return the mask of its readings that may move N."""
        if not len(ts):
            self.ahead = 0
            return np.ones(0, bool)
        latest = _latest_per_code(code, ts)  # each sensor's latest reading in this batch
        reference = int(np.partition(latest, (len(latest) - 1) // 2)[(len(latest) - 1) // 2])
        if self.largest is not None:
            reference = max(reference, self.largest)
        accepted = ts <= reference + self.ahead_ms
        self.ahead = int(len(ts) - accepted.sum())
        if accepted.any():
            top = int(ts[accepted].max())
            self.largest = top if self.largest is None else max(self.largest, top)
        return accepted


@dataclass
class Policy:
    """What every policy shares: the guarded frontier, a watermark that never decreases, and the
    last batch's coverage (readings on time / readings)."""

    spec: str
    frontier: Frontier
    watermark: int = NONE_YET
    coverage: float = 1.0

    def current(self) -> int:
        return self.watermark

    def observe(self, code: np.ndarray, ts: np.ndarray, late: int,
                summed: tuple[np.ndarray, np.ndarray, int] | None = None) -> None:
        """The batch's readings in arrival order (late ones included), after the engine applied them;
        `summed`: readings stage 0 sent as slice partials (runtime/state/summaries.py), as each sensor's
        latest time among them (codes, times) and how many there were: all on time, none held out."""
        previous = self.frontier.largest
        count = len(ts)
        if summed is not None and len(summed[0]):
            accepted = self.frontier.advance(np.concatenate([code, summed[0]]), np.concatenate([ts, summed[1]]))[:len(ts)]
            count += summed[2]
        else:
            accepted = self.frontier.advance(code, ts)
        if count:
            self.coverage = (count - late) / count
        self._observe(ts[accepted], previous, count)
        if self.frontier.largest is not None:
            self.watermark = max(self.watermark, self.frontier.largest - self.buffer_ms())

    def _observe(self, ts: np.ndarray, previous: int | None, count: int) -> None:
        """Policy-specific: the batch's readings that may move N (arrival order), N before the
        batch, and how many readings the batch had."""

    def buffer_ms(self) -> int:
        """How far the watermark stays behind N now."""
        raise NotImplementedError

    def metrics(self, in_force: int) -> dict[str, float]:
        """Gauges of the partition after a batch judged by watermark `in_force` (everything below it
        is emitted): that watermark, N, its lag behind N, coverage. (The readings held out,
        `frontier.ahead`, are a count: the job sums them with its counters.)"""
        out = {"coverage": self.coverage}
        if self.frontier.largest is not None:
            out["max_ts"] = float(self.frontier.largest)
        if in_force != NONE_YET:
            out["watermark"] = float(in_force)
            out["lag_ms"] = float(self.frontier.largest - in_force)
        return out

    def resume(self, earlier: "Policy") -> "Policy":
        """Take over from another policy (a run that overrides the compiled one): its N and its
        watermark, which this one never goes below."""
        self.frontier.largest = earlier.frontier.largest
        self.watermark = earlier.watermark
        return self


@dataclass
class FixedDelay(Policy):
    delay_ms: int = 0

    def buffer_ms(self) -> int:
        return self.delay_ms


@dataclass
class Adaptive(Policy):
    """W = N - M * (1 - P) over the latest k arrivals (Lv et al. 2023 with its sign mended)."""

    max_delay_ms: int = 0
    k: int = ADAPTIVE_K
    recent: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))

    @property
    def disorder(self) -> float:
        """P over the latest k arrivals (a state of an older release kept it as a field: not read)."""
        return ordered_share(self.recent)

    def _observe(self, ts, previous, count):
        if not len(ts):
            return
        self.recent = np.concatenate([self.recent, ts.astype(np.int64)])[-self.k:]

    def buffer_ms(self) -> int:
        # W = N - M * (1 - P) is a real number and event times are whole milliseconds: a reading
        # is late when ts < W, that is ts < ceil(W) = N - floor(M * (1 - P)), computed exactly.
        ordered, pairs = ordered_pairs(self.recent)
        return self.max_delay_ms * (pairs - ordered) // pairs if pairs else 0

    def metrics(self, in_force):
        return {**super().metrics(in_force), "disorder": self.disorder, "k_ms": float(self.buffer_ms())}


def ordered_pairs(ts: np.ndarray) -> tuple[int, int]:
    """(the pairs i < j in arrival order with ts[i] <= ts[j], all pairs): P as a fraction."""
    n = len(ts)
    if n < 2:
        return 0, 0
    later = np.triu(ts[None, :] >= ts[:, None], k=1)
    return int(later.sum()), n * (n - 1) // 2


def ordered_share(ts: np.ndarray) -> float:
    """P: the share of pairs i < j (in arrival order) with ts[i] <= ts[j]; 1.0 for fewer than two."""
    ordered, pairs = ordered_pairs(ts)
    return ordered / pairs if pairs else 1.0


@dataclass
class Quality(Policy):
    """A K-slack buffer K = alpha * (largest delay seen), alpha set by a PD controller on coverage.

    The coverage bound for the error bound (eps, delta), P(error >= eps) <= delta, is
    1 - eps * delta: a window that misses a share m of its readings has a relative error of m for
    count, and for sum over readings of one sign an error whose expectation is m when late readings
    are not biased in value; Markov's inequality gives P(error >= eps) <= m / eps <= delta. The
    mean of the readings that came (avg) errs less than the sum; min and max have no bound from
    coverage alone, and get the same bound.

    The controller is that of Yang et al. 2019, alpha <- alpha + Kp * err + Kd * (err - err_prev),
    with two choices of ours for micro-batches: the coverage it measures is smoothed over batches (each
    batch's readings weigh in, older batches fade by SMOOTHING per batch: the coverage of one batch
    of a few readings is too noisy for a derivative gain of 4, and alpha swung between 0 and 1 on
    it), and it aims halfway between the bound and 1 (1 - eps * delta / 2), so that the coverage it
    holds on average meets the bound. alpha starts at 0 (no buffer) and is kept in [0, 1]; the
    controller's own output (`level`) may go on to 2 (anti-windup): a burst that pushes it past 1
    leaves it there once the burst's derivative term has passed, instead of the clamp forgetting
    what the burst taught (measured on bursty disorder: coverage 96.7 % -> 99.4 % at 12 s).
    """

    SMOOTHING = 0.9

    eps: float = 0.05
    delta: float = 0.05
    kp: float = QUALITY_KP
    kd: float = QUALITY_KD
    alpha: float = 0.0
    level: float = 0.0  # the controller's output, alpha before the clamp at 1
    largest_delay_ms: int = 0
    error: float = 0.0  # the last batch's coverage error, for the derivative term
    on_time: float = 0.0  # smoothed counts of readings on time and of all readings
    readings: float = 0.0

    @property
    def target(self) -> float:
        return 1.0 - self.eps * self.delta

    @property
    def aim(self) -> float:
        return 1.0 - self.eps * self.delta / 2

    def _observe(self, ts, previous, count):
        if len(ts):
            # A reading's delay: how far it arrives behind the largest event time before it.
            start = previous if previous is not None else int(ts[0])
            before = np.maximum.accumulate(np.r_[start, ts])[:-1]
            self.largest_delay_ms = max(self.largest_delay_ms, int((before - ts).max(initial=0)))
        if not count:
            return
        self.on_time = self.on_time * self.SMOOTHING + self.coverage * count
        self.readings = self.readings * self.SMOOTHING + count
        error = self.aim - self.on_time / self.readings
        self.level = min(2.0, max(0.0, self.level + self.kp * error + self.kd * (error - self.error)))
        self.alpha = min(1.0, self.level)
        self.error = error

    def buffer_ms(self) -> int:
        # W = N - alpha * D, a real number: ts < W exactly when ts < N - floor(alpha * D).
        return math.floor(self.alpha * self.largest_delay_ms)

    def metrics(self, in_force):
        return {**super().metrics(in_force), "k_ms": float(self.buffer_ms()), "alpha": self.alpha,
                "target": self.target}


def parse_policy(spec: str) -> Policy:
    """`fixed:30s`, `adaptive:10s`, `adaptive:10s,k=200`, `quality:0.05,0.05`, each with an optional
    `,ahead=DURATION` -> a policy. Errors say what was wrong."""
    kind, _, argument = spec.strip().partition(":")
    positional, options = [], {}
    for item in filter(None, (a.strip() for a in argument.split(","))):
        name, equals, value = item.partition("=")
        if equals:
            options[name.strip()] = value.strip()
        else:
            positional.append(item)
    frontier = Frontier(duration_ms(options.pop("ahead"), "ahead") if "ahead" in options else DEFAULT_AHEAD_MS)

    def expect(count: int, form: str) -> None:
        if len(positional) != count:
            raise ValueError(f"watermark policy '{spec}': expected {form}")

    if kind == "fixed":
        positional = positional or ["0"]
        expect(1, "fixed:DELAY, e.g. fixed:5s")
        policy: Policy = FixedDelay(spec, frontier, delay_ms=duration_ms(positional[0], "watermark delay"))
    elif kind == "adaptive":
        expect(1, "adaptive:MAX_DELAY, e.g. adaptive:10s")
        k = _number(options.pop("k", str(ADAPTIVE_K)), "k", int)
        if k < 2:
            raise ValueError(f"watermark policy '{spec}': k must be 2 or more")
        policy = Adaptive(spec, frontier, max_delay_ms=duration_ms(positional[0], "maximum delay"), k=k)
    elif kind == "quality":
        expect(2, "quality:EPS,DELTA, e.g. quality:0.05,0.05")
        eps, delta = (_number(v, n, float) for v, n in zip(positional, ("EPS", "DELTA")))
        if not (0 < eps < 1 and 0 < delta < 1):
            raise ValueError(f"watermark policy '{spec}': EPS and DELTA lie between 0 and 1")
        gains = {name: _number(options.pop(name, str(default)), name, float)
                 for name, default in (("kp", QUALITY_KP), ("kd", QUALITY_KD))}
        policy = Quality(spec, frontier, eps=eps, delta=delta, **gains)
    else:
        raise ValueError(f"unknown watermark policy '{kind}': use fixed:DELAY, adaptive:MAX_DELAY or "
                         f"quality:EPS,DELTA")
    if options:
        raise ValueError(f"watermark policy '{spec}': unknown option {', '.join(sorted(options))}")
    return policy


def _number(text: str, what: str, kind):
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"{what} '{text}' is not a {'whole ' if kind is int else ''}number") from None


LATE_POLICIES = ("drop", "log", "correct")
DEFAULT_GAMMA_MS = 5_000  # `correct`: the event-time span of pending late readings that starts a correction


def parse_late_policy(spec: str) -> tuple[str, int]:
    """`drop`, `log`, `correct` or `correct:GAMMA` -> (name, gamma in ms)."""
    name, _, gamma = spec.strip().partition(":")
    if name not in LATE_POLICIES:
        raise ValueError(f"unknown late policy '{spec}': use drop, log or correct (correct:GAMMA, e.g. correct:10s)")
    if gamma and name != "correct":
        raise ValueError(f"late policy '{spec}': only correct takes a span (correct:GAMMA)")
    return name, duration_ms(gamma, "correction span") if gamma else DEFAULT_GAMMA_MS
