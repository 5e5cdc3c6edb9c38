"""Hostile input (issue #15): malformed lines, NaN and infinities, huge and tiny values, unknown
sensors, exact duplicates, empty files, binary garbage, a very long line, byte-order marks, CRLF,
JSON with extra or missing fields, timestamps far in the past or the future.

The job keeps going and every line is accounted for: a reading (on time, or late and in the late
store), quarantined with its reason, a reading of a sensor no workflow reads, or a line the rules
skip (blank, a CSV header). docs/LANGUAGE.md, "What the job does with bad and odd input", says
what each case gets; these tests hold the record rules (records.py), Spark's parse of them and
the whole job to it.
"""

import codecs
import json
import os
import re
import sqlite3
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sensorscript.compiler import compile_workflows
from sensorscript.parser import load
from oracles import records as oracle
from oracles.records import read_line
from oracles.streams import evaluate, referenced_sensors
from sensorscript.runtime.ingest import records
from sensorscript.runtime.job import main
from sensorscript.runtime.ingest.records import Reading, Rejected, parse_line
from sensorscript.runtime.output.status import describe, read_status
from sensorscript.runtime.plan.loading import load_job
from tests.conftest import ROOT
from tests.differential import assert_read_as_records, assert_same, expected_rows, result_rows, spark_lines

BASE = 1_767_225_600_000  # 2026-01-01 00:00:00 UTC
YEAR_9999 = 253_402_300_799_999  # 9999-12-31 23:59:59.999 UTC: 15 digits, the last valid ts
YEAR_1 = -62_135_596_800_000  # 0001-01-01 00:00:00.000 UTC: the first

