"""The group page's state says what became of the callback: never "running" beside a
callback that is dead, aborted or gone."""

from __future__ import annotations

import html
import re

import httpx

from rota import Client, JobSpec
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
