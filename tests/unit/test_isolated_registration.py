"""An isolated handler must be a plain ``def`` a child process can import by its path:
anything else is refused when it is registered, in one line naming the job; and the
fetcher leases isolated jobs within the children's room (``within_room``)."""

from __future__ import annotations

from typing import Any

import pytest

from rota import WorkerPool
from rota.errors import ConfigError
from rota.protocol.job import Reason
from rota.worker.fetcher import within_room
from rota.worker.registry import Handler
from tests import isolated_jobs


def test_a_module_level_function_is_taken_by_its_path() -> None:
    handler = Handler(name="add", func=isolated_jobs.add, isolated=True)
    assert handler.target == "tests.isolated_jobs:add"
    assert Handler(name="add", func=isolated_jobs.add).target == ""


def test_a_lambda_is_refused() -> None:
    pool = WorkerPool()
    with pytest.raises(ValueError, match=r"job 'l': isolated: .*module:qualname, got .*<lambda>"):
        pool.job(name="l", isolated=True)(lambda: None)


def test_a_closure_is_refused() -> None:
    def inner() -> None:
        pass

    with pytest.raises(ValueError, match=r"job 'inner': isolated: .*<locals>"):
        WorkerPool().job(isolated=True)(inner)


def test_an_async_handler_is_refused() -> None:
    async def handler() -> None:
        pass

    with pytest.raises(ValueError, match="isolated: the handler must be a plain def, not async"):
        WorkerPool().job(isolated=True)(handler)


def test_isolated_is_a_bool() -> None:
    with pytest.raises(TypeError, match="isolated: must be True or False"):
        Handler(name="add", func=isolated_jobs.add, isolated=1)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("setting", "value"),
    [("child_processes", -1), ("child_processes", 1025), ("child_memory_mb", 10)],
)
def test_the_child_settings_have_a_range(setting: str, value: int) -> None:
    overrides: dict[str, Any] = {setting: value}
    with pytest.raises(ConfigError, match=f"{setting}: must be"):
        WorkerPool(**overrides)


def test_crashed_is_a_reason() -> None:
    assert Reason("crashed") is Reason.CRASHED


ISOLATED = frozenset({"cpu"})


def test_without_room_the_isolated_turns_go_to_the_other_names() -> None:
    names, fill = within_room(["cpu", "tick", "cpu"], ["cpu", "mail"], 0, ISOLATED)
    assert (names, fill) == (["tick", "tick", "mail"], ["mail"])


def test_without_room_and_no_other_name_nothing_is_asked() -> None:
    assert within_room(["cpu", "cpu"], ["cpu"], 0, ISOLATED) == ([], [])


def test_with_room_a_batch_holding_an_isolated_name_is_cut_to_it() -> None:
    assert within_room(["tick", "cpu", "tick", "cpu"], ["mail"], 1, ISOLATED) == (
        ["tick"],
        ["mail"],
    )


def test_the_other_names_a_cut_leaves_out_lead_the_fill() -> None:
    """A batch cut to an isolated name still leases the others' jobs: their names are
    in the fill, before the robin's other names."""
    assert within_room(["cpu", "tick", "cpu", "mail"], ["news", "cpu"], 1, ISOLATED) == (
        ["cpu"],
        ["tick", "mail", "news"],
    )
    assert within_room(["tick", "cpu", "mail", "tick"], ["mail"], 2, ISOLATED) == (
        ["tick", "cpu"],
        ["mail"],
    )


def test_a_batch_without_an_isolated_name_is_left_whole() -> None:
    assert within_room(["tick", "mail"], ["cpu", "mail"], 2, ISOLATED) == (
        ["tick", "mail"],
        ["mail"],
    )
