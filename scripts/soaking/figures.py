"""The figures of a run, from what the feed recorded, the sink watcher saw and the sampler took:
  latency      per window result (a row with window_end): commit time of its batch minus the wall time
               at which the reading that closed its window was written: the first chunk holding a
               reading with ts >= window_end. The partition's watermark passes window_end only after
               such a reading of one of its sensors, and every sensor reads in every chunk, so the chunk
               is the same for every partition (at rate / sensors >= 1 Hz for files, >= 10 Hz for the
               socket). p50 and p99 over the results whose closing chunk was written after the warm-up.
               `from window end` is the same with window_end itself (event time = wall time) in place of
               the write: it adds the feed's own buffering (up to a chunk).
  lag at the commits  the lag right after each commit (without the saw-tooth of the time until the next
               commit): what its trend is judged on.
  per minute   of feed (the drain after it included): rates fed (lines written per second), of
               sensors the job reads (the rest are filtered out by the job) and processed, memory,
               state, batch durations, lag, latency and CPU, as a table.
Also the helpers the verdict and the report share: percentiles, least-squares trends, means, and
numbers shown or "-".
"""

from __future__ import annotations

import math

import numpy as np

from .feed import Feed
from .sampling import Sample
from .sink import Result, SinkWatcher


def percentile(values, q: float) -> float | None:
    return float(np.percentile(values, q)) if len(values) else None


def trend(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """(slope per s, mean) of the least-squares line through (t, y)."""
    if len(points) < 3:
        return None
    t, y = np.array(points, dtype=float).T
    if t.max() - t.min() <= 0:
        return None
    return float(np.polyfit(t, y, 1)[0]), float(y.mean())


def batch_lags(watcher: SinkWatcher, feed: Feed) -> list[tuple[float, float]]:
    """(commit time s since the feed began, lag at that commit in s) per batch: the lag sampled right
    after each commit, without the saw-tooth of the lag between commits (which grows by the time
    until the next commit); what its trend is judged on."""
    newest: dict[int, float] = {}
    out = []
    for batch in watcher.committed():
        newest.update(batch.max_ts)
        fed = feed.newest_written(batch.committed)
        if newest and fed is not None and batch.committed >= feed.started_at:
            out.append((batch.committed - feed.started_at, (fed - min(newest.values())) / 1000))
    return out


def latencies(results: list[Result], feed: Feed, since: float,
              until: float = math.inf) -> list[tuple[float, float, float]]:
    """(commit time s since the feed began, latency from the write, latency from the window's end)
    of the window results whose closing chunk was written from `since` on, before `until` (s since
    the feed began)."""
    chunks = feed.chunks
    newest = np.array([c.newest_ts for c in chunks], np.int64)
    written = np.array([c.written for c in chunks])
    newest = np.maximum.accumulate(newest)
    out = []
    for result in results:
        at = int(np.searchsorted(newest, result.closing_ms, side="left"))
        if at >= len(chunks):
            continue
        if not since <= written[at] - feed.started_at < until:
            continue
        out.append((result.committed - feed.started_at, result.committed - written[at],
                    result.committed - result.closing_ms / 1000))
    return out


def minute_rows(feed: Feed, watcher: SinkWatcher, samples: list[Sample], lat, observed_s: float) -> list[dict]:
    """Per minute of feed (the drain after it included): the figures of the module's doc."""
    start = feed.started_at
    rows = []
    for minute in range(int(math.ceil(observed_s / 60))):
        lo, hi = minute * 60.0, (minute + 1) * 60.0
        observing = min(hi, observed_s) - lo
        chunks = [c for c in feed.chunks if lo <= c.written - start < hi]
        covered = sum(c.span for c in chunks)
        batches = [b for b in watcher.committed() if lo <= b.committed - start < hi]
        mine = [s for s in samples if lo <= s.at < hi]
        memory = [s for s in mine if s.rss]
        cpu = [s for s in memory if s.cpu]
        stateful = [s for s in mine if s.state_total is not None]
        durations = [b.duration for b in batches if b.duration is not None]
        lags = [s.lag for s in mine if s.lag is not None]
        here = [x for x in lat if lo <= x[0] < hi]
        if observing <= 0:
            continue
        rows.append({
            "minute": minute + 1, "seconds": observing,
            # per second of the event time the minute's chunks cover (a chunk may end a minute)
            "fed_per_s": sum(c.readings for c in chunks) / covered if covered else 0.0,
            "referenced_per_s": sum(c.referenced for c in chunks) / covered if covered else 0.0,
            "processed_per_s": sum(b.readings for b in batches) / observing,
            "driver_mib": mean_of([s.rss["driver"] for s in memory]),
            "jvm_mib": mean_of([s.rss["jvm"] for s in memory]),
            "workers_mib": mean_of([s.rss["workers"] for s in memory]),
            "workers_pss_mib": mean_of([s.pss["workers"] for s in memory]),
            "workers": max((s.workers for s in memory), default=None),
            "state_max_bytes": stateful[-1].state_max if stateful else None,
            "state_total_bytes": stateful[-1].state_total if stateful else None,
            "batches": len(batches),
            "batch_p50_s": percentile(durations, 50),
            "batch_max_s": max(durations) if durations else None,
            "lag_mean_s": mean_of(lags),
            "lag_max_s": max(lags) if lags else None,
            "latency_p50_s": percentile([x[1] for x in here], 50),
            "latency_p99_s": percentile([x[1] for x in here], 99),
            "results": len(here),
            "cpu_job": mean_of([s.cpu["job"] for s in cpu]),
            "cpu_soak": mean_of([s.cpu["soak"] for s in cpu]),
        })
    return rows


def mean_of(values) -> float | None:
    return float(np.mean(values)) if len(values) else None


def shown(value, fmt: str, scale: float = 1.0) -> str:
    return "-" if value is None else format(value / scale, fmt)


def minute_table(rows: list[dict]) -> str:
    head = ("min", "fed/s", "ref fed/s", "processed/s", "driver MiB", "JVM MiB", "workers MiB (n)",
            "state KiB max/total", "batches", "batch s p50/max", "lag s mean/max", "latency s p50/p99", "CPU % job/soak")
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in rows:
        lines.append(" | ".join((
            str(r["minute"]) + (f" ({r['seconds']:.0f} s)" if r["seconds"] < 59.5 else ""), shown(r["fed_per_s"], ",.0f"), shown(r["referenced_per_s"], ",.0f"),
            shown(r["processed_per_s"], ",.0f"), shown(r["driver_mib"], ".0f"), shown(r["jvm_mib"], ".0f"),
            f"{shown(r['workers_mib'], '.0f')} ({shown(r['workers'], '.0f')})",
            f"{shown(r['state_max_bytes'], ',.0f', 1024)}/{shown(r['state_total_bytes'], ',.0f', 1024)}",
            str(r["batches"]), f"{shown(r['batch_p50_s'], '.2f')}/{shown(r['batch_max_s'], '.2f')}",
            f"{shown(r['lag_mean_s'], '.1f')}/{shown(r['lag_max_s'], '.1f')}",
            f"{shown(r['latency_p50_s'], '.2f')}/{shown(r['latency_p99_s'], '.2f')}",
            f"{shown(r['cpu_job'], '.0f')}/{shown(r['cpu_soak'], '.0f')}")))
    return "\n".join("| " + line + " |" for line in lines)
