"""Raw input records (docs/LANGUAGE.md, "Input records"): one line of CSV (`sensor_id,ts,value`) or one JSON object.

These rules are written once, here: `parse_line` reads one line by them, and `read_block` reads a
block of whole lines with Arrow's CSV reader, taking only what it can tell certainly follows them
(plain CSV numbers, a sensor id without blanks around it) and handing every other line to
`parse_line`. The job's stage 0 reads its input with `read_block` (runtime/ingest/packets.py);
tests hold both to the oracle's rules (oracles/records.py) line for line.

- lines and fields are stripped of spaces, tabs, carriage returns, line feeds (a JSON string
  may hold one) and byte-order marks U+FEFF (a file written with a BOM, or files so written
  and concatenated); only those: the same characters Spark strips;
- blank lines and the CSV header `sensor_id,ts,value` are skipped, not quarantined;
- a line starting with `{` is JSON: one object with sensor_id, ts and value (other keys are
  ignored; a key given twice counts by its last value) and nothing after it;
- otherwise CSV: exactly three comma-separated fields;
- sensor_id must be non-empty; ts an integer (epoch milliseconds, optional sign) of a time in the
  years 1 to 9999 (what every sink, ISO 8601 and an alarm's time can hold);
- value a decimal number (`12`, `-0.5`, `1e-3`) or a boolean (`true` = 1.0, `false` = 0.0,
  any case); nan, inf and numbers too large for a double are not values.

The first failing rule, in the order above, gives the quarantine reason. A line is text: bytes
that are not UTF-8 read as U+FFFD, as Python's `bytes.decode("utf-8", "replace")` (in Spark,
`make_valid_utf8`). A rejected line is kept as read, but for its NUL characters, which are kept as
U+FFFD too: no text column of a database (PostgreSQL's) can hold one, and a line kept must be
storable wherever the quarantine goes.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sensorscript.times import FIRST_MS, LAST_MS

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

HEADER = "sensor_id,ts,value"

REASON_FIELDS = "expected 3 comma-separated fields: sensor_id,ts,value"
REASON_JSON = "not a JSON object with sensor_id, ts and value"
REASON_SENSOR = "empty sensor_id"
REASON_TS = "ts is not an integer (epoch milliseconds)"
REASON_TS_RANGE = "ts is outside the years 1 to 9999 (epoch milliseconds)"
REASON_VALUE = "value is not a number"

# Python's re here; RE2 (Arrow's regular expressions) in read_block: the same language for these.
TS_PATTERN = r"^[+-]?[0-9]{1,18}$"
VALUE_PATTERN = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
BOOLEANS = {"true": 1.0, "false": 0.0}

BLANKS = " \t\r\n\ufeff"

_TS = re.compile(TS_PATTERN)
_VALUE = re.compile(VALUE_PATTERN)


@dataclass(frozen=True)
class Reading:
    sensor_id: str
    ts: int
    value: float


@dataclass(frozen=True)
class Rejected:
    raw: str
    reason: str


# A line longer than this is quarantined whatever it holds, and where the job reads it (a file a
# block at a time, source.blocks) it is never held whole: only its first KEPT_BYTES are kept.
MAX_LINE_BYTES = 1 << 20
KEPT_BYTES = 1 << 10
REASON_LONG = f"the line is longer than {MAX_LINE_BYTES:,} bytes (1 MiB); only its first {KEPT_BYTES:,} bytes are kept"


def overlong(start: str) -> Rejected:
    """The rejection of a line longer than MAX_LINE_BYTES whose text begins with `start` (its first
    KEPT_BYTES at least, or all of it): those bytes, a character they cut through left out."""
    return _rejected(start.encode("utf-8", "replace")[:KEPT_BYTES].decode("utf-8", "ignore"), REASON_LONG)


def _rejected(raw: str, reason: str) -> Rejected:
    """A line's rejection, its NULs kept as U+FFFD (storable in every sink)."""
    return Rejected(raw.replace("\x00", "\ufffd"), reason)


def parse_line(line: str) -> Reading | Rejected | None:
    """A reading, a rejection with its reason, or None for a line to skip."""
    raw = line.rstrip("\n").rstrip("\r")
    if len(raw) > MAX_LINE_BYTES // 4 and len(raw.encode("utf-8", "replace")) > MAX_LINE_BYTES:
        return overlong(raw)
    text = raw.strip(BLANKS)
    if not text or text == HEADER:
        return None
    if text.startswith("{"):
        fields = _json_fields(text)
        if fields is None:
            return _rejected(raw, REASON_JSON)
    else:
        fields = [f.strip(BLANKS) for f in text.split(",")]
        if len(fields) != 3:
            return _rejected(raw, REASON_FIELDS)
    sensor_id, ts, value = fields
    if not sensor_id:
        return _rejected(raw, REASON_SENSOR)
    if not _TS.fullmatch(ts):
        return _rejected(raw, REASON_TS)
    if not FIRST_MS <= int(ts) <= LAST_MS:
        return _rejected(raw, REASON_TS_RANGE)
    number = _number(value)
    if number is None:
        return _rejected(raw, REASON_VALUE)
    return Reading(sensor_id, int(ts), number)


