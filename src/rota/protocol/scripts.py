"""Calling the Lua of protocol v4: by ``FCALL`` of the function library, else ``EVALSHA``.

Redis 7 keeps the library (:mod:`rota.protocol.render`) loaded once, so a call runs only
its script's code; a script called by ``EVALSHA`` defines every shared helper again on
each call (several µs of Redis CPU). So calls go by ``FCALL``. When the function is
missing (Redis restarted without persistence, ``FUNCTION FLUSH``) the library is loaded
again and the call repeated, as a script is on NOSCRIPT, so callers never see either
error. When a server has no functions (Redis 6.2, or ``FUNCTION``/``FCALL`` renamed
away) or refuses them (ACL), this process calls every script by ``EVALSHA`` from then on:
remembered per process, since one refusal says how the deployment is set up, and
``EVALSHA`` works on every server.

A connection is anything with ``await conn.execute_command(*args)`` that raises redis-py's
errors (a ``redis.asyncio.Redis``, or a :class:`rota.redis.conn.Conn`); :func:`call_many`
sends its calls with the ``execute_many`` of a Conn.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import cache
from typing import Any, Protocol

import structlog
from redis.asyncio import Redis
from redis.exceptions import NoPermissionError, NoScriptError, OutOfMemoryError, ResponseError

from rota.protocol.render import SCRIPT_NAMES, library, script_source

__all__ = [
    "SCRIPT_NAMES",
    "Arg",
    "Script",
    "call_many",
    "library_loaded",
    "load_all",
    "script",
    "use_functions",
    "uses_functions",
]

Arg = str | bytes | int | float

log = structlog.get_logger("rota.redis")


class Connection(Protocol):
    async def execute_command(self, *args: Any) -> Any: ...


class Batching(Connection, Protocol):
    async def execute_many(self, commands: Sequence[Sequence[Arg]]) -> list[Any]: ...


_functions = True  # False once a server refused the library: EVALSHA from then on
_flagged = False  # scripts carry their flags in a shebang line (Redis 7 without the library)


def use_functions(enabled: bool, *, flagged: bool = False) -> None:
    """Call by ``FCALL`` of the library (the default) or by ``EVALSHA`` of the scripts,
    which is what happens by itself after a server refuses functions. ``flagged``: the
    server is Redis 7 or newer, so scripts declare their flags (``allow-oom``) in a
    shebang line as the library's functions do; Redis 6.2 does not read that line."""
    global _functions, _flagged
    _functions = enabled
    _flagged = flagged and not enabled


def uses_functions() -> bool:
    """Whether calls go by ``FCALL`` (else ``EVALSHA``)."""
    return _functions


def _text(error: ResponseError) -> str:
    return str(error).removeprefix("ERR ")


def _refused(error: ResponseError) -> bool:
    """The server has no functions, or this user may not use them."""
    text = _text(error).lower()
    if isinstance(error, NoPermissionError):
        return "'fcall" in text or "'function" in text
    return text.startswith(("unknown command", "unknown subcommand"))


async def library_loaded(conn: Connection) -> bool:
    """Whether this version's library is loaded already. Its name carries the digest of
    its code, so a library of that name is this code."""
    try:
        reply = await conn.execute_command("FUNCTION", "LIST", "LIBRARYNAME", library().name)
    except ResponseError:
        return False  # no functions, or FUNCTION LIST refused: loading tells which
    return bool(reply)


async def load_library(conn: Connection) -> bool:
    """Load the function library unless it is loaded already; False, and ``EVALSHA``
    from then on in this process, when the server will not.

    Checking first lets a pool start on a Redis that is over ``maxmemory``, which
    refuses ``FUNCTION LOAD`` even of a library it holds; a library that is missing
    there cannot be loaded, so this process calls scripts by ``EVALSHA`` instead.
    """
    if await library_loaded(conn):
        return True
    try:
        await conn.execute_command("FUNCTION", "LOAD", "REPLACE", library().code)
    except ResponseError as error:
        full = isinstance(error, OutOfMemoryError)
        if not full and not _refused(error):  # e.g. a busy server: not a verdict on functions
            raise
        log.warning(
            "function library not loaded: scripts are called by EVALSHA in this process",
            library=library().name,
            cause="Redis is out of memory" if full else "functions refused",
            error=str(error),
        )
        # Out of memory, the server knows functions: it is Redis 7 and reads flags.
        use_functions(False, flagged=full)
        return False
    return True


