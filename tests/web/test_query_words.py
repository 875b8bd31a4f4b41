"""The query parameters that take one of a few words (an order, a window, a state, what
a search matches): the API refuses another word in one line naming them; a page takes
the default instead, where it did before, or refuses too."""

from __future__ import annotations

import httpx
import pytest

from rota import Client, JobSpec
from tests.web.conftest import BASE

FORM = {"origin": BASE, "sec-fetch-site": "same-origin", "accept": "text/html"}


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("/api/queues?order=up", "order: one of busy, name, size, running, latency, not 'up'"),
        ("/api/queues/mail/jobs?order=up", "order: oldest or newest, not 'up'"),
        ("/api/dead?order=up", "order: newest or oldest, not 'up'"),
        ("/api/complete?order=up", "order: one of newest, oldest, longest, name, not 'up'"),
        ("/api/complete?fields=all", "fields: id or content, not 'all'"),
        ("/api/queues/mail/run-times?window=week", "window: hour or day, not 'week'"),
    ],
)
async def test_the_api_refuses_a_word_it_does_not_take(
    http: httpx.AsyncClient, client: Client, path: str, error: str
) -> None:
    await client.enqueue("mail")
    reply = await http.get(path)
    assert (reply.status_code, reply.json()) == (400, {"error": error})


async def test_a_group_s_state_refused_in_the_api_and_all_on_its_page(
    http: httpx.AsyncClient, client: Client
) -> None:
    g = await client.group([JobSpec(name="mail")])
    reply = await http.get(f"/api/groups/{g.id}?state=asleep")
    assert reply.status_code == 400
    assert reply.json()["error"].startswith("state: one of all, ")
    assert reply.json()["error"].endswith(", not 'asleep'")
    assert (await http.get(f"/groups/{g.id}?state=asleep", headers=FORM)).status_code == 200


@pytest.mark.parametrize(
    "path", ["/queues?order=up", "/queues/mail?order=up", "/dead?order=up", "/retry?order=up"]
)
async def test_a_page_takes_its_default_for_a_word_it_does_not_take(
    http: httpx.AsyncClient, client: Client, path: str
) -> None:
    await client.enqueue("mail")
    assert (await http.get(path, headers=FORM)).status_code == 200


@pytest.mark.parametrize("path", ["/complete?order=up", "/complete?fields=all"])
async def test_the_complete_page_refuses_a_word_it_does_not_take(
    http: httpx.AsyncClient, path: str
) -> None:
    assert (await http.get(path, headers=FORM)).status_code == 400
