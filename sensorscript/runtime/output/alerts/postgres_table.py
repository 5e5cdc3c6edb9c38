"""Alarms into a PostgreSQL table (`--alerts postgresql://[USER@]HOST[:PORT]/DB[?schema=NAME&...]`,
the sink's address as `--sink` takes it: the password from PGPASSWORD or ~/.pgpass, never in the
address): a row an alarm in the schema's `alarms` table, made with the sink's tables
(postgres_sink.Tables), which Grafana's "Newest alarms" panel reads (docs/grafana/).

The rows are the alarms as every target gets them (payload.py: an incident's states, firing, updated,
resolved, each with its revision), so what an alarm is stays decided once (alarms.py, detection.py),
not restated in SQL. A request's alarms go in one transaction; `id` (INCIDENT/REVISION) is the
table's key, so an alarm sent again (after a delivery the database took but did not acknowledge in
time) is kept once.
"""

from __future__ import annotations

from sensorscript.runtime.output.alerts.notifier import SEND_TIMEOUT_S, Failure, Request
from sensorscript.runtime.output.alerts.payload import to_json
from sensorscript.runtime.output.alerts.settings import Target
from sensorscript.runtime.output.postgres_sink import ALARM_COLUMNS, Address, Tables

MOST = 1_000  # alarms of one request


def alarm_row(alarm: dict) -> tuple:
    """The table's columns (postgres_sink.ALARM_COLUMNS) of one alarm as delivered, a NUL in any of
    its text as U+FFFD: PostgreSQL's text and jsonb refuse one (as quarantine keeps a line's)."""
    alarm = _without_nul(alarm)
    return (alarm["id"], alarm["incident"], alarm["revision"], alarm["state"], alarm["kind"], alarm["stream"],
            alarm["workflow"], alarm["ts_ms"], alarm["started_ms"], alarm.get("value"), alarm["version"],
            bool(alarm["retracted"]), alarm["summary"], to_json(alarm))


def _without_nul(item):
    if isinstance(item, str):
        return item.replace("\x00", "\ufffd")
    if isinstance(item, dict):
        return {_without_nul(key): _without_nul(value) for key, value in item.items()}
    if isinstance(item, (list, tuple)):
        return [_without_nul(value) for value in item]
    return item


class AlarmsTable:
    """The notifier of a postgresql:// target: one connection, made again after a failure."""

    most = MOST

    def __init__(self, target: Target):
        self.target = target
        self.address = Address.parse(target.url)
        self.tables = Tables(self.address.schema)
        self.db = None

    def _connection(self):
        if self.db is None or self.db.closed:
            db = self.address.connect_waiting(patience=0)
            db.autocommit = True
            self.tables.create(db)
            self.db = db
        return self.db

    def send(self, request: Request) -> None:
        import psycopg

        columns = ", ".join(ALARM_COLUMNS)
        try:
            db = self._connection()
            with db.transaction():
                db.execute(f"SET LOCAL statement_timeout = '{int(SEND_TIMEOUT_S * 1000)}ms'")
                with db.cursor() as cursor:
                    cursor.executemany(
                        f"INSERT INTO {self.tables.name('alarms')} ({columns}) VALUES "
                        f"({', '.join(['%s'] * len(ALARM_COLUMNS))}) ON CONFLICT (id) DO NOTHING",
                        [alarm_row(alarm) for alarm in request.alarms])
        except (ConnectionError, psycopg.Error) as exc:
            self.close()
            text = str(exc).strip().splitlines()
            raise Failure(f"PostgreSQL at {self.address.url} did not take the alarms "
                          f"({text[-1] if text else type(exc).__name__})") from None

    def close(self) -> None:
        if self.db is not None:
            try:
                self.db.close()
            finally:
                self.db = None
