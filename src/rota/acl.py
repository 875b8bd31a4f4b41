"""Least-privilege Redis ACL users for the parts of a rota installation.

Every key and channel of namespace ``ns`` starts with ``{ns}:`` (see
:mod:`rota.protocol.keys`), so one pattern, ``~{ns}:*``, gives a user one namespace and
nothing else. The roles differ in the commands they may run:

- ``worker``: a pool. It reads and writes its keys, blocks on wake lists (in a cluster,
  subscribes to their shard channels instead), subscribes to abort requests, loads the
  function library (``FUNCTION LOAD``) and calls it (``FCALL``; ``EVALSHA`` and
  ``SCRIPT LOAD`` where functions are missing). No command that is not
  about keys (``FLUSHALL``, ``CONFIG``, ``KEYS``...): ``-@dangerous`` takes those away,
  ``INFO`` is given back for the memory figures.
- ``web``: the web UI and ``rota status``, read-only: reads of the namespace's keys and
  ``INFO``; every write, and every script, is refused, so a retry or delete is answered
  "forbidden".
- ``web-operator``: the web UI (or the CLI) allowed to retry, delete, pause, abort and
  enqueue, to change limits, rates and the settings of fair keys: the reads of ``web``
  plus writes and the library's functions for those.
- ``producer``: a service that enqueues, in Python (the ``enqueue`` functions) or in
  another language (the plain ``MULTI; HSET; LPUSH; SADD; LPUSH; EXEC`` of
  docs/protocol.md, or ``FCALL`` of the enqueue function). On Redis 7 its writes are
  confined to the keys an enqueue writes (it reads its namespace, and may wait for a
  job's result), so it cannot touch the dead, retry and running
  sets, the pools' records, limits or pauses, and it can call no other function; the
  dead set takes only the ``ZADD`` of a child whose parent is dead already.

``FCALL|<function>`` names one function; the library's name carries the digest of its
code (:func:`rota.protocol.render.library`), so these lines change with a rota release
that changes the Lua: ``rota acl ROLE`` prints them for the installed version.
"""

from __future__ import annotations

from typing import Final

from rota.protocol.keys import Keys
from rota.protocol.render import library

__all__ = ["ROLES", "rules", "setuser"]

ROLES: Final = ("worker", "web", "web-operator", "producer")

# ``cluster|slots``: a client in a cluster asks a node which node owns its slots
# (rota.redis.topology); without it no role could locate a shard there.
_CONNECT: Final = (
    "+ping", "+client|setname", "+select", "+time", "+acl|whoami", "+cluster|slots",
)  # fmt: skip
_SCRIPTS: Final = ("+fcall", "+fcall_ro", "+evalsha", "+script|load", "+function|list")


# The keys an enqueue writes (see the Lua of enqueue and its helpers): the job, its
# queue (or its fair key's list and the name's fair-key sets) and wake list, the names,
# the scheduled and waiting sets, unique and debounce keys, counters, and a workflow's
# children and groups; ``never`` is the no-op write of Redis 6.2; the prefix itself is
# the one key a function call names (KEYS[1]).
def _producer_writes(k: Keys) -> list[str]:
    return [
        k.job("*"), k.queue("*"), k.wake("*"), k.names, k.ready, k.scheduled, k.sched_wake,
        k.waiting, k.unique("*"), k.debounce("*"), k.stats, k.stats_bucket("*"), k.children("*"),
        k.group("*"), k.group_members("*"), k.never, k.prefix,
        # a job with a fair key: its key's list, the name's keys and their backlog
        k.fair_queue("*", "*"), k.fair_keys("*"), k.fair_backlog("*"), k.fair("*"),
    ]  # fmt: skip


# A wake token pushed into an empty list rings the shard channel of the same name
# (docs/protocol.md, "Wake lists").
_SHARD_CHANNELS: Final = ("+spublish",)


# What the enqueue functions run inside (each command of a function is checked
# against the caller's rules too), and the plain-command enqueue.
_PRODUCER_COMMANDS: Final = (
    "+multi", "+exec", "+discard", "+hset", "+hsetnx", "+hget", "+hmget", "+hexists",
    "+hincrby", "+exists", "+get", "+set", "+expire", "+pexpire", "+llen", "+lpush",
    "+rpush", "+sadd", "+smembers", "+type", "+zadd", "+zscore", "+publish",
    *_SHARD_CHANNELS,
)  # fmt: skip


