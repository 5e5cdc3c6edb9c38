"""Times people read. Stored times stay epoch milliseconds (docs/LANGUAGE.md, "Results"); wherever a person reads
one (`sscript status`, `sscript results`, the dashboard, the demo's summary) it is a date and
time in UTC, or in the IANA time zone the user names with `--tz`."""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

UTC = timezone.utc


def time_zone(name: str | None) -> tzinfo:
    """UTC for None or "UTC", else the IANA zone of that name (Europe/Zurich); ValueError, worded
    for the user, for a name that is none."""
    if name is None or name.upper() in ("UTC", "Z"):
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"'{name}' is not a time zone; name one of the IANA database, e.g. UTC, Europe/Zurich "
                         f"or America/New_York") from None


def zone_name(tz: tzinfo) -> str:
    """How a page or a heading names the zone: UTC or its IANA name."""
    return "UTC" if tz is UTC else str(tz)


def human_time(ms: float, tz: tzinfo = UTC) -> str:
    """Epoch milliseconds as "2026-01-01 00:10:00.000 UTC" (or with the zone's abbreviation)."""
    if not math.isfinite(ms):
        return "+infinity" if ms > 0 else "-infinity"
    try:
        moment = datetime.fromtimestamp(ms / 1000.0, tz)
    except (OverflowError, OSError, ValueError):  # past year 9999: a watermark at the end of input
        return "+infinity" if ms > 0 else "-infinity"
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + (" UTC" if tz is UTC else moment.strftime(" %Z"))


def parse_time(text: str, tz: tzinfo = UTC) -> int:
    """A time a person writes, as epoch milliseconds: a date and time in ISO 8601 ("2026-01-01",
    "2026-01-01 00:10", "2026-01-01T00:10:00+01:00"; without an offset, in `tz`) or epoch
    milliseconds; ValueError, worded for the user, for anything else."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"'{text}' is not a time; write a date and time such as 2026-01-01T00:10:00 (ISO 8601, "
                         f"{zone_name(tz)} unless it names an offset) or epoch milliseconds") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=tz)
    return int(round(moment.timestamp() * 1000))


# The units of durations on the command line (policies, retention): the language's, and days.
DURATION_UNITS = {"ms": 1, "s": 1_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def duration_ms(text: str, what: str) -> int:
    """A duration a person writes on the command line (30s, 5min, 250ms, 7d; no unit: milliseconds)
    in milliseconds; ValueError, naming `what`, for anything else."""
    match = re.fullmatch(r"([0-9][0-9_]*)(ms|s|min|h|d)?", text.strip())
    if not match:
        raise ValueError(f"{what} '{text}' is not a duration like 30s, 5min, 12h or 7d")
    return int(match.group(1).replace("_", "")) * DURATION_UNITS[match.group(2) or "ms"]


def duration_text(ms: float) -> str:
    """A duration as a person reads it: in the largest unit that divides it (7 d, 90 min, 1.5 s)."""
    for unit in ("d", "h", "min", "s"):
        size = DURATION_UNITS[unit]
        if ms >= size and ms % size == 0:
            return f"{ms // size:,.0f} {unit}"
    return f"{ms / 1000:,.3g} s" if ms >= 1000 else f"{ms:,.0f} ms"


# Times as stored data: epoch milliseconds of any 64-bit value a window bound can reach. Python's
# datetime stops at the years 1 and 9999; a window's end after a reading of 9999-12-31 does not, so
# the dates a sink or an alarm writes come from the calendar's arithmetic (the proleptic Gregorian
# calendar, as ISO 8601's), not from datetime.
DAY_MS = DURATION_UNITS["d"]
FIRST_MS = -62_135_596_800_000  # 0001-01-01T00:00:00.000Z
LAST_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


def civil_date(day: int) -> tuple[int, int, int]:
    """The (year, month, day) of a day counted from 1970-01-01 (negative before it), for any day;
    year 0 is 1 BC, as in ISO 8601."""
    z = day + 719_468  # days from 0000-03-01: leap days come at the end of a year so counted
    era = z // 146_097  # 400-year cycles
    of_era = z - era * 146_097
    year_of_era = (of_era - of_era // 1_460 + of_era // 36_524 - of_era // 146_096) // 365
    of_year = of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    shifted = (5 * of_year + 2) // 153  # months from March
    month = shifted + 3 if shifted < 10 else shifted - 9
    return year_of_era + era * 400 + (month <= 2), month, of_year - (153 * shifted + 2) // 5 + 1


def civil_day(year: int, month: int, day: int) -> int:
    """The day counted from 1970-01-01 of a (year, month, day): `civil_date`'s inverse."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    of_year = (153 * (month - 3 if month > 2 else month + 9) + 2) // 5 + day - 1
    return era * 146_097 + year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + of_year - 719_468


def iso_utc(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 in UTC: 2026-01-01T00:12:00.000Z; a year outside 0-9999 in
    the standard's expanded form, a sign and six digits or more (+010000-01-01T00:00:00.000Z), as
    JavaScript's toISOString writes it."""
    ms = int(ms)
    day, of_day = divmod(ms, DAY_MS)
    year, month, date = civil_date(day)
    clock = f"{of_day // 3_600_000:02d}:{of_day // 60_000 % 60:02d}:{of_day // 1000 % 60:02d}.{of_day % 1000:03d}"
    shown = f"{year:04d}" if 0 <= year <= 9999 else f"{'+' if year > 0 else '-'}{abs(year):06d}"
    return f"{shown}-{month:02d}-{date:02d}T{clock}Z"
