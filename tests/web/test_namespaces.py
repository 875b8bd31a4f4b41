"""Several namespaces in one web UI and one `rota status`.

A UI started with ``--also`` shows other namespaces beside its own: a switch in the
header (remembered in a cookie) for pages, ``?ns=`` for the API; `rota status --also`
prints each. Each namespace is read through its own client, so in a cluster each is
read from the node that holds it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import msgspec
import pytest
from starlette.applications import Starlette

from rota import Client, Settings
from rota.web import create_app
from tests.cli_helpers import run_rota
from tests.web.conftest import BASE


@pytest.fixture
async def two(
    settings: Settings, client: Client, redis_url: str
) -> AsyncIterator[tuple[Starlette, Client]]:
    other = Client.from_url(redis_url, settings.namespace + "b")
    app = create_app(settings, client=client, namespaces=[other.namespace])
    try:
        yield app, other
    finally:
        await other.close()
        # the app's own client of the other namespace (its lifespan closes it when served)
        await app.state.rota.clients[other.namespace].close()


async def test_the_api_reads_the_namespace_asked_for(
    two: tuple[Starlette, Client], client: Client
) -> None:
    app, other = two
    await client.enqueue("mail", 1)
    await other.enqueue("sms", 1)
    await other.enqueue("sms", 2)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
        mine = (await http.get("/api/queues")).json()["queues"]
        theirs = (await http.get("/api/queues", params={"ns": other.namespace})).json()["queues"]
        assert [(q["name"], q["size"]) for q in mine] == [("mail", 1)]
        assert [(q["name"], q["size"]) for q in theirs] == [("sms", 2)]
        unknown = await http.get("/api/queues", params={"ns": "nope"})
        assert unknown.status_code == 404 and "nope" in unknown.json()["error"]


async def test_a_page_switches_namespace_and_remembers_it(
    two: tuple[Starlette, Client], client: Client
) -> None:
    app, other = two
    await other.enqueue("sms", 1)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
        page = (await http.get("/queues")).text
        assert f'href="/ns/{other.namespace}"' in page and "sms" not in page
        switched = await http.get(f"/ns/{other.namespace}")
        assert switched.status_code == 303 and switched.headers["location"] == "/"
        page = (await http.get("/queues")).text
        assert "sms" in page and 'aria-current="true">' + other.namespace in page
        assert (await http.get("/ns/nope")).status_code == 404


async def test_status_shows_each_namespace(client: Client, redis_url: str) -> None:
    other = Client.from_url(redis_url, client.namespace + "c")
    try:
        await client.enqueue("mail", 1)
        await other.enqueue("sms", 1)
        conn = ("--redis-url", redis_url, "--namespace", client.namespace)
        done = run_rota("status", "--json", "--also", other.namespace, *conn)
        assert done.returncode == 0, done.stderr
        both = msgspec.json.decode(done.stdout)
        assert [d["namespace"] for d in both] == [client.namespace, other.namespace]
        assert [[q["name"] for q in d["queues"]] for d in both] == [["mail"], ["sms"]]
        text = run_rota("status", "--also", other.namespace, *conn).stdout
        assert f"namespace {client.namespace}:" in text and f"namespace {other.namespace}:" in text
        bad = run_rota("status", "--also", "a{b}", *conn)
        assert bad.returncode == 2 and bad.stderr.startswith("rota: --also: ")
    finally:
        await other.close()
