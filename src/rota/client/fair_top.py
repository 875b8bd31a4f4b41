"""Fair keys, the read of the keys of job names worth an operator's look, one shard at
a time (:meth:`rota.client.fair.FairKeys.of` and ``of_names`` merge the
shards): the keys with the largest backlog, ranked by ``fbacklog:<name>``, and, where
asked, the keys with jobs running and none queued, which no ranking holds (a key's
running set, ``frun:<name>/<key>``, is found only by its name): they are found from the
fair key of the jobs of the name's running set, at most :data:`RUNNING_SCAN` of them.
A key's running set holds its leases only while a limit reaches it (a key without one
would pay for it per job, see "Fair keys" in docs/protocol.md): a key's running count is
the larger of its size and the key's jobs found among those of the name's running set
(with ``running``; the scrape's read, without it, counts the running sets only, so
that its cost stays one read per name).

Every read is a few round trips per shard whatever the number of names and keys: the
rankings of every name in one pipeline, then the settings and running counts of every
key found in one more (and the fair key of each running job read there too), then the
settings of the keys found running only. What a hand wrote in these keys that is no
figure or no setting (a weight of NaN, a running set that is a hash, a backlog of
infinity) reads as the default the fetch reads it as, and the row names it in
``malformed``: a read never fails on it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Final

import msgspec
from msgspec import Meta

from rota.client.spec import FAIR_KEY_RE
from rota.protocol.bounds import FAIR
from rota.protocol.job import opt_int, reply_text
from rota.protocol.rate import Rate

if TYPE_CHECKING:
    from rota.client.shard import Shard

__all__ = ["RUNNING_SCAN", "FairKeyInfo", "merged", "ranked", "row_of", "setting", "settings_of"]

#: Running jobs of a name read per shard to find the keys with jobs running and none
#: queued (the longest without a heartbeat first), and to count the running jobs of
#: keys that no limit reaches (they have no running set): a key none of whose jobs is
#: among them is not listed, and counts no more of them than are found there.
RUNNING_SCAN: Final = 1000


class FairKeyInfo(msgspec.Struct, frozen=True):
    """Figures and settings of one fair key of a job name: ``queued`` and ``running``
    jobs, its concurrency ``limit`` (its own, else the name's default; None: none),
    ``weight`` (1 when not set), whether it is ``paused``, and its ``rate`` as written
    (``"10/s"``; None: none). ``malformed``: what was written there that is no figure or
    setting (``"weight"``, ``"limit"``, ``"rate"``, ``"queued"``, ``"running"``), read as
    the default, as the fetch reads it."""

    key: str
    queued: int
    running: int
    limit: int | None
    weight: int
    paused: bool
    rate: str | None = None
    malformed: Annotated[
        list[str], Meta(description="figures or settings written wrong, read as the default")
    ] = msgspec.field(default_factory=list)


def setting(value: bytes | str | None, bound: str) -> int | None:
    """A stored whole-number setting of a key (``"weight"``, ``"limit"``) as the fetch
    reads it: absent, garbage or outside ``FAIR[bound]`` reads as None (not set)."""
    number = opt_int(value)
    lo, hi = FAIR[bound].lo, FAIR[bound].hi
    return number if number is not None and lo <= number <= hi else None


def merged(a: FairKeyInfo, b: FairKeyInfo) -> FairKeyInfo:
    """One key's rows of two shards: its figures added up, the settings of the shard
    its key names (the one with more jobs, else the first)."""
    main = a if (a.queued, a.running) >= (b.queued, b.running) else b
    bad = sorted({*a.malformed, *b.malformed})
    return msgspec.structs.replace(
        main, queued=a.queued + b.queued, running=a.running + b.running, malformed=bad
    )


async def ranked(
    shard: Shard, names: Sequence[str], top: int, running: bool
) -> dict[str, list[FairKeyInfo]]:
    """The ``top`` keys of each of ``names`` with the largest backlog in ``shard``, and
    with ``running`` those found running with none queued, each with its figures and
    settings: two round trips, three where keys run with none queued."""
    k = shard.keys
    scan = RUNNING_SCAN if running else 0  # (a scrape's read: the running sets only)
    first = await shard.piped(
        lambda p: [
            *(p.zrevrange(k.fair_backlog(n), 0, top - 1, withscores=True) for n in names),
            *(p.zrange(k.running(n), 0, scan - 1) for n in names if scan),
        ],
        errors=False,  # a key of another type answers an error: read as empty
    )
    queued = {
        n: {reply_text(key): score for key, score in _listed(rows)}
        for n, rows in zip(names, first, strict=False)
    }
    running_sets = zip(names, first[len(names) :], strict=False)  # none when not asked
    leased = [(n, reply_text(i)) for n, rows in running_sets for i in _listed(rows)]
    asked = [(n, key) for n in names for key in queued[n]]
    second = await shard.piped(
        lambda p: [*_details(p, shard, asked), *(p.hget(k.job(i), "fair") for _, i in leased)],
        errors=False,
    )
    found = dict(zip(asked, _pairs(second[: 2 * len(asked)]), strict=True))
    fair = zip(leased, second[2 * len(asked) :], strict=True)
    seen = Counter((n, reply_text(raw)) for (n, _), raw in fair if isinstance(raw, bytes))
    extra = sorted(p for p in seen.keys() - found.keys() if FAIR_KEY_RE.match(p[1]))
    if extra:
        third = await shard.piped(lambda p: _details(p, shard, extra), errors=False)
        found.update(zip(extra, _pairs(third), strict=True))
    out: dict[str, list[FairKeyInfo]] = {n: [] for n in names}
    for (n, key), (kept, fields) in found.items():
        count = max(kept, seen[n, key]) if isinstance(kept, int) else kept
        if key in queued[n] or count != 0:  # not a key whose running jobs ended since
            out[n].append(row_of(key, queued[n].get(key), count, fields))
    return out


def _listed(reply: Any) -> list[Any]:
    """A read of a sorted set: an error reply (a key of another type) reads as none."""
    return reply if isinstance(reply, list) else []


def _details(pipe: Any, shard: Shard, pairs: Sequence[tuple[str, str]]) -> list[Any]:
    """The running count and the settings of each (name, key): two commands a key."""
    k = shard.keys
    return [
        (pipe.zcard(k.fair_running(n, key)), settings_of(pipe, shard, n, key)) for n, key in pairs
    ]


def settings_of(pipe: Any, shard: Shard, name: str, key: str) -> Any:
    """The read of a key's settings that :func:`row_of` takes: one ``HMGET``."""
    return pipe.hmget(
        shard.keys.fair_set(name), f"w/{key}", f"l/{key}", "l*", f"r/{key}", f"p/{key}"
    )


def _pairs(replies: list[Any]) -> list[tuple[Any, Any]]:
    return list(zip(replies[0::2], replies[1::2], strict=True))


def _count(score: Any) -> int | None:
    """A backlog score as a count of jobs; None for one written by hand that is none
    (negative, infinite, NaN), so one key's garbage never fails the read of the others."""
    value = float(score)
    return int(value) if 0 <= value < math.inf else None


def row_of(key: str, score: Any, running: object, fields: Any) -> FairKeyInfo:
    """A key's row, its settings read as the fetch reads them (garbage: the default,
    named in ``malformed``). ``score``: its backlog, None when it has none."""
    good = isinstance(fields, list)  # an error reply: the settings are no hash
    w, own, default, rate, paused = fields if good else [None] * 5
    bad = [] if good else ["weight", "limit", "rate"]
    queued = 0 if score is None else _count(score)
    if queued is None:
        bad.append("queued")
    if not isinstance(running, int):
        bad.append("running")
    weight, limit = setting(w, "weight"), setting(own, "limit")
    stored = Rate.from_stored(reply_text(rate)) if rate else None
    bad += [
        f for f, raw, read in (("weight", w, weight), ("limit", own, limit)) if raw and not read
    ]
    if rate and stored is None:
        bad.append("rate")
    return FairKeyInfo(
        key,
        queued or 0,
        running if isinstance(running, int) else 0,
        setting(default, "limit") if limit is None else limit,
        weight or 1,
        paused is not None,
        None if stored is None else str(stored),
        sorted(set(bad)),
    )
