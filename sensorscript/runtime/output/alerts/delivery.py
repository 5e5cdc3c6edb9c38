"""The delivery threads (`Deliverer`): per target, a dispatcher that groups what waits and hands the
requests to a few sender threads, so that a storm goes out in parallel batches, a receiver that is
slow or down holds up no other target (nor a batch: the batch path only inserts rows), and a failed
request puts off its own alarms alone (retry.py). At least once, oldest first; an incident's states
in their order (its next state waits until the one before is acknowledged). One more thread tells
the status the outbox's counts when they change and trims what was acknowledged.

Grouping (Alertmanager's `group_by` and `group_wait`): alarms of one group (`--alerts-group-by`:
workflow, stream or none) go in one request once the oldest of them has waited `--alerts-group-wait`,
or at once when they fill a request or the input has ended (`flush`). Silences (outbox.py) are
applied here, as each alarm is about to go, so that one made during a storm holds back what still waits.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sensorscript.runtime.ingest import mqtt
from sensorscript.runtime.output.alerts import retry
from sensorscript.runtime.output.alerts.mqtt_topic import Topic
from sensorscript.runtime.output.alerts.notifier import SEND_TIMEOUT_S, Failure, Notifier, Request
from sensorscript.runtime.output.alerts.outbox import Outbox
from sensorscript.runtime.output.alerts.payload import FIRING
from sensorscript.runtime.output.alerts.settings import GROUP_BY, GROUP_WAIT_S, LIMIT, Target
from sensorscript.runtime.output.alerts.webhook import Webhook

STATUS_EVERY_S = 1.0  # the outbox's counts go into status.json at most this often
TRIM_EVERY_S = 60.0  # and trims the acknowledged alarms kept this often
REQUESTS_IN_FLIGHT = 8  # requests to one target at once
SCAN = 20_000  # alarms a dispatcher looks at in one round


def group_of(alarm: dict, by: str) -> tuple[dict, str]:
    """An alarm's group labels and key under --alerts-group-by."""
    if by == "none":
        return {}, ""
    return {by: alarm[by]}, f"{by}={alarm[by]}"


def silenced_by(alarm: dict, silences: list[dict]) -> bool:
    return any(s["what"] in (alarm["workflow"], alarm["stream"]) for s in silences)


