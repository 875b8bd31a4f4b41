"""The kept complete jobs, newest (or oldest) first, over every shard: what the finished
jobs view of the web and ``rota complete list`` show (:meth:`Admin.finished`).

The complete set (``{ns}:complete``, id -> time it completed in ms, capped by
``complete_max_count``) is ordered by time, so a page of all of it within a time window
is exact and cheap: one shard's first ``offset + count`` entries of the window; over
several shards the exact page at any depth (:mod:`rota.client.pages`), then the page's
records (two round trips a shard). A page of one job name, or of a
search, has no index to read (the scripts keep none per name): it is a bounded scan of the
window in time order, a chunk of :data:`~rota.client.scan.SEARCH_CHUNK` a round trip and
one ``HMGET`` a job in the next, that stops after ``scan`` jobs or a time ``budget`` and
says how far back it read: :attr:`Finished.next_until` (or ``next_since`` oldest first) is
where a later page goes on. Every job at or after that time was read on every shard, so
the matches it lists are exact for that part of the window.

A job's result is shown as a preview of at most ``preview`` bytes (cut at a character);
a result larger than :data:`READ_MAX` is not read at all (its size is).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal

import msgspec
from msgspec import Meta

from rota.client.pages import set_page
from rota.client.scan import (
    CONTENT_FIELDS,
    JOBS,
    SEARCH_CHUNK,
    SEARCH_LIMIT,
    Fields,
    checked_scan,
    matches,
    scored,
)
from rota.protocol.bounds import Bound, checked
from rota.protocol.job import field_int, field_seconds, field_text, reply_text, validate_name

if TYPE_CHECKING:
    from rota.client.routing import Shards
    from rota.client.shard import Shard

__all__ = [
    "MAX_COUNT",
    "MAX_OFFSET",
    "MAX_PREVIEW",
    "PREVIEW",
    "READ_MAX",
    "TIME_MAX",
    "Finished",
    "FinishedJob",
    "Order",
    "finished",
    "preview_text",
]

#: Bytes of a result a page shows by default, and at most.
PREVIEW: Final = 200
MAX_PREVIEW: Final = 4096
#: A result larger than this many bytes is not read for its preview.
READ_MAX: Final = 64 * 1024
#: The deepest page, and the most jobs a page: each shard reads ``offset + count``
#: entries of its set.
MAX_OFFSET: Final = 1_000_000
MAX_COUNT: Final = 1000
Order = Literal["newest", "oldest"]
#: The fields of a record a page reads besides the result.
_FIELDS: Final = ("name", "started_at", "attempts", "pool", "args")


#: The latest time a window of finished jobs may name: the end of year 9999 (seconds).
TIME_MAX: Final = 253_402_300_799.0


class FinishedJob(msgspec.Struct, frozen=True, kw_only=True):
    """A complete job as its page lists it (times in seconds since the epoch)."""

    id: str
    name: str
    finished_at: Annotated[float, Meta(description="when it completed")]
    started_at: float | None = None
    run_time: Annotated[
        float | None, Meta(description="seconds from its last start to its completion")
    ] = None
    attempts: int = 0
    pool: str | None = None
    args: Annotated[str | None, Meta(description="the args as stored, cut as the result")] = None
    result: Annotated[
        str | None, Meta(description="the result JSON, its first bytes (see result_size)")
    ] = None
    result_size: Annotated[int, Meta(description="bytes of the result as stored")] = 0


class Finished(msgspec.Struct, frozen=True, kw_only=True):
    """A page of the complete jobs of a time window, newest (or oldest) first: ``total``
    of them match among the ``searched`` jobs read, of the ``size`` the window holds. A
    page of every job reads the whole window (``searched == size``); a page of one name
    or of a search reads it in time order and stops: ``next_until`` (newest first) or
    ``next_since`` (oldest first), in seconds, is where a later page goes on, None when
    it read to the end of the window."""

    total: int
    offset: int
    jobs: list[FinishedJob]
    searched: int
    size: int
    next_until: float | None = None
    next_since: float | None = None

    @property
    def complete(self) -> bool:
        return self.next_until is None and self.next_since is None


def preview_text(value: bytes | str | None, limit: int) -> str | None:
    """``value``'s first ``limit`` bytes as text, cut at a character (never half one),
    with "…" when it was cut."""
    if value is None:
        return None
    raw = value.encode() if isinstance(value, str) else value
    if len(raw) <= limit:
        return raw.decode(errors="replace")
    return raw[:limit].decode(errors="ignore") + "…"


def _window(since: float | None, until: float | None) -> tuple[int | str, int | str]:
    """The bounds of a time window in ms, as ZRANGEBYSCORE takes them."""
    lo: int | str = "-inf" if since is None else round(since * 1000)
    hi: int | str = "+inf" if until is None else round(until * 1000)
    return lo, hi


class _Read(msgspec.Struct):
    """What a scan of one shard read: its matches and every time and id it read, in order,
    where it stopped (None: the end of the window) and the window's size."""

    hits: list[tuple[int, str]]
    times: list[int]
    ids: list[str]
    stop: int | None
    size: int


