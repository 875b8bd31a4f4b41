"""A real uvicorn server in a background thread, and a pool of example handlers that
leaves jobs in every state the UI shows."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import anyio
import uvicorn

import rota
from rota import Client, JobContext, WorkerPool
from rota.web.server import listen, url_of
from tests.helpers import pool_settings, wait_until

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(2)>"


class LiveServer:
    """Serve an ASGI app on a free loopback port while the block runs."""

    def __init__(self, app: Any, host: str = "127.0.0.1") -> None:
        self.sock = listen(host, 0)
        self.url = url_of(self.sock)
        config = uvicorn.Config(
            app, log_config=None, access_log=False, lifespan="on", loop="asyncio"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            assert self.thread.is_alive(), "the web server thread died"
            assert time.monotonic() < deadline, "the web server did not start"
            time.sleep(0.02)
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.server.should_exit = True
        self.thread.join(15)
        self.sock.close()
        assert not self.thread.is_alive(), "the web server did not stop"


def example_pool(redis_url: str, namespace: str, **changes: Any) -> WorkerPool:
    """Handlers whose jobs end complete, dead, in retry, or stay running a while."""
    values: dict[str, Any] = {"keep_result": 3600.0, **changes}
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, **values))

    @pool.job
    async def ok(ctx: JobContext, n: int = 0) -> dict[str, int]:
        await ctx.job_log(f"working on {n}")
        await ctx.progress(100, "all done")
        return {"n": n}

    @pool.job(max_fails=1)
    async def boom(ctx: JobContext, note: str = "") -> None:
        raise ValueError(f"broke on {note} {IMG}")

    @pool.job(max_fails=1)
    async def flaky(ctx: JobContext) -> str:
        """Dies on its first attempt, succeeds when retried."""
        if ctx.attempt == 1:
            raise ValueError("first attempt fails")
        return "second attempt worked"

    @pool.job(max_fails=5)
    async def later(ctx: JobContext) -> None:
        raise rota.Retry(delay=3600)

    @pool.job(timeout=600)
    async def slow(ctx: JobContext, seconds: float = 600) -> None:
        step = 0
        deadline = anyio.current_time() + seconds
        while anyio.current_time() < deadline:
            step += 1
            await ctx.progress(min(99, step), f"step {step}")
            if await ctx.checkin(f"step {step}"):
                return
            await anyio.sleep(0.2)

    return pool


@dataclass
class Seeded:
    complete: list[str] = field(default_factory=list)
    dead: list[str] = field(default_factory=list)
    flaky: list[str] = field(default_factory=list)
    retry: list[str] = field(default_factory=list)
    scheduled: list[str] = field(default_factory=list)
    script: str = ""


async def enqueue_examples(client: Client) -> Seeded:
    s = Seeded()
    s.complete = [(await client.enqueue("ok", n=i)).id for i in range(5)]
    s.script = (await client.enqueue("boom", note=SCRIPT)).id
    s.dead = [s.script] + [(await client.enqueue("boom", note=f"n{i}")).id for i in range(3)]
    s.flaky = [(await client.enqueue("flaky")).id for _ in range(2)]
    s.retry = [(await client.enqueue("later")).id for _ in range(2)]
    s.scheduled = [(await client.enqueue_in(3600, "ok", n=99)).id for _ in range(2)]
    return s


async def settled(client: Client, s: Seeded) -> bool:
    """Every example job has reached the state it stays in."""
    dead = await client.admin.page("dead", 0, 100)
    retry = await client.admin.page("retry", 0, 100)
    stats = await client.admin.stats()
    return (
        dead.total >= len(s.dead) + len(s.flaky)
        and retry.total >= len(s.retry)
        and stats.get("processed:ok", 0) >= len(s.complete)
    )


async def seed(client: Client, redis_url: str, namespace: str) -> Seeded:
    """Run the example pool until every example job has settled, then stop it."""
    s = await enqueue_examples(client)
    async with example_pool(redis_url, namespace).running():
        await wait_until(lambda: settled(client, s), within=20)
    return s