class Deliverer:
    """The delivery threads of a run (or of `sscript alerts deliver`): a dispatcher and its senders
    per target, and the status thread. Each thread has its own connection to the outbox."""

    def __init__(self, out: Path, targets: list[Target], template=None, tls: mqtt.Tls = mqtt.Tls(),
                 limit: int = LIMIT, on_counts=None, login: mqtt.Login = mqtt.Login(mqtt.ALERTS_PASSWORD_VARIABLE),
                 group_by: str = GROUP_BY, group_wait_s: float = GROUP_WAIT_S, routing_key: str | None = None):
        self.out, self.targets, self.template, self.tls, self.limit = Path(out), targets, template, tls, limit
        self.login, self.routing_key = login, routing_key  # an MQTT target's password; PagerDuty's key
        self.group_by, self.group_wait_s = group_by, group_wait_s
        self.on_counts = on_counts  # told the outbox's counts when they change (status.json)
        self.woken = {t.key: threading.Event() for t in targets}
        self.stopping = threading.Event()
        self.flushing = threading.Event()  # the input ended: no group waits for more
        self.local = threading.local()  # each sender thread's outbox connection
        self.connections: list[Outbox] = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._dispatch, args=(t,), name=f"sscript-alerts-{i}", daemon=True)
                        for i, t in enumerate(targets)]
        self.threads.append(threading.Thread(target=self._keep, name="sscript-alerts-status", daemon=True))

    def start(self) -> "Deliverer":
        for thread in self.threads:
            thread.start()
        return self

    def wake(self) -> None:
        """New alarms wait: every target's dispatcher looks now."""
        for event in self.woken.values():
            event.set()

    def flush(self) -> None:
        """No more alarms come (the input ended): what waits goes without waiting for its group."""
        self.flushing.set()
        self.wake()

    def alive(self) -> bool:
        return any(thread.is_alive() for thread in self.threads[:-1])

    def stop(self) -> None:
        self.stopping.set()
        self.wake()
        deadline = time.monotonic() + 2 * SEND_TIMEOUT_S + 5
        for thread in self.threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        with self.lock:
            for outbox in self.connections:
                outbox.close()
            self.connections.clear()
        if self.on_counts is not None:  # as the threads leave it
            outbox = Outbox(self.out, self.limit)
            self.on_counts(outbox.counts())
            outbox.close()

    def _sender(self, target: Target) -> Notifier:
        if target.kind == "mqtt":
            ident = hashlib.sha1(f"{self.out.resolve()}|{target.key}".encode()).hexdigest()[:12]
            return Topic(target, self.tls, f"sscript-alerts-{ident}", self.login)
        return Webhook(target, self.template, self.routing_key)

    def _outbox(self) -> Outbox:
        """The calling sender thread's connection to the outbox."""
        outbox = getattr(self.local, "outbox", None)
        if outbox is None:
            outbox = self.local.outbox = Outbox(self.out, self.limit, durable=False)
            with self.lock:
                self.connections.append(outbox)
        return outbox

    def _dispatch(self, target: Target) -> None:
        outbox = Outbox(self.out, self.limit, durable=False)
        woken, sender, flight = self.woken[target.key], None, _Flight()
        pool = ThreadPoolExecutor(REQUESTS_IN_FLIGHT, thread_name_prefix="sscript-alerts-send")
        try:
            while not self.stopping.is_set():
                woken.clear()
                if sender is None and outbox.waiting([target.key]):
                    try:
                        sender = self._sender(target)
                    except Exception as exc:  # noqa: BLE001 (a TLS file missing, ...: said in the status, tried again)
                        outbox.failed(target.key, str(exc))
                        woken.wait(retry.BACKOFF_LAST_S)
                        continue
                pause = self._round(outbox, target, sender, flight, pool) if sender is not None else STATUS_EVERY_S
                woken.wait(max(0.01, min(pause, STATUS_EVERY_S)))
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            if sender is not None:
                sender.close()
            outbox.close()

    def _round(self, outbox: Outbox, target: Target, sender: Notifier, flight: "_Flight", pool) -> float:
        """Hand what is ready to go to the senders; seconds until something more may be."""
        now = time.time()
        ready, next_at = [], now + STATUS_EVERY_S
        blocked = flight.incidents()
        for seq, incident, body, enqueued, next_try, attempts in outbox.queue(target.key, SCAN):
            if incident in blocked or flight.has(seq):
                blocked.add(incident)
                continue
            blocked.add(incident)  # an incident's states go one at a time, in order
            if next_try > now:
                next_at = min(next_at, next_try)
                continue
            ready.append((seq, incident, json.loads(body), enqueued, attempts))
        ready = self._unsilenced(outbox, target, ready, now)
        groups = defaultdict(list)
        for item in ready:
            groups[group_of(item[2], self.group_by)[1]].append(item)
        for items in groups.values():
            due = min(item[3] for item in items) + self.group_wait_s
            if not (self.flushing.is_set() or len(items) >= sender.most or due <= now):
                next_at = min(next_at, due)
                continue
            for first in range(0, len(items), sender.most):
                if flight.requests() >= REQUESTS_IN_FLIGHT:
                    return STATUS_EVERY_S  # a sender finishing wakes the dispatcher
                chunk = items[first:first + sender.most]
                labels, key = group_of(chunk[0][2], self.group_by)
                request = Request([i[0] for i in chunk], [i[2] for i in chunk], labels, key)
                flight.add(request)
                pool.submit(self._send, target, sender, request, max(i[4] for i in chunk), flight)
        return next_at - now

    def _unsilenced(self, outbox: Outbox, target: Target, ready: list, now: float) -> list:
        """The alarms not held back by a silence; those that are leave the target's queue."""
        silences = outbox.silences(now)
        later = [item[1] for item in ready if item[2]["state"] != FIRING]
        held_incidents = outbox.silenced_incidents(target.key, later) if later else set()
        held, going = [], []
        for item in ready:
            alarm = item[2]
            hold = silenced_by(alarm, silences) if alarm["state"] == FIRING else item[1] in held_incidents
            (held if hold else going).append(item)
        if held:
            outbox.held_back(target.key, [(item[0], item[1]) for item in held])
        fired = [item[1] for item in going if item[2]["state"] == FIRING]
        if fired:
            outbox.sent_again(target.key, fired)
        return going

    def _send(self, target: Target, sender: Notifier, request: Request, attempts: int, flight: "_Flight") -> None:
        outbox = self._outbox()
        try:
            try:
                sender.send(request)
                outbox.acknowledged(target.key, request.seqs, revive=True)
            except Failure as exc:
                self._failed(outbox, target, request, attempts, exc)
            except Exception as exc:  # noqa: BLE001 (a template's error, a library's: counted and retried)
                self._failed(outbox, target, request, attempts, Failure(f"{type(exc).__name__}: {exc}", lasting=True))
        finally:
            flight.remove(request)
            self.woken[target.key].set()

    @staticmethod
    def _failed(outbox: Outbox, target: Target, request: Request, attempts: int, failure: Failure) -> None:
        if failure.delivered:
            outbox.acknowledged(target.key, sorted(failure.delivered))
        rest = [seq for seq in request.seqs if seq not in failure.delivered]
        retry_at = time.time() + retry.delay(attempts + 1, failure.lasting, failure.retry_after)
        outbox.failed(target.key, str(failure), rest, retry_at)

    def _keep(self) -> None:
        outbox = Outbox(self.out, self.limit, durable=False)
        said, trimmed = None, time.monotonic()
        try:
            while not self.stopping.wait(STATUS_EVERY_S):
                if time.monotonic() - trimmed >= TRIM_EVERY_S:
                    outbox.trim()
                    trimmed = time.monotonic()
                counts = outbox.counts()
                if self.on_counts is not None and counts != said:  # status.json is written when something changed
                    self.on_counts(counts)
                said = counts
        finally:
            outbox.close()


class _Flight:
    """A target's requests in flight: their alarms and incidents (shared by its dispatcher and senders)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.seqs: dict[int, str] = {}
        self.count = 0

    def add(self, request: Request) -> None:
        with self.lock:
            self.seqs.update(zip(request.seqs, request.incidents))
            self.count += 1

    def remove(self, request: Request) -> None:
        with self.lock:
            for seq in request.seqs:
                self.seqs.pop(seq, None)
            self.count -= 1

    def has(self, seq: int) -> bool:
        with self.lock:
            return seq in self.seqs

    def incidents(self) -> set[str]:
        with self.lock:
            return set(self.seqs.values())

    def requests(self) -> int:
        with self.lock:
            return self.count
