"""The Lua of protocol v4 in the two forms Redis runs: scripts and one function library.

A *script* (``EVAL``/``EVALSHA``, every Redis from 6.2) is the key prelude rendered by
:mod:`rota.protocol.keys`, the shared helpers it includes (the ``_*.lua`` files, one per
concern, named on each file's first line and checked by :mod:`rota.protocol.includes`),
the line that starts a call (``enter(KEYS[1])``, or ``set_prefix(KEYS[1])`` for a script
without counters) and the script's own file. Redis runs all of it on every call, so
every call defines the prelude's and those helpers' functions again: the fewer, the less.

The *library* (``FUNCTION LOAD``, Redis 7) holds the prelude and all the helpers once and
registers each script's file as one function, so that a call runs only its own code. A
function's callback receives ``KEYS`` and ``ARGV`` as parameters instead of globals;
naming the parameters so lets the same file serve both forms. The library's name and its
functions' names carry a digest of its code, so processes of two rota versions can share
a server, each calling its own.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Final

from rota.protocol.includes import Plan, plan
from rota.protocol.keys import lua_prelude

__all__ = [
    "ALLOW_OOM",
    "CROSS_SLOT",
    "NO_WRITES",
    "SCRIPT_NAMES",
    "Library",
    "helpers",
    "library",
    "script_source",
]

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
    "register",
    "pause",
    "finish_kept",
    "forget_names",
    "repair",
    "fair_keys",
    "edit",
    "operate",
    "rebalance",
    "backlog",
    "run_times",
    "look",
)

#: Scripts registered once more under another name, with other flags: ``finish_kept``
#: is ``finish`` for outcomes that keep a result, which grow Redis's memory.
ALIASES: Final = {"finish_kept": "finish"}

#: What Redis may run while it is over ``maxmemory`` (the ``allow-oom`` flag of Redis 7
#: functions): every script that moves, marks or deletes jobs and so does not grow
#: memory (or by a few bytes), so that pools keep draining a full Redis, which frees it.
#: Not the enqueues, a finish that keeps a result, nor an edit of args: they grow it.
ALLOW_OOM: Final = frozenset(SCRIPT_NAMES) - {
    "enqueue",
    "enqueue_batch",
    "finish_kept",
    "edit",
    "backlog",
    "run_times",
    "look",
}
#: What writes nothing (the ``no-writes`` flag): ``FCALL_RO`` runs it, on a replica too,
#: and a user who may run no script that writes (the ``web`` role) may be granted it.
#: Redis runs such a script when it is over ``maxmemory`` without ``allow-oom``.
NO_WRITES: Final = frozenset({"backlog", "run_times", "look"})
#: What reads keys of every slot its cluster node serves (the ``allow-cross-slot-keys``
#: flag, Redis 7): the idle shards' look of a pool on one node (rota.worker.idle).
CROSS_SLOT: Final = frozenset({"look"})

_ENTER: Final = "enter(KEYS[1])\n"
# A script without counters (no _counts) only sets the prefix: in a script, whose locals
# start afresh on each call, that is all enter() does.
_PREFIX: Final = "set_prefix(KEYS[1])\n"

# Redis 6.2 reads no flags: over maxmemory it refuses a script whose FIRST write may grow
# memory, and lets the rest of a script that wrote already run on. So a script that may
# run then writes first what cannot grow memory: deleting a key that never exists (a
# no-op that Redis neither replicates nor persists).
_FIRST_WRITE: Final = "redis.call('DEL', K_NEVER)\n"


def _read(name: str) -> str:
    return files("rota.protocol").joinpath("lua", name).read_text(encoding="utf-8")


@cache
def helpers() -> Plan:
    """The helpers of each Lua file (``needs["wait"]`` is ``("_base",)``) in the order
    they are joined, checked when first asked (:func:`rota.protocol.includes.plan`)."""
    lua = files("rota.protocol").joinpath("lua")
    names = sorted(p.name.removesuffix(".lua") for p in lua.iterdir() if p.name.endswith(".lua"))
    return plan({name: _read(name + ".lua") for name in names})


def _shared(names: tuple[str, ...]) -> str:
    """The prelude and the helpers ``names``: what a script or the library starts with."""
    return lua_prelude() + "".join(_read(name + ".lua") + "\n" for name in names)


@cache
def script_source(name: str, *, flagged: bool = False) -> str:
    """The full text of the script ``name`` (one of :data:`SCRIPT_NAMES`); ``flagged``
    starts it with the shebang line that gives Redis 7 its flags, as the library does."""
    if name not in SCRIPT_NAMES:
        raise KeyError(name)
    shebang = ""
    first = ""
    if flagged:
        shebang = "#!lua\n"
        if name in ALLOW_OOM or name in NO_WRITES:
            flags = "allow-oom" if name in ALLOW_OOM else "no-writes"
            if name in CROSS_SLOT:
                flags += ",allow-cross-slot-keys"
            shebang = f"#!lua flags={flags}\n"
    elif name in ALLOW_OOM:
        first = _FIRST_WRITE
    own = ALIASES.get(name, name)
    needs = helpers().needs[own]
    start = _ENTER if "_counts" in needs else _PREFIX
    return shebang + _shared(needs) + start + first + _read(own + ".lua")


@dataclass(frozen=True)
class Library:
    """The function library: its name, its code, and the function of each script."""

    name: str
    code: str

    def function(self, script: str) -> str:
        """The name of the function that runs ``script``."""
        return f"{self.name}_{script}"


@cache
def library() -> Library:
    shared = _shared(helpers().order)
    bodies = {name: _read(ALIASES.get(name, name) + ".lua") for name in SCRIPT_NAMES}
    digest = hashlib.sha1(usedforsecurity=False)
    for text in (shared, *(f"{n}\n{n in ALLOW_OOM}\n{b}" for n, b in bodies.items())):
        digest.update(text.encode())
    lib = Library(name="rota_" + digest.hexdigest()[:16], code="")
    parts = [f"#!lua name={lib.name}\n", shared]
    for name, body in bodies.items():
        flags = "{'allow-oom'}" if name in ALLOW_OOM else "{}"
        if name in NO_WRITES:
            flags = "{'no-writes'}"
        if name in CROSS_SLOT:
            flags = "{'no-writes', 'allow-cross-slot-keys'}"
        parts.append(
            f"redis.register_function{{function_name='{lib.function(name)}',"
            f" flags={flags}, callback=function(KEYS, ARGV)\n"
            f"{_ENTER}{body.rstrip()}\nend}}\n"
        )
    return Library(name=lib.name, code="".join(parts))
