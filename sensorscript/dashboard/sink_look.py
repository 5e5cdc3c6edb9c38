"""One look at a job's sink, as the dashboard reads it (read-only): `with sink:` opens it, then its
rows by rowid (the order they were written), the quarantine's counts and the metrics past a rowid.
A look is made for each kind of sink: sqlite_look.SQLite, file_look.Files (CSV, Parquet); a sink the
page cannot show (the console) is `Nothing`, which says why in one sentence (`Unreadable`).
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from sensorscript.runtime.output.sinks import MATCH_COLUMNS, METRIC_COLUMNS, RESULT_COLUMNS

COLUMNS = RESULT_COLUMNS + MATCH_COLUMNS
METRICS_SHOWN = ("readings", "lag_ms", "watermark", "state_bytes")  # the health plots' measures
BATCHES_SHOWN = 300  # the health plots show the last this many batches


class Unreadable(Exception):
    """A sink the page cannot show, in one sentence."""


class Sink:
    """One look at a sink: `with sink:` opens it, then its rows by rowid (the order they were written)."""

    def __enter__(self):
        return self

    def __exit__(self, *_):
        return False

    def last_rowid(self) -> int:
        return 0

    def rows(self, streams: list[str], after: int, upto: int, columns: tuple[str, ...],
             by_stream: bool = True) -> pd.DataFrame:
        """The rows of these streams with after < rowid <= upto; `by_stream`: few rows of each stream
        are expected (else: few rows past `after`)."""
        return pd.DataFrame(columns=list(columns))

    def quarantine(self, after: int, counts: Counter) -> tuple[Counter, int]:
        return counts, after

    def metrics(self, after: int) -> tuple[pd.DataFrame, int]:
        return pd.DataFrame(columns=list(METRIC_COLUMNS)), after


class Nothing(Sink):
    def __init__(self, spec: str):
        self.spec = spec

    def __enter__(self):
        raise Unreadable(f"the job writes its results to the {self.spec}: there is nothing to show")