def _range(
    order: Order, z: str, window: tuple[int | str, int | str], at: int, n: int
) -> list[tuple[Any, ...]]:
    """The commands of a window's size and its entries from place ``at``, ``n`` of them."""
    lo, hi = window
    if order == "newest":
        read = ("ZREVRANGEBYSCORE", z, hi, lo, "WITHSCORES", "LIMIT", at, n)
    else:
        read = ("ZRANGEBYSCORE", z, lo, hi, "WITHSCORES", "LIMIT", at, n)
    return [("ZCOUNT", z, lo, hi), read]


async def _scan(
    shard: Shard,
    window: tuple[int | str, int | str],
    order: Order,
    want: tuple[str | None, str, Fields],
    scan: int,
    budget: float | None,
) -> _Read:
    """Read one shard's window in time order and keep the jobs of ``want`` (a name or
    None, a text or "", what the text matches) (see the module)."""
    name, needle, fields = want
    needle = needle.strip().lower()
    read = ("name", *CONTENT_FIELDS[1:]) if needle and fields == "content" else ("name",)
    z = shard.keys.complete
    deadline = None if budget is None else time.monotonic() + budget
    out = _Read([], [], [], None, 0)

    async def take(rows: list[tuple[int, str]]) -> None:
        got = await shard.conn.execute_many([("HMGET", shard.keys.job(i), *read) for _, i in rows])
        for (at, job_id), row in zip(rows, got, strict=True):
            out.times.append(at)
            out.ids.append(job_id)
            if not isinstance(row, list) or row[0] is None:
                continue  # its record expired before its entry went
            if name is not None and reply_text(row[0]) != name:
                continue
            if not needle or matches(needle, job_id, row if fields == "content" else row[:1]):
                out.hits.append((at, job_id))

    while True:
        n = min(SEARCH_CHUNK, max(1, scan - len(out.times)))
        size, raw = await shard.conn.execute_many(_range(order, z, window, len(out.times), n))
        out.size, rows = size, scored(raw)
        await take(rows)
        if len(rows) < n or len(out.times) >= size:
            return out
        if len(out.times) >= scan or (deadline is not None and time.monotonic() >= deadline):
            break
    # It stops after a time it read all of: the rest of the jobs of the last time read.
    last = out.times[-1]
    seen = {i for at, i in zip(out.times, out.ids, strict=True) if at == last}
    [same] = await shard.conn.execute_many([("ZRANGEBYSCORE", z, last, last, "WITHSCORES")])
    await take([(at, i) for at, i in scored(same) if i not in seen])
    out.stop = last
    return out


async def _details(
    shards: Shards, chosen: Sequence[tuple[int, int, str]], preview: int
) -> list[FinishedJob]:
    """The rows of ``chosen`` (ms, a shard's index, an id), in order: one round trip a
    shard for the fields and the result's size, one for the results small enough."""

    async def read(shard: Shard) -> dict[str, FinishedJob]:
        mine = [(at, i) for at, s, i in chosen if s == shard.index]
        if not mine:
            return {}
        k = shard.keys
        cmds: list[tuple[Any, ...]] = []
        for _, i in mine:
            cmds += [("HMGET", k.job(i), *_FIELDS), ("HSTRLEN", k.job(i), "result")]
        got = await shard.conn.execute_many(cmds)
        rows = [(got[2 * n], got[2 * n + 1]) for n in range(len(mine))]
        small = [i for (_, i), (_, size) in zip(mine, rows, strict=True) if _small(size)]
        results = await shard.conn.execute_many([("HGET", k.job(i), "result") for i in small])
        result = dict(zip(small, results, strict=True))
        out = {}
        for (at, i), (row, size) in zip(mine, rows, strict=True):
            if not isinstance(row, list) or row[0] is None:
                continue  # gone since
            name, started, attempts, pool, args = row
            begun = field_seconds(started)
            if begun is not None and not 0 <= begun <= _LATEST:
                begun = None  # written by hand past the year 9999: no start to show
            got_result = result.get(i)
            text = got_result if isinstance(got_result, bytes | str) else None
            out[i] = FinishedJob(
                id=i,
                name=field_text(name) or "",
                finished_at=at / 1000,
                started_at=begun,
                run_time=None if begun is None else max(0.0, at / 1000 - begun),
                attempts=field_int(attempts),
                pool=field_text(pool),
                args=preview_text(args, preview),
                result=preview_text(text, preview),
                result_size=size if isinstance(size, int) else 0,
            )
        return out

    each = await shards.each(read)
    found = {i: job for part in each for i, job in part.items()}
    return [found[i] for _, _, i in chosen if i in found]