def _number(text: str) -> float | None:
    if text.lower() in BOOLEANS:
        return BOOLEANS[text.lower()]
    if not _VALUE.fullmatch(text):
        return None
    number = float(text)
    return number if math.isfinite(number) else None


def _json_fields(text: str) -> list[str] | None:
    """[sensor_id, ts, value] as text (numbers as written), or None if not such an object."""
    try:
        obj = json.loads(text, parse_int=str, parse_float=str, parse_constant=_reject)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than Python's parser goes
        return None
    if not isinstance(obj, dict) or not {"sensor_id", "ts", "value"} <= obj.keys():
        return None
    fields = []
    for key in ("sensor_id", "ts", "value"):
        item = obj[key]
        if isinstance(item, bool):
            item = "true" if item else "false"
        if not isinstance(item, str):  # null, a list, an object
            return None
        fields.append(item.strip(BLANKS))
    return fields


def with_sensor(data: bytes, sensor_id: str) -> bytes:
    """Lines of readings that carry no sensor id (CSV `ts,value`, or JSON objects without sensor_id:
    an MQTT payload whose topic names the sensor) as records of `sensor_id`, by these rules: the id
    goes first in a CSV line and last in a JSON object (where a key given twice counts by its last
    value: the topic's id wins over one in the payload). Blank lines and the header `ts,value` go;
    a line that is not of either form is passed on as it is, with the id, to be quarantined with
    its reason."""
    csv_prefix = f"{sensor_id},"
    json_field = '"sensor_id": ' + json.dumps(sensor_id)
    lines = []
    for line in data.decode("utf-8", "replace").splitlines():
        text = line.strip(BLANKS)
        if not text or text == "ts,value":
            continue
        if text.startswith("{") and text.endswith("}"):
            inner = text[1:-1].strip(BLANKS)
            lines.append("{" + inner + (", " if inner else "") + json_field + "}")
        elif text.startswith("{"):
            lines.append(text)  # not one JSON object: quarantined as it came
        else:
            lines.append(csv_prefix + text)
    return ("\n".join(lines) + "\n").encode() if lines else b""


def _reject(constant: str):
    """NaN and Infinity are not JSON; Python's parser accepts them unless told not to."""
    raise ValueError(constant)


# ---------------------------------------------------------------- blocks of lines, with Arrow

BOM = "\ufeff".encode()
_NAMES = ["sensor_id", "ts", "value"]


@dataclass
class Block:
    """What a block of lines holds, in line order: its readings as columns, its rejected lines, and
    how many lines the rules skip. `known`: for each reading, its sensor's position in the value set
    `read_block` was given (-1: another sensor)."""

    sensor_id: "pa.Array"
    ts: "np.ndarray"
    value: "np.ndarray"
    known: "np.ndarray"
    rejected: list[Rejected] = field(default_factory=list)
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.ts)

    @staticmethod
    def of_rejected(rejected: list[Rejected]) -> "Block":
        """A block of rejected lines alone (a line too long to be read: source.blocks)."""
        import numpy as np
        import pyarrow as pa

        return Block(pa.array([], pa.string()), np.array([], np.int64), np.array([], np.float64),
                     np.array([], np.int64), list(rejected))


def read_piece(piece: "bytes | Rejected", known: "pa.Array | None" = None, *, file_start: bool = True) -> Block:
    """What a piece of a file that source.blocks yields holds: a block of lines (read_block), or a
    line too long to be read, rejected already."""
    if isinstance(piece, Rejected):
        return Block.of_rejected([piece])
    return read_block(piece, known, file_start=file_start)


