"""The cluster benchmarks refuse a number of seconds that is not finite or not above 0
(``--idle 0`` divides a count by nothing, ``nan`` prints nan for every rate) at parse
time, naming the option, before any cluster starts."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from bench import idle_cost, many_nodes, scale_model


@pytest.mark.parametrize("main", [many_nodes.main, scale_model.main])
@pytest.mark.parametrize(
    "argv", [["--idle", "0"], ["--idle", "nan"], ["--idle", "inf"], ["--settle", "-1"]]
)
def test_a_run_refuses_seconds_out_of_range(
    main: Callable[[list[str]], int], argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(argv)
    assert f"argument {argv[0]}" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--seconds", "nan"], ["--seconds", "0"], ["--pools", "0"]])
def test_idle_cost_refuses_counts_and_seconds_out_of_range(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        idle_cost.main(argv)
    assert f"argument {argv[0]}" in capsys.readouterr().err
