"""The pool's one fetcher: a batch of jobs per script call, wake lists instead of polling.

When k jobs fit in the pool (free workers, plus room to prefetch while jobs are short;
see :mod:`rota.worker.handoff`) it leases up to k jobs in one call, visiting job names in the
weighted round robin's order. When that finds less than it wanted, it blocks on the wake
lists of its job names, which every script that makes a job runnable pushes to; the
BLPOP timeout is only a safety net for producers that forget to push a wake token.
"""

from __future__ import annotations

import contextlib

import anyio
import redis.exceptions
import structlog
from redis.asyncio import Redis

from rota.client import now_ms
from rota.link import Link
from rota.protocol.scripts import Arg, script
from rota.worker.acker import Acker
from rota.worker.robin import Robin
from rota.worker.runtime import Fetched, PoolRuntime

__all__ = ["Fetcher"]

log = structlog.get_logger("rota.pool")


class Fetcher:
    def __init__(self, rt: PoolRuntime, robin: Robin, acker: Acker | None = None) -> None:
        self.rt = rt
        self.robin = robin
        self.acker = acker
        self.wake_keys = [rt.keys.wake(name) for name in rt.handlers]
        self.names = list(rt.handlers)
        self._turn = 0
        self.buried = 0
        self._client_id: int | None = None
        # A connection of its own: its BLPOP blocks it, and the fetch that follows a
        # wake-up needs no pool checkout (see rota.link).
        self.conn: Link | Redis = Link.beside(rt.redis) or rt.redis

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            if isinstance(self.conn, Link):
                with anyio.CancelScope(shield=True):
                    await self.conn.aclose()

    async def _run(self) -> None:
        rt = self.rt
        handoff = rt.handoff
        # Stop on the flag, not only on cancellation: while the pool drains, workers hand
        # each fetched job back at once, so slots are free again by the time a fetch
        # returns, the next fetch starts without a checkpoint outside the shield, and the
        # cancellation would never land.
        short = False  # the last fetch found less than it wanted: wait for a wake token
        while not rt.stopping.is_set():
            if self.acker is not None:  # Redis refuses finishes: hold no more than a pool's worth
                await self.acker.wait_room(rt.settings.concurrency)
            want = min(await handoff.wait_room(), rt.settings.fetch_batch)
            try:
                if short and not isinstance(self.conn, Link):
                    await self.conn.blpop(self.wake_keys, timeout=rt.settings.wake_timeout)
                with anyio.CancelScope(shield=True):
                    # Shielded: a lease whose reply never arrives would wait for the reaper.
                    # (A stopping pool ends the wait with CLIENT UNBLOCK: see unblock.)
                    if short and isinstance(self.conn, Link):
                        jobs = await self._wait_and_fetch(self.conn, want)
                    else:
                        jobs = await self._fetch(want)
                for job in jobs:
                    handoff.put(job)
                short = len(jobs) < want
                rt.watch.ok("fetcher")
            except Exception as exc:
                self._client_id = None
                await anyio.sleep(await rt.watch.failed("fetcher", exc))

    async def _wait_and_fetch(self, link: Link, want: int) -> list[Fetched]:
        """BLPOP on the wake lists and the fetch behind it, in one write: Redis runs the
        fetch the moment the BLPOP returns, which saves the round trip between them on
        the way from an enqueue to a start. The fetch reads the server's clock (now 0)."""
        if self._client_id is None:
            try:
                self._client_id = int(await link.execute_command("CLIENT", "ID"))
            except redis.exceptions.ResponseError:  # e.g. an ACL user without CLIENT
                self._client_id = 0  # no unblocking: a stopping pool waits out the BLPOP
        wait: tuple[Arg, ...] = ("BLPOP", *self.wake_keys, self.rt.settings.wake_timeout)
        fetch = script("fetch").command(self.rt.keys.prefix, self._args(want, now=0))
        _, reply = await link.execute_many([wait, fetch])
        if isinstance(reply, Exception):
            if isinstance(reply, redis.exceptions.ResponseError):
                return await self._fetch(want)  # e.g. the library is gone: loaded again there
            raise reply
        return self._parse(reply)

    async def unblock(self) -> None:
        """End a wait of this fetcher (the pool is stopping): its fetch then runs at once
        and the jobs it leases go back to their queues with the others not started."""
        if self._client_id:
            with contextlib.suppress(redis.exceptions.ResponseError):  # CLIENT refused
                await self.rt.redis.client_unblock(self._client_id)

    async def _fetch(self, want: int) -> list[Fetched]:
        reply = await script("fetch")(self.conn, self.rt.keys.prefix, self._args(want))
        return self._parse(reply)

    def _args(self, want: int, now: int | None = None) -> list[Arg]:
        rt = self.rt
        names = self.robin.take(want)
        # The pool's other names fill the batch when the robin's are empty; a rotating
        # start keeps that fill fair between them.
        k = self._turn % len(self.names)
        self._turn += 1
        fill = [n for n in self.names[k:] + self.names[:k] if n not in names]
        return [
            now_ms() if now is None else now,
            int(rt.settings.lease * 1000),
            rt.pool_id,
            rt.settings.max_args_bytes,
            len(names),
            *names,
            len(fill),
            *fill,
        ]

    def _parse(self, reply: list[list[bytes]]) -> list[Fetched]:
        flat, buried = reply
        for job_id in buried:
            self.buried += 1
            log.warning("bad payload made dead", job_id=job_id.decode("utf-8", "replace"))
        return Fetched.parse(flat)
