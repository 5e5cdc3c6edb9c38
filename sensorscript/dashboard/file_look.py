"""A look at a CSV or Parquet sink (runtime/output/sinks.py; each batch journalled once written): the
rows of the batches journalled since the last look: the CSV file past the offset the last look read
to, the Parquet files (one per batch) and the quarantine/ and metrics/ folders' files not read yet
(`FileReads`); the rows read are kept in memory (`Appended`), less those of files removed since.
"""

from __future__ import annotations

import io
import threading
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from sensorscript.dashboard.sink_look import BATCHES_SHOWN, COLUMNS, METRICS_SHOWN, Sink
from sensorscript.runtime.output.sinks import METRIC_COLUMNS, file_batch, read_journal


class Files(Sink):
    """A CSV or Parquet sink, as far as its journal says it was written: each look reads only what
    came since the last (FileReads, kept by JobOutput between looks)."""

    def __init__(self, kind: str, path: Path, cache: dict, run):
        self.kind, self.path, self.cache, self.run = kind, path, cache, run

    def __enter__(self):
        # The results' look and the health's share what was read: one at a time.
        self.lock = self.cache.setdefault("lock", threading.Lock())
        self.lock.acquire()
        try:
            reads = self.cache.get("reads")
            if reads is None or reads.key != (self.kind, self.path, self.run) or not reads.look():
                reads = FileReads(self.kind, self.path, self.run)  # a new run, or the sink written anew
                reads.look()
        except BaseException:
            self.lock.release()
            raise
        self.cache["reads"] = self.reads = reads
        return self

    def __exit__(self, *_):
        self.lock.release()
        return False

    def last_rowid(self):
        return self.reads.results.rowid

    def rows(self, streams, after, upto, columns, by_stream=True):
        rows = self.reads.results.after(after)
        rows = rows[rows["stream"].isin(streams) & (rows["_rowid"] <= upto)]
        return rows.reindex(columns=list(columns)).reset_index(drop=True)

    def quarantine(self, after, counts):
        lines = self.reads.side["quarantine"]
        if lines.rowid < after:  # written anew under the same run
            counts, after = Counter(), 0
        counts = counts.copy()
        counts.update(lines.after(after)["reason"].astype(str))
        return counts, lines.rowid

    def metrics(self, after):
        metrics = self.reads.side["metrics"]
        return metrics.after(after).reindex(columns=list(METRIC_COLUMNS)).reset_index(drop=True), metrics.rowid


