"""Results in PostgreSQL: `--sink postgresql://[USER@]HOST[:PORT]/DB[?schema=NAME&sslmode=...]`,
written by the executors: no result row crosses the driver.

The address holds no password: libpq finds it as it always does (PGPASSWORD, ~/.pgpass, PGPASSFILE),
in the driver's process. The driver hands what it found to the executors inside the write it sends
them (never into status, logs or the address), since a cluster's executors do not share its
environment. Every other libpq setting of the address (sslmode, sslrootcert, connect_timeout, ...)
is libpq's; `schema` (default `public`) and `retry_for` (how long a write waits for the database to
come back, default 5min) are ours.

The tables (`Tables.create`, made by the job, kept by later runs):

    results          the rows of every output stream (sinks.RESULT_COLUMNS, MATCH_COLUMNS, plan_version)
                     and the batch that wrote them; partitioned by event time (ts), a day a
                     partition (results_dYYYYMMDD), so `--retain results=...` drops whole days
    late             the late store (sinks.LATE_COLUMNS), partitioned the same way (late_dYYYYMMDD)
    quarantine       lines that could not be read, with the batch and its time
    metrics, metrics_minutes   as in SQLite, their `time` in seconds since the epoch
    streams          the job's output streams: workflow, and `match` or `flag` for those with alarms
    alarms           the alarms delivered to this database (`--alerts postgresql://...`,
                     alerts/postgres_table.py): a row an alarm (an incident's state), keyed by its id
    latest           a view: the newest version of each result row, retractions left out
    sscript_parts    the ledger of the executors' writes: one row per (batch, stage, partition),
                     in the transaction that COPYs that partition's rows
    sscript_batches  the ledger of the driver's: a batch's small facts, a correction's write

Exactly once. A micro-batch's result rows are written per Spark partition of its last stage, by
the Python worker that holds them (`ExecutorWrites`): one transaction inserts the partition's
ledger row and COPYs its rows; a partition whose ledger row is there (a batch done again after a
kill, a task retried) writes nothing. The recomputation of a batch from the same checkpoint gives
the same rows, so a partition written by an earlier attempt holds what this one would write. An
attempt under another version of the plan (`sscript update` switched between the two) may cut the
batch differently: the driver first removes what earlier attempts of the batch wrote under
another version (`ExecutorWrites.write`). The driver then writes the batch's small facts and its
`sscript_batches` row in one transaction (`PostgresSink.write`).
"""

from __future__ import annotations

import io
import re
import time
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit, urlencode, urlunsplit

import numpy as np
import pandas as pd

from sensorscript.hosts import loopback
from sensorscript.runtime.output.columns import KEY_COLUMNS, MATCH_COLUMNS, PLAN_COLUMN, RESULT_COLUMNS
from sensorscript.runtime.output.executor_writes import ExecutorWrite, last_stage, write_on_executors
from sensorscript.times import DAY_MS, civil_date, civil_day, duration_ms

PREFIXES = ("postgresql://", "postgres://")
# The columns of a results row in the table's order, then the batch that wrote it.
RESULTS = RESULT_COLUMNS + MATCH_COLUMNS + (PLAN_COLUMN, "batch_id")
KEY = KEY_COLUMNS
# The alarms table's columns (alerts/postgres_table.py fills them from an alarm as delivered, payload.py).
ALARM_COLUMNS = ("id", "incident", "revision", "state", "kind", "stream", "workflow", "ts", "started", "value",
                 "version", "retracted", "summary", "alarm")
_OURS = ("schema", "retry_for")  # the address's settings that are not libpq's
_PATIENCE = "5min"
_SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")  # libpq's
_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def is_postgres(spec: str | None) -> bool:
    return bool(spec) and spec.startswith(PREFIXES)


