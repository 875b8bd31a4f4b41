"""What an idle pool sends, server by server: a pool of one job name with its upkeep at
short intervals, and a ``MONITOR`` of each server over a window, so that the idle tests
on one server and on a cluster count the commands of each shard the same way."""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any

import anyio

from rota import JobContext, WorkerPool
from rota.protocol.keys import Keys, tag_of
from tests.helpers import pool_settings
from tests.redis_server import RedisServer

#: A key's hash tag: the shard it belongs to.
TAG = re.compile(r"\{([^}]*)\}")


async def _noop(ctx: JobContext) -> None:
    return None


def primaries(servers: Sequence[RedisServer]) -> list[RedisServer]:
    """The servers that are primaries now."""
    return [s for s in servers if s.client().info("replication")["role"] == "master"]


def idle_pool(
    url: str, namespace: str, shards: int, interval: float, wake_timeout: float, **job: Any
) -> tuple[WorkerPool, list[str]]:
    """A pool of the one job name ``n`` (``job``: its options) whose heartbeat and
    scheduler run every ``interval``, with the forget pass of idle names turned off (it
    runs in a turn per shard, once in many reaper passes), and the hash tag of each
    shard, by shard."""
    settings = pool_settings(
        url,
        namespace,
        shards=shards,
        heartbeat_interval=interval,
        scheduler_interval=interval,
        wake_timeout=wake_timeout,
        forget_names_after=0,
    )
    pool = WorkerPool(settings=settings)
    pool.job(name="n", **job)(_noop)
    return pool, [tag_of(Keys(namespace, i, shards).prefix) for i in range(shards)]


def _watch(server: RedisServer, seen: list[tuple[bool, list[str]]], stop: threading.Event) -> None:
    """Every command Redis runs (MONITOR: those scripts run inside too, marked True),
    as its words, until ``stop`` is set (at the next command after it)."""
    r = server.client()
    try:
        with r.monitor() as m:  # type: ignore[no-untyped-call]
            for event in m.listen():
                if stop.is_set():
                    break
                words = [w.strip('"') for w in str(event["command"]).split(" ")]
                seen.append((event.get("client_type") == "lua", words))
    finally:
        r.close()


class Monitor:
    """A ``MONITOR`` of each server between ``start`` and ``stop``; ``seen[i]`` holds
    what server ``i`` ran, as ``(inside a script, words)``."""

    def __init__(self, servers: Sequence[RedisServer]) -> None:
        self._servers = list(servers)
        self._stop = threading.Event()
        self.seen: list[list[tuple[bool, list[str]]]] = [[] for _ in self._servers]
        self._threads = [
            threading.Thread(target=_watch, args=(server, into, self._stop))
            for server, into in zip(self._servers, self.seen, strict=True)
        ]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    async def stop(self) -> None:
        """Ends the window: a command on each server (each watcher stops at the first
        one after ``stop``), then waits for the watchers."""
        self._stop.set()
        for server in self._servers:
            with server.client() as r:
                r.ping()
        for t in self._threads:
            await anyio.to_thread.run_sync(t.join, 10)