def _remedy(error: ResponseError, script: Script) -> str | None:
    """What makes a failed call possible: ``"script"`` (load it), ``"library"`` (load
    it), ``"evalsha"`` (functions refused); None when the error is the call's own."""
    if isinstance(error, NoScriptError):
        return "script"
    if not _functions:
        return None
    if _text(error).startswith("Function not found"):
        return "library"
    return "evalsha" if _refused(error) else None


async def _mend(conn: Connection, remedy: str, script: Script) -> None:
    if remedy == "script":
        await conn.execute_command("SCRIPT", "LOAD", script.source)
    elif remedy == "library":
        await load_library(conn)
    else:
        use_functions(False)


class Script:
    """One script: its source and SHA1 for ``EVALSHA``, and its function in the library."""

    __slots__ = ("_flagged", "_plain", "function", "name")

    def __init__(self, name: str, source: str, function: str, flagged: str = "") -> None:
        self.name = name
        self._plain = (source, hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest())
        flagged = flagged or source
        self._flagged = (flagged, hashlib.sha1(flagged.encode(), usedforsecurity=False).hexdigest())
        self.function = function

    @property
    def source(self) -> str:
        """The text ``EVALSHA`` runs: with its flags' shebang line where the server
        reads it."""
        return (self._flagged if _flagged else self._plain)[0]

    @property
    def sha(self) -> str:
        return (self._flagged if _flagged else self._plain)[1]

    def command(self, prefix: str, args: Sequence[Arg]) -> tuple[Arg, ...]:
        """The raw command of one call (``FCALL`` or ``EVALSHA``), for callers that send
        it in a pipeline of their own; an error reply is theirs to mend by calling the
        script again."""
        if _functions:
            return ("FCALL", self.function, 1, prefix, *args)
        return ("EVALSHA", self.sha, 1, prefix, *args)

    async def __call__(self, conn: Connection, prefix: str, args: Sequence[Arg]) -> Any:
        # At most three mends: the function missing (load the library), functions refused
        # (EVALSHA), then the script missing from the script cache (load it).
        for attempt in range(4):
            try:
                return await conn.execute_command(*self.command(prefix, args))
            except ResponseError as error:
                remedy = _remedy(error, self)
                if remedy is None or attempt == 3:
                    raise
                await _mend(conn, remedy, self)
        raise AssertionError("unreachable")


@cache
def script(name: str) -> Script:
    """The script called ``name`` (one of :data:`SCRIPT_NAMES`)."""
    return Script(
        name, script_source(name), library().function(name), script_source(name, flagged=True)
    )


async def load_all(redis: Redis) -> None:
    """Load the library (or, without functions, every script in one pipeline), so that
    the first calls need no second round trip."""
    if _functions and await load_library(redis):
        return
    async with redis.pipeline(transaction=False) as pipe:
        for name in SCRIPT_NAMES:
            pipe.script_load(script(name).source)
        await pipe.execute()


async def call_many(
    conn: Batching,
    prefix: str,
    calls: Sequence[tuple[Script, Sequence[Arg]]],
    *,
    raise_on_error: bool = True,
) -> list[Any]:
    """Run many script calls in one pipeline (one round trip), in order.

    Calls that found their function or script missing, or functions refused, are run
    again once that is mended; any other error is raised after the whole pipeline ran
    (or, with ``raise_on_error=False``, returned in the call's place).
    """
    results: list[Any] = [None] * len(calls)
    todo = list(range(len(calls)))
    for _ in range(3):
        answers = await conn.execute_many([calls[i][0].command(prefix, calls[i][1]) for i in todo])
        again: list[int] = []
        remedies: dict[tuple[str, str], Script] = {}
        for i, answer in zip(todo, answers, strict=True):
            results[i] = answer
            s = calls[i][0]
            remedy = _remedy(answer, s) if isinstance(answer, ResponseError) else None
            if remedy is not None:
                again.append(i)
                remedies[remedy, s.name if remedy == "script" else ""] = s
        for (remedy, _name), s in remedies.items():
            await _mend(conn, remedy, s)
        if not again:
            break
        todo = again
    for answer in results:
        if raise_on_error and isinstance(answer, Exception):
            raise answer
    return results
