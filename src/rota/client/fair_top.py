"""Fair keys, the read of the keys of job names worth an operator's look, one shard at
a time (:meth:`rota.client.fair.FairKeys.of` and ``of_names`` merge the
shards): the keys with the most jobs queued, found by ``fbacklog:<name>`` and counted by
their lists, and, where asked, the keys with jobs running and none queued, which no
ranking holds (a key's running set, ``frun:<name>/<key>``, is found only by its name):
they are found from the fair key of the jobs of the name's running set, at most
:data:`RUNNING_SCAN` of them. A key's running set holds its leases only while a limit
reaches it (a key without one would pay for it per job, see "Fair keys" in
docs/protocol.md): a key's running count is the larger of its size and the key's jobs
found among those of the name's running set (with ``running``; the scrape's read,
without it, counts the running sets only, so that its cost stays one read per name).

A key's backlog is the length of its list at its last push, which the fetch does not
lower while the key has jobs (that would cost a read and a write of every key it takes
from, per call): an upper bound of its jobs queued. So the read takes the keys of the
largest backlogs, :data:`CANDIDATES` times ``top`` of them, counts each one's list, and
ranks them by that; while a key it did not read may still hold more jobs than the
``top``-th it counted (its backlog says so), it reads the next ones, as many again as it
read, up to :data:`WIDEST` keys for the read of one name (the key pages, the CLI), and
up to :data:`SCRAPE_WIDEST` times ``top`` a name for the scrape's read of many (without
``running``), so that a scrape's cost stays bounded by its names and ``top`` whatever the
backlogs say: where more keys than that were drained since their last push, a key of more
jobs may go unlisted there until its next push.

Every read is a few round trips per shard whatever the number of names and keys: the
backlogs of every name in one pipeline, then the lists, settings and running counts of
every key found in one more (and the fair key of each running job read there too), then
the same of the keys found running only (and of the next keys of a name, rarely). What a
hand wrote in these keys that is no figure or no setting (a weight of NaN, a running set
that is a hash, a list that is none) reads as the default the fetch reads it as, and
the row names it in ``malformed``: a read never fails on it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Annotated, Any, Final

import msgspec
from msgspec import Meta

from rota.client.spec import FAIR_KEY_RE
from rota.protocol.bounds import FAIR
from rota.protocol.job import opt_int, reply_text
from rota.protocol.rate import Rate

if TYPE_CHECKING:
    from rota.client.shard import Shard

__all__ = [
    "CANDIDATES",
    "RUNNING_SCAN",
    "SCRAPE_WIDEST",
    "WIDEST",
    "FairKeyInfo",
    "merged",
    "ranked",
    "row_of",
    "setting",
    "settings_of",
]

#: Running jobs of a name read per shard to find the keys with jobs running and none
#: queued (the longest without a heartbeat first), and to count the running jobs of
#: keys that no limit reaches (they have no running set): a key none of whose jobs is
#: among them is not listed, and counts no more of them than are found there.
RUNNING_SCAN: Final = 1000
#: Keys read per name at first, in times ``top``, of the largest backlogs.
CANDIDATES: Final = 2
#: Keys read at most by the read of one name: past it, a key with more jobs than the
#: last listed may go unlisted while more than this many keys' backlogs (lengths at
#: their last push) exceed what their lists hold now.
WIDEST: Final = 8000
#: Keys read at most by the scrape's read, per name, in times ``top``.
SCRAPE_WIDEST: Final = 8


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
    """The ``top`` keys of each of ``names`` with the most jobs queued in ``shard``, and
    with ``running`` those found running with none queued, each with its figures and
    settings: two round trips, three where keys run with none queued (and one or two
    more for a name whose next keys may hold more)."""
    k = shard.keys
    scan = RUNNING_SCAN if running else 0  # (a scrape's read: the running sets only)
    span = CANDIDATES * top
    first = await shard.piped(
        lambda p: [
            *(p.zrevrange(k.fair_backlog(n), 0, span - 1, withscores=True) for n in names),
            *(p.zrange(k.running(n), 0, scan - 1) for n in names if scan),
        ],
        errors=False,  # a key of another type answers an error: read as empty
    )
    listed = {
        n: [(reply_text(key), float(score)) for key, score in _listed(rows)]
        for n, rows in zip(names, first, strict=False)
    }
    running_sets = zip(names, first[len(names) :], strict=False)  # none when not asked
    leased = [(n, reply_text(i)) for n, rows in running_sets for i in _listed(rows)]
    asked = [(n, key) for n in names for key, _ in listed[n]]
    second = await shard.piped(
        lambda p: [*_details(p, shard, asked), *(p.hget(k.job(i), "fair") for _, i in leased)],
        errors=False,
    )
    found = dict(zip(asked, _triples(second[: 3 * len(asked)]), strict=True))
    fair = zip(leased, second[3 * len(asked) :], strict=True)
    seen = Counter((n, reply_text(raw)) for (n, _), raw in fair if isinstance(raw, bytes))
    await _widen(shard, listed, found, top, WIDEST if running else SCRAPE_WIDEST * top)
    extra = sorted(p for p in seen.keys() - found.keys() if FAIR_KEY_RE.match(p[1]))
    if extra:
        third = await shard.piped(lambda p: _details(p, shard, extra), errors=False)
        found.update(zip(extra, _triples(third), strict=True))
    chosen = {(n, key) for n in names for key in _most(listed[n], n, found, top)}
    out: dict[str, list[FairKeyInfo]] = {n: [] for n in names}
    for (n, key), (length, kept, fields) in found.items():
        count = max(kept, seen[n, key]) if isinstance(kept, int) else kept
        if (n, key) in chosen or count != 0:  # not a key whose running jobs ended since
            queued = length if isinstance(length, int) else math.nan  # a list that is none
            out[n].append(row_of(key, queued, count, fields))
    return out


def _most(listed: list[tuple[str, float]], name: str, found: dict[Any, Any], top: int) -> list[str]:
    """The ``top`` keys of ``listed`` with the most jobs queued (a list that is none
    counts as one, so that it is shown), the most first."""
    sized = [(_length(found[name, key][0]), key) for key, _ in listed]
    return [key for length, key in sorted(sized, key=lambda x: (-x[0], x[1])) if length][:top]


def _length(reply: Any) -> int:
    return reply if isinstance(reply, int) else 1


async def _widen(
    shard: Shard,
    listed: dict[str, list[tuple[str, float]]],
    found: dict[Any, Any],
    top: int,
    widest: int,
) -> None:
    """Read the next keys of each name, as many again as were read, while one of them
    may hold more jobs than the ``top``-th counted so far (its backlog, the length of its
    list at its last push, exceeds that count), up to ``widest`` keys a name."""
    k = shard.keys
    start = CANDIDATES * top
    while start < widest:
        names = [
            n for n, rows in listed.items() if len(rows) == start and _open(n, rows, found, top)
        ]
        if not names:
            return
        rows = await shard.piped(partial(_backlogs, keys=k, names=names, at=start), errors=False)
        new = []
        for n, reply in zip(names, rows, strict=True):
            more = [(reply_text(key), float(score)) for key, score in _listed(reply)]
            listed[n] += more
            new += [(n, key) for key, _ in more]
        details = await shard.piped(partial(_details, shard=shard, pairs=new), errors=False)
        found.update(zip(new, _triples(details), strict=True))
        start *= 2


def _backlogs(pipe: Any, keys: Any, names: list[str], at: int) -> list[Any]:
    """The next keys of each of ``names`` by backlog, as many as were read (``at``)."""
    return [pipe.zrevrange(keys.fair_backlog(n), at, 2 * at - 1, withscores=True) for n in names]


def _open(name: str, rows: list[tuple[str, float]], found: dict[Any, Any], top: int) -> bool:
    """Whether a key past ``rows`` may hold more jobs than the ``top``-th counted: its
    backlog is at most the last one read, and at least the length of its list."""
    lengths = sorted((_length(found[name, key][0]) for key, _ in rows), reverse=True)
    return len(lengths) < top or lengths[top - 1] < rows[-1][1]


def _listed(reply: Any) -> list[Any]:
    """A read of a sorted set: an error reply (a key of another type) reads as none."""
    return reply if isinstance(reply, list) else []


def _details(pipe: Any, shard: Shard, pairs: Sequence[tuple[str, str]]) -> list[Any]:
    """The jobs queued, the running count and the settings of each (name, key): three
    commands a key."""
    k = shard.keys
    return [
        (
            pipe.llen(k.fair_queue(n, key)),
            pipe.zcard(k.fair_running(n, key)),
            settings_of(pipe, shard, n, key),
        )
        for n, key in pairs
    ]


def settings_of(pipe: Any, shard: Shard, name: str, key: str) -> Any:
    """The read of a key's settings that :func:`row_of` takes: one ``HMGET``."""
    return pipe.hmget(
        shard.keys.fair_set(name), f"w/{key}", f"l/{key}", "l*", f"r/{key}", f"p/{key}"
    )


def _triples(replies: list[Any]) -> list[tuple[Any, Any, Any]]:
    return list(zip(replies[0::3], replies[1::3], replies[2::3], strict=True))


def _count(score: Any) -> int | None:
    """A count of jobs; None for one that is none (a list written by hand as another
    type reads as NaN), so one key's garbage never fails the read of the others."""
    value = float(score)
    return int(value) if 0 <= value < math.inf else None


def row_of(key: str, score: Any, running: object, fields: Any) -> FairKeyInfo:
    """A key's row, its settings read as the fetch reads them (garbage: the default,
    named in ``malformed``). ``score``: its jobs queued, None when it has none."""
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
