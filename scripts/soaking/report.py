"""The report of a run: its lines (the per-minute table, then the verdict, or --find-max's steps and
the highest rate sustained), printed and written to OUT/report.txt, and the JSON document with every
sample, batch and latency, written to OUT/soak.json (and --json).
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

from .figures import batch_lags, latencies, minute_rows, minute_table, percentile, shown
from .findmax import step_latency, step_table
from .run import Soak
from .stores import batch_trend, day_lines, per_day
from .verdict import P99_TARGET, verdict
from .workload import Workload


def report(args, out: Path, workload: Workload, soak: Soak) -> tuple[list[str], dict]:
    """The report's lines and the JSON document of a run."""
    feed, watcher, sampler = soak.feed, soak.watcher, soak.sampler
    lat = latencies(watcher.results, feed, args.warmup)
    state_from = args.state_from if args.state_from is not None else args.warmup + workload.fill_ms / 1000
    rows = minute_rows(feed, watcher, sampler.samples, latencies(watcher.results, feed, 0.0), soak.observed_s)
    by_message = f" ({args.lines_per_message} readings a message)" if args.source in ("mqtt", "kafka") else ""
    lines = ["", f"soak through the {args.source} source{by_message}: {len(workload.sensors):,} sensors, "
                 f"{workload.workflows} workflows ({len(workload.referenced)} sensors read), "
                 f"{args.partitions} partitions, "
             + (f"find-max from {args.start_rate:,.0f} readings/s" if args.find_max else f"{args.rate:,.0f} readings/s")
             + f"; sink {soak.watcher.reading.spec}; fed {soak.fed_s / 60:.1f} min; drained in {soak.drained_s:.1f} s; work folder {out}",
             "", minute_table(rows), "",
             "(per minute of feed, the warm-up's included; latency per minute is by commit time; the verdict "
             "leaves the warm-up out)"]
    found: dict = {}
    if soak.failure:
        lines.append(f"the run FAILED: {soak.failure}")
    if args.find_max:
        step_latency(soak.steps, watcher, feed)
        best = max((s for s in soak.steps if s["passed"]), key=lambda s: s["rate"], default=None)
        p99 = best["p99_s"] if best else None
        lines += [step_table(soak.steps),
                  f"highest rate sustained: {shown(best and best['rate'], ',.0f')} readings/s"
                  + ("" if p99 is None else f", p99 latency {p99:.2f} s ({'' if p99 < P99_TARGET else 'NOT '}under "
                                            f"{P99_TARGET:.0f} s)")
                  + (" (no step failed: raise --minutes or --start-rate)"
                     if soak.steps and soak.steps[-1]["passed"] else "")]
        found["highest_sustained_rate"] = best and best["rate"]
        found["highest_sustained_p99_s"] = p99
    else:
        judged, found = verdict(sampler.samples, batch_lags(watcher, feed), lat, args.warmup, state_from,
                                workload.fill_ms / 1000, args.max_lag, soak.failure)
        lines += [f"warm-up {args.warmup:.0f} s; the state judged from {state_from:.0f} s of feed on "
                  f"(it fills for {workload.fill_ms / 1000:.0f} s)", *judged]
    if args.days:
        judged, batches = per_day(sampler.samples, args.days, args.day_seconds), batch_trend(watcher.committed())
        lines += day_lines(judged, batches)
        found = {**found, "stores_per_day": judged, "batch_duration": batches}
    document = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]), "source": args.source,
        "sink": soak.watcher.reading.spec,
        "lines_per_message": args.lines_per_message if by_message else None, "rate": args.rate,
        "minutes": args.minutes, "days": args.days, "day_seconds": args.day_seconds, "retain": args.retain,
        "job_args": args.job_arg, "sensors": len(workload.sensors), "referenced": len(workload.referenced),
        "workflows": workload.workflows, "partitions": args.partitions, "fill_s": workload.fill_ms / 1000,
        "warmup_s": args.warmup, "state_from_s": state_from, "fed_s": soak.fed_s, "drained_s": soak.drained_s,
        "exit_code": soak.exit_code, "failure": soak.failure, "minutes_table": rows, "verdict": found,
        "steps": soak.steps, "samples": [asdict(s) for s in sampler.samples],
        "batches": [asdict(b) for b in watcher.committed()],
        "batch_lags": batch_lags(watcher, feed),
        "chunks": {"count": len(feed.chunks), "lateness_p99_s": percentile([c.lateness for c in feed.chunks], 99),
                   "written_newest_ts_readings": [(c.written, c.newest_ts, c.readings) for c in feed.chunks]},
        "window_results": len(watcher.results), "other_results": watcher.other_results,
        "latency_from_write_s": [x[1] for x in lat],
    }
    return lines, document