@dataclass(frozen=True)
class Address:
    """A checked `postgresql://` sink address: libpq's connection string (`conninfo`, no password),
    the schema of the tables and how long a write waits for the database (`patience_s`)."""

    url: str
    conninfo: str
    schema: str = "public"
    patience_s: float = 300.0
    verified_by_default: bool = False  # sslmode=verify-full because the address named none, to another host

    @staticmethod
    def parse(url: str) -> "Address":
        """ValueError, in the user's words, for an address the sink cannot use."""
        parts = urlsplit(url)
        if parts.scheme not in ("postgresql", "postgres"):
            raise ValueError(f"--sink {url}: a PostgreSQL sink is postgresql://[USER@]HOST[:PORT]/DB")
        settings = dict(parse_qsl(parts.query, keep_blank_values=True))
        if parts.password is not None or {"password", "sslpassword"} & settings.keys():
            raise ValueError("--sink: the address of a PostgreSQL sink holds no password (it would be kept in "
                             "OUT/status.json and shown); give it in PGPASSWORD or ~/.pgpass, as for psql")
        if not parts.hostname or not parts.path.strip("/"):
            raise ValueError(f"--sink {url}: name the server and the database: postgresql://[USER@]HOST[:PORT]/DB")
        try:
            parts.port  # noqa: B018 (raises for a port that is not a number)
        except ValueError:
            raise ValueError(f"--sink {url}: the port is not a number") from None
        schema = settings.pop("schema", "public")
        if not _NAME.fullmatch(schema):
            raise ValueError(f"--sink {url}: schema '{schema}' is not a plain lower-case name (letters, digits, _)")
        patience = duration_ms(settings.pop("retry_for", _PATIENCE), "retry_for") / 1000.0
        if settings.get("sslmode", "prefer") not in _SSLMODES:
            raise ValueError(f"--sink {url}: sslmode '{settings['sslmode']}' is not one of {', '.join(_SSLMODES)}")
        # The password goes to another host only over TLS that checks the server (libpq's default,
        # prefer, takes an unverified server, and a man in the middle may ask for the password in
        # clear): verify-full unless the address says otherwise, as MQTT's password is kept.
        servers = [parts.hostname, *filter(None, settings.get("host", "").split(","))]
        verified = "sslmode" not in settings and not all(h.startswith("/") or loopback(h) for h in servers)
        if verified:
            settings["sslmode"] = "verify-full"
        conninfo = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(settings), ""))
        from psycopg.conninfo import conninfo_to_dict

        try:
            conninfo_to_dict(conninfo)
        except Exception as exc:  # noqa: BLE001 (psycopg's ProgrammingError: libpq's own words)
            raise ValueError(f"--sink {url}: {str(exc).strip()}") from None
        return Address(url, conninfo, schema, patience, verified)

    def describe(self) -> str:
        return f"{self.url} (tables results, late, quarantine, metrics in schema {self.schema}; " \
               f"results written by the executors)"

    def connect(self, password: str | None = None, **settings):
        import psycopg

        extra = {"password": password} if password else {}
        return psycopg.connect(self.conninfo, **extra, **settings)

    def password(self) -> str | None:
        """The password libpq finds for this address here (PGPASSWORD, ~/.pgpass), for the executors;
        ConnectionError in one sentence when the database cannot be reached."""
        with self.connect_waiting() as db:
            return db.info.password or None

    def connect_waiting(self, password: str | None = None, patience: float | None = None):
        """A connection, waiting up to `patience` seconds (default the address's) for the database;
        ConnectionError in one sentence when it stays away."""
        import psycopg

        deadline = time.monotonic() + (self.patience_s if patience is None else patience)
        delay = 0.5
        while True:
            try:
                return self.connect(password)
            except psycopg.OperationalError as exc:
                if time.monotonic() + delay > deadline or _refused_for_good(exc):
                    hint = ("; to another host the password goes only over TLS that verifies the server: add "
                            "sslrootcert=CA.pem (sslrootcert=system for the system's CAs), or say sslmode=prefer "
                            "or disable in the address to allow less" if self.verified_by_default else "")
                    raise ConnectionError(f"PostgreSQL at {self.url} could not be reached: {_first_line(exc)}{hint}") \
                        from None
                time.sleep(delay)
                delay = min(delay * 2, 10.0)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[-1].strip() if text else type(exc).__name__


def _refused_for_good(exc: BaseException) -> bool:
    """A login refused (a wrong password, an unknown role or database, TLS that does not verify):
    waiting will not help."""
    text = str(exc)
    return any(words in text for words in ("password authentication failed", "does not exist",
                                           "no password supplied", "certificate verify failed",
                                           "no pg_hba.conf entry", "server does not support SSL"))


