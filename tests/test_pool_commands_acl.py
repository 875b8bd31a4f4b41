"""Pool commands under the least-privilege roles of docs/operations.md: a pool of the
worker role reads its command and leaves its field behind it, the web-operator role
writes commands, and the read-only web role is refused by Redis itself."""

from __future__ import annotations

import anyio
import httpx

from rota import Client, JobContext, WorkerPool
from rota.web import create_app
from tests.helpers import wait_until
from tests.redis_server import RedisServer
from tests.test_acl import admin, server, settings_for  # noqa: F401 - fixtures

WEB = "http://127.0.0.1:5040"


async def test_the_operator_role_quiets_and_stops_a_worker_role_pool(
    server: RedisServer,  # noqa: F811
    namespace: str,
    admin: Client,  # noqa: F811
) -> None:
    pool = WorkerPool(settings=settings_for(server, "worker", namespace, heartbeat_interval=0.1))

    @pool.job
    async def noop(ctx: JobContext) -> None:
        pass

    async def says(pool_id: str, state: str | None) -> bool:
        found = [p.state for p in await admin.admin.pools() if p.id == pool_id]
        return found == ([] if state is None else [state])

    apps = {
        role: create_app(settings_for(server, role, namespace)) for role in ("web", "web-operator")
    }
    with anyio.fail_after(30):
        async with pool.running() as rt:
            for role, app in apps.items():
                transport = httpx.ASGITransport(app=app)
                async with (
                    app.router.lifespan_context(app),
                    httpx.AsyncClient(transport=transport, base_url=WEB) as http,
                ):
                    reply = await http.post(f"/api/pools/{rt.pool_id}/quiet")
                    if role == "web":
                        assert reply.status_code == 403, reply.text
                        assert "read-only" in reply.json()["error"]
                        assert await admin.admin.commands.read() == {}
                        continue
                    assert reply.status_code == 200, reply.text
                    await wait_until(lambda: says(rt.pool_id, "quiet"))
                    reply = await http.post(f"/api/pools/{rt.pool_id}/stop")
                    assert reply.status_code == 200, reply.text
            await anyio.sleep_forever()  # the stop ends the block
    await wait_until(lambda: says(rt.pool_id, None))
    assert await admin.admin.commands.read() == {}  # the worker role deleted its field
