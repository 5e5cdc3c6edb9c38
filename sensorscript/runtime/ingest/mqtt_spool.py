"""mqtt://[USER@]HOST:PORT/TOPIC through a spool: the driver subscribes to the topic (filters with
`+` and `#`) and writes what comes into small files that the drop-folder source reads, as the
socket spool does (runtime/ingest/spool.py), each deleted once a batch has committed it.

Nothing is lost and nothing is read twice, whatever stops the job:

- The broker keeps the session: the client id is derived from OUT and the host (`client_id`),
  the session is persistent (clean session off) and the subscription QoS 1, so messages
  published while the job is down wait at the broker (up to its `max_queued_messages`:
  docs/SOURCES_AND_SINKS.md, "What the broker must be told").
- A message is acknowledged (PUBACK) only once the spool file that holds it is on disk (written,
  fsynced, renamed, its folder fsynced). A job killed before that gets the message again from the
  broker; from the spool on, the drop-folder source and Spark's checkpoint read each file once.
- A job killed after the file is on disk and before the broker has the PUBACK gets the message
  again, marked as a duplicate (DUP) under the same packet id (MQTT 3.1.1, 4.4). Before a file is
  renamed into the spool, a journal of its messages (packet id and a digest of topic and payload)
  is written beside it; a message marked DUP whose packet id and digest the journal holds is
  acknowledged and dropped. A message the broker sends for the first time never carries DUP, so
  a packet id the broker uses again for a new message is never mistaken for the old one.

A message's payload is one or more lines of readings (CSV or JSON objects, docs/LANGUAGE.md "Input records"). With
`sensor_level`, the sensor id is the topic's level at that position (1 is the first level, -1 the
last) and the lines carry only the time and value (records.py `with_sensor`).
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
from pathlib import Path

from sensorscript.runtime.ingest import mqtt, records, spool

JOURNALS_KEPT = 64  # the journals of the newest spool files; a PUBACK lost in a kill is among them
ROLL_MESSAGES = 5_000  # a spool file is written at the latest when this many messages wait


def client_id(out: Path) -> str:
    """The broker session's id for the job in `out`: the same for every run of that job on this host
    (MQTT 3.1.1 allows 23 characters)."""
    digest = hashlib.sha256(f"{socket.gethostname()}:{Path(out).resolve()}".encode()).hexdigest()
    return f"sscript-{digest[:15]}"


def topic_level(topic: str, level: int) -> str:
    """The topic's level at `level` (1: the first, -1: the last); '' where the topic has no such level."""
    parts = topic.split("/")
    index = level - 1 if level > 0 else level
    return parts[index] if -len(parts) <= index < len(parts) else ""


def check_level(level: int | None) -> int | None:
    if level == 0:
        raise ValueError("--sensor-from-topic 0: levels count from 1 (the first) or from -1 (the last)")
    return level


