"""The suffixes of every key kind after a shard's prefix, and the Lua prelude rendered
from them: the Lua scripts never spell a key (see :mod:`rota.protocol.keys`).
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "FAIR_MARK",
    "FIXED_KEYS",
    "LUA_KEYS",
    "PAIR_KEYS",
    "PARAM_KEYS",
    "fixed_key",
    "lua_prelude",
    "validate_namespace",
]

_NAMESPACE_RE: Final = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")

#: Key kinds that take an argument (job id, job name, ...) -> suffix after the prefix.
PARAM_KEYS: Final[dict[str, str]] = {
    "job": "job:",
    "queue": "queue:",
    "running": "running:",
    "unique": "unique:",
    "debounce": "debounce:",
    "pool": "pool:",
    "stats_bucket": "stats:",
    "wake": "wake:",
    "joblog": "log:",
    "done": "done:",
    "cron": "cron:",
    "children": "children:",
    "group": "group:",
    "group_results": "gresults:",
    "group_members": "gmembers:",
    "quarantine": "quarantine:",
    # Fair keys (lua/_fair.lua), per job name:
    "fair_keys": "fkeys:",  # zset: key -> virtual time, the keys with jobs ready to take
    "fair_rest": "frest:",  # zset: key -> when (ms) a key resting for its rate is due
    "fair_backlog": "fbacklog:",  # zset: key -> its queued jobs (the top keys' read)
    "fair": "fair:",  # hash: 'n' keyed queued jobs, 'vt' the plain list's virtual time,
    # 't/<key>' when a rate-limited key's next job may start
    "fair_set": "fset:",  # hash of settings: 'w/<key>' weight, 'l/<key>' limit, 'l*' the
    # default limit, 'r/<key>' rate '<count>/<period ms>', 'p/<key>' paused
}

#: Key kinds of a job name and a second part (a fair key, a slot) -> their infix:
#: ``<prefix><infix><name>/<key>``
#: ('/' is no character of a job name, so the pair reads back one way only).
PAIR_KEYS: Final[dict[str, str]] = {
    "fair_queue": "fqueue:",  # list: the queued ids of one key, the next at the tail
    "fair_running": "frun:",  # zset: lease deadline (ms) -> id, the key's running jobs
    # and of a job name and a ten-minute slot (YYYYMMDDHHM0, UTC; protocol/run_times.py):
    "run_times": "runtimes:",  # hash: bucket index -> finished attempts (lua/_runtimes.lua)
}

#: Key kinds without an argument -> full suffix after the prefix.
FIXED_KEYS: Final[dict[str, str]] = {
    "scheduled": "scheduled",
    "retry": "retry",
    "dead": "dead",
    "complete": "complete",
    "waiting": "waiting",
    "names": "names",
    "paused": "paused",
    "ready": "ready",
    "leased": "leased",
    "limits": "limits",
    "rates": "rates",
    "rate_tat": "ratetat",
    "priorities": "priorities",
    "pools": "pools",
    "beats": "beats",
    "stats": "stats",
    "sched_wake": "schedwake",
    "abort": "abort",
    "never": "never",
    "idle": "idle",  # job name -> when it was first seen with nothing (forget_names)
    "expiring": "expiring",  # job id -> its expiry (ms), for jobs enqueued with one
    "shards": "shards",  # the shard count record (rota.protocol.reshard), read by enqueues
    # A namespace over several shards (lua/rebalance.lua): in shard 0, job name -> its
    # whole concurrency limit, and the lock of the pool that places it and its counter;
    # in every shard, the highest lock number that read it (a fence for older holders).
    "limit_totals": "limittotals",
    "rate_totals": "ratetotals",
    "rebalancer": "rebalancer",
    "rebalance_count": "rebalancecount",
    "rebalance_fence": "rebalancefence",
}

LUA_KEYS: Final[dict[str, str]] = {**PARAM_KEYS, **PAIR_KEYS, **FIXED_KEYS}

#: What the ready set holds, beside a job name, while the name's fair keys may have jobs
#: to take: the name after this mark (no character of a job name), so that a fetch
#: learns it from the set it reads anyway.
FAIR_MARK: Final = "/"


def fixed_key(prefix: str, kind: str) -> str:
    """The key of a kind without argument (``"limits"``, a key of :data:`FIXED_KEYS`)
    under a shard's ``prefix``: for code that holds a script scope, not a Keys."""
    return prefix + FIXED_KEYS[kind]


def validate_namespace(namespace: str) -> str:
    """Return ``namespace`` if it is a usable name, else raise ``ValueError``.

    Braces, colons and spaces would break the hash tag or the key grammar.
    """
    if not _NAMESPACE_RE.match(namespace):
        raise ValueError(
            f"invalid namespace {namespace!r}:"
            " use 1-64 characters of letters, digits, '_', '-', '.'"
        )
    return namespace


def lua_prelude() -> str:
    """Lua that builds key names from the namespace prefix.

    ``set_prefix(p)`` sets ``P`` (the prefix) and the fixed names ``K_<KIND>``;
    ``key_<kind>(x)`` builds the others. The names are locals assigned per call rather
    than constants, so the same text serves a script (which starts every call afresh)
    and a function library (whose locals outlive a call, and which may serve several
    namespaces).
    """
    fixed = [f"K_{kind.upper()}" for kind in FIXED_KEYS]
    lines = ["local P", "local " + ", ".join(fixed)]
    for kind, suffix in PARAM_KEYS.items():
        lines.append(f"local function key_{kind}(x) return P .. '{suffix}' .. x end")
    for kind, suffix in PAIR_KEYS.items():
        lines.append(f"local function key_{kind}(x, y) return P .. '{suffix}' .. x .. '/' .. y end")
    lines.append(f"local FAIR_MARK = '{FAIR_MARK}'")
    lines += ["local function set_prefix(p)", "  if p == P then return end", "  P = p"]
    for kind, suffix in FIXED_KEYS.items():
        lines.append(f"  K_{kind.upper()} = P .. '{suffix}'")
    lines.append("end")
    return "\n".join(lines) + "\n"