# Each case: a line and what the rules make of it (a Reading, a Rejected reason, or None: skipped).
CASES = {
    "plain reading": ("8MD1-AZ,1000,2.5", Reading("8MD1-AZ", 1000, 2.5)),
    "spaces and tabs around fields": ("  8MD1-AZ\t, 1000 ,2.5 ", Reading("8MD1-AZ", 1000, 2.5)),
    "CRLF line end": ("8MD1-AZ,1000,2.5\r", Reading("8MD1-AZ", 1000, 2.5)),
    "BOM before a reading": ("\ufeff8MD1-AZ,1000,2.5", Reading("8MD1-AZ", 1000, 2.5)),
    "BOM before the header": ("\ufeffsensor_id,ts,value", None),
    "header": ("sensor_id,ts,value", None),
    "blank line": ("", None),
    "blanks only": (" \t\r", None),
    "NaN": ("8MD1-AZ,1000,NaN", records.REASON_VALUE),
    "nan": ("8MD1-AZ,1000,nan", records.REASON_VALUE),
    "inf": ("8MD1-AZ,1000,inf", records.REASON_VALUE),
    "-Infinity": ("8MD1-AZ,1000,-Infinity", records.REASON_VALUE),
    "huge": ("8MD1-AZ,1000,1e308", Reading("8MD1-AZ", 1000, 1e308)),
    "largest double": ("8MD1-AZ,1000,-1.7976931348623157e308", Reading("8MD1-AZ", 1000, -1.7976931348623157e308)),
    "overflows a double": ("8MD1-AZ,1000,1e309", records.REASON_VALUE),
    "tiny (subnormal)": ("8MD1-AZ,1000,5e-324", Reading("8MD1-AZ", 1000, 5e-324)),
    "underflows to zero": ("8MD1-AZ,1000,1e-400", Reading("8MD1-AZ", 1000, 0.0)),
    "boolean": ("8MD1-AZ,1000,TRUE", Reading("8MD1-AZ", 1000, 1.0)),
    "hex value": ("8MD1-AZ,1000,0x10", records.REASON_VALUE),
    "two fields": ("8MD1-AZ,1000", records.REASON_FIELDS),
    "four fields": ("8MD1-AZ,1000,1,2", records.REASON_FIELDS),
    "empty sensor id": (",1000,1", records.REASON_SENSOR),
    "fractional ts": ("8MD1-AZ,1000.5,1", records.REASON_TS),
    "ts before the epoch": ("8MD1-AZ,-1000,1", Reading("8MD1-AZ", -1000, 1.0)),
    "ts in year 9999": (f"8MD1-AZ,{YEAR_9999},1", Reading("8MD1-AZ", YEAR_9999, 1.0)),
    "ts after year 9999": (f"8MD1-AZ,{YEAR_9999 + 1},1", records.REASON_TS_RANGE),
    "ts at the start of year 1": (f"8MD1-AZ,{YEAR_1},1", Reading("8MD1-AZ", YEAR_1, 1.0)),
    "ts before year 1": (f"8MD1-AZ,{YEAR_1 - 1},1", records.REASON_TS_RANGE),
    "ts of 18 digits": ("8MD1-AZ,999999999999999999,1", records.REASON_TS_RANGE),
    "ts of 18 digits before the epoch": ("8MD1-AZ,-999999999999999999,1", records.REASON_TS_RANGE),
    "JSON ts after year 9999": ('{"sensor_id": "8MD1-AZ", "ts": %d, "value": 1}' % (YEAR_9999 + 1),
                                records.REASON_TS_RANGE),
    "ts of 19 digits": ("8MD1-AZ,1767225600000000000,1", records.REASON_TS),
    "NUL bytes": ("\x00\x00\x00", records.REASON_FIELDS),
    "NUL in a sensor id": ("8MD1-AZ\x00,1000,1", Reading("8MD1-AZ\x00", 1000, 1.0)),
    "NUL in a bad line": ("8MD1-AZ\x00,10\x0000,1", records.REASON_TS),
    "invalid UTF-8, as read": ("\ufffd\ufffd\ufffd(,1000,1", Reading("\ufffd\ufffd\ufffd(", 1000, 1.0)),
    "form feed after a value": ("8MD1-AZ,1000,1\x0c", records.REASON_VALUE),
    "very long line": ("x" * 2_000_000, records.REASON_LONG),
    "a line of 1 MiB": ("8MD1-AZ,1000," + "0" * (2**20 - 14) + "1", Reading("8MD1-AZ", 1000, 1.0)),
    "a line of 1 MiB and a byte": ("8MD1-AZ,1000," + "0" * (2**20 - 13) + "1", records.REASON_LONG),
    "a long line of blanks": (" " * (2**20 + 1), records.REASON_LONG),
    "very long number": ("8MD1-AZ,1000," + "9" * 400, records.REASON_VALUE),
    "JSON": ('{"sensor_id": "8MD1-AZ", "ts": 1000, "value": 2.5}', Reading("8MD1-AZ", 1000, 2.5)),
    "JSON with extra fields": ('{"sensor_id": "8MD1-AZ", "ts": 1000, "value": 2.5, "unit": "mm", "gw": {"id": [1]}}',
                               Reading("8MD1-AZ", 1000, 2.5)),
    "JSON with a field twice": ('{"sensor_id": "8MD1-AZ", "ts": 1000, "value": 1, "value": 2}',
                                Reading("8MD1-AZ", 1000, 2.0)),
    "JSON missing a field": ('{"sensor_id": "8MD1-AZ", "ts": 1000}', records.REASON_JSON),
    "JSON null value": ('{"sensor_id": "8MD1-AZ", "ts": 1000, "value": null}', records.REASON_JSON),
    "JSON NaN": ('{"sensor_id": "8MD1-AZ", "ts": 1000, "value": NaN}', records.REASON_JSON),
    "JSON NaN as text": ('{"sensor_id": "8MD1-AZ", "ts": 1000, "value": "NaN"}', records.REASON_VALUE),
    "JSON number overflowing": ('{"sensor_id": "8MD1-AZ", "ts": 1000, "value": 1e309}', records.REASON_VALUE),
    "JSON in single quotes": ("{'sensor_id': '8MD1-AZ', 'ts': 1000, 'value': 2.5}", records.REASON_JSON),
    "JSON and more after it": ('{"sensor_id": "8MD1-AZ", "ts": 1000, "value": 2.5} x', records.REASON_JSON),
    "two JSON objects": ('{"sensor_id": "8MD1-AZ", "ts": 1000, "value": 2.5}{"a": 1}', records.REASON_JSON),
    "JSON and a closing bracket": ('{"sensor_id": "8MD1-AZ", "ts": 1000, "value": 2.5}]', records.REASON_JSON),
    "JSON and brackets": ('{"sensor_id": "8MD1-AZ", "ts": 1000, "value": 2.5} ]]', records.REASON_JSON),
    "JSON with a list and a bracket in a string": ('{"sensor_id": "a]b", "ts": 1000, "value": 2.5, "l": [[1], []]}',
                                                   Reading("a]b", 1000, 2.5)),
    "JSON without its closing brace": ('{"sensor_id": "8MD1-AZ", "ts": 1000, "value": 2.5', records.REASON_JSON),
    "JSON with a brace in a string": ('{"sensor_id": "}", "ts": 1000, "value": 2.5}', Reading("}", 1000, 2.5)),
    "JSON and a closing brace": ('{"sensor_id": "8MD1-AZ", "ts": 1000, "value": 2.5}}', records.REASON_JSON),
    "JSON and a comma": ('{"sensor_id": "8MD1-AZ", "ts": 1000, "value": 2.5}, "x": 1', records.REASON_JSON),
    "JSON nested too deep": ('{"sensor_id": "8MD1-AZ", "ts": 1000, "value": 2.5, "d": ' + "[" * 5000 + "]" * 5000
                             + "}", records.REASON_JSON),
    "JSON string with a line feed": ('{"sensor_id": "8MD1-AZ", "ts": "1000\\n", "value": "2.5\\n"}',
                                     Reading("8MD1-AZ", 1000, 2.5)),
    "JSON sensor id of blanks": ('{"sensor_id": " \\n", "ts": 1000, "value": 1}', records.REASON_SENSOR),
    "JSON ts with an exponent": ('{"sensor_id": "8MD1-AZ", "ts": 1e3, "value": 1}', records.REASON_TS),
}


