"""A bounded scan of one shard's job set, matching each job by its id and name or by its
content too: what :meth:`rota.client.admin.Admin.search` runs on every shard.

A search has no index to read (the scripts write none), so it reads the set in its order
from a position, a chunk of :data:`SEARCH_CHUNK` ids a round trip and, for those, one
``HMGET`` each of the fields it matches, pipelined in a second round trip; it stops after
``scan`` jobs or a time ``budget`` and says how far it read, so that a search that stopped
says so rather than "none", and a later one goes on from there. Never ``KEYS`` or ``SCAN``.

What it matches (:data:`Fields`): ``"id"``, the id and the name (one short field a job,
the default: cheap); ``"content"``, those and the args (positional and keyword, as their
JSON text), the error (type and message), the reason and the result: up to the size of
the records, which a set of large results makes many times the reads.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Final, Literal, get_args

from rota.protocol.bounds import Bound, checked
from rota.protocol.job import reply_text
from rota.protocol.keys import Keys
from rota.wire.conn import Conn, score_pairs

__all__ = [
    "CONTENT_FIELDS",
    "JOBS",
    "NEWEST_FIRST",
    "POSITION",
    "SEARCHED_SETS",
    "SEARCH_CHUNK",
    "SEARCH_LIMIT",
    "Fields",
    "SearchedSet",
    "checked_scan",
    "matches",
    "scan_set",
    "scored",
    "shard_position",
]

#: A search reads at most this many jobs of a set by default (the dead set keeps 10,000
#: by default, the complete set 100,000), the records of :data:`SEARCH_CHUNK` a round trip.
SEARCH_LIMIT: Final = 50_000
SEARCH_CHUNK: Final = 2_000
#: What a search matches: the id and name only, or the job's content too.
Fields = Literal["id", "content"]
#: The sets a search reads: the four job sets and the kept complete jobs.
SearchedSet = Literal["scheduled", "retry", "dead", "waiting", "complete"]
SEARCHED_SETS: Final[tuple[SearchedSet, ...]] = get_args(SearchedSet)
#: The hash fields a content search reads and matches, beside the id.
CONTENT_FIELDS: Final = ("name", "args", "error", "reason", "result")
#: The sets read newest first, as their pages list them.
NEWEST_FIRST: Final = frozenset({"dead", "complete"})


#: A place in a set (``offset``, ``start``) and how many jobs a search reads or returns:
#: finite on purpose, so a wild number from the web or the CLI fails here, by name.
POSITION: Final = Bound(0, 10**9, whole=True)
JOBS: Final = Bound(1, 10**8, whole=True)
#: How many seconds a search may spend (``budget``): a scan is cut short, never left open.
_BUDGET: Final = Bound(0, 3600)


def checked_scan(fields: object, budget: float | None) -> None:
    """The checks :meth:`~rota.client.admin.Admin.search` and
    :meth:`~rota.client.admin.Admin.finished` share, in one place so
    the two scans take the same words and the same limits."""
    if fields not in ("id", "content"):
        raise ValueError(f"fields: 'id' or 'content', not {fields!r}")
    if budget is not None:
        checked("budget", budget, _BUDGET)


def scored(reply: Any) -> list[tuple[int, str]]:
    """A ``WITHSCORES`` reply (flat, or in pairs as RESP3 gives it) as (score, id), the
    scores whole (the sets hold times in ms); an error reply is raised (a key of
    another type)."""
    return [(_whole(s), reply_text(i)) for i, s in score_pairs(reply)]


#: The furthest a score is read as: a set's ``inf`` or 1e300 (written by hand) is a time
#: this far off, past the year 9999 in ms, so a page shows it as malformed, not an error.
_SCORE_MAX = 2**53


def _whole(score: Any) -> int:
    return int(max(-_SCORE_MAX, min(_SCORE_MAX, float(score))))


def matches(needle: str, job_id: str, values: Sequence[object]) -> bool:
    """Whether ``needle`` (lower case, stripped) is in the id or one of the text
    ``values`` (any case); an absent field (None) or an error reply matches nothing."""
    if needle in job_id.lower():
        return True
    return any(isinstance(v, bytes | str) and needle in reply_text(v).lower() for v in values)


async def scan_set(
    conn: Conn,
    keys: Keys,
    which: tuple[str, bool],
    text: str,
    scan: int,
    start: int,
    budget: float | None,
    fields: Fields = "id",
) -> tuple[list[tuple[int, float, str]], int, int]:
    """The jobs of a set (``which``: its key, and whether it is read newest first) that
    match ``text`` (see the module), each as its position in the set, its score and its
    id, how far
    it read and the set's size: from position ``start``, at most ``scan`` (at least one)
    jobs and, with a ``budget``, for about that many seconds. A job whose record is gone
    (it expired, or was read between its set and its hash) matches nothing."""
    scan = max(1, scan)
    z, desc = which
    needle = text.strip().lower()
    read = CONTENT_FIELDS if fields == "content" else ("name",)
    deadline = None if budget is None else time.monotonic() + budget
    matched: list[tuple[int, float, str]] = []
    searched = start = max(0, start)
    while True:
        last = searched + min(SEARCH_CHUNK, start + scan - searched) - 1
        size, raw = await conn.execute_many(
            [("ZCARD", z), ("ZREVRANGE" if desc else "ZRANGE", z, searched, last, "WITHSCORES")]
        )
        entries = scored(raw)
        ids = [i for _, i in entries]
        rows = await conn.execute_many([("HMGET", keys.job(i), *read) for i in ids])
        for at, ((score, job_id), row) in enumerate(zip(entries, rows, strict=True), searched):
            # A record that is gone answers only Nones: its id alone does not match.
            if isinstance(row, list) and row[0] is not None and matches(needle, job_id, row):
                matched.append((at, score, job_id))
        searched += len(ids)
        late = deadline is not None and time.monotonic() >= deadline
        if not ids or searched >= size or searched - start >= scan or late:
            break
    return matched, min(searched, size), size


def shard_position(start: int, sizes: Sequence[int]) -> int:
    """The place in each shard's set of a search that read ``start`` jobs over every
    shard, each up to the same place (as :meth:`Admin.search` reads them): the least
    place ``p`` where the shards' ``min(p, size)`` add up to ``start`` (or more)."""
    lo, hi = 0, max(sizes, default=0)
    while lo < hi:
        mid = (lo + hi) // 2
        if sum(min(mid, size) for size in sizes) >= start:
            hi = mid
        else:
            lo = mid + 1
    return lo
