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

import fcntl
import hashlib
import json
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sensorscript.runtime.ingest import mqtt
from sensorscript.runtime.output.alerts import retry
from sensorscript.runtime.output.alerts.kafka_topic import KafkaTopic
from sensorscript.runtime.output.alerts.mqtt_topic import Topic
from sensorscript.runtime.output.alerts.notifier import SEND_TIMEOUT_S, Failure, Notifier, Request
from sensorscript.runtime.output.alerts.outbox import FOLDER, Outbox
from sensorscript.runtime.output.alerts.payload import FIRING, stream_of
from sensorscript.runtime.output.alerts.postgres_table import AlarmsTable
from sensorscript.runtime.output.alerts.settings import GROUP_BY, GROUP_WAIT_S, LIMIT, Target
from sensorscript.runtime.output.alerts.webhook import Webhook

LOCK = "deliver.lock"  # OUT/alerts/deliver.lock
STATUS_EVERY_S = 1.0  # the outbox's counts go into status.json at most this often
TRIM_EVERY_S = 60.0  # and trims the acknowledged alarms kept this often
REQUESTS_IN_FLIGHT = 8  # requests to one target at once (its sender threads)
QUEUED = 256  # requests handed to them and not finished at most (a template of one alarm a request: a storm
#               goes in rounds of this many, not of REQUESTS_IN_FLIGHT)
SCAN = 20_000  # alarms a dispatcher looks at in one round


class Busy(Exception):
    """Another process delivers this outbox's alarms."""


def group_of(stream: str, by: str) -> tuple[dict, str]:
    """An alarm's group labels and key under --alerts-group-by, from its stream."""
    if by == "none":
        return {}, ""
    value = stream if by == "stream" else stream.rsplit(".", 1)[0]
    return {by: value}, f"{by}={value}"


def silenced_by(stream: str, silences: list[dict]) -> bool:
    return any(s["what"] in (stream.rsplit(".", 1)[0], stream) for s in silences)