def read_block(data: bytes, known: "pa.Array | None" = None, *, file_start: bool = True) -> Block:
    """The lines of `data` (whole lines: a file, or a part of one cut after a line break) read by
    the rules above, as `parse_line` reads each of them.

    Lines end at \\n, \\r\\n or \\r (as Spark's and Hadoop's text sources read them); a byte-order
    mark at the start of a file is not part of its first line (`file_start`: `data` begins a file).
    Arrow's CSV reader splits the lines into three text fields (no quoting: a `"` is a character
    like any other); a line is taken as it stands only if its ts is 1 to 18 digits of a time in the
    years 1 to 9999, its value a
    number Arrow reads as a finite double (the language of VALUE_PATTERN, booleans aside) and its
    sensor id one of `known`, or without blanks around it. Every other line (JSON, other field
    counts, blanks, signs, booleans, the header, garbage) goes through `parse_line`.
    """
    import io

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    if data.lstrip(b" \t\r\n")[:1] == b"{" and (file_start or not data.startswith(BOM)):
        block = _json_block(data, known)
        if block is not None:
            return block
    added = 0
    if not file_start and data.startswith(BOM):  # Arrow would drop it; a line here keeps it
        data, added = b"\n" + data, 1
    others: list[tuple[int, str]] = []  # (position among the lines Arrow did not find empty, text)

    def other_line(row) -> str:
        others.append((row.number - 1, row.text))
        return "skip"

    if not _utf8(data):  # bytes that are not UTF-8: read as U+FFFD, as a line is read (three bytes each)
        data = data.decode("utf-8", "replace").encode()
    options = (pacsv.ReadOptions(column_names=_NAMES, use_threads=False, block_size=len(data) + 1),
               pacsv.ParseOptions(quote_char=False, double_quote=False, escape_char=False,
                                  newlines_in_values=False, ignore_empty_lines=True, invalid_row_handler=other_line),
               pacsv.ConvertOptions(column_types={name: pa.string() for name in _NAMES}, null_values=[],
                                    strings_can_be_null=False, quoted_strings_can_be_null=False))
    table = pacsv.read_csv(io.BytesIO(data), *options)
    sensor, ts_text, value_text = (table.column(name).combine_chunks() for name in _NAMES)
    skipped = _line_count(data) - len(table) - len(others) - added  # the empty lines Arrow passed over

    digits = pc.binary_length(ts_text)
    good = pc.and_(pc.ascii_is_decimal(ts_text), pc.and_(pc.greater(digits, 0), pc.less_equal(digits, 18)))
    try:
        value = pc.cast(value_text, pa.float64())
    except pa.ArrowInvalid:  # not all numbers: Arrow reads those that match the pattern
        number = pc.match_substring_regex(value_text, VALUE_PATTERN)
        good = pc.and_(good, number)
        value = pc.cast(pc.if_else(number, value_text, "0"), pa.float64())
    good = pc.and_(good, pc.is_finite(value))
    if len(data) > MAX_LINE_BYTES:  # a line longer than that: parse_line quarantines it
        length = pc.add(pc.add(pc.binary_length(sensor), digits), pc.binary_length(value_text))
        good = pc.and_(good, pc.less_equal(length, MAX_LINE_BYTES - 2))  # and its two commas
    good = good.to_numpy(zero_copy_only=False)
    index = _positions(sensor, known)
    unknown = index < 0
    if unknown.any():  # a sensor id not among `known`: certain only if not empty and not blank at its ends
        good &= ~unknown | _plain_ids(sensor)
    ts = pc.cast(ts_text if good.all() else pc.if_else(pa.array(good), ts_text, "0"), pa.int64())
    ts = ts.to_numpy(zero_copy_only=False)
    outside = good & ((ts < FIRST_MS) | (ts > LAST_MS))  # for parse_line to quarantine with its reason
    if outside.any():
        good &= ~outside
    value = value.to_numpy(zero_copy_only=False)
    if good.all() and not others:  # the common case: every line plain
        return Block(sensor, ts, value, index, [], skipped)

    # Lines for parse_line: those Arrow read but the checks above did not take, and the others.
    doubtful = np.flatnonzero(~good)
    texts = pc.binary_join_element_wise(*(column.take(doubtful) for column in (sensor, ts_text, value_text)), ",")
    positions = np.arange(len(table) + len(others))
    taken_at = np.delete(positions, [p for p, _ in others]) if others else positions  # the rows of `table`
    pending = sorted([(int(taken_at[i]), text) for i, text in zip(doubtful, texts.to_pylist())] + others)
    extra_at, extra_id, extra_ts, extra_value, rejected = [], [], [], [], []
    for at, text in pending:
        parsed = parse_line(text)
        if parsed is None:
            skipped += 1
        elif isinstance(parsed, Rejected):
            rejected.append(parsed)
        else:
            extra_at.append(at)
            extra_id.append(parsed.sensor_id)
            extra_ts.append(parsed.ts)
            extra_value.append(parsed.value)
    order = np.argsort(np.concatenate([taken_at[good], np.array(extra_at, np.int64)]), kind="stable")
    extra_ids = pa.array(extra_id, pa.string())
    return Block(pa.concat_arrays([sensor.filter(pa.array(good)), extra_ids]).take(pa.array(order)),
                 np.concatenate([ts[good], np.array(extra_ts, np.int64)])[order],
                 np.concatenate([value[good], np.array(extra_value, np.float64)])[order],
                 np.concatenate([index[good], _positions(extra_ids, known)])[order], rejected, skipped)


