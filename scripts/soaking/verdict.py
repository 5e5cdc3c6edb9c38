"""A run against the targets of issue #15:
  memory flat     from the end of the warm-up: the least-squares line through the driver's, the JVM's
                  and the workers' RSS samples rises by at most 10 % of its mean over that span (the
                  workers' PSS is shown beside it: forked workers share pages). Needs 2 minutes of
                  samples, else shown but not judged.
  state flat      the same rule for the state of all partitions, from `--state-from` seconds of feed on
                  (default: warm-up + the job's fill time, the longest chain of window lengths and
                  pattern `within`s from a sensor to an output, windows over pattern matches left out
                  as they hold a few rows: until then the state grows by design; 20 min for the
                  default workload, whose bridge workflows chain a window of up to 10 min over windows
                  of up to 10 min). Memory is judged from the warm-up on: the state is small next
                  to the processes' memory (the report shows both).
  lag bounded     after the warm-up, the lag's least-squares trend at the commits is at most 0.01 s per s
                  (1 % of the feed left behind) and its largest sample at most `--max-lag` (30 s).
  latency         p99 under 5 s.
                  Each target is judged on at least 2 minutes of feed after the warm-up (shorter runs
                  show the figures, "not judged"), and none for a run that ended early.
  CPU             the job's processes and the soak, in % of one core, and the machine's load average
                  (figures from a busy machine are not the ones to record).
"""

from __future__ import annotations

import os

import numpy as np

from .figures import mean_of, percentile, shown, trend
from .sampling import Sample

FLAT_GROWTH = 0.10  # memory and state: fitted rise over the judged span, share of its mean
LAG_TREND = 0.01  # s of lag per s of feed: at most 1 % of the feed left behind
P99_TARGET = 5.0
JUDGE_AT_LEAST = 120.0  # seconds of samples needed to judge a trend


def flatness(samples: list[Sample], name: str, value, since: float, unit: str, scale: float) -> tuple[str, dict | None]:
    """The least-squares trend of `value` over the samples from `since` on: judged flat when its rise over
    that span is at most FLAT_GROWTH of the mean, given at least JUDGE_AT_LEAST seconds of samples."""
    points = [(s.at, value(s)) for s in samples if s.at >= since and s.rss and value(s) is not None]
    fitted = trend(points)
    if fitted is None:
        return f"  {name}: too few samples from {since:.0f} s of feed on", None
    slope, mean = fitted
    span = points[-1][0] - points[0][0]
    growth = slope * span / mean if mean else 0.0
    edge = min(60.0, span / 2)  # the first and last minute (of a shorter span, its halves)
    first = float(np.mean([y for t, y in points if t <= points[0][0] + edge]))
    last = float(np.mean([y for t, y in points if t >= points[-1][0] - edge]))
    judged = span >= JUDGE_AT_LEAST
    flat = growth <= FLAT_GROWTH if judged else None
    line = (f"  {name}: {first * scale:,.1f} -> {last * scale:,.1f} {unit} (mean of the first and last "
            f"{edge:.0f} s from {since:.0f} s of feed on), trend {slope * 60 * scale:+,.2f} {unit}/min, "
            f"{growth:+.1%} over {span:.0f} s"
            + ("" if judged else f" (not judged: under {JUDGE_AT_LEAST:.0f} s of samples)"))
    return line, {"since_s": since, "first_minute": first * scale, "last_minute": last * scale,
                  "trend_per_min": slope * 60 * scale, "growth": growth, "span_s": span, "flat": flat}


