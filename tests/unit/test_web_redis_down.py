"""The web API answers 503 when Redis is down."""

from __future__ import annotations

import httpx

from rota import Client
from rota.web import create_app
from tests.helpers import pool_settings
from tests.web.conftest import BASE
from tests.web.test_api import error_of


async def test_redis_down_is_a_503(namespace: str) -> None:
    from tests.redis_server import free_port

    url = f"redis://127.0.0.1:{free_port()}/0"
    async with Client.from_url(url, namespace) as down:
        app = create_app(pool_settings(url, namespace), client=down)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as http:
            assert "Redis is unavailable" in error_of(await http.get("/api/queues"), 503)
            health = await http.get("/healthz")
            assert health.status_code == 503  # and it does not say where Redis is
            assert health.json() == {"ok": False, "error": "Redis is unavailable"}
            page = await http.get("/queues", headers={"accept": "text/html"})
            assert page.status_code == 503
            assert "Redis is unavailable" in page.text