def retrying(address: Address, password: str | None, work, what: str):
    """`work(connection)` (in autocommit: `work` opens the transactions it needs), done again from the
    start when the connection is lost (the database restarted), for up to the address's patience;
    ConnectionError in one sentence once it is spent. `work` must be safe to do again (the ledger
    makes it so)."""
    import psycopg

    deadline = time.monotonic() + address.patience_s
    delay = 0.5
    while True:
        try:
            with address.connect_waiting(password, max(0.0, deadline - time.monotonic())) as db:
                db.autocommit = True
                return work(db)
        except (psycopg.OperationalError, psycopg.errors.AdminShutdown, psycopg.errors.CrashShutdown) as exc:
            if time.monotonic() + delay > deadline:
                raise ConnectionError(f"{what}: PostgreSQL at {address.url} stayed away: {_first_line(exc)}") from None
            time.sleep(delay)
            delay = min(delay * 2, 10.0)


# ------------------------------------------------------------------ the tables

class Tables:
    """The sink's tables in `schema`, and their partitions by day of event time."""

    # The tables `create` makes and a run afresh drops (`PostgresSink.reset`); the view `latest` reads results.
    TABLES = ("results", "late", "quarantine", "metrics", "metrics_minutes", "streams", "alarms", "sscript_parts",
              "sscript_batches")
    # What `_create` makes, as a version kept in the comment of sscript_batches: a sink already made by
    # this version is left as it is. Raise it with every change to the tables, indexes or view below.
    MADE = "sensorscript sink tables"  # the comment of sscript_batches, then the version
    VERSION = f"{MADE} 3"
    MARK = "sensorscript sink table"  # each table's comment: a table of this sink's, which a run afresh may drop

    def __init__(self, schema: str):
        self.schema = schema
        self.known: set[str] = set()  # partitions this process made or found

    def name(self, table: str) -> str:
        return f'"{self.schema}".{table}'

    def create(self, db) -> None:
        """Every table, index and view, where missing (one process at a time: an advisory lock); a sink
        this version made is left as it is after one look at the catalog (no lock, no DDL): every
        command and housekeeping pass that opens the sink opens it again."""
        made = db.execute("SELECT obj_description(to_regclass(%s), 'pg_class')", (self.name("sscript_batches"),))
        if made.fetchone()[0] == self.VERSION:
            return
        with db.transaction():
            self._create(db)

    def foreign(self, db) -> list[str]:
        """The tables and views of the sink's names in the schema that it did not make (their comment
        is not MARK, and no sink made the schema's sscript_batches), which it never takes or drops."""
        found = dict(db.execute(
            "SELECT c.relname, obj_description(c.oid, 'pg_class') FROM pg_class c JOIN pg_namespace n ON "
            "n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = ANY(%s) AND c.relkind IN ('r', 'p', 'v', 'm', "
            "'f') AND NOT c.relispartition", (self.schema, [*self.TABLES, "latest"])).fetchall())
        if (found.get("sscript_batches") or "").startswith(self.MADE):  # a sink's, an earlier version's too
            return []
        return sorted(name for name, comment in found.items() if comment != self.MARK)

    def refuse_foreign(self, db) -> None:
        foreign = self.foreign(db)
        if foreign:
            raise ValueError(f"the schema {self.schema} holds {', '.join(foreign)}, which this sink did not make: it "
                             f"neither writes into nor drops another's tables; give the sink a schema of its own "
                             f"(?schema=NAME)")

    def _create(self, db) -> None:
        self._take(db)
        self._make(db)

    def _take(self, db) -> None:
        """The schema held for this transaction (one process at a time: an advisory lock), made if
        missing; refused if it holds another's tables of the sink's names (`refuse_foreign`)."""
        db.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"sensorscript:{self.schema}",))
        db.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
        self.refuse_foreign(db)

    def _make(self, db) -> None:
        """Every table, index and view where missing, each marked as the sink's."""
        s = self.schema
        for statement in (
            f"""CREATE TABLE IF NOT EXISTS "{s}".results (stream text NOT NULL, ts bigint NOT NULL,
                window_start bigint, window_end bigint, value double precision, version integer NOT NULL,
                start_ts bigint, end_ts bigint, events text, plan_version integer, batch_id bigint NOT NULL)
                PARTITION BY RANGE (ts)""",
            # A stream's rows in time, each row's versions side by side (the view `latest`, corrections).
            f'CREATE INDEX IF NOT EXISTS results_by_stream ON "{s}".results (stream, ts, version)',
            f"""CREATE TABLE IF NOT EXISTS "{s}".late (sensor_id text NOT NULL, ts bigint NOT NULL,
                value double precision, watermark bigint NOT NULL, streams text NOT NULL, batch_id bigint NOT NULL,
                too_late integer) PARTITION BY RANGE (ts)""",
            f"""CREATE TABLE IF NOT EXISTS "{s}".quarantine (raw text NOT NULL, reason text NOT NULL,
                batch_id bigint, time timestamptz NOT NULL DEFAULT now())""",
            f'CREATE INDEX IF NOT EXISTS quarantine_by_time ON "{s}".quarantine (time)',
            f"""CREATE TABLE IF NOT EXISTS "{s}".metrics (batch_id bigint NOT NULL, partition integer,
                time double precision NOT NULL, name text NOT NULL, value double precision)""",
            f'CREATE INDEX IF NOT EXISTS metrics_by_name ON "{s}".metrics (name, batch_id)',
            f'CREATE INDEX IF NOT EXISTS metrics_by_time ON "{s}".metrics (time)',
            f"""CREATE TABLE IF NOT EXISTS "{s}".metrics_minutes (minute double precision NOT NULL,
                partition integer, name text NOT NULL, batches integer NOT NULL, total double precision,
                low double precision, high double precision)""",
            f'CREATE INDEX IF NOT EXISTS metrics_minutes_by_minute ON "{s}".metrics_minutes (minute)',
            # The job's output streams, their workflow, and which have alarms (runtime/output/alarms.py:
            # `match`, `flag`): Grafana's workflow variable and alarm panels (docs/grafana/).
            f"""CREATE TABLE IF NOT EXISTS "{s}".streams (stream text PRIMARY KEY, workflow text NOT NULL,
                alarm text)""",
            # An alarm as delivered (payload.py): ts and started in epoch ms (the row's time, the
            # incident's start), `alarm` its whole JSON object; `time` when the database took it.
            f"""CREATE TABLE IF NOT EXISTS "{s}".alarms (id text PRIMARY KEY, incident text NOT NULL,
                revision integer NOT NULL, state text NOT NULL, kind text NOT NULL, stream text NOT NULL,
                workflow text NOT NULL, ts bigint NOT NULL, started bigint NOT NULL, value double precision,
                version integer NOT NULL, retracted boolean NOT NULL, summary text NOT NULL, alarm jsonb NOT NULL,
                time timestamptz NOT NULL DEFAULT now())""",
            # Grafana's "Newest alarms": a workflow's incidents by when they began.
            f'CREATE INDEX IF NOT EXISTS alarms_by_workflow ON "{s}".alarms (workflow, started)',
            f"""CREATE TABLE IF NOT EXISTS "{s}".sscript_parts (batch_id bigint NOT NULL, stage integer NOT NULL,
                part integer NOT NULL, plan_version integer NOT NULL, rows bigint, low_ts bigint, high_ts bigint,
                time timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (batch_id, stage, part))""",
            # `seq`: the order the driver wrote batches (a correction's too), which a look of the
            # dashboard reads past (sensorscript/dashboard/postgres_look.py).
            f"""CREATE TABLE IF NOT EXISTS "{s}".sscript_batches (batch_id bigint PRIMARY KEY,
                seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE, time timestamptz NOT NULL DEFAULT now())""",
            # The rows of some batches (written batch after batch: a block range index, tiny to keep).
            f'CREATE INDEX IF NOT EXISTS results_by_batch ON "{s}".results USING brin (batch_id)',
            # The newest version of each row, retractions (an empty value) left out: one look-up in
            # results_by_stream per row.
            f"""CREATE OR REPLACE VIEW "{s}".latest AS SELECT r.* FROM "{s}".results r WHERE r.value IS NOT NULL
                AND NOT EXISTS (SELECT 1 FROM "{s}".results n WHERE n.stream = r.stream AND n.ts = r.ts AND """
            + " AND ".join(f"n.{c} IS NOT DISTINCT FROM r.{c}" for c in KEY[2:]) + " AND n.version > r.version)",
        ):
            db.execute(statement)
        for table in self.TABLES[:-1]:
            db.execute(f"COMMENT ON TABLE {self.name(table)} IS '{self.MARK}'")
        db.execute(f"COMMENT ON VIEW {self.name('latest')} IS '{self.MARK}'")
        db.execute(f"COMMENT ON TABLE {self.name('sscript_batches')} IS '{self.VERSION}'")

    def partitions(self, db, table: str, days: set[int]) -> None:
        """Make the partitions of `table` for these days (days since the epoch) that are missing: each
        made alone and attached, which neither waits for nor blocks the writes and reads of the
        others (CREATE ... PARTITION OF would lock the whole table); one process at a time."""
        wanted = {day: f"{table}_d{_day_name(day)}" for day in days}
        missing = {day: name for day, name in wanted.items() if name not in self.known}
        if not missing:
            return
        found = {row[0] for row in db.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = ANY(%s)", (self.schema, list(missing.values())))}
        for day, name in sorted(missing.items()):
            if name not in found:
                with db.transaction():
                    db.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"sensorscript:{self.schema}:{name}",))
                    exists = db.execute("SELECT to_regclass(%s)", (f'"{self.schema}".{name}',)).fetchone()[0]
                    if exists is None:
                        db.execute(f'CREATE TABLE "{self.schema}".{name} (LIKE "{self.schema}".{table} '
                                   f'INCLUDING DEFAULTS INCLUDING CONSTRAINTS)')
                        db.execute(f'ALTER TABLE "{self.schema}".{table} ATTACH PARTITION "{self.schema}".{name} '
                                   f'FOR VALUES FROM ({day * DAY_MS}) TO ({(day + 1) * DAY_MS})')
            self.known.add(name)

    def drop_before(self, db, table: str, before_ms: int) -> int:
        """Drop the partitions of `table` whose every row is older than `before_ms`; how many rows they held."""
        rows = db.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_class p ON p.oid = i.inhparent JOIN pg_namespace n ON n.oid = p.relnamespace "
            "WHERE n.nspname = %s AND p.relname = %s", (self.schema, table)).fetchall()
        dropped = 0
        for (name,) in rows:
            match = re.fullmatch(rf"{table}_d({DAY_NAME})", name)
            if match and (_day_of_name(match.group(1)) + 1) * DAY_MS <= before_ms:
                dropped += db.execute(f'SELECT count(*) FROM "{self.schema}".{name}').fetchone()[0]
                db.execute(f'DROP TABLE "{self.schema}".{name}')
                self.known.discard(name)
        return dropped


