"""Calling the Lua of protocol v4: by ``FCALL`` of the function library, else ``EVALSHA``.

Redis 7 keeps the library (:mod:`rota.protocol.render`) loaded once, so a call runs only
its script's code; a script called by ``EVALSHA`` defines every shared helper again on
each call (several µs of Redis CPU). So calls go by ``FCALL``. When the function is
missing (Redis restarted without persistence, ``FUNCTION FLUSH``) the library is loaded
again and the call repeated, as a script is on NOSCRIPT, so callers never see either
error. When a server has no functions (Redis 6.2, or ``FUNCTION``/``FCALL`` renamed
away) or refuses them (ACL), calls to that server go by ``EVALSHA`` from then on.

Which of the two is a :class:`ScriptMode`, one per server a process talks to (each
:class:`rota.Client` holds its own): one process may use a Redis 6.2 and a Redis 7, or
several namespaces under other users, and one server's refusal says nothing of another.

A connection is anything with ``await conn.execute_command(*args)`` that raises redis-py's
errors (a ``redis.asyncio.Redis``, or a :class:`rota.wire.conn.Conn`); :func:`call_many`
sends its calls with the ``execute_many`` of a Conn.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import cache
from typing import Any, Literal, Protocol

import structlog

from rota.protocol.render import SCRIPT_NAMES, library, script_source
from rota.wire.redispy import NoPermissionError, NoScriptError, OutOfMemoryError, Redis, ReplyError

__all__ = [
    "SCRIPT_NAMES",
    "Arg",
    "Script",
    "ScriptMode",
    "call_many",
    "library_loaded",
    "load_all",
    "script",
]

Arg = str | bytes | int | float
Remedy = Literal["script", "library", "evalsha"]

log = structlog.get_logger("rota.redis")


class Connection(Protocol):
    async def execute_command(self, *args: Any) -> Any: ...


class Batching(Connection, Protocol):
    async def execute_many(self, commands: Sequence[Sequence[Arg]]) -> list[Any]: ...


class ScriptMode:
    """How scripts are called on one server: by ``FCALL`` of the library (``functions``,
    the start), or by ``EVALSHA`` once that server refused functions. The one place
    that picks the command of a call (:meth:`command`) and mends a failed one.

    ``flagged``: calls go by ``EVALSHA`` to a Redis 7 or newer, so scripts declare
    their flags (``allow-oom``) in a shebang line as the library's functions do; Redis
    6.2 does not read that line.
    """

    __slots__ = ("flagged", "functions")
    functions: bool
    flagged: bool

    def __init__(self, functions: bool = True, *, flagged: bool = False) -> None:
        self.use_functions(functions, flagged=flagged)

    def __repr__(self) -> str:
        how = "FCALL" if self.functions else "EVALSHA, flagged" if self.flagged else "EVALSHA"
        return f"ScriptMode({how})"

    def use_functions(self, enabled: bool, *, flagged: bool = False) -> None:
        """Call by ``FCALL`` (``enabled``) or by ``EVALSHA``, which is what happens by
        itself after the server refuses functions."""
        self.functions = enabled
        self.flagged = flagged and not enabled

    def text(self, script: Script) -> tuple[str, str]:
        """The source ``EVALSHA`` runs on this server, and its SHA1."""
        return script.flagged_text if self.flagged else script.plain_text

    def command(self, script: Script, prefix: str, args: Sequence[Arg]) -> tuple[Arg, ...]:
        """The raw command of one call (``FCALL`` or ``EVALSHA``), for callers that send
        it in a pipeline of their own; an error reply is theirs to mend by calling the
        script again."""
        if self.functions:
            return ("FCALL", script.function, 1, prefix, *args)
        return ("EVALSHA", self.text(script)[1], 1, prefix, *args)

    def remedy(self, error: ReplyError) -> Remedy | None:
        """What makes a failed call possible: ``"script"`` (load it), ``"library"`` (load
        it), ``"evalsha"`` (functions refused); None when the error is the call's own."""
        if isinstance(error, NoScriptError):
            return "script"
        if not self.functions:
            return None
        if _text(error).startswith("Function not found"):
            return "library"
        return "evalsha" if _refused(error) else None

    async def mend(self, conn: Connection, remedy: Remedy, script: Script) -> None:
        if remedy == "script":
            await conn.execute_command("SCRIPT", "LOAD", self.text(script)[0])
        elif remedy == "library":
            await load_library(conn, self)
        else:
            self.use_functions(False)


