"""The job sets (scheduled, retry, dead, waiting): a page of one, searchable by id and
name, and retrying or deleting its jobs: from a page (one job, the ticked ones, or all
a search lists: a 303 back) or the API (some ids, or all)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final, get_args

import msgspec
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from rota.client import console
from rota.client.finished import Order
from rota.client.scan import SEARCH_LIMIT, Fields
from rota.protocol.job import JobRecord, JobSet
from rota.web.base import ApiError, JSONResponse, back, client_of
from rota.web.complete import date_field, moment_param
from rota.web.declare import (
    Choice,
    Ms,
    Number,
    Routes,
    doc,
    is_api,
    mirror,
    ms,
    pages,
    query,
    ref,
    said,
)

__all__ = ["JOB_SETS", "MAX_IDS", "MAX_POSITION", "MAX_SEARCH", "RETRYABLE", "SUMMARY", "routes"]

routes = Routes()
JOB_SETS: Final[tuple[JobSet, ...]] = get_args(JobSet)
#: The sets whose jobs can be queued now; a waiting job runs when its parents complete.
RETRYABLE: Final[tuple[JobSet, ...]] = ("scheduled", "retry", "dead")
MAX_IDS: Final = 1000
#: A position in a set (where a search begins or ends), as the pages' ``from``.
MAX_POSITION: Final = 10**9
#: The longest search text, as the pages' ``q``.
MAX_SEARCH: Final = 200
#: How long a search of a page reads the set before it stops and says where: the page
#: stays under 300 ms on a set of 100,000 (the next search goes on from there).
SEARCH_BUDGET: Final = 0.15
#: The fields of a job record that a page of a job set shows for each job.
SUMMARY: Final = (
    *("id", "name", "state", "args", "attempts", "failures", "enqueued_at", "run_at"),
    *("finished_at", "reason", "error", "after", "pending", "group", "waits_group"),
)
#: What a page's notice says was done.
_DONE: Final = {"retry": "retried", "delete": "deleted"}
_OFFSET: Final = Number("offset", 0, 0, MAX_POSITION)
_LIMIT: Final = Number("limit", 25, 1, 500, page=25)
_FROM: Final = Number("from", 0, 0, MAX_POSITION, "where in the set a search begins")
_SEARCH: Final = query("q", {"type": "string", "maxLength": MAX_SEARCH}, "part of a job id or name")
_ORDERS: Final[tuple[Order, ...]] = ("newest", "oldest")
_ORDER: Final = Choice(
    "order",
    _ORDERS,
    "by the set's time: newest or oldest first (default: dead newest, the others oldest)",
)
_MOMENT: Final[dict[str, Any]] = {"type": "string", "maxLength": 40}
_SINCE: Final = query(
    "since", _MOMENT, "its time (due, died, waiting since) at or after: ms or ISO-8601 (UTC)"
)
_UNTIL: Final = query("until", _MOMENT, "its time at or before: ms or ISO-8601 (UTC)")
_FIELDS: Final = query(
    "fields",
    {"type": "string", "enum": list(get_args(Fields))},
    "what q matches: id (the id and name, the default: one short field read a job) or"
    " content (args, kwargs, error, reason and result too: each record's fields read)",
)


def _fields(value: object, api: bool) -> Fields:
    """What a search matches, from a query or form field: ``id`` when absent; anything
    else but ``content`` a 400 in the API (a page's form sends only those two)."""
    if value in (None, "", "id"):
        return "id"
    if value == "content":
        return "content"
    if api:
        raise ApiError(400, f"fields: id or content, not {str(value)[:40]!r}")
    raise HTTPException(400, f"fields: id or content, not {str(value)[:40]!r}")


class JobTimes(msgspec.Struct, kw_only=True):
    """A job record's times as the JSON API carries them (the record has seconds)."""

    enqueued_at: Ms | None
    run_at: Ms | None
    started_at: Ms | None
    finished_at: Ms | None
    expires: Ms | None = None


class JobPage(msgspec.Struct, kw_only=True):
    set: JobSet
    q: str
    fields: Annotated[Fields, said("what q matched: id (and name) or content")] = "id"
    total: int
    offset: int
    limit: int
    searched: Annotated[int | None, said("jobs read by a search")]
    size: Annotated[
        int | None, said("jobs in the set when searched: a search read them all when equal")
    ] = None
    start: Annotated[
        int, said("where in the set a search began (from): it read start to searched")
    ] = 0
    #: Each a projection of a job record (:data:`SUMMARY`), documented as such.
    jobs: list[Annotated[dict[str, Any], doc(**ref("JobSummary"))]]
    order: Annotated[Order, said("by the set's time: newest or oldest first")] = "oldest"
    since: Annotated[Ms | None, said("the window's start (without a search)")] = None
    until: Annotated[Ms | None, said("the window's end (without a search)")] = None


class Ids(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The jobs to act on: {"ids": [...]} or {"all": true}."""

    #: What the fields' types cannot say, added to the document's schema.
    rules: ClassVar[dict[str, Any]] = {
        "oneOf": [
            {"required": ["ids"]},
            {"required": ["all"], "properties": {"all": {"const": True}}},
        ]
    }

    ids: Annotated[list[str], doc(minItems=1, maxItems=MAX_IDS)] | None = None
    all: Annotated[bool, said("true: every job of the set")] = False


class Retried(msgspec.Struct):
    retried: int


class Deleted(msgspec.Struct):
    deleted: int


def _position(field: object, name: str) -> int | None:
    """A position in a set from a form field (None when absent or empty): a whole number
    from 0 to :data:`MAX_POSITION`, else 400 naming the field."""
    if field is None or field == "":
        return None
    text = field.strip() if isinstance(field, str) else ""
    digits = text.isascii() and text.isdigit() and len(text.lstrip("0")) <= 10  # '²' is a digit
    if digits and int(text) <= MAX_POSITION:
        return int(text)
    shown = repr(field[:40]) if isinstance(field, str) else "a file"
    raise HTTPException(
        400, f"{name}: a position in the set, a whole number from 0 to {MAX_POSITION}, not {shown}"
    )


async def _apply(request: Request, which: JobSet, action: str, ids: list[str] | None) -> int:
    """Retry or delete ``ids`` of a set (None: all of it); how many."""
    client = client_of(request)
    if action == "retry":
        return await client.admin.retry(which, ids)
    return await client.admin.delete(which, ids)


async def _act(request: Request, which: JobSet, action: str, ids: list[str] | None) -> Response:
    """Retry or delete ``ids`` of a set (None: all of it): how many, as JSON or a 303
    back to the page (never to a job it deleted)."""
    n = request.state.audit_count = 0 if ids == [] else await _apply(request, which, action, ids)
    if is_api(request):
        return JSONResponse(Retried(n) if action == "retry" else Deleted(n))
    return await back(request, f"/{which}", _DONE[action], n, _gone(request, action))


def _gone(request: Request, action: str) -> str | None:
    """The page of the job a form deletes: no page to go back to."""
    job_id = request.path_params.get("job_id")
    return f"/jobs/{job_id}" if job_id and action == "delete" else None


def _declare(which: JobSet) -> None:
    """The page of a set, its JSON, and the actions on its jobs (a waiting job runs when
    its parents complete: it is deleted, never retried)."""
    actions = ("retry", "delete") if which in RETRYABLE else ("delete",)

    async def context(request: Request, data: Any) -> dict[str, Any]:
        query_ = f"?{request.url.query}" if request.url.query else ""
        return {
            "which": which,
            "column": {"dead": "Died", "waiting": "Enqueued"}.get(which, "Runs at"),
            "here": request.url.path + query_,
            "window": {k: v for k, v in request.query_params.items() if k in _WINDOW and v},
            "since_field": date_field(data["since"]),
            "until_field": date_field(data["until"]),
            **pages(data["offset"], 25, data["total"]),
        }

    @routes.page(f"/{which}", "jobs.html", context)
    @routes.api(
        f"/api/{which}",
        f"list_{which}",
        JobPage,
        params=(_OFFSET, _LIMIT, _SEARCH, _FROM, _FIELDS, _ORDER, _SINCE, _UNTIL),
        summary=f"A page of the {which} jobs, searchable by id and name or content, or"
        " ordered and cut to a window of their time.",
    )
    async def read(request: Request) -> JobPage:
        # q keeps the jobs whose id or name contains it, searched from position ``from``
        # of the set for at most SEARCH_BUDGET
        offset, limit, start = _OFFSET.read(request), _LIMIT.read(request), _FROM.read(request)
        q = request.query_params.get("q", "")
        if len(q) > MAX_SEARCH and is_api(request):
            raise ApiError(400, f"q: at most {MAX_SEARCH} characters")
        q, searched, size = q[:MAX_SEARCH], None, None
        fields = _fields(request.query_params.get("fields"), is_api(request))
        order, since, until = _window(request, which)
        if not q.strip() and (since, until, order) != (None, None, console.default_order(which)):
            try:  # its offset goes to 1,000,000 (the client's check, in its words)
                page = await console.window(
                    client_of(request),
                    which,
                    since=since,
                    until=until,
                    order=order,
                    offset=offset,
                    count=limit,
                )
            except ValueError as exc:
                raise ApiError(400, str(exc)) from None
            total, jobs, start = page.total, page.jobs, 0
        elif not q.strip():
            page = await client_of(request).admin.page(which, offset, limit)
            total, jobs, start = page.total, page.jobs, 0
        else:
            found = await client_of(request).admin.search(
                which, q, offset, limit, start=start, budget=SEARCH_BUDGET, fields=fields
            )
            total, jobs, searched, size = found.total, found.jobs, found.searched, found.size
        summaries = [_summary(j) for j in jobs]
        return JobPage(
            set=which,
            q=q,
            fields=fields,
            total=total,
            offset=offset,
            limit=limit,
            searched=searched,
            size=size,
            start=start,
            jobs=summaries,
            order=order,
            since=None if since is None else ms(since),
            until=None if until is None else ms(until),
        )

    @routes.form(f"/{which}/{{job_id}}/{{action}}")
    async def one(request: Request) -> Response:
        job_id, action = request.path_params["job_id"], request.path_params["action"]
        if action not in actions or [job_id] != await client_of(request).admin.in_set(
            which, [job_id]
        ):
            raise HTTPException(404, f"no job {job_id} among the {which} jobs")
        n = await _apply(request, which, action, [job_id])
        return await back(request, f"/{which}", _DONE[action], n, _gone(request, action))

    for action in actions:
        _actions(which, action)


#: The query fields of a page's order and window, kept by its links.
_WINDOW: Final = ("order", "since", "until")


def _window(request: Request, which: JobSet) -> tuple[Order, float | None, float | None]:
    """The order and the window (``since``, ``until`` in seconds) a page asks for; a
    page brings an unknown order to the set's own, the API answers 400."""
    order = _ORDER.read(request, console.default_order(which))
    since, until = moment_param(request, "since"), moment_param(request, "until")
    return order, since, until


def _summary(job: JobRecord) -> dict[str, Any]:
    """The fields of :data:`SUMMARY`, the times in ms."""
    times = msgspec.structs.asdict(mirror(JobTimes, job))
    return {f: times[f] if f in times else getattr(job, f) for f in SUMMARY}


def _actions(which: JobSet, action: str) -> None:
    @routes.form(f"/{which}/{action}-all")
    async def every(request: Request) -> Response:
        """Every job of the set, or, when the form carries the page's search (``q``),
        only those that match it: a bulk button under a search acts on what the operator
        sees listed, never on the whole set; under a search that stopped, on the matching
        jobs of the part of the set it read (``from``, ``to``). A field out of its range
        is refused (400, naming it) before anything is done; the audit entry records the
        filter and how many jobs were acted on."""
        form = await request.form()
        q = form.get("q")
        if q is not None and (not isinstance(q, str) or len(q) > MAX_SEARCH):
            raise HTTPException(400, f"q: a search text of at most {MAX_SEARCH} characters")
        q = (q or "").strip()
        start, end = _position(form.get("from"), "from"), _position(form.get("to"), "to")
        fields = _fields(form.get("fields"), False)
        if not q:
            return await _act(request, which, action, None)
        scan = SEARCH_LIMIT if end is None else max(0, end - (start or 0))
        found = await client_of(request).admin.search(
            which, q, 0, SEARCH_LIMIT, start=start or 0, scan=scan, fields=fields
        )
        content = "content" if fields == "content" else None
        given: dict[str, object] = {"q": q, "fields": content, "from": start, "to": end}
        request.state.audit_filter = {k: v for k, v in given.items() if v is not None}
        return await _act(request, which, action, [j.id for j in found.jobs])

    @routes.form(f"/{which}/{action}-selected")
    async def selected(request: Request) -> Response:
        """The jobs ticked on a page (the form's ``id`` fields), those of them still in
        the set, and nothing else: a search or another page does not widen it. The ids
        go into the audit log's entry."""
        ticked = (await request.form()).getlist("id")
        ids = list(dict.fromkeys(i for i in ticked if isinstance(i, str) and i))
        if len(ids) > MAX_IDS:
            raise HTTPException(400, f"select at most {MAX_IDS} jobs at once")
        if not ids:
            return await back(request, f"/{which}", "none-selected")
        there = request.state.audit_ids = await client_of(request).admin.in_set(which, ids)
        return await _act(request, which, action, there)

    @routes.api(
        f"/api/{which}/{action}",
        f"{which}_{action}",
        Retried if action == "retry" else Deleted,
        404,
        body=Ids,
        post=True,
        summary=(
            "Run scheduled jobs now (queue them): some ids, or all."
            if (which, action) == ("scheduled", "retry")
            else f"{action.capitalize()} {which} jobs: some ids, or all."
        ),
    )
    async def api(request: Request, body: Ids) -> Response:
        if body.all == (body.ids is not None):
            raise ApiError(422, 'give "ids" (a list of job ids) or "all": true, not both')
        if body.ids is not None and not 1 <= len(body.ids) <= MAX_IDS:
            raise ApiError(422, f"ids: give 1 to {MAX_IDS} job ids")
        ids = None if body.ids is None else list(dict.fromkeys(body.ids))
        if ids is not None:
            held = set(await client_of(request).admin.in_set(which, ids))
            missing = [i for i in ids if i not in held]
            if missing:
                raise ApiError(404, f"not among the {which} jobs: {', '.join(missing[:10])}")
            request.state.audit_ids = ids
        return await _act(request, which, action, ids)


for _which in JOB_SETS:
    _declare(_which)
