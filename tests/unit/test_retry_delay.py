"""A retry takes its delay."""

from __future__ import annotations

import rota


def test_retry_takes_its_delay() -> None:
    assert rota.Retry(2.5).delay == 2.5
    assert rota.Retry(delay=1).delay == 1
    assert rota.Retry().delay is None
