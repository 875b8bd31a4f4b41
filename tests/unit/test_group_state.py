"""The state a group page shows for each kind of group."""

from __future__ import annotations

from typing import Any

import pytest

from rota.web.flows import group_state


def _group(**changes: Any) -> dict[str, Any]:
    then = changes.pop("then", "waiting")
    data: dict[str, Any] = {"total": 3, "sent": 3, "done": 0, "failed": 0, "finished": False}
    data["then"] = None if then is None else {"id": "c", "name": "after", "state": then}
    return {**data, **changes}


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({}, "running"),
        ({"then": None}, "running"),
        ({"then": "dead"}, "members still to run; the callback is dead: it will not run"),
        (
            {"failed": 1, "then": "dead"},
            "members still to run, 1 dead or aborted already; the callback is dead:"
            " it will not run",
        ),
        (
            {"failed": 1},
            "members still to run, 1 dead or aborted already: the callback will not run",
        ),
        ({"done": 3, "finished": True, "then": "complete"}, "finished"),
        ({"done": 3, "finished": True, "then": "dead"}, "finished; the callback is dead"),
        (
            {"done": 2, "failed": 1, "finished": True, "then": "dead"},
            "finished, 1 dead or aborted; the callback is dead",
        ),
        ({"sent": 2}, "incomplete: members missing"),
        (
            {"sent": 2, "then": "aborted"},
            "incomplete: members missing; the callback was aborted: it will not run",
        ),
    ],
)
def test_the_state_of_each_kind_of_group(changes: dict[str, Any], said: str) -> None:
    assert group_state(_group(**changes)) == said
