"""The durable outbox, OUT/alerts/outbox.db (SQLite in WAL mode): written by the batch path (and by
`sscript correct` and `sscript backfill`), read by each target's delivery thread through a
connection of its own.

- A unit of the sink (a batch, or a correction's or a backfill's write, by the id the sink keeps it
  under) is taken once: its alarms, the flags' states after it and its id in one transaction, so a
  batch done again after a kill adds nothing. A batch's alarms are taken right after the sink wrote
  it: killed in between, Spark does the batch again (it was not committed) and the sink skips the
  write but the alarms are taken then. A correction or a backfill is not done again, so its alarms
  are *staged* before its write and taken once the sink shows the write (`settle`): at the next
  write, at the job's start and by `sscript alerts deliver`; a write that never happened (the
  process died first) drops its staged alarms, and the correction, run again, stages them anew.
- Each incident (payload.py) has a state and a revision: an alarm found again in the same state and
  version (a batch of a run started afresh on the same input) is not taken twice; one that changes
  it is taken as the incident's next revision, even back to firing after a retraction.
- Each alarm waits for each target (`pending`) until that target acknowledges it, with its own
  attempts and the time it may be tried again (a failed request puts off its alarms alone).
  Acknowledged alarms keep only their id and times (their bodies go), the newest KEPT_DELIVERED.
- Silences (`sscript alerts silence`) hold back the incidents of a workflow or a stream that begin
  while they last, for every target; updates and resolutions of an incident already sent still go.
- Targets are keyed by `Target.key`, which holds no secret, and their errors are stored redacted.
  Earlier versions keyed a target by its URL as given: opening such an outbox moves what waits for
  it to its key now. At most `limit` alarms wait: beyond, new ones are counted (`dropped`).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

from sensorscript.redaction import redacted, redacted_text
from sensorscript.runtime.output.alerts.detection import FlagState, in_time
from sensorscript.runtime.output.alerts.payload import FIRING, PRIVATE, REOPENED, RESOLVED, SUPERSEDES, UPDATED, numbered
from sensorscript.runtime.output.alerts.settings import LIMIT

FOLDER, OUTBOX = "alerts", "outbox.db"  # OUT/alerts/outbox.db
KEPT_DELIVERED = 100_000  # ids of acknowledged alarms kept (bodies dropped), newest first
KEPT_INCIDENTS = 100_000  # incidents remembered (their state and revision), most recently changed first

_SCHEMA = """
    CREATE TABLE IF NOT EXISTS alarms (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
        body TEXT, enqueued REAL NOT NULL, waiting INTEGER NOT NULL, delivered REAL);
    CREATE INDEX IF NOT EXISTS alarms_waiting ON alarms (waiting, seq);
    CREATE TABLE IF NOT EXISTS pending (target TEXT NOT NULL, seq INTEGER NOT NULL,
        PRIMARY KEY (target, seq)) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS flags (stream TEXT PRIMARY KEY, ts INTEGER NOT NULL, value REAL NOT NULL);
    CREATE TABLE IF NOT EXISTS counts (name TEXT PRIMARY KEY, value REAL NOT NULL);
    CREATE TABLE IF NOT EXISTS targets (target TEXT PRIMARY KEY, delivered INTEGER NOT NULL DEFAULT 0,
        failed INTEGER NOT NULL DEFAULT 0, last_error TEXT, last_error_at REAL, last_success REAL);
    CREATE TABLE IF NOT EXISTS incidents (incident TEXT PRIMARY KEY, revision INTEGER NOT NULL,
        state TEXT NOT NULL, version INTEGER NOT NULL, retracted INTEGER NOT NULL, changed REAL NOT NULL,
        kind TEXT NOT NULL, body TEXT);
    CREATE INDEX IF NOT EXISTS incidents_changed ON incidents (changed);
    CREATE TABLE IF NOT EXISTS units (unit INTEGER PRIMARY KEY, taken REAL NOT NULL);
    CREATE TABLE IF NOT EXISTS staged (unit INTEGER PRIMARY KEY, pid INTEGER NOT NULL, staged REAL NOT NULL,
        alarms TEXT NOT NULL, flags TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS silences (id INTEGER PRIMARY KEY AUTOINCREMENT, what TEXT NOT NULL,
        since REAL NOT NULL, until REAL NOT NULL, comment TEXT);
    CREATE TABLE IF NOT EXISTS silenced (target TEXT NOT NULL, incident TEXT NOT NULL,
        PRIMARY KEY (target, incident)) WITHOUT ROWID;
"""
# Columns later versions added to an outbox's tables (ALTER TABLE when missing).
_ADDED = {"pending": [("attempts", "INTEGER NOT NULL DEFAULT 0"), ("next_try", "REAL NOT NULL DEFAULT 0"),
                      ("revivable", "INTEGER NOT NULL DEFAULT 0")],
          "alarms": [("incident", "TEXT"), ("state", "TEXT")],
          "flags": [("on_since", "INTEGER")],
          "targets": [("silenced", "INTEGER NOT NULL DEFAULT 0")]}


class Outbox:
    """OUT/alerts/outbox.db. One object per thread (each has its own connection)."""

    def __init__(self, out: Path, limit: int = LIMIT, durable: bool = True, read_only: bool = False):
        """`read_only`: counts only, the outbox as it is. `durable`: each commit is on disk before it returns (the batch path's: an alarm of a batch
        Spark then commits must survive a power cut). The delivery threads' commits are
        acknowledgements, which a power cut may lose (the alarm is sent again: at least once), and
        fsyncing each would cost a few ms; a process killed loses none of them (WAL)."""
        self.path = Path(out) / FOLDER / OUTBOX
        self.limit = limit
        if read_only:  # `sscript status`: what it holds, written by nobody (an OUT one may not write to)
            self.db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=30,
                                      isolation_level=None)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        self.db.executescript(_SCHEMA)
        for table, columns in _ADDED.items():
            present = {row[1] for row in self.db.execute(f"PRAGMA table_info({table})")}
            for name, kind in columns:
                if name not in present:
                    self.db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
        self.db.execute("CREATE INDEX IF NOT EXISTS pending_by_alarm ON pending (seq)")
        self.db.execute("CREATE INDEX IF NOT EXISTS pending_by_try ON pending (target, next_try, seq)")
        self._redact_earlier_keys()

    def _redact_earlier_keys(self) -> None:
        """An outbox of an earlier version: targets keyed by their URL as given become their key now."""
        known = [t for (t,) in self.db.execute("SELECT target FROM targets UNION SELECT DISTINCT target FROM pending")]
        earlier = {t: redacted(t) for t in known if redacted(t) != t}
        if not earlier:
            return
        with self._transaction():
            for old, new in earlier.items():
                self._move(old, new)
            for target, error in self.db.execute("SELECT target, last_error FROM targets").fetchall():
                if error:
                    self.db.execute("UPDATE targets SET last_error = ? WHERE target = ?", (redacted_text(error), target))

    def _move(self, old: str, new: str) -> None:
        """What waits for `old` waits for `new` (once, if it waited for both)."""
        self.db.execute("INSERT OR IGNORE INTO pending (target, seq) SELECT ?, seq FROM pending WHERE target = ?",
                        (new, old))
        self.db.execute("DELETE FROM pending WHERE target = ?", (old,))
        self.db.execute("UPDATE OR IGNORE targets SET target = ? WHERE target = ?", (new, old))
        self.db.execute("DELETE FROM targets WHERE target = ?", (old,))
        self.db.execute("UPDATE alarms SET waiting = (SELECT COUNT(*) FROM pending p WHERE p.seq = alarms.seq) "
                        "WHERE waiting > 0")
        self.db.execute("UPDATE alarms SET body = NULL, delivered = ? WHERE waiting <= 0 AND body IS NOT NULL",
                        (time.time(),))

    def close(self) -> None:
        self.db.close()

    def _count(self, name: str, default: float | None = None) -> float | None:
        row = self.db.execute("SELECT value FROM counts WHERE name = ?", (name,)).fetchone()
        return row[0] if row else default

    def _set(self, name: str, value: float) -> None:
        self.db.execute("INSERT INTO counts (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = ?",
                        (name, value, value))

    def _transaction(self):
        db = self.db

        class Transaction:
            def __enter__(self):
                db.execute("BEGIN IMMEDIATE")

            def __exit__(self, kind, *_):
                db.execute("COMMIT" if kind is None else "ROLLBACK")
                return False

        return Transaction()

    # -- taking alarms -----------------------------------------------------------------------------

    def start_afresh(self) -> None:
        """The run starts afresh: batch and correction numbers begin again (the corrections' record
        goes with the checkpoint), and every flag is off. What waits stays, and so do the incidents
        (a replay's alarms are not sent twice)."""
        with self._transaction():
            self.db.execute("DELETE FROM flags")
            self.db.execute("DELETE FROM counts WHERE name = 'last_batch'")
            self.db.execute("DELETE FROM units")
            self.db.execute("DELETE FROM staged")

    def taken(self, unit: int) -> bool:
        """Whether the sink's unit `unit` (a batch, or a correction's or backfill's write: negative) was taken."""
        if unit >= 0:
            last = self._count("last_batch")
            return last is not None and unit <= last
        return self.db.execute("SELECT 1 FROM units WHERE unit = ?", (unit,)).fetchone() is not None

    def flags(self, streams) -> dict[str, FlagState]:
        """The state (last row, since when on) of each of these flag streams taken so far."""
        streams = list(streams)
        if not streams:
            return {}
        rows = self.db.execute("SELECT stream, ts, value, on_since FROM flags "
                               "WHERE stream IN (SELECT value FROM json_each(?))", (json.dumps(streams),)).fetchall()
        return {stream: FlagState(ts, value, on_since) for stream, ts, value, on_since in rows}

    def take(self, unit: int, alarms: list[dict], flags: dict[str, FlagState], targets: list[str]) -> int:
        """Take a unit's alarms and the flags' states after it, once, in one transaction with its id.
        Returns how many alarms were new."""
        with self._transaction():
            return self._take(unit, alarms, flags, targets)

    def _take(self, unit: int, alarms: list[dict], flags: dict[str, FlagState], targets: list[str]) -> int:
        if self.taken(unit):
            return 0
        now = time.time()
        waiting = self.db.execute("SELECT COUNT(*) FROM alarms WHERE waiting > 0").fetchone()[0]
        added = dropped = 0
        for alarm in self._with_superseded(alarms):
            change = self._change(alarm, now)
            if change is None:
                continue
            if waiting >= self.limit or not targets:
                dropped += bool(targets)
                continue
            body = numbered({k: v for k, v in alarm.items() if k not in PRIVATE}, *change)
            cursor = self.db.execute("INSERT OR IGNORE INTO alarms (id, body, enqueued, waiting, incident, state) "
                                     "VALUES (?, ?, ?, ?, ?, ?)", (body["id"], json.dumps(body), now, len(targets),
                                                                   body["incident"], body["state"]))
            if cursor.rowcount:
                seq = cursor.lastrowid
                self.db.executemany("INSERT INTO pending (target, seq) VALUES (?, ?)", [(t, seq) for t in targets])
                waiting += 1
                added += 1
        if dropped:
            self._set("dropped", (self._count("dropped", 0) or 0) + dropped)
        # A flag's state only moves forward: a correction's or a backfill's write taken after later
        # batches (staged by a process beside the job) leaves the batches' state as it is.
        self.db.executemany("INSERT INTO flags (stream, ts, value, on_since) VALUES (?, ?, ?, ?) ON CONFLICT (stream) "
                            "DO UPDATE SET ts = excluded.ts, value = excluded.value, on_since = excluded.on_since "
                            "WHERE excluded.ts >= flags.ts",
                            [(s, int(f.ts), float(f.value), f.on_since) for s, f in flags.items()])
        if unit >= 0:
            self._set("last_batch", unit)
        else:
            self.db.execute("INSERT INTO units (unit, taken) VALUES (?, ?)", (unit, now))
        return added

    def _with_superseded(self, alarms: list[dict]) -> list[dict]:
        """The alarms, and after those of a correction's match row key (SUPERSEDES: all its matches
        now) the retractions of the key's incidents not among them (their last alarm, resolved)."""
        keys: dict[str, tuple[set[str], dict]] = {}
        found = []
        for alarm in alarms:
            prefix = alarm.get(SUPERSEDES)
            if prefix is None:
                found.append(alarm)
                continue
            kept, _ = keys.setdefault(prefix, (set(), alarm))
            if alarm["state"] == FIRING:
                kept.add(alarm["incident"])
                found.append(alarm)
        for prefix, (kept, alarm) in keys.items():
            rows = self.db.execute("SELECT incident, body FROM incidents WHERE substr(incident, 1, ?) = ? "
                                   "AND state != 'resolved' ORDER BY incident", (len(prefix), prefix)).fetchall()
            for incident, body in rows:
                if incident not in kept and body:
                    last = json.loads(body)
                    found.append({**last, "state": RESOLVED, "retracted": True, "version": alarm["version"],
                                  "value": None})
        return sorted(found, key=in_time) if keys else found
    def _change(self, alarm: dict, now: float) -> tuple[int, str] | None:
        """The incident's next revision and state this alarm makes, or None when it changes nothing
        (the same state and version found again); the incident updated."""
        key, version = alarm["incident"], int(alarm["version"])
        row = self.db.execute("SELECT revision, state, version, retracted FROM incidents WHERE incident = ?",
                              (key,)).fetchone()
        if alarm["state"] == FIRING:
            if row is None:
                change = (1, FIRING)
            elif row[1] in (FIRING, UPDATED):
                change = None if row[2] == version else (row[0] + 1, UPDATED)
            else:  # resolved: back after a retraction, or a flag's run that no longer ends; not a replay
                again = row[3] or alarm.get(REOPENED) or row[2] != version
                change = (row[0] + 1, FIRING) if again else None
        elif row is None:
            change = None
        elif row[1] == RESOLVED:  # resolved already; a retraction says it was no incident after all
            change = (row[0] + 1, RESOLVED) if alarm.get("retracted") and not row[3] else None
        else:
            change = (row[0] + 1, RESOLVED)
        if change is not None:
            last = json.dumps({k: v for k, v in alarm.items() if k not in PRIVATE and k not in ("id", "revision")})
            self.db.execute("INSERT INTO incidents (incident, revision, state, version, retracted, changed, kind, body) "
                            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (incident) DO UPDATE SET "
                            "revision = excluded.revision, state = excluded.state, version = excluded.version, "
                            "retracted = excluded.retracted, changed = excluded.changed, body = excluded.body",
                            (key, change[0], change[1], version, int(bool(alarm.get("retracted"))), now, alarm["kind"],
                             last))
        return change

    def stage(self, unit: int, alarms: list[dict], flags: dict[str, FlagState]) -> None:
        """A correction's or a backfill's alarms, before its write: taken once the sink shows the
        write (`settle`)."""
        with self._transaction():
            self.db.execute("INSERT OR REPLACE INTO staged (unit, pid, staged, alarms, flags) VALUES (?, ?, ?, ?, ?)",
                            (unit, os.getpid(), time.time(), json.dumps(alarms),
                             json.dumps({s: list(f) for s, f in flags.items()})))

    def settle(self, written, targets: list[str]) -> int:
        """Take every staged unit the sink wrote (`written(unit)`), and drop those whose process died
        before writing. Returns how many alarms were new."""
        added = 0
        for unit, pid in self.db.execute("SELECT unit, pid FROM staged ORDER BY staged").fetchall():
            alive = _alive(pid)  # first: once its process is gone, whether the sink holds the write is final
            done = written(unit)
            if not done and alive:
                continue
            with self._transaction():
                row = self.db.execute("SELECT alarms, flags FROM staged WHERE unit = ?", (unit,)).fetchone()
                if row is None:  # settled by another process meanwhile
                    continue
                if done:
                    flags = {s: FlagState(*f) for s, f in json.loads(row[1]).items()}
                    added += self._take(unit, json.loads(row[0]), flags, targets)
                self.db.execute("DELETE FROM staged WHERE unit = ?", (unit,))
        return added

    def staged(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM staged").fetchone()[0]

    def retarget(self, targets: list[str]) -> dict[str, int]:
        """The run delivers to `targets`: what waits for a target it does not name waits for each of
        them instead. Returns how many alarms moved from each target no longer named."""
        moved = {}
        with self._transaction():
            for (old,) in self.db.execute("SELECT DISTINCT target FROM pending").fetchall():
                if old in targets:
                    continue
                moved[old] = self.db.execute("SELECT COUNT(*) FROM pending WHERE target = ?", (old,)).fetchone()[0]
                for new in targets:
                    self.db.execute("INSERT OR IGNORE INTO pending (target, seq) SELECT ?, seq FROM pending "
                                    "WHERE target = ?", (new, old))
                    self.db.execute("INSERT OR IGNORE INTO silenced (target, incident) SELECT ?, incident "
                                    "FROM silenced WHERE target = ?", (new, old))
                self.db.execute("DELETE FROM pending WHERE target = ?", (old,))
            if moved:
                self.db.execute("UPDATE alarms SET waiting = (SELECT COUNT(*) FROM pending p WHERE p.seq = alarms.seq) "
                                "WHERE waiting > 0")
        return moved

    # -- delivering --------------------------------------------------------------------------------

    def waiting_for(self, target: str, count: int = 100) -> list[tuple[int, str, str]]:
        """(seq, id, body) of the alarms waiting for `target`, oldest first."""
        return self.db.execute("SELECT a.seq, a.id, a.body FROM pending p JOIN alarms a ON a.seq = p.seq "
                               "WHERE p.target = ? ORDER BY p.seq LIMIT ?", (target, count)).fetchall()

    def ready(self, target: str, now: float, count: int) -> list[tuple]:
        """(seq, incident, state, enqueued, attempts) of what waits for `target` and may be tried at
        `now` (time.time()), oldest first."""
        return self.db.execute("SELECT p.seq, a.incident, a.state, a.enqueued, p.attempts FROM pending p "
                               "JOIN alarms a ON a.seq = p.seq WHERE p.target = ? AND p.next_try <= ? "
                               "ORDER BY p.seq LIMIT ?", (target, now, count)).fetchall()

    def deferred(self, target: str, now: float) -> tuple[set[str], float | None]:
        """The incidents with an alarm for `target` put off past `now` (their later states wait for
        it), and when the first of those may be tried."""
        rows = self.db.execute("SELECT a.incident, p.next_try FROM pending p JOIN alarms a ON a.seq = p.seq "
                               "WHERE p.target = ? AND p.next_try > ?", (target, now)).fetchall()
        return {incident for incident, _ in rows}, min((at for _, at in rows), default=None)

    def bodies(self, seqs: list[int]) -> dict[int, str]:
        """The JSON bodies of these alarms."""
        return dict(self.db.execute("SELECT seq, body FROM alarms WHERE seq IN (SELECT value FROM json_each(?))",
                                    (json.dumps(seqs),)).fetchall())

    def queue(self, target: str, count: int) -> list[tuple]:
        """(seq, incident, body, enqueued, next_try, attempts) of what waits for `target`, oldest first."""
        return self.db.execute("SELECT p.seq, a.incident, a.body, a.enqueued, p.next_try, p.attempts FROM pending p "
                               "JOIN alarms a ON a.seq = p.seq WHERE p.target = ? ORDER BY p.seq LIMIT ?",
                               (target, count)).fetchall()

    def waiting(self, targets: list[str]) -> int:
        """How many deliveries to these targets wait."""
        return self.db.execute("SELECT COUNT(*) FROM pending WHERE target IN (SELECT value FROM json_each(?))",
                               (json.dumps(targets),)).fetchone()[0]

    def _done(self, target: str, seqs: list[int], now: float) -> int:
        """These alarms no longer wait for `target`; returns how many did."""
        done = 0
        for seq in seqs:
            if not self.db.execute("DELETE FROM pending WHERE target = ? AND seq = ?", (target, seq)).rowcount:
                continue
            done += 1
            self.db.execute("UPDATE alarms SET waiting = waiting - 1 WHERE seq = ?", (seq,))
            self.db.execute("UPDATE alarms SET body = NULL, delivered = ? WHERE seq = ? AND waiting <= 0", (now, seq))
        self._target(target)
        return done

    def acknowledged(self, target: str, seqs, revive: bool = False) -> None:
        """`target` acknowledged these alarms. `revive`: it answers again, so what it failed for a
        passing reason is tried now rather than at its backoff's end."""
        seqs = [seqs] if isinstance(seqs, int) else list(seqs)
        now = time.time()
        with self._transaction():
            done = self._done(target, seqs, now)
            self.db.execute("UPDATE targets SET delivered = delivered + ?, last_success = ? WHERE target = ?",
                            (done, now, target))
            if revive:
                self.db.execute("UPDATE pending SET next_try = ?, revivable = 0 WHERE target = ? AND revivable = 1 "
                                "AND next_try > ?", (now, target, now))

    def failed(self, target: str, error: str, seqs=(), retry_at: float | None = None, revivable: bool = False) -> None:
        """An attempt to deliver these alarms (none: to reach the target at all) failed; they are
        tried again from `retry_at` (time.time()), or sooner once the target acknowledges another
        request if `revivable` (a passing failure, no Retry-After)."""
        with self._transaction():
            self._target(target)
            self.db.execute("UPDATE targets SET failed = failed + 1, last_error = ?, last_error_at = ? WHERE target = ?",
                            (redacted_text(error), time.time(), target))
            self.db.executemany("UPDATE pending SET attempts = attempts + 1, next_try = ?, revivable = ? "
                                "WHERE target = ? AND seq = ?",
                                [(retry_at or 0.0, int(revivable), target, seq) for seq in seqs])

    def held_back(self, target: str, rows: list[tuple[int, str]]) -> None:
        """These alarms (seq, incident) are silenced for `target`: they leave its queue, and the
        incident's later states are held back with them."""
        now = time.time()
        with self._transaction():
            done = self._done(target, [seq for seq, _ in rows], now)
            self.db.executemany("INSERT OR IGNORE INTO silenced (target, incident) VALUES (?, ?)",
                                [(target, incident) for _, incident in rows])
            self.db.execute("UPDATE targets SET silenced = silenced + ? WHERE target = ?", (done, target))

    def any_silenced(self, target: str) -> bool:
        """Whether an incident was held back for `target` (its later states are held back too)."""
        return self.db.execute("SELECT 1 FROM silenced WHERE target = ? LIMIT 1", (target,)).fetchone() is not None

    def silenced_incidents(self, target: str, incidents) -> set[str]:
        """Which of these incidents were held back for `target` when they fired."""
        return {i for (i,) in self.db.execute("SELECT incident FROM silenced WHERE target = ? AND incident IN "
                                              "(SELECT value FROM json_each(?))", (target, json.dumps(list(incidents))))}

    def sent_again(self, target: str, incidents) -> None:
        """These incidents fired again outside a silence: their later states go to `target` again."""
        with self._transaction():
            self.db.executemany("DELETE FROM silenced WHERE target = ? AND incident = ?",
                                [(target, i) for i in incidents])

    def _target(self, target: str) -> None:
        self.db.execute("INSERT OR IGNORE INTO targets (target) VALUES (?)", (target,))

    # -- silences ----------------------------------------------------------------------------------

    def silence(self, what: str, seconds: float, comment: str = "") -> int:
        """Hold back the incidents of a workflow or a stream (WORKFLOW.NAME) that begin within the
        next `seconds`; returns the silence's number."""
        now = time.time()
        with self._transaction():
            return self.db.execute("INSERT INTO silences (what, since, until, comment) VALUES (?, ?, ?, ?)",
                                   (what, now, now + seconds, comment or None)).lastrowid

    def expire(self, number: int) -> bool:
        """End a silence now; False when there is no such silence in force."""
        now = time.time()
        with self._transaction():
            return bool(self.db.execute("UPDATE silences SET until = ? WHERE id = ? AND until > ?",
                                        (now, number, now)).rowcount)

    def silences(self, now: float | None = None) -> list[dict]:
        """The silences in force."""
        now = time.time() if now is None else now
        return [{"id": n, "what": what, "since": since, "until": until, "comment": comment}
                for n, what, since, until, comment in
                self.db.execute("SELECT id, what, since, until, comment FROM silences WHERE until > ? ORDER BY id",
                                (now,))]

    # -- upkeep and counts -------------------------------------------------------------------------

    def trim(self) -> None:
        """Keep the newest KEPT_DELIVERED acknowledged alarms' ids and KEPT_INCIDENTS incidents (and
        every flag's open one)."""
        with self._transaction():
            row = self.db.execute("SELECT seq FROM alarms WHERE waiting <= 0 ORDER BY seq DESC LIMIT 1 OFFSET ?",
                                  (KEPT_DELIVERED,)).fetchone()
            if row:
                self.db.execute("DELETE FROM alarms WHERE waiting <= 0 AND seq <= ?", (row[0],))
            # A flag's open incident is kept (its resolution must find it; a flag has one at a time);
            # resolved incidents and matches (which stay firing) only the newest KEPT_INCIDENTS.
            row = self.db.execute("SELECT changed FROM incidents WHERE state = 'resolved' OR kind = 'match' "
                                  "ORDER BY changed DESC LIMIT 1 OFFSET ?", (KEPT_INCIDENTS,)).fetchone()
            if row:
                self.db.execute("DELETE FROM incidents WHERE changed <= ? AND (state = 'resolved' OR kind = 'match')",
                                (row[0],))
            self.db.execute("DELETE FROM silenced WHERE incident NOT IN (SELECT incident FROM incidents)")
            self.db.execute("DELETE FROM silences WHERE until < ?", (time.time() - 30 * 86_400,))

    def counts(self) -> dict:
        """What status.json's `alerts` says: alarms waiting, deliveries acknowledged, attempts failed
        and alarms silenced (summed over targets, over the outbox's life), the bound and whether it is
        reached, alarms dropped because it was, the silences in force, and per target its own."""
        waiting = self.db.execute("SELECT COUNT(*) FROM alarms WHERE waiting > 0").fetchone()[0]
        per_target = {t: {"waiting": n} for t, n in
                      self.db.execute("SELECT target, COUNT(*) FROM pending GROUP BY target")}
        for target, delivered, failed, silenced, error, error_at, success in self.db.execute(
                "SELECT target, delivered, failed, silenced, last_error, last_error_at, last_success FROM targets"):
            per_target.setdefault(target, {"waiting": 0}).update(
                delivered=delivered, failed=failed, silenced=silenced, last_error=error, last_error_at=error_at,
                last_success=success)
        return {"waiting": waiting,
                "delivered": sum(t.get("delivered", 0) for t in per_target.values()),
                "failed": sum(t.get("failed", 0) for t in per_target.values()),
                "silenced": sum(t.get("silenced", 0) for t in per_target.values()),
                "limit": self.limit, "full": waiting >= self.limit, "dropped": int(self._count("dropped", 0) or 0),
                "staged": self.staged(), "silences": self.silences(),
                "outbox": str(self.path), "targets": per_target}

    def latencies(self) -> list[tuple[str, float, float | None]]:
        """(id, enqueued, delivered to every target) of the alarms kept: what a benchmark measures."""
        return self.db.execute("SELECT id, enqueued, delivered FROM alarms ORDER BY seq").fetchall()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
