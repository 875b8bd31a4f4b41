"""The Lua scripts of protocol v1, loaded once and called by SHA.

Each script is the key prelude rendered by :mod:`rota.protocol.keys`, the shared helpers
of ``lua/_common.lua`` and the script's own file. Calls go by ``EVALSHA``; when Redis
answers NOSCRIPT (it restarted, or its script cache was flushed) the script is loaded
again and the call repeated, so callers never see that error.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import cache
from importlib.resources import files
from typing import Any, Final

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.exceptions import NoScriptError

from rota.protocol.keys import lua_prelude

__all__ = ["SCRIPT_NAMES", "Script", "call_many", "load_all", "script"]

SCRIPT_NAMES: Final = (
    "enqueue",
    "enqueue_batch",
    "fetch",
    "finish",
    "promote",
    "move",
    "delete",
    "trim_dead",
    "heartbeat",
    "reap",
    "abort",
    "wait",
)

Arg = str | bytes | int | float


class Script:
    """One Lua script: its full source, its SHA1, and a call that survives NOSCRIPT."""

    __slots__ = ("name", "sha", "source")

    def __init__(self, name: str, source: str) -> None:
        self.name = name
        self.source = source
        self.sha = hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()

    async def __call__(self, redis: Redis, prefix: str, args: Sequence[Arg]) -> Any:
        try:
            return await redis.evalsha(self.sha, 1, prefix, *args)
        except NoScriptError:
            await redis.script_load(self.source)
            return await redis.evalsha(self.sha, 1, prefix, *args)

    def queue(self, pipe: Pipeline, prefix: str, args: Sequence[Arg]) -> None:
        """Add a call to ``pipe`` (see :func:`call_many`)."""
        pipe.evalsha(self.sha, 1, prefix, *args)


def _read(name: str) -> str:
    return files("rota.protocol").joinpath("lua", name).read_text(encoding="utf-8")


@cache
def script(name: str) -> Script:
    """The script called ``name`` (one of :data:`SCRIPT_NAMES`)."""
    if name not in SCRIPT_NAMES:
        raise KeyError(name)
    source = lua_prelude() + _read("_common.lua") + "\n" + _read(name + ".lua")
    return Script(name, source)


async def load_all(redis: Redis) -> None:
    """Load every script, so the first calls need no NOSCRIPT round trip."""
    pipe = redis.pipeline(transaction=False)
    for name in SCRIPT_NAMES:
        pipe.script_load(script(name).source)
    await pipe.execute()


async def call_many(
    redis: Redis, prefix: str, calls: Sequence[tuple[Script, Sequence[Arg]]]
) -> list[Any]:
    """Run many script calls in one pipeline (one round trip), in order.

    Calls that found their script missing are run again after loading it; any other
    error is raised after the whole pipeline ran.
    """
    results: list[Any] = [None] * len(calls)
    todo = list(range(len(calls)))
    for _ in range(2):
        pipe = redis.pipeline(transaction=False)
        for i in todo:
            s, args = calls[i]
            s.queue(pipe, prefix, args)
        answers = await pipe.execute(raise_on_error=False)
        missing = []
        for i, answer in zip(todo, answers, strict=True):
            if isinstance(answer, NoScriptError):
                missing.append(i)
            results[i] = answer
        if not missing:
            break
        for s in {calls[i][0].name: calls[i][0] for i in missing}.values():
            await redis.script_load(s.source)
        todo = missing
    for answer in results:
        if isinstance(answer, Exception):
            raise answer
    return results