def _json_block(data: bytes, known: "pa.Array | None") -> "Block | None":
    """A block of JSON lines read by Arrow's JSON reader, when every one of its lines is certainly a
    reading by the rules: one object per line, sensor_id a string (not blank at its ends), ts an
    integer of a time in the years 1 to 9999, value a finite number. None for a block with any other line
    (booleans, numbers as text, a key twice, two objects on a line, a bad line...): `read_block`
    reads it line by line."""
    import io

    import numpy as np
    import pyarrow as pa
    import pyarrow.json as pajson

    schema = pa.schema([("sensor_id", pa.string()), ("ts", pa.int64()), ("value", pa.float64())])
    try:
        table = pajson.read_json(io.BytesIO(data), pajson.ReadOptions(use_threads=False, block_size=len(data) + 1),
                                 pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore",
                                                     newlines_in_values=False))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    octets = np.frombuffer(data, np.uint8)
    breaks = (octets == 10) | (octets == 13)
    filled = ~breaks & (octets != 32) & (octets != 9)
    line_of = np.cumsum(breaks)
    if np.count_nonzero(np.bincount(line_of[filled])) != len(table):  # two objects on one line, ...
        return None
    if len(data) > MAX_LINE_BYTES and np.bincount(line_of[~breaks]).max() > MAX_LINE_BYTES:
        return None  # a line longer than that: parse_line quarantines it
    nesting = line_of[(octets == 91) | (octets == 123)]  # a line nested deeper than Python's parser goes
    if len(nesting) and np.bincount(nesting).max() > 256:  # is a rejection (parse_line): let it say so
        return None
    sensor, ts, value = (table.column(name).combine_chunks() for name in ("sensor_id", "ts", "value"))
    if sensor.null_count or ts.null_count or value.null_count:
        return None
    ts, value = ts.to_numpy(zero_copy_only=False), value.to_numpy(zero_copy_only=False)
    if not (np.isfinite(value).all() and ((ts >= FIRST_MS) & (ts <= LAST_MS)).all()):
        return None
    index = _positions(sensor, known)
    unknown = index < 0
    if unknown.any() and not _plain_ids(sensor)[unknown].all():
        return None
    return Block(sensor, ts, value, index, [], _line_count(data) - len(table))


def _utf8(data: bytes) -> bool:
    """Whether `data` is UTF-8 (checked by Arrow in place, without a copy)."""
    import numpy as np
    import pyarrow as pa

    offsets = pa.py_buffer(np.array([0, len(data)], np.int64))
    try:
        pa.LargeStringArray.from_buffers(1, offsets, pa.py_buffer(data)).validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def _line_count(data: bytes) -> int:
    """How many lines `data` holds: ended by \\n, \\r\\n or \\r, the last one perhaps by none."""
    returns = data.count(b"\r")
    lines = data.count(b"\n") + (returns - data.count(b"\r\n") if returns else 0)
    return lines + 1 if data and data[-1:] not in b"\r\n" else lines


def _positions(ids: "pa.Array", known: "pa.Array | None") -> "np.ndarray":
    """Each id's position in `known` (int64), -1 for an id not there (every id, without `known`)."""
    import numpy as np
    import pyarrow.compute as pc

    if known is None:
        return np.full(len(ids), -1, np.int64)
    return pc.fill_null(pc.index_in(ids, value_set=known), -1).to_numpy(zero_copy_only=False).astype(np.int64)


# Bytes that may begin or end a field's blanks: space, tab, CR, LF, and the first or last byte of a
# BOM (EF BB BF). A field that neither begins nor ends with one has nothing for `strip` to take.
_BLANK_FIRST = frozenset(b" \t\r\n\xef")
_BLANK_LAST = frozenset(b" \t\r\n\xbf")


def _plain_ids(ids: "pa.Array") -> "np.ndarray":
    """For each text: not empty, and its first and last bytes none that can begin or end a blank."""
    import numpy as np

    offsets = np.frombuffer(ids.buffers()[1], np.int32, len(ids) + 1, ids.offset * 4)
    data = np.frombuffer(ids.buffers()[2], np.uint8) if ids.buffers()[2] is not None else np.zeros(0, np.uint8)
    if not len(data):
        data = np.zeros(1, np.uint8)
    length = offsets[1:] - offsets[:-1]
    filled = length > 0
    first = data[np.where(filled, offsets[:-1], 0)]
    last = data[np.where(filled, offsets[1:] - 1, 0)]
    first_blank = np.zeros(256, bool)
    first_blank[list(_BLANK_FIRST)] = True
    last_blank = np.zeros(256, bool)
    last_blank[list(_BLANK_LAST)] = True
    return filled & ~first_blank[first] & ~last_blank[last]
