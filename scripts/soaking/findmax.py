"""--find-max: one job, fed at `--start-rate` for the warm-up and then in steps of `--step-seconds`, each
`--step-factor` times the rate before (the result's resolution); a step passes when, over its last two
thirds, the lag's trend at the commits is at most 0.03 s per s and its largest sample at most `--max-lag`
(10 s here). The run stops at the first step that fails (or at `--minutes`) and the report gives the
highest rate that passed, and a table of the steps with each step's p99 latency (from the write, as
the verdict's: soaking.figures), taken once the run is over so that every result of the step is in
(`step_latency`); the highest rate says whether its p99 is under 5 s (issue #41: the highest rate
held with p99 < 5 s).
"""

from __future__ import annotations

import math

from .feed import Feed
from .figures import batch_lags, latencies, percentile, shown, trend
from .sampling import Sample
from .sink import SinkWatcher

STEP_LAG_TREND = 0.03  # the same for --find-max's short steps (their lag trend is noisier)


def judge_step(samples: list[Sample], feed: Feed, lo: float, hi: float, rate: float, max_lag: float,
               watcher: SinkWatcher) -> dict:
    """A step of --find-max over [lo, hi) s of feed: judged on its last two thirds."""
    settle = lo + (hi - lo) / 3
    fitted = trend([(t, lag) for t, lag in batch_lags(watcher, feed) if settle <= t < hi])
    largest = max((s.lag for s in samples if settle <= s.at < hi and s.lag is not None), default=math.inf)
    batches = [b for b in watcher.committed() if lo <= b.committed - feed.started_at < hi]
    durations = [b.duration for b in batches if b.duration is not None]
    fed = [c for c in feed.chunks if lo <= c.written - feed.started_at < hi]
    passed = fitted is not None and fitted[0] <= STEP_LAG_TREND and largest <= max_lag
    return {"rate": rate, "from_s": lo, "to_s": hi,
            "fed_per_s": sum(c.referenced for c in fed) / max(sum(c.span for c in fed), 1e-9),
            "processed_per_s": sum(b.readings for b in batches) / (hi - lo),
            "lag_trend": fitted[0] if fitted else math.inf, "lag_max": largest,
            "batch_p50_s": percentile(durations, 50), "batch_max_s": max(durations) if durations else None,
            "passed": passed}


def step_latency(steps: list[dict], watcher: SinkWatcher, feed: Feed) -> None:
    """Each step's p99 latency from the write (`p99_s`) over the results whose closing chunk was
    written in its last two thirds: once the run is over, every one of them is in."""
    for step in steps:
        settle = step["from_s"] + (step["to_s"] - step["from_s"]) / 3
        step["p99_s"] = percentile([x[1] for x in latencies(watcher.results, feed, settle, step["to_s"])], 99)


def step_table(steps: list[dict]) -> str:
    head = ("rate", "ref fed/s", "processed/s", "batch s p50/max", "lag trend s/s", "lag max s", "p99 s", "")
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for s in steps:
        lines.append(" | ".join((f"{s['rate']:,.0f}", f"{s['fed_per_s']:,.0f}", f"{s['processed_per_s']:,.0f}",
                                 f"{shown(s['batch_p50_s'], '.2f')}/{shown(s['batch_max_s'], '.2f')}",
                                 f"{s['lag_trend']:+.4f}", f"{s['lag_max']:.1f}", shown(s.get("p99_s"), ".2f"),
                                 "passes" if s["passed"] else "fails")))
    return "\n".join("| " + line + " |" for line in lines)