@pytest.mark.parametrize("name", CASES)
def test_the_record_rules_on_each_odd_line(name):
    """The job's parser and the oracle's (oracles/records.py) each give what the table says."""
    line, want = CASES[name]
    for got in (parse_line(line), read_line(line)):
        if want is None:
            assert got is None, got
        elif isinstance(want, str):
            assert isinstance(got, (Rejected, oracle.Rejected)) and got.reason == want, got
            kept = line.rstrip("\r").replace("\x00", "\ufffd")  # kept as read, NULs as U+FFFD
            assert got.raw == (kept[:1024] if want == records.REASON_LONG else kept)
        else:
            assert (type(got).__name__, got.sensor_id, got.ts, got.value) == \
                ("Reading", want.sensor_id, want.ts, want.value)


def test_stage_0_reads_every_odd_line_as_the_rules_do(tmp_path):
    lines = [line for line, _ in CASES.values()]
    assert_read_as_records("\n".join(lines).encode(), tmp_path)
    for line in lines:
        assert_read_as_records(line.encode(), tmp_path, (1 << 20,))


# JSON-like garbage: an object, half an object or a brace, and fragments after it (more objects,
# brackets closing early, quotes of both kinds, non-numbers); stage 0 must read each line as the rules do.
_JSON_START = st.sampled_from(['{', '{"sensor_id": "S1", "ts": 12, "value": 2.5', '{"sensor_id": "S1", "ts": 12, '
                                                                                  '"value": 2.5}'])
