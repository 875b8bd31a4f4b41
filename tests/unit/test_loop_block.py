"""loop_block_warn is 0 or within its range."""

from __future__ import annotations

import pytest

from rota import ConfigError, Settings


@pytest.mark.parametrize("value", [-1.0, 0.001, 3601.0])
def test_loop_block_warn_is_0_or_within_its_range(value: float) -> None:
    with pytest.raises(
        ConfigError,
        match=r"loop_block_warn: must be 0 \(off\) or from 0.01 to 3600",
    ):
        Settings(loop_block_warn=value)
    assert Settings(loop_block_warn=0).loop_block_warn == 0
    assert Settings(loop_block_warn=3600).loop_block_warn == 3600