def rules(role: str, namespace: str = "rota", shards: int = 1) -> list[str]:
    """The ACL rules of ``role`` (one of :data:`ROLES`) for ``namespace`` over
    ``shards`` shards, as the arguments of ``ACL SETUSER`` after the user's name and
    password. Over several shards each key pattern is granted for shard 0 (``{ns}:``)
    and for the others together (``{ns~*}:``, see :meth:`Keys.other_shards`)."""
    keys = Keys(namespace)
    every = [keys, Keys.other_shards(namespace)] if shards > 1 else [keys]
    # Every key and channel of the namespace starts with one of these prefixes.
    prefixes = [k.prefix for k in every]
    where = [
        "resetkeys", *(f"~{p}*" for p in prefixes),
        "resetchannels", *(f"&{p}*" for p in prefixes),
    ]  # fmt: skip
    lib = library().name
    if role == "worker":
        return [
            *where, "-@all", "+@read", "+@write", "+@blocking", "-@dangerous", "+info",
            *_CONNECT, *_SCRIPTS, "+function|load", "+subscribe", "+unsubscribe",
            "+publish",  # a finish tells the clients waiting on a job (Client.wait)
            # In a cluster a pool waits on its wake channels, one subscription a node
            # (rota.worker.nodewaits); the scripts ring them (Redis 7: SPUBLISH).
            *_SHARD_CHANNELS, "+ssubscribe", "+sunsubscribe",
        ]  # fmt: skip
    if role == "web":
        return [
            *where, "-@all", "+@read", "-@dangerous", "+info", *_CONNECT,
            # the functions that write nothing: the jobs of every name at once, and the
            # run times of the names a scrape details
            f"+fcall_ro|{lib}_backlog", f"+fcall_ro|{lib}_run_times",
            # A logout ends its session (rota.web.sessions) and a login or logout goes
            # into the audit log (rota.web.audit): the only writes of this role.
            f"(%RW~{keys.web_sessions_ended} %RW~{keys.web_audit}"
            " +zadd +zremrangebyscore +pexpire +lpush +ltrim)",
        ]  # fmt: skip
    if role == "web-operator":
        functions = [
            f"+fcall|{lib}_{name}"
            for name in (
                "move",
                "delete",
                "pause",
                "abort",
                "enqueue",
                "enqueue_batch",
                "fair_keys",
                "edit",
                "operate",
                "rebalance",  # a limit or rate over several shards (rota.client.balance)
            )
        ] + [f"+fcall_ro|{lib}_backlog", f"+fcall_ro|{lib}_run_times"]
        return [
            *where, "-@all", "+@read", "+@write", "-@dangerous", "+info", *_CONNECT,
            *functions, "+subscribe", "+unsubscribe",
            "+publish",  # an abort tells the pool running the job
            *_SHARD_CHANNELS,  # a wake token pushed rings its channel
        ]  # fmt: skip
    if role == "producer":
        return [
            "resetkeys", *(f"%R~{p}*" for p in prefixes),
            *(f"%RW~{pattern}" for k in every for pattern in _producer_writes(k)),
            "resetchannels", *(f"&{p}*" for p in prefixes),
            "-@all", "+@read", "-@dangerous", *_CONNECT,
            f"+fcall|{lib}_enqueue", f"+fcall|{lib}_enqueue_batch", *_PRODUCER_COMMANDS,
            # Client.wait: marks the job as waited for, then listens on its done channel.
            f"+fcall|{lib}_wait", "+subscribe", "+unsubscribe",
            # A child enqueued after a dead parent is dead at once: ZADD to the dead set,
            # and nothing else there (no SET, EXPIRE... that would replace or drop it).
            "(" + " ".join(f"%RW~{k.dead}" for k in every) + " +zadd +zscore)",
            # The plain-command enqueue caps the wake lists; no other list is trimmed.
            "("
            + " ".join(f"%RW~{k.wake('*')} %RW~{k.sched_wake}" for k in every)
            + " +ltrim)",
        ]  # fmt: skip
    raise ValueError(f"unknown role {role!r}: one of {', '.join(ROLES)}")


def setuser(
    role: str, user: str, namespace: str = "rota", password: str = "<password>", shards: int = 1
) -> str:
    """The ``ACL SETUSER`` line that makes ``user`` a ``role`` of ``namespace`` over
    ``shards`` shards (for redis-cli or an ACL file; ``>password`` adds a password,
    ``#<sha256>`` a hash)."""
    words = ["ACL SETUSER", user, "reset", "on", f">{password}"]
    return " ".join([*words, *rules(role, namespace, shards)])
