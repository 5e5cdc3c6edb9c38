"""Sinks and the archive when a micro-batch is done again after a kill: nothing written twice."""

from __future__ import annotations

import csv

import numpy as np
import pandas as pd

from sensorscript.runtime.ingest import archive
from sensorscript.runtime.output.sinks import QUARANTINE_COLUMNS, BatchRows, CsvSink


def _rows(values: list[float]) -> BatchRows:
    results = pd.DataFrame({"stream": "w.A", "ts": range(len(values)), "window_start": None, "window_end": None,
                            "value": values, "version": 1})
    return BatchRows(results, pd.DataFrame(columns=list(QUARANTINE_COLUMNS)))


def test_csv_sink_cuts_rows_a_killed_run_appended_without_journalling(tmp_path):
    path = tmp_path / "results.csv"
    CsvSink(path).write(0, _rows([1.0, 2.0]))
    with path.open("a") as f:  # batch 1 appended, then the run was killed before its journal line
        f.write("w.A,0,,,9.0,1\nw.A,1,,,9.0,1\n")
    again = CsvSink(path)  # the next run does batch 1 again, and batch 0 is skipped
    again.write(0, _rows([1.0, 2.0]))
    again.write(1, _rows([3.0]))
    with path.open() as f:
        values = [row["value"] for row in csv.DictReader(f)]
    assert values == ["1.0", "2.0", "3.0"]


def test_an_archived_batch_done_again_replaces_its_files_and_a_cut_attempt_is_forgotten(tmp_path):
    rng = np.random.default_rng(3)
    code = rng.integers(0, 5, 500).astype(np.int32)
    ts = rng.integers(0, 3 * archive.HOUR_MS, 500).astype(np.int64)
    value = rng.normal(size=500)
    archive.write(str(tmp_path), 0, 7, code, ts, value)
    shuffled = rng.permutation(500)  # the shuffle may hand the partition its readings in another order
    archive.write(str(tmp_path), 0, 7, code[shuffled], ts[shuffled], value[shuffled])
    files = sorted(tmp_path.glob("hour=*/*.parquet"))
    assert len(files) == len({p.parent for p in files}) == 3
    assert len(pd.read_parquet(tmp_path)) == 500
    # An attempt at batch 8 cut short under one plan; done again under another (an update), the
    # partition receives only the first hour's readings: nothing of the cut attempt may remain.
    archive.write(str(tmp_path), 0, 8, code, ts, value)
    assert archive.forget(tmp_path, 8) == 3
    first = ts < archive.HOUR_MS
    archive.write(str(tmp_path), 0, 8, code[first], ts[first], value[first])
    assert len(pd.read_parquet(tmp_path)) == 500 + first.sum()


def test_a_run_starting_afresh_removes_only_what_the_sink_wrote(tmp_path):
    from sensorscript.runtime.control.run_loop import _reset_sink

    path = tmp_path / "results.csv"
    rows = _rows([1.0])
    rows.quarantine = pd.DataFrame({"raw": ["x"], "reason": ["malformed"]})
    CsvSink(path).write(0, rows)
    (tmp_path / "quarantine" / "notes.txt").write_text("the user's own file")
    (tmp_path / "late").mkdir()
    _reset_sink(f"csv:{path}")
    assert not path.exists() and not list(tmp_path.glob("quarantine/batch-*"))
    assert (tmp_path / "quarantine" / "notes.txt").exists() and (tmp_path / "late").exists() is False
