"""Times people read: UTC by default, an IANA zone on request, stored epoch milliseconds unchanged."""

import pytest

from sensorscript.times import UTC, human_time, time_zone, zone_name


def test_utc_by_default_and_a_named_zone_on_request():
    assert human_time(1_767_225_600_000) == "2026-01-01 00:00:00.000 UTC"
    assert human_time(1_767_225_600_000, time_zone("Europe/Zurich")) == "2026-01-01 01:00:00.000 CET"
    assert human_time(1_782_864_000_123, time_zone("Europe/Zurich")) == "2026-07-01 02:00:00.123 CEST"
    assert time_zone(None) is time_zone("UTC") is UTC and zone_name(time_zone("Asia/Tokyo")) == "Asia/Tokyo"


def test_a_watermark_past_every_date_is_infinity():
    assert human_time(float("inf")) == "+infinity" and human_time(2**63 - 1) == "+infinity"
    assert human_time(-(2**63)) == "-infinity"


@pytest.mark.parametrize("name", ["Mars/Base", "../etc/passwd", "", "Europe/"])
def test_a_name_that_is_no_zone_is_one_sentence(name):
    with pytest.raises(ValueError, match="is not a time zone; name one of the IANA database"):
        time_zone(name)


def test_stored_times_of_any_64_bit_value_as_dates_and_iso_8601():
    """The calendar's arithmetic (times.civil_date, civil_day, iso_utc) agrees with datetime in the
    years 1 to 9999, where datetime goes, and round-trips beyond them: a window's end after a
    reading of 9999-12-31 still has a date for a sink's day partition and an alarm's time."""
    from datetime import datetime, timedelta, timezone

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from sensorscript.times import DAY_MS, FIRST_MS, LAST_MS, civil_date, civil_day, iso_utc

    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)

    @settings(max_examples=2_000, deadline=None)
    @given(st.integers(-10**18, 10**18) | st.integers(FIRST_MS, LAST_MS)
           | st.sampled_from([FIRST_MS, FIRST_MS - 1, LAST_MS, LAST_MS + 1, 0, -1]))
    def check(ms):
        day = ms // DAY_MS
        assert civil_day(*civil_date(day)) == day
        if FIRST_MS <= ms <= LAST_MS:
            moment = epoch + timedelta(milliseconds=ms)
            assert civil_date(day) == (moment.year, moment.month, moment.day)
            assert iso_utc(ms) == moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    check()
    assert (iso_utc(LAST_MS), iso_utc(LAST_MS + 1)) == ("9999-12-31T23:59:59.999Z", "+010000-01-01T00:00:00.000Z")
    assert iso_utc(10**18 - 1) == "+31690708-07-05T01:46:39.999Z"
    assert iso_utc(FIRST_MS - 1) == "0000-12-31T23:59:59.999Z" and iso_utc(-10**18).startswith("-31686769-")
