"""The durable outbox, OUT/alerts/outbox.db (SQLite in WAL mode): written by the batch path, read by
each target's delivery thread through a connection of its own.

- A batch's alarms, the flags' last values and the batch's number are committed in one transaction;
  a batch done again after a kill (its number not above the last one taken) adds nothing, and an
  alarm's `id` (unique per stream, row and version) is its key (INSERT OR IGNORE).
- Each alarm waits for each target of the run that found it (`pending`) until that target
  acknowledges it. Acknowledged alarms keep only their id and times (their bodies go), the newest
  KEPT_DELIVERED of them, so that the disk stays bounded and a run that starts afresh on the same
  input (after `--once`) does not send them again.
- Targets are keyed by `Target.key`, which holds no secret, and their errors are stored redacted.
  Earlier versions keyed a target by its URL as given (a token in its query too): opening such an
  outbox moves what waits for it to its key now, so nothing is lost and the secret goes.
- At most `limit` alarms wait (settings.LIMIT by default): beyond, new alarms are not taken but
  counted (`dropped`), and status says the outbox is full.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from sensorscript.redaction import redacted, redacted_text
from sensorscript.runtime.output.alerts.settings import LIMIT

FOLDER, OUTBOX = "alerts", "outbox.db"  # OUT/alerts/outbox.db
KEPT_DELIVERED = 100_000  # ids of acknowledged alarms kept (bodies dropped), newest first


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
        self._redact_earlier_keys()

    def _redact_earlier_keys(self) -> None:
        """An outbox of an earlier version: targets keyed by their URL as given become their key now."""
        known = [t for (t,) in self.db.execute("SELECT target FROM targets UNION SELECT DISTINCT target FROM pending")]
        earlier = {t: redacted(t) for t in known if redacted(t) != t}
        if not earlier:
            return
        with self._transaction():
            for old, new in earlier.items():
                self.db.execute("INSERT OR IGNORE INTO pending (target, seq) SELECT ?, seq FROM pending WHERE target = ?",
                                (new, old))
                self.db.execute("DELETE FROM pending WHERE target = ?", (old,))
                self.db.execute("UPDATE OR IGNORE targets SET target = ? WHERE target = ?", (new, old))
                self.db.execute("DELETE FROM targets WHERE target = ?", (old,))
            # Two URLs differing in their query alone are one target now: an alarm waits for it once.
            self.db.execute("UPDATE alarms SET waiting = (SELECT COUNT(*) FROM pending p WHERE p.seq = alarms.seq) "
                            "WHERE waiting > 0")
            self.db.execute("UPDATE alarms SET body = NULL, delivered = ? WHERE waiting <= 0 AND body IS NOT NULL",
                            (time.time(),))
            for target, error in self.db.execute("SELECT target, last_error FROM targets").fetchall():
                if error:
                    self.db.execute("UPDATE targets SET last_error = ? WHERE target = ?", (redacted_text(error), target))

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
                            (redacted_text(error), time.time(), target))

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