# A day partition's name: its date, 20261203; a year outside 1-9999 (a window's end after a reading of
# 9999-12-31) as p or m and six digits or more, its sign (p010000..., m000001...).
DAY_NAME = r"\d{8}|[pm]\d{10,}"


def _day_name(day: int) -> str:
    year, month, date = civil_date(day)
    shown = f"{year:04d}" if 1 <= year <= 9999 else f"{'p' if year > 0 else 'm'}{abs(year):06d}"
    return f"{shown}{month:02d}{date:02d}"


def _day_of_name(text: str) -> int:
    sign = {"p": 1, "m": -1}.get(text[0], 1)
    digits = text.lstrip("pm")
    return civil_day(sign * int(digits[:-4]), int(digits[-4:-2]), int(digits[-2:]))


def days_of(ts) -> set[int]:
    return {int(d) for d in np.unique(np.floor_divide(np.asarray(ts, np.int64), DAY_MS))}


# ------------------------------------------------------------------ COPY

def copy_arrow(db, tables: Tables, table: str, columns: tuple[str, ...], data) -> int:
    """COPY an Arrow table (these columns, in order) into `table`: written as CSV by Arrow's writer
    (every string quoted, an empty value unquoted: NULL), read by PostgreSQL's COPY."""
    import pyarrow.csv as pacsv

    if not data.num_rows:
        return 0
    buffer = io.BytesIO()
    pacsv.write_csv(data.select(list(columns)), buffer,
                    pacsv.WriteOptions(include_header=False, quoting_style="needed"))
    with db.cursor().copy(f"COPY {tables.name(table)} ({', '.join(columns)}) FROM STDIN WITH (FORMAT csv)") as copy:
        copy.write(buffer.getbuffer())
    return data.num_rows


