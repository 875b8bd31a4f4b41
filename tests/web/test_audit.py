"""The audit log: every change that went through the UI or the API, with who, from
where, what and when; nothing for reads or refusals."""

from __future__ import annotations

import base64

import httpx

from rota import Client, Settings
from rota.web import Auth, create_app
from rota.web.middleware.csrf import CSRF_COOKIE
from tests.web.conftest import BASE


def _client(settings: Settings, client: Client, auth: Auth) -> httpx.AsyncClient:
    app = create_app(settings, client=client, auth=auth)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE)


async def test_changes_are_recorded_with_who_and_what(settings: Settings, client: Client) -> None:
    await client.enqueue("mail", 1)
    auth = Auth(token="audit-tok", basic=("ada", "pw"))
    async with _client(settings, client, auth) as web:
        bearer = {"authorization": "Bearer audit-tok"}
        assert (await web.post("/api/queues/mail/pause", headers=bearer)).status_code == 200
        basic = {"authorization": "Basic " + base64.b64encode(b"ada:pw").decode()}
        made = await web.post("/api/jobs", json={"name": "mail", "args": [2]}, headers=basic)
        assert made.status_code == 201
        # the login form: a session, then a form action under it
        await web.get("/login")
        csrf = web.cookies[CSRF_COOKIE]
        await web.post("/login", data={"token": "audit-tok", "csrf": csrf, "next": "/"})
        done = await web.post("/queues/mail/resume", data={"csrf": csrf, "next": "/queues"})
        assert done.status_code == 303
        # refused (no CSRF token) and reads: not recorded
        assert (await web.post("/queues/mail/pause", data={"next": "/"})).status_code == 403
        assert (await web.get("/api/queues", headers=bearer)).status_code == 200
        log = (await web.get("/api/audit", headers=bearer)).json()
        page = await web.get("/audit", headers={**bearer, "accept": "text/html"})
    entries = log["entries"]
    what = [(e["method"], e["path"], e["status"]) for e in entries]
    assert what == [
        ("POST", "/queues/mail/resume", 303),
        ("POST", "/login", 303),
        ("POST", "/api/jobs", 201),
        ("POST", "/api/queues/mail/pause", 200),
    ]
    assert [e["who"] for e in entries][2:] == ["basic:ada", "token"]
    assert entries[0]["who"].startswith("session:") and entries[1]["who"] == "login form"
    assert all(e["at"] > 0 and e["address"] for e in entries)
    assert log["total"] == 4
    assert (
        page.status_code == 200 and "/queues/mail/resume" in page.text and "basic:ada" in page.text
    )
