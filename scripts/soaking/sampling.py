"""Sampling while the job runs, from the feed, the sink and the processes' /proc entries (psutil):
  lag          every second: the newest event time written to the source minus the job's newest
               processed event time, the smallest over partitions of the `max_ts` gauge of their
               latest committed batch (metrics table). Event time is wall time, so this is how far in
               seconds the job's processing is behind the feed (in steps of a chunk: 1 s for files).
               `watermark lag` is the same with the partitions' watermark gauges (what a window waits
               for).
  memory       every 5 s, RSS (and PSS) of the driver (the job's Python process), of its JVM, and of
               the Python workers (every Python process under the JVM: pyspark.daemon and its forks);
               CPU % of the job's processes and of the soak (the feed and the polling), and the
               machine's load average; the state of every partition (soaking.sink). Each such sample
               is printed as a line of progress, and the file feed's old files are deleted then (not
               with --days: the job deletes what it has read, --input-cleanup delete).
  stores       with --days, every 10 s (at least 6 times a simulated day): what the job keeps on disk (soaking.stores). Lags are then in
               wall seconds (event time runs faster).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from .feed import Feed, FileFeed
from .job import JobProcess
from .sink import SinkWatcher, checkpoint_durations
from .stores import STORES_EVERY, measure

MEMORY_EVERY = 5.0


@dataclass
class Sample:
    at: float  # s since the feed began
    lag: float | None  # s
    watermark_lag: float | None
    rss: dict[str, float] | None = None  # MiB: driver, jvm, workers
    pss: dict[str, float] | None = None
    workers: int | None = None
    cpu: dict[str, float] | None = None  # % of one core: job, soak
    load: float | None = None  # the machine's load average over 1 minute
    state_total: float | None = None  # bytes, over partitions
    state_max: float | None = None
    stores: dict | None = None  # --days: soaking.stores.measure


class Sampler:
    def __init__(self, job: JobProcess, feed: Feed, watcher: SinkWatcher, checkpoint: Path, echo,
                 stores_of: Path | None = None, stores_every: float = STORES_EVERY):
        self.job, self.feed, self.watcher, self.checkpoint, self.echo = job, feed, watcher, checkpoint, echo
        self.stores_of = stores_of  # --days: the job's folder, whose stores are sampled
        self.next_stores, self.stores_every = 0.0, stores_every
        self.samples: list[Sample] = []
        self.cpu_seen: dict[int, float] = {}
        self.own = psutil.Process()
        self.own_cpu = self._cpu(self.own)
        self.cpu_at = time.time()
        self.next_memory = 0.0

    @staticmethod
    def _cpu(process: psutil.Process) -> float:
        """CPU seconds of the process's own threads (not of its children: a worker counted while it
        ran would be counted again in its parent's once it ends)."""
        times = process.cpu_times()
        return times.user + times.system

    def lags(self) -> tuple[float | None, float | None]:
        fed = self.feed.newest_written()
        if fed is None:
            return None, None
        processed, watermark = self.watcher.processed_ms("max_ts"), self.watcher.processed_ms("watermark")
        wall = 1000 * self.feed.clock.speedup  # event ms per wall second
        return (None if processed is None else (fed - processed) / wall,
                None if watermark is None else (fed - watermark) / wall)

    def sample(self) -> Sample:
        now = time.time()
        lag, watermark_lag = self.lags()
        sample = Sample(now - self.feed.started_at, lag, watermark_lag)
        if now >= self.next_memory:
            self.next_memory = now + MEMORY_EVERY
            self._memory(sample, now)
            state = [g["state_bytes"] for g in self.watcher.partitions.values() if "state_bytes" in g]
            if state:
                sample.state_total, sample.state_max = float(sum(state)), float(max(state))
            checkpoint_durations(self.checkpoint, self.watcher.batches)
            if isinstance(self.feed, FileFeed) and self.feed.clock.speedup == 1:
                processed = self.watcher.processed_ms()
                if processed is not None:
                    self.feed.clean(int(processed))
            self.echo(self.progress(sample))
        if self.stores_of is not None and now >= self.next_stores:
            self.next_stores = now + self.stores_every
            feed_folder = self.feed.folder if isinstance(self.feed, FileFeed) else None
            sample.stores = measure(self.stores_of, feed_folder, self.watcher.reading)
        self.samples.append(sample)
        return sample

    def _memory(self, sample: Sample, now: float) -> None:
        groups = self.job.processes()
        sample.rss, sample.pss = {}, {}
        job_cpu = 0.0
        for name, processes in groups.items():
            rss = pss = 0.0
            for process in processes:
                try:
                    info = process.memory_full_info()
                    rss += info.rss
                    pss += getattr(info, "pss", info.rss)
                    total = self._cpu(process)
                    job_cpu += total - self.cpu_seen.get(process.pid, total)
                    self.cpu_seen[process.pid] = total
                except psutil.Error:
                    continue
            sample.rss[name], sample.pss[name] = rss / 2**20, pss / 2**20
        sample.workers = len(groups["workers"])
        sample.load = os.getloadavg()[0]
        own = self._cpu(self.own)
        if self.samples:  # the first sample only sets the baselines
            elapsed = max(now - self.cpu_at, 1e-6)
            sample.cpu = {"job": 100 * job_cpu / elapsed, "soak": 100 * (own - self.own_cpu) / elapsed}
        self.own_cpu, self.cpu_at = own, now

    def progress(self, s: Sample) -> str:
        batches = self.watcher.committed()
        last = batches[-1] if batches else None
        window = min(10.0, max(s.at, 1.0))
        fed = sum(c.readings for c in self.feed.chunks if c.written >= time.time() - window) / window
        text = [f"{s.at:6.0f} s", f"fed {fed:,.0f}/s"]
        if last is not None:
            text.append(f"batch {last.batch_id}" + (f" {last.duration:.1f} s" if last.duration else ""))
        if s.lag is not None:
            text.append(f"lag {s.lag:.1f} s")
        if s.state_total is not None:
            text.append(f"state {s.state_max / 2**20:.1f}/{s.state_total / 2**20:.1f} MiB (max/total)")
        if s.rss:
            text.append(f"RSS driver {s.rss['driver']:.0f} MiB, JVM {s.rss['jvm']:.0f} MiB, "
                        f"workers {s.rss['workers']:.0f} MiB ({s.workers})")
        if s.cpu:
            text.append(f"CPU job {s.cpu['job']:.0f} % soak {s.cpu['soak']:.0f} %")
        return "  " + ", ".join(text)