def arrow_of(frame: pd.DataFrame, columns: tuple[str, ...], types: dict[str, str]):
    """A pandas frame (a driver's rows) as an Arrow table of these columns."""
    import pyarrow as pa

    arrays = []
    for column in columns:
        values = frame[column] if column in frame else pd.Series([None] * len(frame), dtype=object)
        kind = {"text": pa.string(), "bigint": pa.int64(), "integer": pa.int32(), "double": pa.float64()}[types[column]]
        present = values.notna().to_numpy()
        if kind in (pa.int64(), pa.int32()):
            arrays.append(pa.array(values.astype(object).where(present, None).tolist(), type=kind))
        elif kind == pa.float64():
            arrays.append(pa.array(values.to_numpy(np.float64, na_value=np.nan), mask=~present, type=kind))
        else:
            arrays.append(pa.array(values.astype(object).where(present, None).tolist(), type=kind))
    return pa.table(arrays, names=list(columns))


RESULT_TYPES = {"stream": "text", "ts": "bigint", "window_start": "bigint", "window_end": "bigint", "value": "double",
                "version": "integer", "start_ts": "bigint", "end_ts": "bigint", "events": "text",
                "plan_version": "integer", "batch_id": "bigint"}
SIDE_TYPES = {
    "late": {"sensor_id": "text", "ts": "bigint", "value": "double", "watermark": "bigint", "streams": "text",
             "batch_id": "bigint", "too_late": "integer"},
    "quarantine": {"raw": "text", "reason": "text", "batch_id": "bigint"},
    "metrics": {"batch_id": "bigint", "partition": "integer", "time": "double", "name": "text", "value": "double"},
}


