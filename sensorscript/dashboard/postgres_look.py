"""A look at a PostgreSQL sink (runtime/output/postgres_sink.py) through a read-only connection. Its
rows have no rowid; what orders them is the driver's ledger: a batch's rows (written by the
executors, then committed by the driver's ledger row) are visible to a look once the batch has its
`seq` in sscript_batches, and a look reads the rows of the batches past the last seq it read. A
batch's rows share its seq as their `_rowid`.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from sensorscript.dashboard.sink_look import BATCHES_SHOWN, METRICS_SHOWN, Sink, Unreadable
from sensorscript.runtime.output.postgres_sink import Address
from sensorscript.runtime.output.sinks import METRIC_COLUMNS


class Postgres(Sink):
    """A read-only connection for one look; a database that does not answer within 5 s is said."""

    def __init__(self, spec: str):
        self.address = Address.parse(spec)
        self.db = None
        self.present = False

    def __enter__(self):
        try:
            self.db = self.address.connect_waiting(patience=0)
        except ConnectionError as exc:
            raise Unreadable(str(exc)) from None
        self.db.autocommit = True
        self.db.execute("SET default_transaction_read_only = on")
        self.db.execute("SET statement_timeout = '30s'")
        self.present = self.db.execute("SELECT to_regclass(%s)", (self._name("sscript_batches"),)).fetchone()[0] \
            is not None
        return self

    def __exit__(self, *_):
        if self.db is not None:
            self.db.close()
        return False

    def _name(self, table: str) -> str:
        return f'"{self.address.schema}".{table}'

    def _frame(self, sql: str, parameters, columns) -> pd.DataFrame:
        return pd.DataFrame(self.db.execute(sql, parameters).fetchall(), columns=list(columns))

    def last_rowid(self) -> int:
        if not self.present:
            return 0
        return int(self.db.execute(f"SELECT coalesce(max(seq), 0) FROM {self._name('sscript_batches')}").fetchone()[0])

    def rows(self, streams, after, upto, columns, by_stream=True):
        if not self.present or not streams:
            return pd.DataFrame(columns=list(columns))
        select = ", ".join("b.seq" if c == "_rowid" else f"r.{c}" for c in columns)
        # By stream: the index on (stream, ts, version); past a seq: the batches' rows (index on batch_id).
        return self._frame(f"SELECT {select} FROM {self._name('results')} r JOIN {self._name('sscript_batches')} b "
                           f"ON b.batch_id = r.batch_id WHERE r.stream = ANY(%s) AND b.seq > %s AND b.seq <= %s",
                           (list(streams), after, upto), columns)

    def quarantine(self, after, counts):
        if not self.present:
            return counts, after
        last = self.last_rowid()
        if last < after:  # the sink was made anew under the same run
            counts, after = Counter(), 0
        counts = counts.copy()
        for reason, count in self.db.execute(
                f"SELECT q.reason, count(*) FROM {self._name('quarantine')} q JOIN {self._name('sscript_batches')} b "
                f"ON b.batch_id = q.batch_id WHERE b.seq > %s AND b.seq <= %s GROUP BY q.reason", (after, last)):
            counts[reason] += count
        return counts, last

    def metrics(self, after):
        empty = pd.DataFrame(columns=list(METRIC_COLUMNS))
        if not self.present:
            return empty, after
        newest = self.db.execute(f"SELECT seq, batch_id FROM {self._name('sscript_batches')} WHERE batch_id >= 0 "
                                 f"ORDER BY seq DESC LIMIT 1").fetchone()
        if newest is None or newest[0] <= after:
            return empty, after
        last, batch = newest
        frame = self._frame(f"SELECT {', '.join('m.' + c for c in METRIC_COLUMNS)} FROM {self._name('metrics')} m "
                            f"JOIN {self._name('sscript_batches')} b ON b.batch_id = m.batch_id WHERE m.name = ANY(%s) "
                            f"AND m.batch_id > %s AND b.seq > %s AND b.seq <= %s",
                            (list(METRICS_SHOWN), batch - BATCHES_SHOWN, after, last), METRIC_COLUMNS)
        return frame, last
