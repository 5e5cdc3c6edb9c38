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
