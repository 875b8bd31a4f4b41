"""The finished jobs: the kept complete jobs (``keep_result``), newest first, overall or of
one name, in a time window, with their run times and a preview of their results; and a
search of them by id and name or by content (see :meth:`rota.client.admin.Admin.finished`).

All of them in a window is an exact page (each shard reads ``offset + count`` entries of
its set). One name or a search is a bounded scan of the window in time order, for at
most :data:`SCAN_BUDGET` seconds: the page says how far back it read and links on from
there (``until``), as a search of a job set says where it stopped.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Final, Literal

import msgspec
from starlette.requests import Request

from rota.client.finished import MAX_OFFSET, Finished
from rota.client.scan import Fields
from rota.client.spec import moment_seconds
from rota.protocol.job import MAX_MS, NAME_RE
from rota.web.base import ApiError, client_of
from rota.web.declare import Choice, Ms, Number, Routes, ms, pages, query, said

__all__ = [
    "ORDERS",
    "SCAN_BUDGET",
    "FinishedPage",
    "FinishedRow",
    "date_field",
    "moment_param",
    "routes",
]

routes = Routes()
#: How long a page of one name or of a search reads before it stops and says where.
SCAN_BUDGET: Final = 0.15
#: ``newest`` and ``oldest`` order the window (exact); ``longest`` (run time) and
#: ``name`` order the page of the newest that is shown (cheap: no more is read).
ORDERS: Final = ("newest", "oldest", "longest", "name")
_MAX_SEARCH: Final = 200
_OFFSET: Final = Number("offset", 0, 0, MAX_OFFSET)
_COUNT: Final = Number("count", 50, 1, 500, page=50)
_NAME: Final = query("name", {"type": "string", "pattern": NAME_RE.pattern}, "one job name only")
_Q: Final = query(
    "q", {"type": "string", "maxLength": _MAX_SEARCH}, "part of a job's id or name (or content)"
)
_FIELDS: Final[Choice[Fields]] = Choice(
    "fields",
    ("id", "content"),
    "what q matches: id (the id and name, the default: cheap) or content (args, kwargs,"
    " error, reason and result too: reads each record's fields)",
    lenient=False,
)
_MOMENT: Final[dict[str, Any]] = {"type": "string", "maxLength": 40}
_SINCE: Final = query(
    "since", _MOMENT, "completed at or after: ms since the epoch, or an ISO-8601 time (UTC)"
)
_UNTIL: Final = query(
    "until", _MOMENT, "completed at or before: ms since the epoch, or an ISO-8601 time (UTC)"
)
_ORDER: Final = Choice("order", ORDERS, lenient=False)


class FinishedRow(msgspec.Struct, kw_only=True):
    """A complete job: when it completed, how long its last run took, its result's first
    bytes (``result_size`` says how many there are)."""

    id: str
    name: str
    finished_at: Ms
    started_at: Ms | None
    run_ms: Annotated[int | None, said("ms from its last start to its completion")]
    attempts: int
    pool: str | None
    args: Annotated[str | None, said("the args as stored (JSON), their first bytes")]
    result: Annotated[str | None, said("the result as stored (JSON), its first bytes")]
    result_size: Annotated[int, said("bytes of the result as stored")]


class FinishedPage(msgspec.Struct, kw_only=True):
    """A page of the kept complete jobs: ``total`` match among the ``searched`` read of
    the ``size`` in the window; a page of one name or a search that stopped says where a
    later one goes on (``next_until`` newest first, ``next_since`` oldest first)."""

    name: str | None
    q: str
    fields: Literal["id", "content"]
    since: Ms | None
    until: Ms | None
    order: str
    total: Annotated[int, said("jobs that match among those read")]
    offset: int
    count: int
    searched: Annotated[int, said("jobs of the window read")]
    size: Annotated[int, said("jobs in the window: a page read them all when equal")]
    jobs: list[FinishedRow]
    #: Where a page of one name or a search that stopped goes on: ``until`` newest
    #: first, ``since`` oldest first (None: it read the whole window).
    next_until: Ms | None = None
    next_since: Ms | None = None


def moment_param(request: Request, field: str) -> float | None:
    """``since`` or ``until`` in seconds (None: absent or empty): ms since the epoch or
    an ISO-8601 time (naive as UTC, as a browser's date field sends it), else 400."""
    text = request.query_params.get(field, "").strip()
    if not text:
        return None
    try:
        if text.isascii() and text.isdigit() and len(text) <= 16:
            value = int(text) / 1000
        else:
            value = moment_seconds(field, text[:40])
    except (ValueError, OverflowError):
        value = -1.0
    if not 0 <= value * 1000 <= MAX_MS:
        raise ApiError(400, f"{field}: ms since the epoch or an ISO-8601 time, not {text[:40]!r}")
    return value


def _row(j: Any) -> FinishedRow:
    return FinishedRow(
        id=j.id,
        name=j.name,
        finished_at=ms(j.finished_at),
        started_at=None if j.started_at is None else ms(j.started_at),
        run_ms=None if j.run_time is None else round(j.run_time * 1000),
        attempts=j.attempts,
        pool=j.pool,
        args=j.args,
        result=j.result,
        result_size=j.result_size,
    )


def date_field(at: int | None) -> str:
    """A time in ms as a date field shows it (UTC, to the minute)."""
    return "" if at is None else datetime.fromtimestamp(at / 1000, UTC).strftime("%Y-%m-%dT%H:%M")


async def _context(request: Request, data: dict[str, Any]) -> dict[str, Any]:
    keep = {k: v for k, v in request.query_params.items() if k not in ("offset",) and v}
    return {
        "keep": keep,
        "since_field": date_field(data["since"]),
        "until_field": date_field(data["until"]),
        "orders": ORDERS,
        **pages(data["offset"], data["count"], data["total"]),
    }


@routes.page("/complete", "complete.html", _context)
@routes.api(
    "/api/complete",
    "list_complete",
    FinishedPage,
    params=(_NAME, _Q, _FIELDS, _SINCE, _UNTIL, _ORDER, _OFFSET, _COUNT),
)
async def complete(request: Request) -> FinishedPage:
    """A page of the kept complete jobs, newest first, with run times and results."""
    # One name or a search reads for at most SCAN_BUDGET and says where it stopped.
    name = request.query_params.get("name") or None
    if name is not None and not NAME_RE.match(name):
        raise ApiError(400, f"name: a job name ({NAME_RE.pattern}), not {name[:40]!r}")
    q = request.query_params.get("q", "")
    if len(q) > _MAX_SEARCH:
        raise ApiError(400, f"q: at most {_MAX_SEARCH} characters")
    fields = _FIELDS.read(request)
    since, until = moment_param(request, "since"), moment_param(request, "until")
    order = _ORDER.read(request)
    offset, count = _OFFSET.read(request), _COUNT.read(request)
    page: Finished = await client_of(request).admin.finished(
        name=name,
        text=q,
        fields=fields,
        since=since,
        until=until,
        order="oldest" if order == "oldest" else "newest",
        offset=offset,
        count=count,
        budget=SCAN_BUDGET,
    )
    rows = [_row(j) for j in page.jobs]
    if order == "longest":
        rows.sort(key=lambda r: -(r.run_ms or 0))
    elif order == "name":
        rows.sort(key=lambda r: r.name)
    return FinishedPage(
        name=name,
        q=q,
        fields=fields,
        since=None if since is None else ms(since),
        until=None if until is None else ms(until),
        order=order,
        total=page.total,
        offset=offset,
        count=count,
        searched=page.searched,
        size=page.size,
        next_until=None if page.next_until is None else ms(page.next_until),
        next_since=None if page.next_since is None else ms(page.next_since),
        jobs=rows,
    )
