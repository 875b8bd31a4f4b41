"""The weighted round robin over job names: smooth, each name its weight per cycle, and
bad weights refused."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rota.worker.robin import Robin


def test_robin_interleaves_smoothly() -> None:
    robin = Robin({"a": 4, "b": 1})
    assert "".join(robin.take(10)) == "aabaaaabaa"


@given(
    st.dictionaries(
        st.text("abcdefgh", min_size=1, max_size=3), st.integers(1, 50), min_size=1, max_size=6
    )
)
def test_robin_gives_each_name_its_weight_per_cycle(weights: dict[str, int]) -> None:
    robin = Robin(weights)
    total = sum(weights.values())
    for _ in range(3):
        assert Counter(robin.take(total)) == Counter(weights)


def test_robin_rejects_bad_weights() -> None:
    with pytest.raises(ValueError, match="positive"):
        Robin({"a": 0})
    with pytest.raises(ValueError, match="at least one"):
        Robin({})
