"""Rates are read as people write them, and what is not one says what is understood."""

from __future__ import annotations

import pytest

from rota.protocol.rate import Rate, parse_rate


@pytest.mark.parametrize(
    ("text", "count", "period", "shown"),
    [
        ("100/s", 100, 1000, "100/s"),
        (" 2.5 / sec", 2.5, 1000, "2.5/s"),
        ("30/min", 30, 60_000, "30/min"),
        ("30/Minute", 30, 60_000, "30/min"),
        ("2/hour", 2, 3_600_000, "2/h"),
        ("1/h", 1, 3_600_000, "1/h"),
    ],
)
def test_rates_are_read_as_people_write_them(
    text: str, count: float, period: int, shown: str
) -> None:
    rate = parse_rate(text)
    assert (rate.count, rate.period_ms, str(rate)) == (count, period, shown)
    assert Rate.from_stored(rate.stored) == rate


@pytest.mark.parametrize("text", ["", "100", "fast", "0/s", "-1/s", "10/day", "1e9/s", "nan/s"])
def test_a_rate_that_is_not_one_says_what_is_understood(text: str) -> None:
    with pytest.raises(ValueError, match="rate: "):
        parse_rate(text)