#: The latest start a row shows (the end of the year 9999, in seconds).
_LATEST: Final = 253_402_300_799.0


def _ms(score: float) -> int:
    """A score read whole, as :func:`~rota.client.scan.scored` reads one (a hand-written
    ``inf`` or 1e300 as a time past the year 9999)."""
    return int(max(-(2**53), min(2**53, score)))


def _small(size: object) -> bool:
    return isinstance(size, int) and 0 < size <= READ_MAX


async def finished(
    shards: Shards,
    *,
    name: str | None = None,
    text: str = "",
    fields: Fields = "id",
    since: float | None = None,
    until: float | None = None,
    order: Order = "newest",
    offset: int = 0,
    count: int = 50,
    scan: int = SEARCH_LIMIT,
    budget: float | None = None,
    preview: int = PREVIEW,
) -> Finished:
    """A page of the kept complete jobs completed from ``since`` to ``until`` (epoch
    seconds, both included; None: no bound), newest (or oldest) first, each with its run
    time and the first ``preview`` bytes of its result (``admin.finished``, the shards
    its own). All of them: an exact page. Of one ``name`` or matching ``text`` (as
    :meth:`rota.client.admin.Admin.search`): a bounded scan of at most ``scan`` jobs (and
    ``budget`` seconds) that says where a later page goes on (see the module)."""
    if name is not None:
        validate_name(name)
    checked("offset", offset, Bound(0, MAX_OFFSET, whole=True))
    checked("count", count, Bound(1, MAX_COUNT, whole=True))
    checked("preview", preview, Bound(1, MAX_PREVIEW, whole=True))
    checked("scan", scan, JOBS)
    for bound, at in (("since", since), ("until", until)):
        if at is not None:
            checked(bound, at, Bound(0, TIME_MAX))
    if order not in ("newest", "oldest"):
        raise ValueError(f"order: 'newest' or 'oldest', not {order!r}")
    checked_scan(fields, budget)
    window = _window(since, until)
    sign = -1 if order == "newest" else 1
    if name is None and not text.strip() and shards.count > 1:  # exact at any depth
        key = lambda s: s.keys.complete  # noqa: E731
        newest = order == "newest"
        size, got = await set_page(shards.all, key, offset, count, newest=newest, window=window)
        page = [(_ms(at), s, i) for s, i, at in got]
        jobs = await _details(shards, page, preview)
        return Finished(total=size, offset=offset, jobs=jobs, searched=size, size=size)
    if name is None and not text.strip():
        each = await shards.each(lambda s: _first(s, window, order, offset + count))
        merged = heapq.merge(
            *([(at, s, i) for at, i in rows] for s, (_, rows) in enumerate(each)),
            key=lambda r: (sign * r[0], r[2]),
        )
        page = list(merged)[offset : offset + count]
        size = sum(n for n, _ in each)
        jobs = await _details(shards, page, preview)
        return Finished(total=size, offset=offset, jobs=jobs, searched=size, size=size)
    k = shards.count
    share = None if budget is None else budget / k
    want = (name, text, fields)
    reads = await shards.each(lambda s: _scan(s, window, order, want, max(1, scan // k), share))
    stops = [r.stop for r in reads if r.stop is not None]
    # Every shard read every job at or after (before, oldest first) the furthest stop.
    edge = (max(stops) if order == "newest" else min(stops)) if stops else None

    def within(at: int) -> bool:
        return edge is None or (at >= edge if order == "newest" else at <= edge)

    # (A job that completed during the scan moves the others one place: read twice.)
    kept = {i: (at, s) for s, r in enumerate(reads) for at, i in r.hits if within(at)}
    hits = sorted(((at, s, i) for i, (at, s) in kept.items()), key=lambda r: (sign * r[0], r[2]))
    searched = sum(1 for r in reads for at in r.times if within(at))
    jobs = await _details(shards, hits[offset : offset + count], preview)
    on_until = (edge - 1) / 1000 if edge is not None and order == "newest" else None
    on_since = (edge + 1) / 1000 if edge is not None and order == "oldest" else None
    return Finished(
        total=len(hits),
        offset=offset,
        jobs=jobs,
        searched=searched,
        size=sum(r.size for r in reads),
        next_until=on_until,
        next_since=on_since,
    )


async def _first(
    shard: Shard, window: tuple[int | str, int | str], order: Order, n: int
) -> tuple[int, list[tuple[int, str]]]:
    """The size of a shard's window and its first ``n`` entries (ms, id) in order."""
    size, raw = await shard.conn.execute_many(_range(order, shard.keys.complete, window, 0, n))
    return size, scored(raw)
