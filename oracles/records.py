"""What one input line is (docs/LANGUAGE.md "Input records" and "What the job does with
bad and odd input"), written out for the oracles: a reading, a rejection with its reason, or a
line to skip.

- A line is read without the line breaks at its end; spaces, tabs, carriage returns, line feeds
  and byte-order marks around it and around each of its fields are ignored.
- Blank lines and the CSV header `sensor_id,ts,value` are skipped (they are not readings).
- A line starting with `{` is one JSON object (RFC 8259, nothing after it) with `sensor_id`, `ts`
  and `value`, each a string, a number (as written) or a boolean; other keys are ignored, and a key
  given twice counts by its last value. Any other line is CSV: exactly three comma-separated fields.
- `sensor_id` is not empty; `ts` is an integer of at most 18 digits (epoch milliseconds, a sign
  allowed) and a time from 0001-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z; `value` is a
  decimal number, read as the nearest double, or `true`/`false` (1.0/0.0, in any case);
  NaN, infinities and numbers beyond the double range are not values.

- A line of more than 1,048,576 bytes (1 MiB, UTF-8, without its line break) is quarantined whatever
  it holds, and only its first 1,024 bytes are kept (a character they cut through left out).

A line that breaks a rule is quarantined, kept as read (a NUL character in it as U+FFFD), with the
reason of the first rule it breaks, in the order above (the reasons are docs/LANGUAGE.md's, word
for word).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

HEADER = ("sensor_id", "ts", "value")
BLANKS = " \t\r\n\ufeff"

FIELDS = "expected 3 comma-separated fields: sensor_id,ts,value"
JSON = "not a JSON object with sensor_id, ts and value"
SENSOR = "empty sensor_id"
TS = "ts is not an integer (epoch milliseconds)"
TS_RANGE = "ts is outside the years 1 to 9999 (epoch milliseconds)"
# 0001-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z: 719,162 days before the epoch, 2,932,897 after it.
EARLIEST, LATEST = -719_162 * 86_400_000, 2_932_897 * 86_400_000 - 1
VALUE = "value is not a number"
LONGEST, KEPT = 1_048_576, 1_024  # bytes of a line, bytes kept of a longer one
LONG = "the line is longer than 1,048,576 bytes (1 MiB); only its first 1,024 bytes are kept"

INTEGER = re.compile(r"[+-]?[0-9]{1,18}")
DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
BOOLEANS = {"true": 1.0, "false": 0.0}


@dataclass(frozen=True)
class Reading:
    sensor_id: str
    ts: int
    value: float


@dataclass(frozen=True)
class Rejected:
    raw: str  # the line as read
    reason: str


def read_line(line: str) -> Reading | Rejected | None:
    """The reading a line holds, its rejection, or None for a line to skip (blank, the header)."""
    raw = line.rstrip("\r\n")
    text = raw.strip(BLANKS)
    kept = raw.replace("\0", "\ufffd")  # what quarantine keeps of the line
    if len(raw.encode("utf-8", "replace")) > LONGEST:
        return Rejected(kept.encode("utf-8", "replace")[:KEPT].decode("utf-8", "ignore"), LONG)
    if text.startswith("{"):
        fields = json_fields(text)
        if fields is None:
            return Rejected(kept, JSON)
    else:
        fields = tuple(field.strip(BLANKS) for field in text.split(","))
        if fields == ("",) or fields == HEADER:
            return None
        if len(fields) != 3:
            return Rejected(kept, FIELDS)
    sensor_id, ts, value = fields
    if not sensor_id:
        return Rejected(kept, SENSOR)
    if not INTEGER.fullmatch(ts):
        return Rejected(kept, TS)
    if not EARLIEST <= int(ts) <= LATEST:
        return Rejected(kept, TS_RANGE)
    number = BOOLEANS[value.lower()] if value.lower() in BOOLEANS else decimal(value)
    if number is None:
        return Rejected(kept, VALUE)
    return Reading(sensor_id, int(ts), number)


def decimal(text: str) -> float | None:
    """A decimal number as the nearest double; None for anything else, or beyond the double range."""
    if not DECIMAL.fullmatch(text):
        return None
    number = float(text)
    return number if math.isfinite(number) else None


def json_fields(text: str) -> tuple[str, str, str] | None:
    """sensor_id, ts and value of a JSON object, as text (numbers as written, booleans as
    true/false); None if the text is not strict JSON or not such an object."""

    def not_json(constant: str):  # NaN and Infinity, which Python's reader would take
        raise ValueError(constant)

    try:
        found = json.loads(text, parse_int=str, parse_float=str, parse_constant=not_json)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than Python's reader goes
        return None
    if not isinstance(found, dict):
        return None
    fields = []
    for key in ("sensor_id", "ts", "value"):
        item = found.get(key)
        if isinstance(item, bool):
            item = "true" if item else "false"
        if not isinstance(item, str):  # missing, null, a list, an object
            return None
        fields.append(item.strip(BLANKS))
    return tuple(fields)
