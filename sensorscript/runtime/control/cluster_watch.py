"""On a cluster: what the driver sees of its executors, every few seconds, for `sscript status`.

A worker that dies or loses its network takes its executor with it; Spark runs the executor's
tasks again elsewhere and the job goes on, slower. Spark says so in its log only. The watch polls
Spark's status tracker from the driver (no listener in the JVM: its status store has every executor the application had, the removed
with when and why, and their failed tasks) and keeps
in the status the executors the job has now, those that do not answer (a connection to each, let go
at once: a worker cut off from the network is said within seconds, while Spark waits two minutes
for its heartbeat before it gives the executor up), those it lost and when, the tasks that failed
and ran again, and how long the stage running longest has run.
"""

from __future__ import annotations

import socket
import threading
import time

EVERY_S = 2.0


class ClusterWatch:
    def __init__(self, spark, status, echo=print, every_s: float = EVERY_S):
        self.context, self.status, self.echo, self.every_s = spark.sparkContext, status, echo, every_s
        self.said_failure = False
        self.stopped = threading.Event()
        self.thread: threading.Thread | None = None
        self.silent: dict[str, float] = {}  # executor -> since when it has not answered

    @staticmethod
    def start(spark, status, echo=print) -> "ClusterWatch | None":
        """A running watch for a job on a cluster (None for local[N]: one process, nothing to lose)."""
        if spark.sparkContext.master.startswith("local"):
            return None
        watch = ClusterWatch(spark, status, echo)
        watch.thread = threading.Thread(target=watch._loop, name="cluster-watch", daemon=True)
        watch.thread.start()
        return watch

    def stop(self) -> None:
        self.stopped.set()
        if self.thread is not None:
            self.thread.join(10)

    def _loop(self) -> None:
        while not self.stopped.wait(self.every_s):
            try:
                self.look()
            except Exception as exc:  # noqa: BLE001  Spark stopping under it: the next look, or none
                if not self.said_failure and not self.stopped.is_set():
                    self.said_failure = True
                    self.echo(f"warning: the status cannot tell the cluster's executors: {exc.__class__.__name__}: "
                              f"{str(exc).splitlines()[0] if str(exc) else ''}")

    def look(self) -> None:
        """One poll of Spark's status store (every executor the application had, the removed too,
        with when and why, and their failed tasks) and of the stages running."""
        store = self.context._jsc.sc().statusStore()
        executors, lost, failed = [], [], 0
        summaries = store.executorList(False).iterator()
        while summaries.hasNext():
            summary = summaries.next()
            if summary.id() == "driver":
                continue
            failed += summary.failedTasks()
            if summary.isActive():
                executors.append(summary.hostPort())
            else:
                removed, reason = summary.removeTime(), summary.removeReason()
                lost.append({"address": summary.hostPort().rsplit(":", 1)[0],
                             "at": removed.get().getTime() / 1000 if removed.isDefined() else None,
                             "reason": _short(reason.get()) if reason.isDefined() else ""})
        now = time.time()
        for executor in executors:  # one that does not answer: its worker is down or cut off
            if _answers(executor):
                self.silent.pop(executor, None)
            else:
                self.silent.setdefault(executor, now)
        for executor in set(self.silent) - set(executors):
            del self.silent[executor]
        tracker = self.context._jsc.sc().statusTracker()
        running_since = None
        for stage in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage)
            if info.isDefined() and info.get().submissionTime() > 0:
                since = info.get().submissionTime() / 1000
                running_since = since if running_since is None else min(running_since, since)
        address = lambda executor: executor.rsplit(":", 1)[0]  # noqa: E731
        self.status.cluster_seen(sorted(address(e) for e in executors), lost,
                                 {address(e): since for e, since in self.silent.items()}, failed, running_since, now)


def _short(reason: str) -> str:
    """Spark's reason an executor was removed, its first line (it may go on with a stack trace)."""
    line = reason.strip().splitlines()[0] if reason.strip() else ""
    return line if len(line) <= 160 else line[:157] + "..."


def _answers(executor: str, timeout_s: float = 1.0) -> bool:
    """Whether an executor's block manager takes a connection (and is let go at once)."""
    host, _, port = executor.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
        return True
    except OSError:
        return False