def _text(error: ReplyError) -> str:
    return str(error).removeprefix("ERR ")


def _refused(error: ReplyError) -> bool:
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
    except ReplyError:
        return False  # no functions, or FUNCTION LIST refused: loading tells which
    return bool(reply)


async def load_library(conn: Connection, mode: ScriptMode) -> bool:
    """Load the function library unless it is loaded already; False, and ``EVALSHA``
    from then on in ``mode``, when the server will not.

    Checking first lets a pool start on a Redis that is over ``maxmemory``, which
    refuses ``FUNCTION LOAD`` even of a library it holds; a library that is missing
    there cannot be loaded, so scripts are called by ``EVALSHA`` instead.
    """
    if await library_loaded(conn):
        return True
    try:
        await conn.execute_command("FUNCTION", "LOAD", "REPLACE", library().code)
    except ReplyError as error:
        full = isinstance(error, OutOfMemoryError)
        if not full and not _refused(error):  # e.g. a busy server: not a verdict on functions
            raise
        log.warning(
            "function library not loaded: scripts are called by EVALSHA on this server",
            library=library().name,
            cause="Redis is out of memory" if full else "functions refused",
            error=str(error),
        )
        # Out of memory, the server knows functions: it is Redis 7 and reads flags.
        mode.use_functions(False, flagged=full)
        return False
    return True


class Script:
    """One script: its source and SHA1 for ``EVALSHA`` (plain, and with its flags'
    shebang line for Redis 7), and its function in the library. How a call goes is the
    caller's :class:`ScriptMode`."""

    __slots__ = ("flagged_text", "function", "name", "plain_text")

    def __init__(self, name: str, source: str, function: str, flagged: str = "") -> None:
        self.name = name
        self.plain_text = (source, hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest())
        flagged = flagged or source
        self.flagged_text = (
            flagged,
            hashlib.sha1(flagged.encode(), usedforsecurity=False).hexdigest(),
        )
        self.function = function

    @property
    def source(self) -> str:
        """The standalone text, which every server runs (other languages ``EVAL`` it)."""
        return self.plain_text[0]

    @property
    def sha(self) -> str:
        return self.plain_text[1]

    async def __call__(
        self, conn: Connection, prefix: str, args: Sequence[Arg], mode: ScriptMode
    ) -> Any:
        # At most three mends: the function missing (load the library), functions refused
        # (EVALSHA), then the script missing from the script cache (load it).
        for attempt in range(4):
            try:
                return await conn.execute_command(*mode.command(self, prefix, args))
            except ReplyError as error:
                remedy = mode.remedy(error)
                if remedy is None or attempt == 3:
                    raise
                await mode.mend(conn, remedy, self)
        raise AssertionError("unreachable")


@cache
def script(name: str) -> Script:
    """The script called ``name`` (one of :data:`SCRIPT_NAMES`)."""
    return Script(
        name, script_source(name), library().function(name), script_source(name, flagged=True)
    )


async def load_all(redis: Redis, mode: ScriptMode) -> None:
    """Load the library (or, without functions, every script in one pipeline), so that
    the first calls need no second round trip."""
    if mode.functions and await load_library(redis, mode):
        return
    async with redis.pipeline(transaction=False) as pipe:
        for name in SCRIPT_NAMES:
            pipe.script_load(mode.text(script(name))[0])
        await pipe.execute()


async def call_many(
    conn: Batching,
    prefix: str,
    calls: Sequence[tuple[Script, Sequence[Arg]]],
    mode: ScriptMode,
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
        commands = [mode.command(calls[i][0], prefix, calls[i][1]) for i in todo]
        answers = await conn.execute_many(commands)
        again: list[int] = []
        remedies: dict[tuple[Remedy, str], Script] = {}
        for i, answer in zip(todo, answers, strict=True):
            results[i] = answer
            s = calls[i][0]
            remedy = mode.remedy(answer) if isinstance(answer, ReplyError) else None
            if remedy is not None:
                again.append(i)
                remedies[remedy, s.name if remedy == "script" else ""] = s
        for (remedy, _name), s in remedies.items():
            await mode.mend(conn, remedy, s)
        if not again:
            break
        todo = again
    for answer in results:
        if raise_on_error and isinstance(answer, Exception):
            raise answer
    return results
