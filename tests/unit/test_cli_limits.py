"""The CLI's set commands read --limit and --offset before Redis is reached: a bad one
exits 2 with one line."""

from __future__ import annotations

import pytest

from rota.cli import main


@pytest.mark.parametrize("which", ["dead", "retry", "scheduled", "waiting"])
@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("--limit", "0"), "rota: --limit: must be at least 1, got 0"),
        (("--limit", "-3"), "rota: --limit: must be at least 1, got -3"),
        (("--limit", "many"), "rota: --limit: expected an integer, got 'many'"),
        (("--offset", "-1"), "rota: --offset: must be at least 0, got -1"),
    ],
)
def test_bad_limits_and_offsets_exit_2_with_one_line(
    which: str, args: tuple[str, ...], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # refused before any connection is tried: the URL points nowhere
    assert main([which, "list", *args, "--redis-url", "redis://127.0.0.1:1/0"]) == 2
    out, err = capsys.readouterr()
    assert (out, err.strip()) == ("", line)


def test_group_show_checks_its_limit_alike(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["group", "show", "g", "--limit", "0", "--redis-url", "redis://127.0.0.1:1"]) == 2
    assert capsys.readouterr().err.strip() == "rota: --limit: must be at least 1, got 0"
