"""Alarms delivered (`sscript run --alerts URL`): every alarm (runtime/output/alarms.py) of the
workflows asked for, as one JSON object, to webhooks (http://, https://: a POST) and MQTT topics
(mqtt://, mqtts://: published with QoS 1), at least once, from a durable outbox in OUT.

The outbox (OUT/alerts/outbox.db, SQLite in WAL mode) is written by the batch path and read by a
delivery thread per target (`Deliverer`), each with its own connection, so that a receiver that is
slow or down never holds up a batch (the batch path only inserts rows) nor another target.
- A batch's alarms, the flags' last values and the batch's number are committed in one transaction;
  a batch done again after a kill (its number not above the last one taken) adds nothing, and an
  alarm's `id` (unique per stream, row and version) is its key (INSERT OR IGNORE).
- Each alarm waits for each target of the run that found it (`pending`) until that target
  acknowledges it (an HTTP 2xx; an MQTT PUBACK). A run killed and started again sends what waits, and
  nothing else. Acknowledged alarms keep only their id and times (their bodies go), the newest
  KEPT_DELIVERED of them, so that the disk stays bounded and a run that starts afresh on the same
  input (after `--once`) does not send them again.
- A target that fails (connection refused, a timeout, HTTP 5xx or 429) is tried again after a
  delay that doubles from BACKOFF_FIRST_S to BACKOFF_LAST_S, with jitter. A receiver that refuses
  an alarm for good (another HTTP 4xx: a wrong address, a token refused, a template the receiver
  does not take) is tried again every BACKOFF_LAST_S: the alarm stays, and `sscript status` shows
  the target failing with the receiver's answer until someone fixes it.
- At most `limit` alarms wait (LIMIT by default): beyond, new alarms are not taken but counted
  (`dropped`), and status says the outbox is full.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import sqlite3
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pandas as pd

from sensorscript.runtime.ingest import mqtt
from sensorscript.runtime.output.alarms import FLAG, MATCH, alarm_kinds, turned_on
from sensorscript.runtime.output.sinks import KEY_COLUMNS, newest, read_results
from sensorscript.runtime.plan.program import Job

FOLDER, OUTBOX = "alerts", "outbox.db"  # OUT/alerts/outbox.db
LIMIT = 100_000  # alarms waiting at most; beyond, new ones are counted, not kept
KEPT_DELIVERED = 100_000  # ids of acknowledged alarms kept (bodies dropped), newest first
BACKOFF_FIRST_S, BACKOFF_LAST_S = 1.0, 60.0
SEND_TIMEOUT_S = 10.0  # one HTTP request or one PUBACK
TIMEOUT_S = 60.0  # --once: how long the run waits for its alarms to be delivered (--alerts-timeout)
ENV = "env:"  # --alerts env:VARIABLE: the URL is in that environment variable (a Slack URL is a secret)
STATUS_EVERY_S = 1.0  # the outbox's counts go into status.json at most this often
TRIM_EVERY_S = 60.0  # and trims the acknowledged alarms kept this often


@dataclass(frozen=True)
class Target:
    """Where alarms go. `key` names it in the outbox and in status (the URL as given, or env:VARIABLE:
    never the secret a variable holds)."""

    key: str
    url: str

    @property
    def kind(self) -> str:
        return "mqtt" if self.url.startswith(("mqtt://", "mqtts://")) else "http"

    @staticmethod
    def parse(given: str, environ=os.environ) -> "Target":
        url = given
        if given.startswith(ENV):
            name = given[len(ENV):]
            url = environ.get(name, "")
            if not url:
                raise ValueError(f"--alerts {given}: the environment variable {name} is not set (it should hold the "
                                 f"URL to deliver alarms to)")
        if url.startswith(("mqtt://", "mqtts://")):
            address = mqtt.Address.parse(url, "an MQTT target for alarms")
            if "+" in address.topic or "#" in address.topic:
                raise ValueError(f"--alerts {given}: alarms are published to one topic; {address.topic} has a wildcard")
        elif url.startswith(("http://", "https://")):
            if not urlsplit(url).hostname:
                raise ValueError(f"--alerts {given}: the host is missing")
        else:
            raise ValueError(f"--alerts {given}: alarms go to http(s)://... (a webhook), mqtt(s)://HOST[:PORT]/TOPIC, "
                             f"or env:VARIABLE naming an environment variable that holds one")
        return Target(given, url)


@dataclass(frozen=True)
class AlertSettings:
    """`--alerts URL... [--alerts-for WORKFLOW,...] [--alerts-timeout 60s] [--alerts-template FILE]`;
    `tls`: the MQTT TLS files (the run's --mqtt-ca/--mqtt-cert/--mqtt-key)."""

    targets: tuple[str, ...]
    workflows: tuple[str, ...] = ()  # none: every workflow's alarms
    timeout_s: float = TIMEOUT_S
    template: str | None = None
    tls: mqtt.Tls = mqtt.Tls()
    limit: int = LIMIT

    @staticmethod
    def of(targets, workflows=(), timeout: str | None = None, template: str | None = None,
           tls: mqtt.Tls = mqtt.Tls()) -> "AlertSettings":
        """From the command line: --alerts (repeated), --alerts-for (comma-separated, repeated),
        --alerts-timeout (a duration: 60s, 5min), --alerts-template."""
        from sensorscript.times import duration_ms

        names = tuple(sorted({w.strip() for given in workflows or () for w in given.split(",") if w.strip()}))
        seconds = duration_ms(timeout, "--alerts-timeout") / 1000 if timeout else TIMEOUT_S
        return AlertSettings(tuple(targets), names, seconds, template, tls)

    def check(self, job: Job | None = None, environ=os.environ) -> list[Target]:
        """The targets, or ValueError in the user's words: before the run starts."""
        targets = [Target.parse(t, environ) for t in self.targets]
        keys = [t.key for t in targets]
        if len(set(keys)) < len(keys):
            raise ValueError("--alerts: a target is given twice")
        if job is not None:
            unknown = sorted(set(self.workflows) - set(job.workflows))
            if unknown:
                raise ValueError(f"--alerts-for {','.join(unknown)}: no such workflow in this job "
                                 f"(its workflows: {', '.join(job.workflows)})")
        if self.template is not None:
            render(load_template(self.template), example())  # a template that cannot render fails now
        return targets


def iso(ms) -> str | None:
    """Epoch milliseconds as ISO 8601 in UTC (2026-01-01T00:12:00.000Z)."""
    if ms is None or (isinstance(ms, float) and math.isnan(ms)) or ms is pd.NA:
        return None
    return datetime.fromtimestamp(int(ms) / 1000, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _int(value) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


def alarm_object(row: dict, kind: str, retracted: bool = False) -> dict:
    """One alarm as delivered, from a result row (a dict of its columns)."""
    stream, ts, version = row["stream"], int(row["ts"]), int(row["version"])
    value = None if row.get("value") is None or pd.isna(row["value"]) else float(row["value"])
    events = row.get("events") if isinstance(row.get("events"), str) else None
    ident = f"{stream}/{ts}/{version}"
    if kind == MATCH:  # several matches may end at one time: their bounds and events tell them apart
        bound = f"{_int(row.get('start_ts'))}/{_int(row.get('end_ts'))}/{events or ''}"
        ident += "/" + hashlib.sha1(bound.encode()).hexdigest()[:12]
    if retracted:
        ident += "/retracted"
    found = {"id": ident, "stream": stream, "workflow": stream.rsplit(".", 1)[0], "kind": kind,
             "ts": iso(ts), "ts_ms": ts}
    if kind == MATCH:
        start, end = _int(row.get("start_ts")), _int(row.get("end_ts"))
        found.update(start=iso(start), start_ms=start, end=iso(end), end_ms=end)
    window_start, window_end = _int(row.get("window_start")), _int(row.get("window_end"))
    if window_start is not None:
        found.update(window_start=iso(window_start), window_start_ms=window_start, window_end=iso(window_end),
                     window_end_ms=window_end)
    plan_version = _int(row.get("plan_version"))
    found.update(value=value, events=json.loads(events) if events else None, version=version,
                 plan_version=plan_version, retracted=retracted)
    when = iso(ts).replace("T", " ").replace("Z", " UTC")
    found["summary"] = (f"{stream}: the {'match' if kind == MATCH else 'flag turning on'} at {when} is retracted "
                        f"(version {version})" if retracted else
                        f"{stream}: pattern matched at {when} (value {value:.6g})" if kind == MATCH else
                        f"{stream} turned on at {when}")
    return found


def example() -> dict:
    """An alarm to try a template on."""
    events = json.dumps([{"var": "a", "ts": 1767226320000, "value": 0.61, "sensor": "TILT1"}])
    return alarm_object({"stream": "pier_alarms.JUMP", "ts": 1767226320000, "version": 1, "value": 0.61,
                         "start_ts": 1767226300000, "end_ts": 1767226320000, "events": events}, MATCH)


def load_template(path: str):
    import jinja2

    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ValueError(f"--alerts-template {path}: {exc.strerror or exc}") from None
    try:
        return jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False).from_string(text)
    except jinja2.TemplateSyntaxError as exc:
        raise ValueError(f"--alerts-template {path}, line {exc.lineno}: {exc.message}") from None


def render(template, alarm: dict) -> str:
    """A webhook's body from the template: `alarm` is the JSON object (alarm.summary, alarm.events, ...)."""
    import jinja2

    try:
        return template.render(alarm=alarm)
    except jinja2.TemplateError as exc:
        raise ValueError(f"--alerts-template: {exc}") from None


# ---------------------------------------------------------------------- the outbox


class Outbox:
    """OUT/alerts/outbox.db. One object per thread (each has its own connection)."""

    def __init__(self, out: Path, limit: int = LIMIT, durable: bool = True):
        """`durable`: each commit is on disk before it returns (the batch path's: an alarm of a batch
        Spark then commits must survive a power cut). The delivery threads' commits are
        acknowledgements, which a power cut may lose (the alarm is sent again: at least once), and
        fsyncing each would cost a few ms an alarm; a process killed loses none of them (WAL)."""
        self.path = Path(out) / FOLDER / OUTBOX
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.limit = limit
        self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        self.db.executescript("""
            CREATE TABLE IF NOT EXISTS alarms (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
                body TEXT, enqueued REAL NOT NULL, waiting INTEGER NOT NULL, delivered REAL);
            CREATE INDEX IF NOT EXISTS alarms_waiting ON alarms (waiting, seq);
            CREATE TABLE IF NOT EXISTS pending (target TEXT NOT NULL, seq INTEGER NOT NULL,
                PRIMARY KEY (target, seq)) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS flags (stream TEXT PRIMARY KEY, ts INTEGER NOT NULL, value REAL NOT NULL);
            CREATE TABLE IF NOT EXISTS counts (name TEXT PRIMARY KEY, value REAL NOT NULL);
            CREATE TABLE IF NOT EXISTS targets (target TEXT PRIMARY KEY, delivered INTEGER NOT NULL DEFAULT 0,
                failed INTEGER NOT NULL DEFAULT 0, last_error TEXT, last_error_at REAL, last_success REAL);
        """)

    def close(self) -> None:
        self.db.close()

    def _count(self, name: str, default: float | None = None) -> float | None:
        row = self.db.execute("SELECT value FROM counts WHERE name = ?", (name,)).fetchone()
        return row[0] if row else default

    def _set(self, name: str, value: float) -> None:
        self.db.execute("INSERT INTO counts (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = ?",
                        (name, value, value))

    def start_afresh(self) -> None:
        """The run starts afresh: batch numbers begin again, and every flag is off. What waits stays,
        and so do the ids delivered (a replay's alarms are not sent twice)."""
        with self._transaction():
            self.db.execute("DELETE FROM flags")
            self.db.execute("DELETE FROM counts WHERE name IN ('last_batch', 'last_correction')")

    def _transaction(self):
        db = self.db

        class Transaction:
            def __enter__(self):
                db.execute("BEGIN IMMEDIATE")

            def __exit__(self, kind, *_):
                db.execute("COMMIT" if kind is None else "ROLLBACK")
                return False

        return Transaction()

    def taken(self, mark: str, number: int) -> bool:
        """Whether batch (mark `last_batch`) or correction (`last_correction`) `number` was taken."""
        last = self._count(mark)
        return last is not None and number <= last

    def flags(self, streams) -> dict[str, tuple[int, float]]:
        """The last row (ts, value) of each of these flag streams taken so far."""
        streams = list(streams)
        if not streams:
            return {}
        rows = self.db.execute("SELECT stream, ts, value FROM flags WHERE stream IN (SELECT value FROM json_each(?))",
                               (json.dumps(streams),)).fetchall()
        return {stream: (ts, value) for stream, ts, value in rows}

    def enqueue(self, mark: str, number: int, alarms: list[dict], flags: dict[str, tuple[int, float]],
                targets: list[str]) -> int:
        """Take a batch's (or a correction's) alarms and the flags' last rows, once: in one
        transaction with its number, so that one done again adds nothing. Returns how many were new."""
        now = time.time()
        added = 0
        with self._transaction():
            if self.taken(mark, number):
                return 0
            waiting = self.db.execute("SELECT COUNT(*) FROM alarms WHERE waiting > 0").fetchone()[0]
            dropped = 0
            for alarm in alarms if targets else ():
                if waiting >= self.limit:
                    dropped += 1
                    continue
                cursor = self.db.execute("INSERT OR IGNORE INTO alarms (id, body, enqueued, waiting) VALUES (?, ?, ?, ?)",
                                         (alarm["id"], json.dumps(alarm), now, len(targets)))
                if cursor.rowcount:
                    seq = cursor.lastrowid
                    self.db.executemany("INSERT INTO pending (target, seq) VALUES (?, ?)", [(t, seq) for t in targets])
                    waiting += 1
                    added += 1
            if dropped:
                self._set("dropped", (self._count("dropped", 0) or 0) + dropped)
            self.db.executemany("INSERT INTO flags (stream, ts, value) VALUES (?, ?, ?) ON CONFLICT (stream) "
                                "DO UPDATE SET ts = excluded.ts, value = excluded.value",
                                [(s, int(ts), float(v)) for s, (ts, v) in flags.items()])
            self._set(mark, number)
        return added

    def waiting_for(self, target: str, count: int = 100) -> list[tuple[int, str, str]]:
        """(seq, id, body) of the alarms waiting for `target`, oldest first."""
        return self.db.execute("SELECT a.seq, a.id, a.body FROM pending p JOIN alarms a ON a.seq = p.seq "
                               "WHERE p.target = ? ORDER BY p.seq LIMIT ?", (target, count)).fetchall()

    def waiting(self, targets: list[str]) -> int:
        """How many deliveries to these targets wait."""
        return self.db.execute("SELECT COUNT(*) FROM pending WHERE target IN (SELECT value FROM json_each(?))",
                               (json.dumps(targets),)).fetchone()[0]

    def acknowledged(self, target: str, seq: int) -> None:
        now = time.time()
        with self._transaction():
            if not self.db.execute("DELETE FROM pending WHERE target = ? AND seq = ?", (target, seq)).rowcount:
                return
            self.db.execute("UPDATE alarms SET waiting = waiting - 1 WHERE seq = ?", (seq,))
            self.db.execute("UPDATE alarms SET body = NULL, delivered = ? WHERE seq = ? AND waiting <= 0", (now, seq))
            self._target(target)
            self.db.execute("UPDATE targets SET delivered = delivered + 1, last_success = ? WHERE target = ?",
                            (now, target))

    def failed(self, target: str, error: str) -> None:
        with self._transaction():
            self._target(target)
            self.db.execute("UPDATE targets SET failed = failed + 1, last_error = ?, last_error_at = ? WHERE target = ?",
                            (error, time.time(), target))

    def _target(self, target: str) -> None:
        self.db.execute("INSERT OR IGNORE INTO targets (target) VALUES (?)", (target,))

    def trim(self) -> None:
        """Keep the newest KEPT_DELIVERED acknowledged alarms' ids; the rest go."""
        with self._transaction():
            row = self.db.execute("SELECT seq FROM alarms WHERE waiting <= 0 ORDER BY seq DESC LIMIT 1 OFFSET ?",
                                  (KEPT_DELIVERED,)).fetchone()
            if row:
                self.db.execute("DELETE FROM alarms WHERE waiting <= 0 AND seq <= ?", (row[0],))

    def counts(self) -> dict:
        """What status.json's `alerts` says: alarms waiting, deliveries acknowledged and attempts
        failed (summed over targets, over the outbox's life), the bound and whether it is reached,
        alarms dropped because it was, and per target its own."""
        waiting = self.db.execute("SELECT COUNT(*) FROM alarms WHERE waiting > 0").fetchone()[0]
        per_target = {t: {"waiting": n} for t, n in
                      self.db.execute("SELECT target, COUNT(*) FROM pending GROUP BY target")}
        for target, delivered, failed, error, error_at, success in self.db.execute(
                "SELECT target, delivered, failed, last_error, last_error_at, last_success FROM targets"):
            per_target.setdefault(target, {"waiting": 0}).update(
                delivered=delivered, failed=failed, last_error=error, last_error_at=error_at, last_success=success)
        return {"waiting": waiting,
                "delivered": sum(t.get("delivered", 0) for t in per_target.values()),
                "failed": sum(t.get("failed", 0) for t in per_target.values()),
                "limit": self.limit, "full": waiting >= self.limit, "dropped": int(self._count("dropped", 0) or 0),
                "outbox": str(self.path), "targets": per_target}

    def latencies(self) -> list[tuple[str, float, float | None]]:
        """(id, enqueued, delivered to every target) of the alarms kept: what a benchmark measures."""
        return self.db.execute("SELECT id, enqueued, delivered FROM alarms ORDER BY seq").fetchall()


# ---------------------------------------------------------------------- what a batch or a correction sends


def batch_alarms(results: pd.DataFrame, kinds: dict[str, str], flags: dict[str, tuple[int, float]]):
    """The alarms among a batch's result rows (`kinds`: the streams delivered, MATCH or FLAG) and each
    flag's last row after it, given `flags` (its last row before; off when none)."""
    rows = results[results["stream"].isin(kinds.keys())] if len(results) else results
    found, last = [], {}
    if not len(rows):
        return found, last
    rows = rows.sort_values(["stream", "ts"], kind="stable")
    for stream, group in rows.groupby("stream", sort=False):
        group = group[group["value"].notna()]
        if not len(group):
            continue
        records = group.to_dict("records")
        if kinds[stream] == MATCH:
            found += [alarm_object(r, MATCH) for r in records if isinstance(r.get("events"), str)]
        else:
            values = group["value"].to_numpy(float)
            on = turned_on(values, flags.get(stream, (0, 0.0))[1])
            found += [alarm_object(r, FLAG) for r, yes in zip(records, on) if yes]
            last[stream] = (int(group["ts"].iloc[-1]), float(values[-1]))
    return sorted(found, key=_in_time), last


def _in_time(alarm: dict):
    """Alarms are sent in event-time order (then by stream): a receiver reads them as they happened."""
    return alarm["ts_ms"], alarm["stream"], alarm["retracted"]


def correction_alarms(changed: pd.DataFrame, kinds: dict[str, str], stored: pd.DataFrame,
                      flags: dict[str, tuple[int, float]]):
    """What a correction's rows (`changed`: new versions and tombstones) change among the alarms:
    a match's new version, a match retracted; a flag that now turns on at a row where it did not
    (its version), or no longer does (retracted, with the row's newest version). `stored`: every
    version of the flag streams' rows, the correction's included. Returns the alarms and the flags'
    last rows where the correction changed them."""
    changed = changed[changed["stream"].isin(kinds.keys())]
    found: list[dict] = []
    for record in changed[changed["stream"].map(kinds) == MATCH].to_dict("records"):
        if pd.isna(record["value"]):
            found.append(alarm_object(record, MATCH, retracted=True))
        elif isinstance(record.get("events"), str):
            found.append(alarm_object(record, MATCH))
    last = {}
    flag_streams = sorted(set(changed["stream"]) & {s for s, k in kinds.items() if k == FLAG})
    for stream in flag_streams:
        rows = stored[stored["stream"] == stream]
        mine = changed[changed["stream"] == stream]
        ours = _rows_of(rows, mine)
        after = newest(rows).sort_values("ts", kind="stable")
        before = newest(rows[~ours]).sort_values("ts", kind="stable")
        on_after = _turning_on(after)
        on_before = _turning_on(before)
        for record in after[after["ts"].isin(on_after - on_before)].to_dict("records"):
            found.append(alarm_object(record, FLAG))
        for record in after[after["ts"].isin(on_before - on_after)].to_dict("records"):
            found.append(alarm_object(record, FLAG, retracted=True))
        living = after[after["value"].notna()]
        if len(living) and int(living["ts"].iloc[-1]) >= flags.get(stream, (-(2**63), 0.0))[0]:
            last[stream] = (int(living["ts"].iloc[-1]), float(living["value"].iloc[-1]))
    return sorted(found, key=_in_time), last


def _rows_of(rows: pd.DataFrame, written: pd.DataFrame) -> np.ndarray:
    """Which of `rows` are among `written` (the same key and version)."""
    columns = [c for c in (*KEY_COLUMNS, "version") if c in rows.columns and c in written.columns]
    marks = set(map(tuple, written[columns].astype(object).where(written[columns].notna(), None).to_numpy()))
    keys = rows[columns].astype(object).where(rows[columns].notna(), None).to_numpy()
    return np.array([tuple(k) in marks for k in keys], bool)


def _turning_on(rows: pd.DataFrame) -> set[int]:
    """The times a flag (its newest rows, in time order, tombstones among them) turns on."""
    rows = rows[rows["value"].notna()]
    return set(rows["ts"].to_numpy(np.int64)[turned_on(rows["value"].to_numpy(float))].tolist())


# ---------------------------------------------------------------------- delivery


class Failure(Exception):
    """A delivery that did not succeed; `lasting`: the receiver refuses it for good (HTTP 4xx)."""

    def __init__(self, message: str, lasting: bool = False):
        super().__init__(message)
        self.lasting = lasting


class _Webhook:
    def __init__(self, target: Target, template):
        self.target, self.template = target, template

    def send(self, ident: str, body: str) -> None:
        data = body if self.template is None else render(self.template, json.loads(body))
        try:
            json.loads(data)
            content = "application/json"
        except ValueError:
            content = "text/plain; charset=utf-8"
        request = urllib.request.Request(self.target.url, data=data.encode(), method="POST",
                                         headers={"Content-Type": content, "X-Sscript-Alarm-Id": ident,
                                                  "User-Agent": "sensorscript-alerts"})
        try:
            with urllib.request.urlopen(request, timeout=SEND_TIMEOUT_S) as answer:
                answer.read()
        except urllib.error.HTTPError as exc:
            lasting = 400 <= exc.code < 500 and exc.code not in (408, 425, 429)
            raise Failure(f"HTTP {exc.code} {exc.reason}", lasting) from None
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            reason = getattr(exc, "reason", exc)
            raise Failure(f"no answer ({reason})") from None

    def close(self) -> None:
        pass


class _Topic:
    def __init__(self, target: Target, tls: mqtt.Tls, client_id: str):
        self.target = target
        self.address = mqtt.Address.parse(target.url)
        self.connected = threading.Event()
        self.refusal = ""
        self.client = mqtt.client(self.address, client_id, tls)
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = lambda *_: self.connected.clear()
        self.client.connect_async(self.address.host, self.address.port, keepalive=30)
        self.client.loop_start()

    def _on_connect(self, client, userdata, flags, reason_code, properties=None):
        if reason_code.is_failure:
            self.refusal = mqtt.refused(reason_code)
        else:
            self.refusal = ""
            self.connected.set()

    def send(self, ident: str, body: str) -> None:
        if not self.connected.wait(SEND_TIMEOUT_S):
            raise Failure(self.refusal or f"not connected to the broker {self.address.host}:{self.address.port}")
        info = self.client.publish(self.address.topic, body.encode(), qos=1)
        try:
            info.wait_for_publish(SEND_TIMEOUT_S)
        except (RuntimeError, ValueError) as exc:
            raise Failure(f"not published ({exc})") from None
        if not info.is_published():
            raise Failure("the broker did not acknowledge within 10 s")

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


@dataclass
class _Backoff:
    failures: int = 0
    next_try: float = 0.0

    def failed(self, lasting: bool) -> float:
        self.failures += 1
        delay = BACKOFF_LAST_S if lasting else min(BACKOFF_LAST_S, BACKOFF_FIRST_S * 2 ** (self.failures - 1))
        delay *= random.uniform(0.8, 1.2)  # receivers that come back are not all hit at once
        self.next_try = time.monotonic() + delay
        return delay

    def succeeded(self) -> None:
        self.failures, self.next_try = 0, 0.0


class Deliverer:
    """The delivery threads: one per target, so that a receiver that is slow or down holds up no
    other, each sending its target's waiting alarms oldest first, one at a time; a failure puts that
    target off (`_Backoff`). One more thread tells the status the outbox's counts when they change,
    and trims what was acknowledged. Each thread has its own connection to the outbox."""

    def __init__(self, out: Path, targets: list[Target], template=None, tls: mqtt.Tls = mqtt.Tls(),
                 limit: int = LIMIT, on_counts=None):
        self.out, self.targets, self.template, self.tls, self.limit = Path(out), targets, template, tls, limit
        self.on_counts = on_counts  # told the outbox's counts when they change (status.json)
        self.woken = {t.key: threading.Event() for t in targets}
        self.stopping = threading.Event()
        self.backoff = {t.key: _Backoff() for t in targets}
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

    def _sender(self, target: Target):
        if target.kind == "mqtt":
            ident = hashlib.sha1(f"{self.out.resolve()}|{target.key}".encode()).hexdigest()[:12]
            return _Topic(target, self.tls, f"sscript-alerts-{ident}")
        return _Webhook(target, self.template)

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


# ---------------------------------------------------------------------- what the run loop calls


@dataclass
class Alerts:
    """A run's alarms: taken from each batch and correction into the outbox, delivered beside the
    query by the delivery threads, waited for when the input ended (`--once`, `stop --drain`)."""

    settings: AlertSettings
    out: Path
    status: object  # runtime/output/status.py's Status: its `alerts`
    echo: object = print
    targets: list[Target] = field(default_factory=list)
    outbox: Outbox | None = None
    deliverer: Deliverer | None = None
    _kinds: tuple = (None, {})

    @staticmethod
    def open(settings: AlertSettings, out: Path, job: Job, status, echo=print, fresh: bool = False) -> "Alerts":
        alerts = Alerts(settings, Path(out), status, echo, settings.check(job))
        alerts.outbox = Outbox(out, settings.limit)
        if fresh:
            alerts.outbox.start_afresh()
        template = load_template(settings.template) if settings.template else None
        alerts.deliverer = Deliverer(out, alerts.targets, template, settings.tls, settings.limit,
                                     on_counts=status.alerted).start()
        counts = alerts.outbox.counts()
        status.alerted(counts)
        which = ", ".join(settings.workflows) if settings.workflows else "every workflow"
        echo(f"alarms of {which} go to {', '.join(t.key for t in alerts.targets)}"
             + (f"; {counts['waiting']:,} left by an earlier run wait in {alerts.outbox.path}" if counts["waiting"] else ""))
        return alerts

    def kinds(self, job: Job) -> dict[str, str]:
        """The streams whose alarms are delivered (of the workflows asked for): MATCH or FLAG."""
        if self._kinds[0] is not job:
            wanted = set(self.settings.workflows)
            self._kinds = (job, {s: k for s, k in alarm_kinds(job).items()
                                 if not wanted or s.rsplit(".", 1)[0] in wanted})
        return self._kinds[1]

    def batch(self, batch_id: int, results: pd.DataFrame, job: Job) -> None:
        """The batch path: a written batch's alarms into the outbox (once), then the deliverer woken."""
        kinds = self.kinds(job)
        if self.outbox.taken("last_batch", batch_id) or not kinds:
            return
        flag_streams = {s for s, k in kinds.items() if k == FLAG}
        present = set(results["stream"].unique()) & flag_streams if len(results) else set()
        found, last = batch_alarms(results, kinds, self.outbox.flags(present))
        if self.outbox.enqueue("last_batch", batch_id, found, last, [t.key for t in self.targets]):
            self.deliverer.wake()

    def corrected(self, number: int, changed: pd.DataFrame, sink_spec: str, job: Job) -> None:
        """A correction wrote `changed` as batch -number: the alarms it changes."""
        kinds = self.kinds(job)
        if self.outbox.taken("last_correction", number):
            return
        touched = sorted(set(changed["stream"]) & {s for s, k in kinds.items() if k == FLAG})
        stored = read_results(sink_spec, touched) if touched else pd.DataFrame(columns=changed.columns)
        found, last = correction_alarms(changed, kinds, stored, self.outbox.flags(touched))
        if self.outbox.enqueue("last_correction", number, found, last, [t.key for t in self.targets]):
            self.deliverer.wake()

    def finish(self, wait: bool) -> None:
        """The run ends: with `wait` (--once), first until every alarm is delivered or the
        timeout passed; then say how many wait."""
        deadline = time.monotonic() + self.settings.timeout_s
        keys = [t.key for t in self.targets]
        while wait and self.outbox.waiting(keys) and time.monotonic() < deadline and self.deliverer.alive():
            self.deliverer.wake()
            time.sleep(0.1)
        self.deliverer.stop()
        counts = self.outbox.counts()
        self.outbox.close()
        self.status.alerted(counts)
        failing = {t: c.get("last_error") for t, c in counts["targets"].items() if c.get("waiting") and c.get("last_error")}
        self.echo(f"alarms: {counts['delivered']:,} delivered so far, {counts['waiting']:,} wait in {self.outbox.path}"
                  + (" (the next run on this folder sends them)" if counts["waiting"] else "")
                  + (f"; {counts['dropped']:,} dropped: the outbox was full ({counts['limit']:,})" if counts["dropped"]
                     else "")
                  + "".join(f"; {t}: {error}" for t, error in sorted(failing.items())))