def verdict(samples: list[Sample], lags: list[tuple[float, float]], lat, warmup: float, state_from: float,
            fill_s: float, max_lag: float, failure: str | None) -> tuple[list[str], dict]:
    """The run against the targets of issue #15 (see the module's doc for each rule). A target is
    judged on at least JUDGE_AT_LEAST seconds of feed after the warm-up, and never for a failed run."""
    lines, found = [], {}
    memory = []
    for name, value in (("driver RSS", lambda s: s.rss["driver"]), ("JVM RSS", lambda s: s.rss["jvm"]),
                        ("workers RSS", lambda s: s.rss["workers"]), ("workers PSS", lambda s: s.pss["workers"])):
        line, found[name] = flatness(samples, name, value, warmup, "MiB", 1.0)
        lines.append(line)
        if name != "workers PSS":  # shown beside RSS: forked workers share pages
            memory.append(found[name]["flat"] if found[name] else None)
    line, found["state"] = flatness(samples, "state, all partitions", lambda s: s.state_total, state_from,
                                    "KiB", 1 / 1024)
    lines.append(line)
    memory_flat = None if None in memory else all(memory)
    state_flat = found["state"]["flat"] if found["state"] else None
    after = [(t, lag) for t, lag in lags if t >= warmup]
    fed_after = max((s.at for s in samples), default=0.0) - warmup
    judged = fed_after >= JUDGE_AT_LEAST and failure is None
    fitted = trend(after)
    largest = max((s.lag for s in samples if s.at >= warmup and s.lag is not None), default=None)
    lag_ok = (fitted is not None and fitted[0] <= LAG_TREND and largest <= max_lag) if judged else None
    found["lag"] = {"trend_s_per_s": fitted[0] if fitted else None, "max_s": largest, "commits": len(after),
                    "bounded": lag_ok}
    lines.append(f"  lag: trend at the {len(after)} commits after the warm-up "
                 + (f"{fitted[0]:+.4f} s/s" if fitted else "-") + f" (at most {LAG_TREND}), "
                 f"largest sampled {shown(largest, '.1f')} s (at most {max_lag:.0f} s)")
    p50, p99 = percentile([x[1] for x in lat], 50), percentile([x[1] for x in lat], 99)
    p99_end = percentile([x[2] for x in lat], 99)
    latency_ok = (p99 is not None and p99 < P99_TARGET) if judged else None
    found["latency"] = {"p50_s": p50, "p99_s": p99, "p99_from_window_end_s": p99_end, "results": len(lat),
                        "under_target": latency_ok}
    lines.append(f"  latency from the write, {len(lat):,} window results: p50 {shown(p50, '.2f')} s, "
                 f"p99 {shown(p99, '.2f')} s (from the window's end: p99 {shown(p99_end, '.2f')} s)")
    busy = [s for s in samples if s.at >= warmup and s.cpu]
    if busy:
        found["cpu"] = {"job_percent": mean_of([s.cpu["job"] for s in busy]),
                        "soak_percent": mean_of([s.cpu["soak"] for s in busy]),
                        "load_mean": mean_of([s.load for s in busy]), "load_max": max(s.load for s in busy)}
        lines.append(f"  CPU after the warm-up: the job {found['cpu']['job_percent']:.0f} % of one core, this script "
                     f"{found['cpu']['soak_percent']:.0f} %; the machine's load average {found['cpu']['load_mean']:.1f} "
                     f"(largest {found['cpu']['load_max']:.1f}) on {os.cpu_count()} cores")
    if failure is not None:
        memory_flat = state_flat = None
    found.update(memory_flat=memory_flat, state_flat=state_flat, lag_bounded=lag_ok, latency_under_target=latency_ok)
    marks = {True: "yes", False: "NO", None: "not judged"}
    state_note = f" (the state fills for {fill_s / 60:.1f} min: feed longer)" if state_flat is None and not failure else ""
    head = [f"verdict: memory flat after warm-up: {marks[memory_flat]}; state flat: {marks[state_flat]}{state_note}; "
            f"lag bounded: {marks[lag_ok]}; p99 latency under {P99_TARGET:.0f} s: {marks[latency_ok]}"
            + ("" if judged or failure else f" (under {JUDGE_AT_LEAST:.0f} s of feed after the warm-up)")]
    return head + lines, found
