"""One soak run: start the job on a priming chunk, wait for its first batch, feed it for `--minutes`
(or --find-max's steps) while sampling every second, let it take what was fed (up to 30 s), stop it.
A run whose job stops (or stops reading the socket) ends there, with the job's first error line as
its failure. A broker of the feed's own (--source mqtt, kafka) is stopped at the end whatever
happened (the Kafka one after the job).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from .feed import Clock, Feed, FileFeed, KafkaFeed, MqttFeed, Readings, SocketFeed
from .findmax import judge_step
from .job import JobProcess
from .sampling import Sampler
from .sink import Reading, SinkWatcher, checkpoint_durations
from .stores import STORES_EVERY
from .workload import Workload

LAG_EVERY = 1.0


@dataclass
class Soak:
    """A finished run: what was fed, what the job wrote, and how it ended."""

    feed: Feed
    watcher: SinkWatcher
    sampler: Sampler
    steps: list[dict]
    fed_s: float  # seconds of paced feed
    observed_s: float  # seconds from the feed's start to the job's stop
    drained_s: float
    exit_code: int | None
    failure: str | None  # why the run ended early, if it did


def job_options(args, sink: str) -> tuple[str, ...]:
    """job.py's options beyond --input and --out: the sink unless it is the default; with --days, late
    readings corrected and the files read deleted; --retain and --job-arg as given."""
    options = [] if sink.startswith("sqlite:") else ["--sink", sink]
    options += ["--late", "correct", *(["--input-cleanup", "delete"] if args.source == "file" else [])] \
        if args.days else []
    options += [f"--retain={retain}" for retain in args.retain]
    return (*options, *args.job_arg)


def run(args, out: Path, workload: Workload, reading: Reading, echo) -> Soak:
    """Start the job, feed it for `args.minutes` (or --find-max's steps) while sampling, stop it;
    `reading` reads the sink it writes to (soaking.sink)."""
    started = time.time()
    clock = Clock(86_400 / args.day_seconds, int(started * 1000)) if args.days else Clock()
    readings = Readings(workload.sensors, workload.referenced, args.rate, speedup=clock.speedup)
    if args.source == "mqtt":
        feed = MqttFeed(readings, out / "broker", args.lines_per_message, clock)
    elif args.source == "kafka":
        feed = KafkaFeed(readings, out / "broker", args.lines_per_message, args.partitions, clock)
    else:
        feed = FileFeed(readings, out / "input", clock) if args.source == "file" else SocketFeed(readings, clock)
    try:
        if not isinstance(feed, SocketFeed):  # the socket's is written once the job has connected
            feed.prime()
        job = JobProcess(out / "job", feed.source, out / "job.log", job_options(args, reading.spec))
    except BaseException:  # no job: its source's broker goes at once
        feed.close()
        feed.release()
        raise
    echo(f"job: {' '.join(job.command)} (log: {out / 'job.log'})")
    watcher = SinkWatcher(reading, job)
    steps: list[dict] = []
    failure = None
    try:
        if isinstance(feed, SocketFeed):
            feed.accept(job, timeout=600)
            feed.prime()
        watcher.start()
        deadline = time.time() + 600
        while not watcher.batches:
            if not job.alive() or time.time() > deadline:
                raise SystemExit("the job did not commit its first batch:\n" + "\n".join(job.tail[-20:]))
            time.sleep(0.2)
        echo(f"first batch committed {watcher.committed()[0].committed - started:.1f} s after the start; feeding "
             f"{args.rate:,.0f} readings/s ({args.rate / len(workload.sensors):g} Hz per sensor) "
             f"for {args.minutes:g} min through the {args.source} source"
             + (f": {args.days:g} days of event time, a day every {args.day_seconds:g} s" if args.days else ""))
        feed.until = time.time() + args.minutes * 60
        feed.go.set()
        feed.start()
        while feed.started_at is None:
            time.sleep(0.01)
        sampler = Sampler(job, feed, watcher, out / "job" / "checkpoint" / "state", echo,
                          stores_of=out / "job" if args.days else None,
                          stores_every=min(STORES_EVERY, args.day_seconds / 6))
        step_end = feed.started_at + args.warmup + args.step_seconds
        while not feed.done.is_set():
            if not job.alive():
                failure = f"the job stopped after {time.time() - feed.started_at:.0f} s of feed: {job.error()}"
                break
            sampler.sample()
            if args.find_max and time.time() >= step_end:
                lo = step_end - args.step_seconds - feed.started_at if steps else args.warmup
                step = judge_step(sampler.samples, feed, lo, step_end - feed.started_at, readings.rate,
                                  args.max_lag, watcher)
                steps.append(step)
                echo(f"step at {step['rate']:,.0f} readings/s: lag trend {step['lag_trend']:+.4f} s/s, "
                     f"largest {step['lag_max']:.1f} s -> {'passes' if step['passed'] else 'fails'}")
                if not step["passed"]:
                    break
                readings.rate *= args.step_factor
                step_end += args.step_seconds
            time.sleep(LAG_EVERY)
        fed_until = time.time()
        feed.close()
        if feed.error and failure is None:
            failure = f"the feed stopped after {fed_until - feed.started_at:.0f} s: {feed.error}"
        # Let the job take what was fed (up to 30 s) before stopping it: every partition has processed
        # the newest reading of its own sensors, which lies within one reading of a sensor of the
        # newest written (in event time: with --days, a simulated day every --day-seconds, minutes).
        newest = feed.newest_written()
        slack = max(100, int(1000 * args.sensors / readings.rate * clock.speedup))
        while failure is None and time.time() < fed_until + 30 and job.alive():
            processed = watcher.processed_ms()
            if processed is not None and newest is not None and processed >= newest - slack:
                break
            sampler.sample()
            time.sleep(LAG_EVERY)
        drained = time.time() - fed_until
    finally:
        stopped = time.time()
        feed.close()
        try:
            code = job.stop(echo)
            watcher.stop()
        finally:
            feed.release()  # a broker of its own, once the job no longer reads it
    if failure:
        echo(failure)
    checkpoint_durations(out / "job" / "checkpoint" / "state", watcher.batches)
    echo(f"job stopped (exit code {code}); {len(watcher.batches)} batches")
    return Soak(feed, watcher, sampler, steps, fed_until - feed.started_at, stopped - feed.started_at, drained,
                code, failure)