class MqttSpool:
    """A subscription to `url`'s topic whose messages are written, a file every `roll` seconds (or
    every ROLL_MESSAGES messages), to `folder`, and acknowledged once written. `journal` is the
    folder of the files' journals (outside `folder`, whose files the source reads and deletes)."""

    def __init__(self, url: str, folder: Path, journal: Path, client: str, sensor_level: int | None = None,
                 tls: mqtt.Tls = mqtt.Tls(), roll: float = 0.25, echo=print, login: mqtt.Login = mqtt.Login(),
                 on_broker=None):
        self.address = mqtt.Address.parse(url, "an MQTT source")
        self.folder, self.journal = Path(folder), Path(journal)
        self.client_id = client
        self.sensor_level = check_level(sensor_level)
        self.tls, self.login = tls, login
        self.roll = roll
        self.echo = echo
        # Told when the broker is lost (its address as said, since when, why) and back (None, ""): the status.
        self.on_broker = on_broker or (lambda address, lost_since, reason: None)
        self.messages = self.lines = self.duplicates = 0
        self.error: str | None = None
        self._pending: list[tuple[int, bytes, bytes]] = []  # (packet id, digest, lines) not yet spooled
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._connected = threading.Event()  # subscribed (or refused: `error`)
        self._session_present = False
        self._written: dict[int, bytes] = {}  # packet id -> digest of the newest spooled message with it
        self._client = None
        self._thread = threading.Thread(target=self._run, name="sscript-mqtt-spool", daemon=True)

    @property
    def input(self) -> str:
        return spool.PREFIX + str(self.folder.resolve())

    # ---- connecting ------------------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> "MqttSpool":
        """Recover the spool's journal, connect (retrying for `timeout` seconds, as a broker may start
        after the job) and subscribe; then messages are spooled until `stop`. A broker that refuses
        the user or password fails at once."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.journal.mkdir(parents=True, exist_ok=True)
        self._recover()
        client = self._client = mqtt.client(self.address, self.client_id, self.tls, persistent=True,
                                            manual_ack=True, login=self.login)
        client.on_connect = self._on_connect
        client.on_subscribe = self._on_subscribe
        client.on_disconnect = self._on_disconnect
        client.on_message = self._on_message
        client.max_inflight_messages_set(1_000)
        client.max_queued_messages_set(0)
        deadline = time.monotonic() + timeout
        while True:
            try:
                client.connect(self.address.host, self.address.port, keepalive=30)
                break
            except (OSError, ValueError) as exc:
                if time.monotonic() > deadline:
                    raise ValueError(f"{self.address}: cannot connect ({getattr(exc, 'strerror', None) or exc})") \
                        from None
                time.sleep(0.5)
        client.loop_start()
        if not self._connected.wait(max(deadline - time.monotonic(), 10.0)) or self.error:
            client.loop_stop()
            raise ValueError(f"{self.address}: {self.error or 'the broker did not answer the connection'}")
        self._thread.start()
        return self

    def _on_connect(self, client, userdata, flags, reason_code, properties) -> None:
        if reason_code.is_failure:
            self.error = mqtt.refused(reason_code, self.login)
            self._connected.set()
            client.disconnect()
            return
        self._session_present = flags.session_present
        client.subscribe(self.address.topic, qos=1)  # said once the broker grants it (`_on_subscribe`)

    def _on_subscribe(self, client, userdata, mid, reason_codes, properties) -> None:
        if any(code.is_failure for code in reason_codes):  # a topic the broker's ACL refuses this user
            self.error = f"the broker refused the subscription to {self.address.topic} ({reason_codes[0]})"
            self._connected.set()
            client.disconnect()
            return
        if self._connected.is_set():
            self.echo(f"{self.address}: connected again; the broker sends what it kept meanwhile")
            self.on_broker(str(self.address), None, "")
        elif self._session_present:
            self.echo(f"{self.address}: the broker kept this job's session ({self.client_id}): the readings "
                      f"published while it was away come first")
        else:
            self.echo(f"{self.address}: subscribed as {self.client_id} (a persistent session: the broker keeps "
                      f"what is published while the job is down)")
        self._connected.set()

    def _on_disconnect(self, client, userdata, flags, reason_code, properties) -> None:
        if not self._stop.is_set():
            self.echo(f"{self.address}: lost the broker ({reason_code}); reconnecting (what it publishes "
                      f"meanwhile waits there)")
            self.on_broker(str(self.address), time.time(), str(reason_code))

    # ---- receiving and spooling ------------------------------------------------------------------

    def _on_message(self, client, userdata, message) -> None:
        digest = hashlib.blake2b(message.topic.encode() + b"\0" + message.payload, digest_size=8).digest()
        if message.dup and self._written.get(message.mid) == digest:  # spooled, its PUBACK lost: a repeat
            self.duplicates += 1
            client.ack(message.mid, message.qos)
            return
        payload = message.payload
        if self.sensor_level is not None:
            lines = records.with_sensor(payload, topic_level(message.topic, self.sensor_level))
        else:
            lines = payload if payload.endswith(b"\n") or not payload else payload + b"\n"
        with self._lock:
            self._pending.append((message.mid if message.qos else -1, digest, lines))
            if len(self._pending) >= ROLL_MESSAGES:
                self._wake.set()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._wake.wait(self.roll)
                self._wake.clear()
                self._spool()
        except OSError as exc:  # a full disk: nothing more is acknowledged; the broker keeps it
            self.error = f"{self.address}: cannot write the spool in {self.folder}: {exc.strerror or exc}"
            self.echo(f"error: {self.error}; the messages not written stay at the broker")

    def _spool(self) -> None:
        """Write the messages waiting to a spool file, durably, then acknowledge them."""
        with self._lock:
            taken, self._pending = self._pending, []
        if not taken:
            return
        data = b"".join(lines for _, _, lines in taken)
        name = spool.spool_name()
        acked = [(mid, digest) for mid, digest, _ in taken if mid >= 0]
        if data:
            spool.write_file(self.folder, data, durable=True, name=name,
                             before_rename=lambda: self._write_journal(name, acked))
            self._prune_journal()
        for mid, digest in acked:
            self._written[mid] = digest
        for mid, _ in acked:
            self._client.ack(mid, 1)  # fails quietly while disconnected: the broker sends it again, with DUP
        self.messages += len(taken)
        self.lines += data.count(b"\n")

    def stop(self) -> None:
        """Spool and acknowledge what has come, then leave the broker (the session stays there)."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        if self._client is not None:
            try:
                self._spool()
            except OSError:
                pass
            self._client.disconnect()
            self._client.loop_stop()

    # ---- the journal -----------------------------------------------------------------------------

    def _write_journal(self, name: str, acked: list[tuple[int, bytes]]) -> None:
        text = "".join(f"{mid} {digest.hex()}\n" for mid, digest in acked)
        path = self.journal / f"{name}.mids"
        with open(path, "w") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        spool.sync_folder(self.journal)

    def _prune_journal(self) -> None:
        for old in sorted(self.journal.glob("*.mids"))[:-JOURNALS_KEPT]:
            old.unlink(missing_ok=True)

    def _recover(self) -> None:
        """Read the journals of the spool files that were written (renamed into the spool) and drop
        what a killed run left half done: a file never renamed, and its journal."""
        for journal in sorted(self.journal.glob("*.mids")):
            name = journal.name[:-len(".mids")]
            if (self.folder / f".{name}.tmp").exists():  # never renamed: its messages were not acknowledged
                journal.unlink()
                continue
            for line in journal.read_text().splitlines():
                mid, _, digest = line.partition(" ")
                if mid.isdigit() and digest:
                    self._written[int(mid)] = bytes.fromhex(digest)
        for temporary in self.folder.glob(".*.tmp"):
            temporary.unlink(missing_ok=True)
        self._prune_journal()