# ------------------------------------------------------------------ the executors' writes

@dataclass
class PartitionWrite(ExecutorWrite):
    """A micro-batch's result rows into `results`, by partition (`ExecutorWrite`): the password libpq
    found on the driver travels with it (never shown: repr leaves it out)."""

    address: Address | None = None
    password: str | None = field(default=None, repr=False)

    def store(self, part: int, table, ts) -> None:
        """COPY the partition's rows with its ledger row, unless the ledger has it (an earlier attempt)."""
        import pyarrow as pa

        data = table.append_column("batch_id", pa.array(np.full(table.num_rows, self.batch_id, np.int64)))
        tables = Tables(self.address.schema)
        low, high = int(ts.min()), int(ts.max())

        def work(db):
            tables.partitions(db, "results", days_of(ts))
            with db.transaction():
                new = db.execute(f"INSERT INTO {tables.name('sscript_parts')} (batch_id, stage, part, plan_version, "
                                 f"rows, low_ts, high_ts) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                                 f"ON CONFLICT DO NOTHING RETURNING 1",
                                 (self.batch_id, self.stage, part, self.plan, table.num_rows, low, high)).fetchone()
                if new is not None:  # not in the ledger before: this attempt writes the rows
                    copy_arrow(db, tables, "results", RESULTS, data)

        retrying(self.address, self.password, work, f"micro-batch {self.batch_id}, partition {part}")


# ------------------------------------------------------------------ the driver's side