_JSON_PART = st.sampled_from(['{', '}', '[', ']', ',', ' ', ':', '"sensor_id": "S1"', '"ts": 12', '"value": 2.5',
                              '"value": NaN', "'ts': 12", '"x": [1, {"y": "}"}]', '"', 'x'])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.tuples(_JSON_START, st.lists(_JSON_PART, max_size=6)).map(lambda t: t[0] + "".join(t[1])),
                      min_size=1, max_size=40))
def test_stage_0_reads_json_like_garbage_as_the_rules_do(tmp_path, lines):
    assert_read_as_records("\n".join(lines).encode(), tmp_path)


# JSON-lines files, as a gateway writes them: mostly plain readings (Arrow's JSON reader takes a
# block of them whole), with what makes a block go line by line mixed in at random.
_JSON_NUMBER = st.one_of(st.floats(allow_nan=False, allow_infinity=False).map(repr),
                         st.integers(-10**30, 10**30).map(str),
                         st.from_regex(r"-?(0|[1-9][0-9]{0,20})(\.[0-9]{1,25})?([eE][+-]?[0-9]{1,3})?", fullmatch=True))
_JSON_ID = st.one_of(st.sampled_from(["S1", "8MD1-AZ", "ünï", "a\\\"b"]), st.text(max_size=6))
_JSON_READING = st.builds(lambda sensor, ts, value: '{"sensor_id": %s, "ts": %s, "value": %s}'
                          % (json.dumps(sensor), ts, value),
                          _JSON_ID, st.integers(-10**19, 10**19).map(str), _JSON_NUMBER)
_JSON_ODD = st.sampled_from(['{"sensor_id": "S1", "ts": 5, "value": true}', '{"sensor_id": "S1", "ts": "5", "value": 1}',
                             '{"sensor_id": "S1", "ts": 5, "value": 1, "value": 2}', '', '  ',
                             '{"sensor_id": "S1", "ts": 5, "value": 1}{"sensor_id": "S1", "ts": 6, "value": 1}',
                             '{"sensor_id": "S1", "ts": 5, "value": NaN}', '{"sensor_id": "S1", "ts": 5}',
                             '{"sensor_id": "S1", "ts": 5, "value": 1, "x": [[1], {"y": null}]}', 'S1,5,1'])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.one_of(_JSON_READING, _JSON_READING, _JSON_READING, _JSON_ODD), min_size=1, max_size=30))
def test_stage_0_reads_json_lines_as_the_rules_do(tmp_path, lines):
    assert_read_as_records("\n".join(lines).encode(), tmp_path, (7, 120, 1 << 20))


def test_a_block_whose_bytes_grow_when_read_as_utf8_is_read(tmp_path):
    """Bytes that are not UTF-8 are read as U+FFFD, three bytes each: the block read again so grew
    past the Arrow block it was given, and the batch failed (found by the hostile-sinks property test,
    tests/test_kafka.py)."""
    line = b"\xed\xa0\x80\x00\\\\\xff\xfe\t,\xff\xfe\xed\xa0\x80\xff\xfe\x00,"
    assert_read_as_records(b"\n".join([line, b"8MD1-AZ,1000,1", line]) + b"\n", tmp_path, (1 << 20,))


