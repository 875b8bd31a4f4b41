"""A count read back from Redis (a queue's length, a keyed-job counter a hand may have
written) is a whole number of at least 0, whatever the reply: pages and totals add
them up and must never fail on one."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rota.protocol.job import count_of


@pytest.mark.parametrize(
    ("reply", "count"),
    [
        (7, 7),
        (b"12", 12),
        ("3", 3),
        (b"-5", 0),
        (b"nan", 0),
        (b"inf", 0),
        (b"1e300", 0),
        (b"2.9", 2),
        (b"text", 0),
        (b"", 0),
        (None, 0),
        (ValueError("WRONGTYPE Operation against a key holding the wrong kind"), 0),
    ],
)
def test_a_reply_reads_as_a_count(reply: object, count: int) -> None:
    assert count_of(reply) == count


@given(st.one_of(st.integers(), st.binary(), st.text(), st.floats(), st.none()))
def test_any_reply_is_a_whole_number_of_at_least_zero(reply: object) -> None:
    got = count_of(reply)
    assert isinstance(got, int) and got >= 0


@pytest.mark.parametrize("reply", [float("inf"), float("-inf"), float("nan"), 1e300])
def test_a_float_reply_out_of_range_is_zero(reply: float) -> None:
    assert count_of(reply) == 0