class FileReads:
    """What a CSV or Parquet sink's files held at the looks so far. The sink journals each batch once
    its files are written (sinks.read_journal): a look reads the journal past where the last one
    stopped, then the CSV file's rows up to the size journalled last (from where the last look
    stopped), or the per-batch files of the batches journalled that were not read yet (Parquet files,
    the quarantine/ and metrics/ folders' CSV files). Files removed since (retention) take their rows
    with them; the rowids of the rest stay."""

    def __init__(self, kind: str, path: Path, run):
        self.kind, self.path, self.run = kind, path, run
        self.key = (kind, path, run)
        self.journal_offset = 0
        self.journalled = -1  # the last batch journalled (a run journals its batches in order, each once)
        self.csv_offset, self.csv_header, self.csv_size = 0, None, 0
        self.results = Appended(COLUMNS)
        self.side = {"quarantine": Appended(("reason",)), "metrics": Appended(METRIC_COLUMNS)}
        self.files: dict[Path, int] = {}  # a per-batch file read -> its number (the rows' _file)
        self.numbered = 0

    def look(self) -> bool:
        """Read what is new; False when the sink was written anew (read it afresh)."""
        try:
            entries, self.journal_offset = read_journal(self.path, self.journal_offset)
        except ValueError:
            return False
        self.journalled = max([self.journalled, *(batch for batch, _ in entries)])
        sizes = [size for _, size in entries if size is not None]
        if self.kind == "csv":
            self.csv_size = sizes[-1] if sizes else self.csv_size
            if not self._read_csv():
                return False
        else:
            self._read_batches(self.path, "parquet", self.results, lambda f: pd.read_parquet(f))
        self._read_batches(self.path.parent / "quarantine", "csv", self.side["quarantine"],
                           lambda f: pd.read_csv(f, usecols=["reason"]))
        metrics = self.side["metrics"]
        self._read_batches(self.path.parent / "metrics", "csv", metrics,
                           lambda f: (m := pd.read_csv(f, float_precision="round_trip"))[m["name"].isin(METRICS_SHOWN)])
        if metrics.chunks:  # only the last BATCHES_SHOWN batches are shown
            newest_batch = max(chunk["batch_id"].max() for chunk in metrics.chunks)
            metrics.keep(lambda rows: rows["batch_id"] > newest_batch - BATCHES_SHOWN)
        return True

    def _read_csv(self) -> bool:
        """The CSV file's rows from the last look's end up to the size journalled last."""
        if self.csv_size == self.csv_offset:
            return True
        if self.csv_size < self.csv_offset or not self.path.exists():
            return False
        with self.path.open("rb") as f:
            f.seek(self.csv_offset)
            text = f.read(self.csv_size - self.csv_offset)
        if len(text) < self.csv_size - self.csv_offset:
            return False
        if self.csv_offset == 0:
            rows = pd.read_csv(io.BytesIO(text), float_precision="round_trip")
            self.csv_header = list(rows.columns)
        else:
            rows = pd.read_csv(io.BytesIO(text), header=None, names=self.csv_header, float_precision="round_trip")
        self.csv_offset = self.csv_size
        self.results.add(rows, 0)
        return True

    def _read_batches(self, folder: Path, suffix: str, into: "Appended", read) -> None:
        present = {f: batch for f in folder.glob(f"batch-*.{suffix}")  # the sink's: batch-000042.csv, a
                   if (batch := file_batch(f)) is not None and batch >= 0}   # partition's batch-000042.s1p0003.parquet
        gone = [f for f in self.files if f.parent == folder and f not in present]
        if gone:
            into.drop({self.files.pop(f) for f in gone})
        for f, batch in sorted(present.items(), key=lambda item: item[1]):
            if f not in self.files and batch <= self.journalled:  # written whole
                self.numbered += 1
                self.files[f] = self.numbered
                into.add(read(f), self.files[f])


class Appended:
    """Rows read so far, numbered by `_rowid` in the order read and marked with their file (`_file`),
    in a few frames (the newest small, merged as they grow) so that adding rows or reading those past a
    rowid does not copy all the rows kept."""

    def __init__(self, columns: tuple[str, ...]):
        self.columns = columns  # those the rows have at least
        self.chunks: list[pd.DataFrame] = []
        self.rowid = 0  # the last given

    def add(self, rows: pd.DataFrame, file: int) -> None:
        if not len(rows):
            return
        self.chunks.append(rows.assign(_rowid=np.arange(self.rowid + 1, self.rowid + len(rows) + 1), _file=file))
        self.rowid += len(rows)
        while len(self.chunks) > 1 and len(self.chunks[-2]) <= 2 * len(self.chunks[-1]):
            newer = self.chunks.pop()
            self.chunks[-1] = pd.concat([self.chunks[-1], newer], ignore_index=True)

    def after(self, rowid: int) -> pd.DataFrame:
        found = [chunk[chunk["_rowid"] > rowid] if chunk["_rowid"].iloc[0] <= rowid else chunk
                 for chunk in self.chunks if chunk["_rowid"].iloc[-1] > rowid]
        if not found:
            return pd.DataFrame(columns=["_rowid", "_file", *self.columns])
        return pd.concat(found, ignore_index=True) if len(found) > 1 else found[0]

    def drop(self, files: set[int]) -> None:
        self.keep(lambda rows: ~rows["_file"].isin(files))

    def keep(self, which) -> None:
        kept = [chunk[which(chunk)] for chunk in self.chunks]
        self.chunks = [chunk.reset_index(drop=True) for chunk in kept if len(chunk)]