def test_a_line_longer_than_a_mebibyte_is_quarantined_without_being_held(tmp_path):
    """Lines of 1 MiB and a byte more, in a file read in blocks of 64 KiB to 16 MiB: each longer
    line quarantined with its first 1,024 bytes (a character they cut through left out), the lines
    around it read, no block holding more than its size and the bound (issue #62: one 48 MiB line
    took 218 MiB in Python; from 2 GiB the task failed every time). One of exactly 1 MiB is read."""
    bound = records.MAX_LINE_BYTES
    exact = b"8MD1-AZ,1000," + b"1" * (bound - len(b"8MD1-AZ,1000,"))
    cut = "é".encode() * ((bound + 2) // 2)  # a 2-byte character across the 1,024th byte
    data = b"\r\n".join([
        codecs.BOM_UTF8 + b"a" * (bound + 1),  # the file's first line, after its byte-order mark
        b"8MD1-AZ,1,1", exact, b"8MD1-AZ,2,2", b"x" * (3 * bound), b"8MD1-AZ,3,3",
        b"8MD1-AZ," + b"9" * bound + b",1",  # a line Arrow would take: its ts is long
        cut, b"8MD1-AZ,4,4"]) + b"\r" + b"y" * (bound + 7)  # ends with one, no line break after it
    assert len(spark_lines(data)) == 10
    assert_read_as_records(data, tmp_path, (64 << 10, 1 << 20, 16 << 20))
    said = [w for w in map(read_line, spark_lines(data)) if isinstance(w, oracle.Rejected)]
    long = [w for w in said if w.reason == oracle.LONG == records.REASON_LONG]
    assert [len(w.raw.encode()) for w in long] == [1024] * 5 and long[0].raw == "a" * 1024
    assert long[3].raw == "é" * 512  # 1,024 bytes: the character at 1,025-1,026 left out
    assert [w.reason for w in said if w not in long] == [oracle.VALUE]  # 1 MiB exactly: read (its value is not)


# ---------------------------------------------------------------- the whole job

SCRIPT = """
M1 = avg("8MD1-AZ", 2s, 1s);
U  = union("8MD2-A", "8MD3-A");
MX = max(U, 2s, 1s);
N  = count(U, 2s, 2s);
D  = M1 - MX;
S  = sum("8ST1-N", 5s, 5s);
"""
READ = ("8MD1-AZ", "8MD2-A", "8MD3-A", "8ST1-N")  # 4 readings a second each


def regular(start_s: int, end_s: int) -> list[str]:
    """Every read sensor every 250 ms in [start, end) seconds after BASE."""
    return [f"{sensor},{BASE + ms},{(ms // 250 % 7 - 3) * 0.5 + index}"
            for ms in range(start_s * 1000, end_s * 1000, 250) for index, sensor in enumerate(READ)]


def json_line(sensor: str, ts: int, value, **extra) -> str:
    fields = {"sensor_id": sensor, "ts": ts, "value": value, **extra}
    return "{" + ", ".join(f'"{k}": {v}' if not isinstance(v, str) else f'"{k}": "{v}"' for k, v in fields.items()) + "}"


# Readings from the past, read after newer ones: an hour back, before the epoch, at the epoch.
LATE_LINES = [f"8MD1-AZ,{BASE - 3_600_000},1", "8MD2-A,-1000,1", "8ST1-N,0,1"]
LATE = [(r.sensor_id, r.ts, r.value) for r in map(read_line, LATE_LINES)]


def hostile_files() -> list[tuple[str, bytes]]:
    """The input files, (name, bytes), in the order the job reads them (by modification time)."""
    first = ("\ufeffsensor_id,ts,value\n" + "\n".join(regular(0, 5)) + "\n8MD4-AZ,%d,1\nNOPE-9,%d,1\n\n \t\n"
             % (BASE + 100, BASE + 200)).encode()
    t = BASE + 5_000
    odd = [
        "8MD1-AZ,%d,NaN" % (t + 10), "8MD1-AZ,%d,nan" % (t + 20), "8MD2-A,%d,inf" % (t + 30),
        "8MD2-A,%d,-Infinity" % (t + 40), "8ST1-N,%d,1e309" % (t + 50),
        "8ST1-N,%d,1e308" % (t + 60), "8ST1-N,%d,1e308" % (t + 60),  # an exact duplicate: both count
        "8MD1-AZ,%d,5e-324" % (t + 70), "8MD1-AZ,%d,4.0" % YEAR_9999, "8MD1-AZ,1767225600000000000,1",
        "8MD1-AZ,%d,4.0" % (YEAR_9999 + 1), "8MD2-A,999999999999999999,1",  # after the year 9999
        json_line("8MD3-A", t + 1_130, 1.5, unit="mm", gw=7), json_line("8MD3-A", t + 1_140, "1.5", seq=1),
        '{"sensor_id": "8MD3-A", "ts": %d}' % (t + 1_150), json_line("8MD3-A", t + 1_160, "NaN"),
        '{"sensor_id": "8MD3-A", "ts": %d, "value": NaN}' % (t + 1_170),
        json_line("8MD3-A", t + 1_180, 2) + " trailing", "{'sensor_id': '8MD3-A', 'ts': %d, 'value': 2}" % (t + 1_190),
        "", "\t", "\ufeffsensor_id,ts,value", "\ufeff8MD2-A,%d,1.0" % (t + 1_125),
        "8MD1-AZ,%d" % t, "8MD1-AZ,%d,1,2" % t, ",%d,1" % t, "8MD1-AZ,%d.5,1" % t, "8MD1-AZ,%d,1.2.3" % t,
        "8MD4-AZ,%d,1" % t, "NOPE-9,%d,1" % t,
    ]
    lines = regular(5, 10)
    duplicate = next(i for i, line in enumerate(lines) if line.startswith(f"8MD2-A,{BASE + 8_250},"))
    lines.insert(duplicate, lines[duplicate])  # an exact duplicate of a reading: both count
    crlf = "\r\n".join(lines + odd).encode() + b"\r\n"
    t = BASE + 10_000
    garbage = b"\n".join([
        "\n".join(regular(10, 15)).encode(),
        b"\x00\x00\x00\x00", b"\xff\xfe\xc3\x28garbage\x01\x02", b"8MD1-AZ,%d,\xff1" % t, b"8MD1-AZ\x00,%d,1" % t,
        b"\xed\xa0\x80,%d,1" % t, b"8MD2-A,%d,1\x0c" % t, b"8MD2-A,%d,2\r8MD3-A,%d,2" % (t + 5, t + 5),
        b"x" * 2_000_000, json_line("8MD2-A", t + 7, 3, pad="p" * 2_000_000).encode(),
        *[line.encode() for line in LATE_LINES], b"NOPE-9,0,1",
    ])  # no line break at the end
    # Read two files a micro-batch: an empty file and one of only a header ride along.
    return [("a-bom.csv", first), ("b-empty.csv", b""), ("c-crlf.csv", crlf), ("d-header.csv", b"sensor_id,ts,value\n"),
            ("e-garbage.bin", garbage)]


@pytest.mark.spark
def test_the_job_accounts_for_every_line_of_hostile_input(spark, tmp_path, capsys):
    (tmp_path / "hostile.ss").write_text(SCRIPT)
    out = tmp_path / "out"
    compiled = compile_workflows([str(tmp_path / "hostile.ss")], out, str(ROOT / "workflows" / "sensors.csv"), 2)
    # The guard needs company: the sensor of the year-9999 reading shares its partition with another.
    placed = compiled.plan.partitions.sensor_partition
    assert list(placed.values()).count(placed["8MD1-AZ"]) > 1
    data = tmp_path / "data"
    data.mkdir()
    lines = []
    for index, (name, content) in enumerate(hostile_files()):
        (data / name).write_bytes(content)
        os.utime(data / name, (1_700_000_000 + index * 10, 1_700_000_000 + index * 10))  # read in this order
        lines += spark_lines(content)

    module = load_job(out)
    capsys.readouterr()
    assert main(module.JOB, module.build_query, ["--input", str(data), "--once", "--out", str(out),
                                                 "--max-files-per-trigger", "2"]) == 0
    printed = capsys.readouterr().out.splitlines()

    # What the rules make of each line (the oracle's record rules, oracles/records.py).
    workflows = load([str(tmp_path / "hostile.ss")]).workflows
    read = referenced_sensors(workflows)
    parsed = [read_line(line) for line in lines]
    readings = [p for p in parsed if isinstance(p, oracle.Reading) and p.sensor_id in read]
    unread = [p for p in parsed if isinstance(p, oracle.Reading) and p.sensor_id not in read]
    quarantined = [(p.raw, p.reason) for p in parsed if isinstance(p, oracle.Rejected)]
    skipped = parsed.count(None)
    assert len(readings) + len(unread) + len(quarantined) + skipped == len(lines) == 291
    # Each case gets what docs/LANGUAGE.md says.
    assert Counter(reason for _, reason in quarantined) == {
        records.REASON_VALUE: 9,  # NaN, nan, inf, -Infinity, 1e309, JSON "NaN", 1.2.3, \xff1, a form feed
        records.REASON_JSON: 4,  # missing value, NaN, trailing text, single quotes
        records.REASON_FIELDS: 4,  # 2 and 4 fields, NUL bytes, binary garbage
        records.REASON_SENSOR: 1, records.REASON_TS: 2,  # 19 digits, 1000.5
        records.REASON_TS_RANGE: 2,  # after the year 9999: no sink, no alarm's time can hold it
        records.REASON_LONG: 2,  # the 2 MB lines, a JSON reading among them: their first 1,024 bytes kept
    }
    assert len(unread) == 7 and skipped == 7 and len(readings) == 253

    db = sqlite3.connect(out / "results.db")
    # Quarantine: every bad line, whole (of the 2 MB ones, their first 1,024 bytes), with its reason.
    assert sorted(db.execute("SELECT raw, reason FROM quarantine")) == sorted(quarantined)
    # The late store: the readings from the past, behind their partition's watermark; the reading of
    # year 9999 held ahead by the guard did not make the readings after it late.
    assert sorted(db.execute("SELECT sensor_id, ts, value FROM late")) == sorted(LATE)
    counted = dict(db.execute("SELECT name, SUM(value) FROM metrics GROUP BY name"))
    # The job's own counts account for every line.
    assert counted["readings"] + counted["quarantined"] + counted["unread"] + counted["skipped"] == len(lines)
    assert counted["readings"] == len(readings) and counted["quarantined"] == len(quarantined)
    assert counted["unread"] == len(unread) and counted["skipped"] == skipped
    assert counted["late"] == len(LATE) and counted["ahead"] == 1
    # Results: the reference evaluator's over the readings that came on time.
    on_time = [line for line in lines if line not in LATE_LINES]
    assert len(on_time) == len(lines) - len(LATE)
    expected = evaluate(workflows, [on_time])
    assert_same(result_rows(out), expected_rows(expected))
    assert sorted(expected.quarantine) == sorted(quarantined)
    # Exact duplicates both count; infinities come only from arithmetic on huge values.
    rows = {(stream, start): value for stream, _, start, _, value in result_rows(out)}
    assert rows[("hostile.N", BASE + 8_000)] == 17  # 16 readings of U in 2 s, and the duplicate
    assert rows[("hostile.S", BASE + 5_000)] == float("inf")  # 1e308 + 1e308 overflows, as doubles do

    # What the user sees: a batch line, the last line, the status.
    assert any("readings of sensors no workflow reads ignored" in line for line in printed if line.startswith("batch"))
    done = next(line for line in printed if line.startswith("done:"))
    assert done.startswith(f"done: {len(readings)} readings in ")
    assert (f", {len(quarantined)} quarantined, {len(LATE)} late, " in done
            and f"ignored: {len(unread)} readings of sensors no workflow reads, {skipped} blank or header lines" in done)
    status = read_status(out)
    assert {k: status["totals"][k] for k in ("readings", "quarantined", "unread", "skipped", "late", "ahead")} == {
        "readings": len(readings), "quarantined": len(quarantined), "unread": len(unread), "skipped": skipped,
        "late": len(LATE), "ahead": 1}
    assert f"ignored, counted: {len(unread)} readings of sensors no workflow reads" in describe(status)
