"""Every JSON route answers a malformed body with a 400 that names the problem.

Invalid UTF-8, nesting a thousand deep and 100,000 open brackets each reached the
decoder's exceptions that no handler caught: a 500 with a traceback in the log and
without the headers every other answer carries. Now each is a 400, with those headers.
"""

from __future__ import annotations

import httpx
import pytest
from starlette.routing import Route

from rota import Client, Settings
from rota.web import create_app
from rota.web.middleware.headers import SECURITY_HEADERS

BODIES = {
    "invalid UTF-8": (b'{"name": "x", "args": ["\xff\xfe"]}', "not valid UTF-8"),
    "nested 1,000 deep": (b'{"name": "x", "args": ' + b"[" * 1000 + b"]" * 1000 + b"}", "deep"),
    "100,000 open brackets": (b"[" * 100_000, "deep"),
    "objects 1,000 deep": (b'{"a": ' * 1000 + b"1" + b"}" * 1000, "deep"),
    "cut short": (b'{"name": "x", "args": [1, 2', "not valid JSON"),
    "a key twice": (b'{"name": "x", "name": "y", "ids": []}', "the key 'name' is given twice"),
    "NaN": (b'{"name": "x", "args": [NaN]}', "not valid JSON"),
}


@pytest.fixture
def app(settings: Settings, client: Client) -> object:
    return create_app(settings, client=client)


def _post_routes(app: object) -> list[str]:
    """The API's POST routes without a path parameter: the ones whose input is the body
    (enqueue, and retry or delete in each job set)."""
    routes = [r for r in app.routes if isinstance(r, Route)]  # type: ignore[attr-defined]
    return [
        r.path
        for r in routes
        if "POST" in (r.methods or ()) and r.path.startswith("/api") and "{" not in r.path
    ]


async def test_every_json_route_answers_a_malformed_body_with_a_400(app: object) -> None:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)  # type: ignore[arg-type]
    paths = _post_routes(app)
    assert "/api/jobs" in paths and "/api/dead/retry" in paths and len(paths) >= 8
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:5040") as http:
        for path in paths:
            for what, (body, says) in BODIES.items():
                answer = await http.post(
                    path, content=body, headers={"content-type": "application/json"}
                )
                assert answer.status_code == 400, (path, what, answer.text[:200])
                assert says in answer.json()["error"], (path, what, answer.text)
                for name, value in SECURITY_HEADERS:
                    assert answer.headers.get(name.decode()) == value.decode(), (path, what)
