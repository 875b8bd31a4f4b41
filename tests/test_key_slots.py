"""Every key rota builds for a namespace hashes to that namespace's cluster slot.

A namespace is the unit of sharding: its scripts are atomic only while every key they
touch lives in one slot, on one node. Three checks:

- every key-building method and property of :class:`rota.protocol.keys.Keys`, with
  awkward arguments (braces, colons, empty);
- the Lua side, read: scripts take nothing but ``KEYS[1]`` (the prefix) and build keys
  only with the prelude's ``key_<kind>()`` and ``K_<KIND>``, evaluated on a real Redis;
- the Lua side, run: a workload that calls every script runs under ``MONITOR``, and
  every key of every command a script sent (``COMMAND GETKEYS``) is in the slot.
"""

from __future__ import annotations

import re
import socket
import threading
from typing import Any

import anyio
import pytest
import redis
from redis.crc import key_slot

from rota import Client, JobContext, JobSpec, Retry, WorkerPool
from rota.protocol.keys import LUA_KEYS, lua_prelude
from rota.worker.rounds import BEAT, REAP, TICK
from tests.helpers import pool_settings, rounds, wait_until
from tests.redis_server import RedisServer
from tests.unit.test_key_slots import SAMPLES, _slot


def test_the_prelude_builds_keys_in_the_namespace_slot(redis_sync: redis.Redis) -> None:
    kinds = list(LUA_KEYS)
    body = lua_prelude() + "set_prefix(KEYS[1])\nlocal out = {}\n"
    for kind in kinds:
        if re.search(rf"local function key_{kind}\(", lua_prelude()):
            pair = re.search(rf"local function key_{kind}\(x, y\)", lua_prelude())
            args = (lambda s: f"{s!r}, {s!r}") if pair else repr
            body += "".join(f"table.insert(out, key_{kind}({args(s)}))\n" for s in SAMPLES[:4])
        else:
            body += f"table.insert(out, K_{kind.upper()})\n"
    body += "return out\n"
    for namespace in ("rota", "t9", "n.s-1"):
        prefix = "{" + namespace + "}:"
        built = redis_sync.eval(body, 1, prefix)
        assert len(built) >= len(kinds)
        for key in built:
            assert key.startswith(prefix.encode()), key
            assert key_slot(key) == _slot(namespace), key


# -- the scripts, run ------------------------------------------------------------------

_ARG = re.compile(rb'"((?:[^"\\]|\\.)*)"')


def _unescape(raw: bytes) -> bytes:
    out = bytearray()
    i = 0
    while i < len(raw):
        c = raw[i]
        if c == 0x5C and i + 1 < len(raw):  # backslash
            n = raw[i + 1]
            if n == ord("x") and i + 3 < len(raw):
                out.append(int(raw[i + 2 : i + 4], 16))
                i += 4
                continue
            out.append(
                {ord("n"): 10, ord("r"): 13, ord("t"): 9, ord("a"): 7, ord("b"): 8}.get(n, n)
            )
            i += 2
            continue
        out.append(c)
        i += 1
    return bytes(out)


class Monitor(threading.Thread):
    """``MONITOR`` on a raw socket: the argument lists of commands sent by scripts."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(b"MONITOR\r\n")
        self.from_lua: list[list[bytes]] = []
        self.ready = threading.Event()

    def run(self) -> None:
        buf = b""
        while True:
            try:
                data = self.sock.recv(1 << 16)
            except OSError:
                return
            if not data:
                return
            buf += data
            *lines, buf = buf.split(b"\r\n")
            for line in lines:
                if line == b"+OK":
                    self.ready.set()
                elif b" [0 lua] " in line or b" lua] " in line:
                    self.from_lua.append([_unescape(a) for a in _ARG.findall(line)])

    def close(self) -> None:
        self.sock.close()


async def _workload(url: str, namespace: str) -> None:
    """Call every script: enqueue (one, many, unique, scheduled, after, group), fetch,
    finish (complete, retry, dead), abort, heartbeat, reap, promote, pause, move,
    delete, trim, wait."""
    pool = WorkerPool(
        settings=pool_settings(url, namespace, keep_result=60, heartbeat_interval=0.2, lease=1)
    )
    ran: list[str] = []

    @pool.job(max_fails=2, backoff=lambda n: 0.05)
    async def work(ctx: JobContext, mode: str) -> str:
        ran.append(ctx.id)
        if mode == "fail":
            raise RuntimeError("boom")
        if mode == "retry" and ctx.attempt == 1:
            raise Retry(delay=0.05)
        if mode == "slow":
            await anyio.sleep(30)
        await ctx.job_log("a line")
        return mode

    async with Client.from_url(url, namespace) as client:
        first = await client.enqueue("work", mode="ok")
        await client.enqueue("work", mode="ok", unique="u1")
        await client.enqueue_many(
            [JobSpec(name="work", kwargs={"mode": m}) for m in ("ok", "fail")]
        )
        await client.enqueue_in(0.05, "work", mode="retry")
        await client.enqueue("work", mode="ok", after=[first.id])
        await client.group(
            [JobSpec(name="work", kwargs={"mode": "ok"})] * 2,
            then=JobSpec(name="work", kwargs={"mode": "ok"}),
        )
        slow = await client.enqueue("work", mode="slow")
        async with pool.running(client=client):
            assert await client.wait(first.id, timeout=10) == "ok"
            await wait_until(lambda: slow.id in ran, within=10)
            await client.abort(slow.id)
            await wait_until(lambda: _dead_one(client), within=10)
            await client.admin.pause("work")
            await client.admin.resume("work")
            for kind in (BEAT, REAP, TICK):  # heartbeats, a reap and the scheduler's promotes
                await rounds(pool, kind)
        await client.admin.retry("dead")
        await client.admin.delete("retry")
        await client.admin.clear_queue("work")
        await client.admin.delete("dead")


async def _dead_one(client: Client) -> bool:
    return (await client.admin.job_set_sizes())["dead"] > 0


@pytest.mark.timeout(60)
async def test_every_key_a_script_touches_is_in_the_namespace_slot(
    fresh_redis_server: RedisServer, namespace: str
) -> None:
    monitor = Monitor(fresh_redis_server.port)
    monitor.start()
    assert monitor.ready.wait(5)
    try:
        await _workload(fresh_redis_server.url, namespace)
        # MONITOR streams in the order Redis ran: once a script after the workload shows,
        # every command of the workload has too.
        mark = ("{" + namespace + "}:end-of-workload").encode()
        with fresh_redis_server.client() as r:
            r.eval("return redis.call('EXISTS', KEYS[1])", 1, mark)
        await wait_until(lambda: any(mark in args for args in monitor.from_lua))
    finally:
        monitor.close()
    commands = monitor.from_lua
    assert len(commands) > 50
    slot = _slot(namespace)
    seen: dict[str, int] = {}
    with fresh_redis_server.client() as r:
        for args in commands:
            name = args[0].decode().upper()
            try:
                keys: Any = r.command_getkeys(*args)
            except redis.ResponseError:  # a command without keys (PUBLISH, TIME...)
                keys = []
            for key in keys:
                key = key if isinstance(key, bytes) else key.encode()
                assert key_slot(key) == slot, (name, key)
                kind = key.decode().split(":", 2)[1] if b":" in key else key.decode()
                seen[kind] = seen.get(kind, 0) + 1
    # The workload reached the main kinds of keys.
    assert {"job", "queue", "running", "scheduled", "retry", "dead", "pools"} <= set(seen), seen
