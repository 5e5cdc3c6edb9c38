"""The delivery threads (`Deliverer`): one per target, each with its own connection to the outbox, so
that a receiver that is slow or down never holds up a batch (the batch path only inserts rows) nor
another target; at least once, oldest first, a failure putting off only that target (retry.py). One
more thread tells the status the outbox's counts when they change and trims what was acknowledged.
"""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path

from sensorscript.runtime.ingest import mqtt
from sensorscript.runtime.output.alerts.mqtt_topic import Topic
from sensorscript.runtime.output.alerts.notifier import SEND_TIMEOUT_S, Failure, Notifier
from sensorscript.runtime.output.alerts.outbox import Outbox
from sensorscript.runtime.output.alerts.retry import Backoff
from sensorscript.runtime.output.alerts.settings import LIMIT, Target
from sensorscript.runtime.output.alerts.webhook import Webhook

STATUS_EVERY_S = 1.0  # the outbox's counts go into status.json at most this often
TRIM_EVERY_S = 60.0  # and trims the acknowledged alarms kept this often


class Deliverer:
    """The delivery threads: one per target, so that a receiver that is slow or down holds up no
    other, each sending its target's waiting alarms oldest first, one at a time; a failure puts that
    target off (`Backoff`). One more thread tells the status the outbox's counts when they change,
    and trims what was acknowledged. Each thread has its own connection to the outbox."""

    def __init__(self, out: Path, targets: list[Target], template=None, tls: mqtt.Tls = mqtt.Tls(),
                 limit: int = LIMIT, on_counts=None, login: mqtt.Login = mqtt.Login(mqtt.ALERTS_PASSWORD_VARIABLE)):
        self.out, self.targets, self.template, self.tls, self.limit = Path(out), targets, template, tls, limit
        self.login = login  # an MQTT target's password
        self.on_counts = on_counts  # told the outbox's counts when they change (status.json)
        self.woken = {t.key: threading.Event() for t in targets}
        self.stopping = threading.Event()
        self.backoff = {t.key: Backoff() for t in targets}
        self.threads = [threading.Thread(target=self._deliver_to, args=(t,), name=f"sscript-alerts-{i}", daemon=True)
                        for i, t in enumerate(targets)]
        self.threads.append(threading.Thread(target=self._keep, name="sscript-alerts-status", daemon=True))

    def start(self) -> "Deliverer":
        for thread in self.threads:
            thread.start()
        return self

    def wake(self) -> None:
        """New alarms wait: every target's thread looks now."""
        for event in self.woken.values():
            event.set()

    def alive(self) -> bool:
        return any(thread.is_alive() for thread in self.threads[:-1])

    def stop(self) -> None:
        self.stopping.set()
        self.wake()
        deadline = time.monotonic() + 2 * SEND_TIMEOUT_S + 5
        for thread in self.threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        if self.on_counts is not None:  # as the threads leave it
            outbox = Outbox(self.out, self.limit)
            self.on_counts(outbox.counts())
            outbox.close()

    def _sender(self, target: Target) -> Notifier:
        if target.kind == "mqtt":
            ident = hashlib.sha1(f"{self.out.resolve()}|{target.key}".encode()).hexdigest()[:12]
            return Topic(target, self.tls, f"sscript-alerts-{ident}", self.login)
        return Webhook(target, self.template)

    def _deliver_to(self, target: Target) -> None:
        outbox = Outbox(self.out, self.limit, durable=False)
        woken, backoff, senders = self.woken[target.key], self.backoff[target.key], {}
        try:
            while not self.stopping.is_set():
                woken.clear()
                if not self._deliver(outbox, target, senders):
                    put_off = backoff.next_try - time.monotonic()
                    woken.wait(min(put_off, STATUS_EVERY_S) if put_off > 0 else STATUS_EVERY_S)
        finally:
            for sender in senders.values():
                sender.close()
            outbox.close()

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

    def _deliver(self, outbox: Outbox, target: Target, senders: dict) -> bool:
        """Send what waits for `target`, a round of it; True when more may wait."""
        backoff = self.backoff[target.key]
        if backoff.next_try > time.monotonic():
            return False
        waiting = outbox.waiting_for(target.key)
        if waiting and target.key not in senders:
            try:
                senders[target.key] = self._sender(target)
            except Exception as exc:  # noqa: BLE001 (a TLS file missing, ...: said in the status, tried again)
                outbox.failed(target.key, str(exc))
                backoff.failed(True)
                return False
        sender = senders.get(target.key)
        for seq, ident, body in waiting:
            if self.stopping.is_set():
                return False
            try:
                sender.send(ident, body)
            except Failure as exc:
                outbox.failed(target.key, str(exc))
                backoff.failed(exc.lasting)
                return False
            except Exception as exc:  # noqa: BLE001 (a template's error, a library's: counted and retried)
                outbox.failed(target.key, f"{type(exc).__name__}: {exc}")
                backoff.failed(True)
                return False
            outbox.acknowledged(target.key, seq)
            backoff.succeeded()
        return len(waiting) > 0
