"""Raw input records (SPEC §1): one line of CSV (`sensor_id,ts,value`) or one JSON object.

These rules are the contract between the reference evaluator (`parse_line`) and
the Spark job, which applies the same rules with Spark SQL functions
(sensorscript/runtime/ingest/source.py); the differential tests hold them to it.

- lines and fields are stripped of spaces, tabs, carriage returns, line feeds (a JSON string
  may hold one) and byte-order marks U+FEFF (a file written with a BOM, or files so written
  and concatenated); only those: the same characters Spark strips;
- blank lines and the CSV header `sensor_id,ts,value` are skipped, not quarantined;
- a line starting with `{` is JSON: one object with sensor_id, ts and value (other keys are
  ignored; a key given twice counts by its last value) and nothing after it;
- otherwise CSV: exactly three comma-separated fields;
- sensor_id must be non-empty; ts an integer (epoch milliseconds, optional sign);
- value a decimal number (`12`, `-0.5`, `1e-3`) or a boolean (`true` = 1.0, `false` = 0.0,
  any case); nan, inf and numbers too large for a double are not values.

The first failing rule, in the order above, gives the quarantine reason. A line is text: bytes
that are not UTF-8 read as U+FFFD, as Python's `bytes.decode("utf-8", "replace")` (in Spark,
`make_valid_utf8`).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

HEADER = "sensor_id,ts,value"

REASON_FIELDS = "expected 3 comma-separated fields: sensor_id,ts,value"
REASON_JSON = "not a JSON object with sensor_id, ts and value"
REASON_SENSOR = "empty sensor_id"
REASON_TS = "ts is not an integer (epoch milliseconds)"
REASON_VALUE = "value is not a number"

# The same patterns are used by Spark's rlike in the job (Java regex; identical here).
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


def parse_line(line: str) -> Reading | Rejected | None:
    """A reading, a rejection with its reason, or None for a line to skip."""
    raw = line.rstrip("\n").rstrip("\r")
    text = raw.strip(BLANKS)
    if not text or text == HEADER:
        return None
    if text.startswith("{"):
        fields = _json_fields(text)
        if fields is None:
            return Rejected(raw, REASON_JSON)
    else:
        fields = [f.strip(BLANKS) for f in text.split(",")]
        if len(fields) != 3:
            return Rejected(raw, REASON_FIELDS)
    sensor_id, ts, value = fields
    if not sensor_id:
        return Rejected(raw, REASON_SENSOR)
    if not _TS.fullmatch(ts):
        return Rejected(raw, REASON_TS)
    number = _number(value)
    if number is None:
        return Rejected(raw, REASON_VALUE)
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


def _reject(constant: str):
    """NaN and Infinity are not JSON; Python's parser accepts them unless told not to."""
    raise ValueError(constant)