class Deliverer:
    """The delivery threads of a run (or of `sscript alerts deliver`): a dispatcher and its senders
    per target, and the status thread. Each thread has its own connection to the outbox."""

    def __init__(self, out: Path, targets: list[Target], template=None, tls: mqtt.Tls = mqtt.Tls(),
                 limit: int = LIMIT, on_counts=None, login: mqtt.Login = mqtt.Login(mqtt.ALERTS_PASSWORD_VARIABLE),
                 group_by: str = GROUP_BY, group_wait_s: float = GROUP_WAIT_S, routing_key: str | None = None,
                 kafka_options: tuple[str, ...] = ()):
        self.out, self.targets, self.template, self.tls, self.limit = Path(out), targets, template, tls, limit
        self.login, self.routing_key = login, routing_key  # an MQTT target's password; PagerDuty's key
        self.group_by, self.group_wait_s = group_by, group_wait_s
        self.kafka_options = kafka_options  # a kafka:// target's client settings (the run's --kafka-option)
        self.on_counts = on_counts  # told the outbox's counts when they change (status.json)
        self.woken = {t.key: threading.Event() for t in targets}
        self.stopping = threading.Event()
        self.flushing = threading.Event()  # the input ended: no group waits for more
        self.local = threading.local()  # each sender thread's outbox connection
        self.connections: list[Outbox] = []
        self.lock = threading.Lock()
        self.lock_file = None  # OUT/alerts/deliver.lock, held while this process delivers
        self.threads = [threading.Thread(target=self._dispatch, args=(t,), name=f"sscript-alerts-{i}", daemon=True)
                        for i, t in enumerate(targets)]
        self.threads.append(threading.Thread(target=self._keep, name="sscript-alerts-status", daemon=True))

    def start(self, wait: bool = True) -> "Deliverer":
        """Start delivering, once this process holds OUT/alerts/deliver.lock: one process delivers an
        outbox at a time (two would send an incident's states out of order). `wait`: until the other
        lets go (the job's threads); otherwise `Busy` at once (a command)."""
        self.lock_file = open(self.out / FOLDER / LOCK, "a+")
        try:
            fcntl.flock(self.lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                self.lock_file.close()
                raise Busy(f"another process delivers the alarms of {self.out} now (a job running on it, or "
                           f"sscript alerts deliver)") from None
            threading.Thread(target=self._start_when_free, name="sscript-alerts-lock", daemon=True).start()
            return self
        for thread in self.threads:
            thread.start()
        return self

    def _start_when_free(self) -> None:
        fcntl.flock(self.lock_file, fcntl.LOCK_EX)
        if not self.stopping.is_set():
            for thread in self.threads:
                thread.start()

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
        deadline = time.monotonic() + 3 * SEND_TIMEOUT_S + 5  # a request in flight ends by then
        for thread in self.threads:
            if thread.is_alive():
                thread.join(timeout=max(0.0, deadline - time.monotonic()))
        if self.lock_file is not None:
            self.lock_file.close()  # lets go of the lock
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
        if target.kind == "kafka":
            return KafkaTopic(target, self.kafka_options)
        if target.kind == "postgresql":
            return AlarmsTable(target)
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
                try:
                    if sender is None and outbox.waiting([target.key]):
                        sender = self._sender(target)
                    pause = self._round(outbox, target, sender, flight, pool) if sender is not None else STATUS_EVERY_S
                    pause = min(pause, STATUS_EVERY_S)  # what another process added, a silence: seen within a second
                except Exception as exc:  # noqa: BLE001 (a TLS file missing, the disk full, ...: said in the
                    # status, tried again; the thread stays)
                    try:
                        outbox.failed(target.key, f"{type(exc).__name__}: {exc}")
                    except Exception:  # noqa: BLE001 (the outbox itself fails: the next round tries again)
                        pass
                    pause = retry.BACKOFF_LAST_S
                woken.wait(max(0.01, pause))
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            if sender is not None:
                sender.close()
            outbox.close()

    def _round(self, outbox: Outbox, target: Target, sender: Notifier, flight: "_Flight", pool) -> float:
        """Hand what is ready to go to the senders; seconds until something more may be."""
        now = time.time()
        room = QUEUED - flight.requests()
        if room <= 0:
            return STATUS_EVERY_S  # a sender finishing wakes the dispatcher
        # The incidents in flight first, then those waiting for a retry: a sender whose request failed
        # marks its alarms for a retry before it leaves the flight, so an incident is in one or the
        # other (read the other way round, a failure between the two reads left it in neither, and
        # the incident's next state went out before the one that failed: issue #40's storm test).
        flying = flight.incidents()
        blocked, retry_at = outbox.deferred(target.key, now)
        blocked |= flying
        next_at = min(now + STATUS_EVERY_S, retry_at or now + STATUS_EVERY_S)
        ready = []
        for seq, incident, state, enqueued, attempts in outbox.ready(target.key, now, SCAN):
            if incident in blocked:  # an incident's states go one at a time, in order
                continue
            blocked.add(incident)
            ready.append((seq, incident, state, enqueued, attempts, stream_of(incident)))
        ready = self._unsilenced(outbox, target, ready, now)
        groups = defaultdict(list)
        for item in ready:
            groups[group_of(item[5], self.group_by)[1]].append(item)
        chosen = []
        for items in sorted(groups.values(), key=lambda items: items[0][0]):
            due = min(item[3] for item in items) + self.group_wait_s
            if not (self.flushing.is_set() or len(items) >= sender.most or due <= now):
                next_at = min(next_at, due)
                continue
            for first in range(0, len(items), sender.most):
                if len(chosen) >= room:
                    break
                chosen.append(items[first:first + sender.most])
        if not chosen:
            return next_at - now
        bodies = outbox.bodies([item[0] for chunk in chosen for item in chunk])
        fired = []
        for chunk in chosen:
            labels, key = group_of(chunk[0][5], self.group_by)
            request = Request([i[0] for i in chunk], [json.loads(bodies[i[0]]) for i in chunk], labels, key)
            fired += [i[1] for i in chunk if i[2] == FIRING]
            flight.add(request)
            pool.submit(self._send, target, sender, request, max(i[4] for i in chunk), flight)
        if fired and outbox.any_silenced(target.key):
            outbox.sent_again(target.key, fired)
        return 0.0 if len(chosen) >= room else next_at - now

    def _unsilenced(self, outbox: Outbox, target: Target, ready: list, now: float) -> list:
        """The alarms not held back by a silence; those that are leave the target's queue."""
        silences = outbox.silences(now)
        later = [item[1] for item in ready if item[2] != FIRING]
        held_incidents = outbox.silenced_incidents(target.key, later) if later and outbox.any_silenced(target.key) \
            else set()
        if not silences and not held_incidents:
            return ready
        held, going = [], []
        for item in ready:
            hold = silenced_by(item[5], silences) if item[2] == FIRING else item[1] in held_incidents
            (held if hold else going).append(item)
        if held:
            outbox.held_back(target.key, [(item[0], item[1]) for item in held])
        return going

    def _send(self, target: Target, sender: Notifier, request: Request, attempts: int, flight: "_Flight") -> None:
        failed = False
        try:
            outbox = self._outbox()
            try:
                sender.send(request)
                outbox.acknowledged(target.key, request.seqs, revive=True)
            except Failure as exc:
                failed = True
                self._failed(outbox, target, request, attempts, exc)
            except Exception as exc:  # noqa: BLE001 (a template's error, a library's: counted and retried)
                failed = True
                self._failed(outbox, target, request, attempts, Failure(f"{type(exc).__name__}: {exc}", lasting=True))
        except Exception:  # noqa: BLE001 (the outbox failed: what was not acknowledged is sent again)
            failed = True
        finally:
            flight.remove(request)
            if failed or flight.requests() <= QUEUED // 2:
                self.woken[target.key].set()

    @staticmethod
    def _failed(outbox: Outbox, target: Target, request: Request, attempts: int, failure: Failure) -> None:
        if failure.delivered:
            outbox.acknowledged(target.key, sorted(failure.delivered))
        rest = [seq for seq in request.seqs if seq not in failure.delivered]
        retry_at = time.time() + retry.delay(attempts + 1, failure.lasting, failure.retry_after)
        outbox.failed(target.key, str(failure), rest, retry_at,
                      revivable=not failure.lasting and failure.retry_after is None)

    def _keep(self) -> None:
        outbox = Outbox(self.out, self.limit, durable=False)
        said, trimmed = None, time.monotonic()
        try:
            while not self.stopping.wait(STATUS_EVERY_S):
                try:
                    if time.monotonic() - trimmed >= TRIM_EVERY_S:
                        trimmed = time.monotonic()
                        outbox.trim()
                    counts = outbox.counts()
                    if self.on_counts is not None and counts != said:  # status.json is written when it changed
                        self.on_counts(counts)
                    said = counts
                except Exception:  # noqa: BLE001 (the outbox busy or the disk full a moment: next second)
                    pass
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
