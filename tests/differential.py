"""Comparing a job's results with the reference evaluator's: shared by the Spark and cluster tests."""

import math
from pathlib import Path

from sensorscript.runtime import records
from sensorscript.runtime.sinks import sqlite_results
from sensorscript.runtime.source import parse


def result_rows(out: Path) -> list[tuple]:
    """The rows of a run's SQLite sink (OUT/results.db), sorted."""
    return sqlite_results(out / "results.db")


def expected_rows(evaluation) -> list[tuple]:
    return sorted((r.stream, r.ts, r.window_start, r.window_end, r.value) for r in evaluation.rows)


def assert_same(actual: list[tuple], expected: list[tuple]) -> None:
    """Row for row: keys exactly, values to 1e-9 relative."""
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a[:4] == e[:4], (a, e)
        assert math.isclose(a[4], e[4], rel_tol=1e-9, abs_tol=1e-9), (a, e)


def write_scripts(folder: Path, scripts: dict[str, str]) -> list[str]:
    """Each script as FOLDER/NAME.ss; returns the paths."""
    files = []
    for name, text in scripts.items():
        (folder / f"{name}.ss").write_text(text)
        files.append(str(folder / f"{name}.ss"))
    return files


def assert_parsed_as_records(spark, lines: list[str]) -> None:
    """Spark's parse of `lines` gives what records.parse_line gives, line by line (a line the rules
    skip: a row of nulls, which the job counts)."""
    parsed = parse(spark.createDataFrame([(line,) for line in lines], "line string")).collect()
    assert len(parsed) == len(lines)
    for line, row in zip(lines, parsed):
        want = records.parse_line(line)
        if want is None:
            assert tuple(row) == (None,) * 5, (line, row)
        elif isinstance(want, records.Rejected):
            assert (row.raw, row.reason) == (want.raw, want.reason), (line, row)
        else:
            assert row.reason is None and row.raw is None, (line, row)
            assert (row.sensor_id, row.ts, row.value) == (want.sensor_id, want.ts, want.value), (line, row)
