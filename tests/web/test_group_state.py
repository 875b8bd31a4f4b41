"""The group page's state says what became of the callback: never "running" beside a
callback that is dead, aborted or gone."""

from __future__ import annotations

import html
import re
from typing import Any

import httpx
import pytest

from rota import Client, JobSpec
from rota.web.flows import group_state
from tests.web.conftest import BASE

FORM = {"origin": BASE, "sec-fetch-site": "same-origin", "accept": "text/html"}


def _step(label: str) -> JobSpec:
    return JobSpec(name="step", kwargs={"label": label})


async def _state(http: httpx.AsyncClient, group_id: str) -> str:
    page = await http.get(f"/groups/{group_id}", headers=FORM)
    found = re.search(r'id="group-state">([^<]*)<', page.text)
    assert found is not None, page.text
    return html.unescape(found.group(1))


async def test_an_aborted_or_deleted_callback_is_not_called_running(
    http: httpx.AsyncClient, client: Client
) -> None:
    g = await client.group([_step(f"m{i}") for i in range(3)], then=_step("after"))
    assert g.then is not None
    assert await _state(http, g.id) == "running"  # members queued, the callback waits
    assert await client.abort(g.then.id) == "waiting"
    said = await _state(http, g.id)
    assert said == "members still to run; the callback was aborted: it will not run"
    h = await client.group([_step("n0")], then=_step("after"))
    assert h.then is not None
    await http.post(f"/waiting/{h.then.id}/delete", data={"next": "/waiting"}, headers=FORM)
    said = await _state(http, h.id)
    assert said == "members still to run; the callback's record is gone: it will not run"


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