class PostgresSink:
    """The sink `postgresql://...` as the driver sees it: the tables made, a batch's small facts and
    its ledger row written in one transaction (`write`, also a correction's or a backfill's rows),
    what the sink holds read back (`read`), and the executors' write of a micro-batch's result
    rows handed to Spark (`write_on_executors`)."""

    on_executors = True

    def __init__(self, spec: str):
        self.address = Address.parse(spec)
        self.tables = Tables(self.address.schema)
        self._password: str | None = None
        retrying(self.address, None, self.tables.create, "the sink's tables could not be made")

    @property
    def path(self) -> str:  # what a sink's describe names
        return self.address.url

    def describe(self) -> str:
        return self.address.describe()

    def password(self) -> str | None:
        if self._password is None:
            self._password = self.address.password()
        return self._password

    def name_streams(self, alarms: dict[str, str], streams) -> None:
        """The job's output streams (`streams`) into the table `streams`, with their alarm kinds
        (`alarms`: alarms.alarm_kinds); a stream an update dropped stays (its rows do)."""
        rows = [(name, name.split(".", 1)[0], alarms.get(name)) for name in sorted(set(streams))]

        def work(db):
            with db.transaction():
                db.cursor().executemany(f"INSERT INTO {self.tables.name('streams')} (stream, workflow, alarm) "
                                        f"VALUES (%s, %s, %s) ON CONFLICT (stream) DO UPDATE SET "
                                        f"workflow = excluded.workflow, alarm = excluded.alarm", rows)

        retrying(self.address, None, work, "the job's streams could not be written")

    def _in_ledger(self, db, batch_id: int) -> bool:
        return db.execute(f"SELECT 1 FROM {self.tables.name('sscript_batches')} WHERE batch_id = %s",
                          (batch_id,)).fetchone() is not None

    def wrote(self, batch_id: int) -> bool:
        return retrying(self.address, None, lambda db: self._in_ledger(db, batch_id),
                        f"the ledger of {self.address.url} could not be read")

    def write(self, batch_id: int, rows) -> None:
        """One transaction: the rows (results the driver holds: a correction's, a backfill's; the
        late store, quarantine, metrics) and the batch's ledger row, or nothing; a batch in the
        ledger is skipped."""
        tables = self.tables
        results = rows.results if rows.results is not None else pd.DataFrame()
        late = rows.late if rows.late is not None else pd.DataFrame()

        def work(db):
            if self._in_ledger(db, batch_id):
                return
            if len(results):
                tables.partitions(db, "results", days_of(results["ts"].to_numpy(np.int64)))
            if len(late):
                tables.partitions(db, "late", days_of(late["ts"].to_numpy(np.int64)))
            with db.transaction():
                if self._in_ledger(db, batch_id):
                    return
                if len(results):
                    copy_arrow(db, tables, "results", RESULTS,
                               arrow_of(results.assign(batch_id=batch_id), RESULTS, RESULT_TYPES))
                for table, frame in (("late", late), ("quarantine", rows.quarantine), ("metrics", rows.metrics)):
                    if frame is not None and len(frame):
                        types = SIDE_TYPES[table]
                        if table == "quarantine":
                            frame = frame.assign(batch_id=batch_id)
                        copy_arrow(db, tables, table, tuple(types), arrow_of(frame, tuple(types), types))
                db.execute(f"INSERT INTO {tables.name('sscript_batches')} (batch_id) VALUES (%s)", (batch_id,))

        retrying(self.address, None, work, f"micro-batch {batch_id} could not be written")

    def write_on_executors(self, batch, batch_id: int, job, keep: frozenset = frozenset()):
        """A micro-batch's result rows into `results` from the executors (`PartitionWrite`, per
        partition of its last stage); returns what the driver needs: the batch's other rows with
        the result rows of the streams in `keep`, how many result rows there were, and how many of
        them were pattern matches. First, what earlier attempts of this batch wrote under another
        version of the plan goes."""
        number = job.version.number
        self.forget_other_attempts(batch_id, number)
        return write_on_executors(batch, PartitionWrite(batch_id, last_stage(job), number, tuple(job.handed_over()),
                                                        frozenset(keep), self.address, self.password()))

    def forget_other_attempts(self, batch_id: int, plan: int) -> None:
        tables = self.tables

        def work(db):
            with db.transaction():
                for version, low, high in db.execute(
                        f"SELECT plan_version, min(low_ts), max(high_ts) FROM {tables.name('sscript_parts')} "
                        f"WHERE batch_id = %s AND plan_version <> %s GROUP BY plan_version", (batch_id, plan)).fetchall():
                    db.execute(f"DELETE FROM {tables.name('results')} WHERE batch_id = %s AND ts BETWEEN %s AND %s",
                               (batch_id, low, high))
                    db.execute(f"DELETE FROM {tables.name('sscript_parts')} WHERE batch_id = %s AND plan_version = %s",
                               (batch_id, version))

        retrying(self.address, None, work, f"micro-batch {batch_id} could not be written")

    def read(self, columns: list[str], streams=None, lo: int | None = None, hi: int | None = None) -> pd.DataFrame:
        """Every version of the result rows (of these streams, lo <= ts < hi), in `columns`."""
        where, parameters = ["TRUE"], []
        if streams is not None:
            where.append("stream = ANY(%s)")
            parameters.append(list(streams))
        if lo is not None and lo > -(2**63):
            where.append("ts >= %s")
            parameters.append(int(lo))
        if hi is not None and hi < 2**63 - 1:
            where.append("ts < %s")
            parameters.append(int(hi))

        def work(db):
            cursor = db.execute(f"SELECT {', '.join(columns)} FROM {self.tables.name('results')} "
                                f"WHERE {' AND '.join(where)}", parameters)
            return pd.DataFrame(cursor.fetchall(), columns=columns)

        return retrying(self.address, None, work, f"the results in {self.address.url} could not be read")

    def result_groups(self, streams, all_versions: bool, limit: int):
        """For `sscript results`: per stream in name order, (stream, how many rows, its newest `limit`
        rows: all with 0), the newest version of each row (the view `latest`) or every version,
        selected per stream (status.selected_groups)."""
        from sensorscript.runtime.output.status import selected_groups

        def query(sql, parameters):
            return retrying(self.address, None, lambda db: db.execute(sql, parameters).fetchall(),
                            f"the results in {self.address.url} could not be read")

        source = self.tables.name("results" if all_versions else "latest")
        yield from selected_groups(query, source, streams, limit, "%s")

    def reset(self) -> None:
        """Remove what earlier runs wrote (a run afresh): the sink's tables, made anew."""
        s = self.address.schema

        def work(db):
            import psycopg

            with db.transaction():
                self.tables._take(db)
                try:  # without CASCADE: a view of someone's on the results stays, and says so
                    db.execute(f'DROP VIEW IF EXISTS "{s}".latest')
                    for table in Tables.TABLES:
                        db.execute(f'DROP TABLE IF EXISTS "{s}".{table}')
                except psycopg.errors.DependentObjectsStillExist as exc:
                    detail = (exc.diag.message_detail or "").replace("\n", "; ")
                    raise ValueError(f"a run afresh drops the sink's tables in the schema {s}, and other objects "
                                     f"depend on them ({detail}): drop those first, or give the sink another schema "
                                     f"(?schema=NAME)") from None
                self.tables.known.clear()
                self.tables._make(db)

        retrying(self.address, None, work, f"the sink {self.address.url} could not be cleared")

    # ------------------------------------------------------------------ retention (runtime/output/expiry.py)
    def drop_before(self, table: str, before_ms: int) -> int:
        """Drop the days of `table` (results, late) wholly behind `before_ms`; how many rows they held."""
        tables = self.tables

        def work(db):
            with db.transaction():
                return tables.drop_before(db, table, before_ms)

        return retrying(self.address, None, work, f"the {table} behind the horizon could not be removed")

    def downsample_metrics(self, before: float) -> int:
        """The metrics rows older than `before` (s) become per-minute rows, in one transaction."""
        name = self.tables.name

        def work(db):
            with db.transaction():
                db.execute(f"INSERT INTO {name('metrics_minutes')} (minute, partition, name, batches, total, low, high) "
                           f"SELECT floor(time / 60) * 60, partition, name, count(*), sum(value), min(value), "
                           f"max(value) FROM {name('metrics')} WHERE time < %s GROUP BY 1, 2, 3", (before,))
                return db.execute(f"DELETE FROM {name('metrics')} WHERE time < %s", (before,)).rowcount

        return retrying(self.address, None, work, "the metrics could not be downsampled")

    def expire_minutes(self, before: float) -> int:
        return retrying(self.address, None, lambda db: db.execute(
            f"DELETE FROM {self.tables.name('metrics_minutes')} WHERE minute < %s", (before,)).rowcount,
            "the metrics per minute could not be removed")

    def size(self) -> int:
        """Bytes the sink's tables take (their indexes too)."""
        return retrying(self.address, None, lambda db: int(db.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
            (self.address.schema,)).fetchone()[0]), "the sink's size could not be read")
