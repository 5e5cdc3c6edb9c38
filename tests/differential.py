"""Comparing a job's results with the reference evaluator's: shared by the Spark and cluster tests.

`expected_rows` and `assert_same` are the oracle's (oracles/streams.py: scripts/bench_job.py's
`--check` uses them too), named here for the tests that import the rest from this module.
"""

import codecs
import re
from pathlib import Path

from sensorscript.runtime.ingest.records import MAX_LINE_BYTES, read_piece
from sensorscript.runtime.ingest.source import blocks
from sensorscript.runtime.output.sinks import sqlite_results
from oracles.records import Rejected, read_line
from oracles.streams import assert_same, expected_rows  # noqa: F401  (for the tests)


def result_rows(out: Path) -> list[tuple]:
    """The rows of a run's SQLite sink (OUT/results.db), sorted."""
    return sqlite_results(out / "results.db")


def reference_alarms(rows, flags: tuple[str, ...] | None = None) -> list[tuple[str, int, int, int]]:
    """The alarms docs/ALARMS.md names, made from the reference's rows (oracles/streams.ResultRow): every
    pattern match, and every time a flag turns on (a row of 1 after a row that is not 1, or none);
    a flag is one of `flags`, or else any stream of rows outside windows and patterns whose values
    are all 0 and 1. As (stream, ts, start_ts or -1, end_ts or -1), sorted."""
    found = [(r.stream, r.ts, -1 if r.start_ts is None else r.start_ts, -1 if r.end_ts is None else r.end_ts)
             for r in rows if r.events is not None]
    plain: dict[str, list[tuple[int, float]]] = {}
    for r in sorted(rows, key=lambda r: (r.stream, r.ts)):
        if r.events is None and r.window_start is None:
            plain.setdefault(r.stream, []).append((r.ts, r.value))
    for stream, values in plain.items():
        if stream in flags if flags is not None else all(v in (0.0, 1.0) for _, v in values):
            found += [(stream, ts, -1, -1) for (ts, v), before in zip(values, [0.0] + [v for _, v in values])
                      if v == 1.0 and before != 1.0]
    return sorted(found)


def reference_incidents(rows, flags: tuple[str, ...]) -> dict[tuple[str, int, int, int], str]:
    """The incidents docs/ALARMS.md names, made from the reference's rows: every pattern match (open: a
    match is not resolved by itself), and every run of 1s of a flag in `flags`, from the row where it
    begins: open while it lasts to the last row, closed once a row that is not 1 follows. Keyed
    (stream, ts where it began, start_ts or -1, end_ts or -1)."""
    found = {(r.stream, r.ts, -1 if r.start_ts is None else r.start_ts, -1 if r.end_ts is None else r.end_ts): "open"
             for r in rows if r.events is not None}
    for stream in flags:
        on = None
        for r in sorted((r for r in rows if r.stream == stream), key=lambda r: r.ts):
            if r.value == 1.0 and on is None:
                on = r.ts
                found[(stream, on, -1, -1)] = "open"
            elif r.value != 1.0 and on is not None:
                found[(stream, on, -1, -1)] = "closed"
                on = None
    return found


def write_scripts(folder: Path, scripts: dict[str, str]) -> list[str]:
    """Each script as FOLDER/NAME.ss; returns the paths."""
    files = []
    for name, text in scripts.items():
        (folder / f"{name}.ss").write_text(text)
        files.append(str(folder / f"{name}.ss"))
    return files


def spark_lines(data: bytes) -> list[str]:
    """The lines of a file as Spark's and Hadoop's text sources read them: split at \\n, \\r\\n or
    \\r, a UTF-8 BOM at the start of the file dropped; bytes that are not UTF-8 read as U+FFFD."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    pieces = re.split(rb"\r\n|\r|\n", data)
    if pieces[-1] == b"":  # a final line break ends the last line; it starts none
        pieces.pop()
    return [piece.decode("utf-8", "replace") for piece in pieces]


def assert_read_as_records(data: bytes, tmp: Path, block_bytes: tuple[int, ...] = (7, 64, 1 << 20)) -> None:
    """Stage 0's reader (source.blocks, records.read_piece) reads the file `data` as the oracle's
    record rules read its lines (oracles/records.py, written from docs/LANGUAGE.md,
    sharing no pattern with the job's parsers): the same readings and rejections in line order, and
    as many lines skipped; cut into blocks of each size in `block_bytes`."""
    wanted = [read_line(line) for line in spark_lines(data)]
    readings = [(w.sensor_id, w.ts, w.value) for w in wanted if w is not None and not isinstance(w, Rejected)]
    rejected = [(w.raw, w.reason) for w in wanted if isinstance(w, Rejected)]
    path = tmp / "block-test.csv"
    path.write_bytes(data)
    for size in block_bytes:
        got_readings, got_rejected, skipped = [], [], 0
        for number, block in enumerate(blocks(str(path), len(data), size)):
            if isinstance(block, bytes):  # at most a block and the longest line the rules hold
                assert len(block) <= size + MAX_LINE_BYTES + 2, (size, len(block))
            read = read_piece(block, file_start=number == 0)
            got_readings += zip(read.sensor_id.to_pylist(), read.ts.tolist(), read.value.tolist())
            got_rejected += [(r.raw, r.reason) for r in read.rejected]
            skipped += read.skipped
        assert got_readings == readings, size
        assert got_rejected == rejected, size
        assert skipped == wanted.count(None), size


def disordered_replay(folder: Path, seed: int, files: int = 8) -> list[list[str]]:
    """240 s of the example fleet (workflows/sensors.csv), 20 % of the readings delayed (exponential,
    mean 400 ms), cut into `files` files FOLDER/data/part-NNN.csv in arrival order, whose modification
    times give the replay its order (Spark's file source reads by modification time); returns each
    file's lines."""
    import os

    import numpy as np

    from sensorscript.registry import read_csv
    from sensorscript.workload import write_readings

    root = Path(__file__).resolve().parent.parent
    write_readings(read_csv(root / "workflows" / "sensors.csv"), folder / "gen", seconds=240, files=1)
    lines = (folder / "gen" / "readings-000.csv").read_text().splitlines()[1:]  # less the header
    rng = np.random.default_rng(seed)
    ts = np.array([int(line.split(",")[1]) for line in lines])
    arrival = ts + rng.exponential(400, len(ts)) * (rng.random(len(ts)) < 0.2)
    order = np.argsort(arrival, kind="stable")
    batches = [[lines[i] for i in part] for part in np.array_split(order, files)]
    write_replay(folder / "data", batches)
    return batches


def write_replay(folder: Path, batches: list[list[str]]) -> Path:
    """A file FOLDER/part-NNN.csv per batch, whose modification times are in batch order: Spark's
    file source takes files by modification time, so with one file per trigger each file is a
    micro-batch of its own, in this order."""
    import os

    folder.mkdir(parents=True, exist_ok=True)
    for index, lines in enumerate(batches):
        path = folder / f"part-{index:03d}.csv"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (1_700_000_000 + index * 10, 1_700_000_000 + index * 10))
    return folder
