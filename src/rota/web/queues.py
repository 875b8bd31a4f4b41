"""The queues (one per job name): their figures, the jobs waiting in one, a name's
minutes, and pausing, resuming, limiting and clearing one, from a page's form (a 303
back to the page) or the API (JSON)."""

from __future__ import annotations

import time
from typing import Annotated, Any, Final, TypeVar
from urllib.parse import quote

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from rota import inspect
from rota.client import Client, console
from rota.client.status import QueueInfo
from rota.inspect import served_names
from rota.inspect.figures import MINUTES, done_last_minutes, name_minutes
from rota.protocol import bounds
from rota.web import fair_keys, run_times
from rota.web.base import ApiError, back, client_of, known_queue, render
from rota.web.charts import bar_chart, duration_chart
from rota.web.declare import (
    REFRESH,
    Choice,
    Ms,
    Number,
    Routes,
    answer,
    doc,
    is_api,
    mirror,
    ms,
    pages,
    plain,
    said,
)

__all__ = ["routes"]

routes = Routes()
B = TypeVar("B", bound=msgspec.Struct)
MAX_LIMIT: Final = int(bounds.HANDLER["max_concurrency"].hi)
_OFFSET: Final = Number("offset", 0, 0, 10**9)
_LIMIT: Final = Number("limit", 100, 1, 1000, page=100)  # a page stays small with 1000s of names
_JOBS: Final = Number("limit", 25, 1, 500, page=25)
_MINUTES: Final = Number("minutes", MINUTES, 1, 120)
_ORDER: Final = Choice("order", ("oldest", "newest"))
_SORT: Final = Choice(
    "order",
    console.QUEUE_ORDERS,
    "busy (queued and running, the default), name, size, running or latency (the oldest"
    " queued job first); ties by name",
)


class Queue(QueueInfo, frozen=True, kw_only=True):
    done_per_second: Annotated[float, said("completed per second over the last minute")]
    served: Annotated[bool, said("a live pool serves this name (none: its jobs wait for one)")] = (
        True
    )


class Queues(msgspec.Struct):
    """A page of the queues, the busiest first (queued and running jobs), then by name."""

    queues: list[Queue]
    total: Annotated[int, said("job names in all")] = 0
    offset: int = 0
    limit: int = 100
    order: Annotated[console.QueueOrder, said("the order of the list")] = "busy"


class NameMinute(msgspec.Struct):
    """One UTC minute of a job name."""

    start: Ms
    processed: Annotated[int, said("jobs of the name completed")]
    failed: Annotated[int, said("failed attempts of the name")]
    ran_ms: Annotated[int, said("ms its complete jobs ran, summed")]
    mean_ms: Annotated[float | None, said("mean run time of its complete jobs (none: none)")]


class NameStats(msgspec.Struct):
    """A job name's minutes, oldest first; the last one is the current minute."""

    name: str
    minutes: list[NameMinute]


class QueuedJob(inspect.QueuedJob, kw_only=True):
    """A job waiting in a queue, as the queue's page lists it: its args cut short."""

    enqueued_at: Ms | None


class QueueJobs(inspect.QueueView, kw_only=True):
    """A page of the jobs waiting in one queue, in the order asked for."""

    jobs: list[QueuedJob]  # type: ignore[assignment]


QueueState = answer("QueueState", __name__, name=str, paused=bool)
QueueRate = answer("QueueRate", __name__, name=str, rate=str | None)
QueueLimit = answer("QueueLimit", __name__, name=str, limit=int | None)
Cleared = answer("Cleared", __name__, name=str, deleted=int)


class RateRequest(msgspec.Struct, forbid_unknown_fields=True):
    rate: Annotated[
        str | None,
        said(
            "jobs that may start per second, minute or hour, e.g. '100/s', '30/min', '2/hour';"
            " null removes the limit"
        ),
    ]


class LimitRequest(msgspec.Struct, forbid_unknown_fields=True):
    limit: Annotated[
        Annotated[int, doc(minimum=1, maximum=MAX_LIMIT)] | None,
        said("most jobs of the name running at once; null: no limit"),
    ]


@routes.api("/api/queues", "queues", Queues, params=(_OFFSET, _LIMIT, _SORT))
async def queues(request: Request) -> Queues:
    """A page of the queues' figures, the busiest first (or in another order)."""
    # done_per_second: completed per second over the last minute, from the per-minute counters
    client, offset, limit = client_of(request), _OFFSET.read(request), _LIMIT.read(request)
    now = time.time()
    weight = 1 - (now % 60) / 60  # the share of the previous minute inside the last 60 s
    order = _SORT.read(request)
    total, page = await console.queue_page(client, order, offset, limit)
    previous, current = await done_last_minutes(client, [q.name for q in page], now)
    served = await served_names(client)
    out = [
        mirror(
            Queue,
            q,
            done_per_second=round((previous[q.name] * weight + current[q.name]) / 60, 2),
            served=q.name in served,
        )
        for q in page
    ]
    return Queues(out, total, offset, limit, order)


@routes.form("/queues", "GET")
async def queues_page(request: Request, error: str | None = None) -> Response:
    """``error``: what was wrong with a form sent from it (a rate or a limit that does not
    parse), shown above the table with status 400."""
    data = plain(await queues(request))
    offset, size = data["offset"], data["limit"]
    api = f"/api/queues?offset={offset}&limit={size}&order={data['order']}"
    columns = {"Name": "name", "Size": "size", "Latency": "latency", "Running / limit": "running"}
    sorts = {
        label: (f"?order={by if by != data['order'] else 'busy'}", by == data["order"])
        for label, by in columns.items()
    }
    context = {"data": data, "api": api, "refresh": REFRESH, "error": error, "sorts": sorts}
    context.update(pages(offset, size, data["total"]))
    return render(request, "queues.html", context, status=400 if error else 200)


async def _queue(request: Request, data: Any) -> dict[str, Any]:
    """The queue page's charts and links, its run times and its fair keys."""
    stats = await _name_stats(client_of(request), data["name"], _MINUTES.read(request))
    fair = await fair_keys.read(client_of(request), data["name"])
    runs = await run_times.page_figures(client_of(request), data["name"])
    minutes, offset, total = plain(stats)["minutes"], data["offset"], data["total"]
    last = max(0, (total - 1) // 25 * 25)
    query_ = f"?{request.url.query}" if request.url.query else ""
    return {
        "api": f"/api/queues/{quote(data['name'])}/jobs{query_}",
        "last_offset": last if offset < last else None,
        "charts": {"done": bar_chart(minutes, "minute"), "ran": duration_chart(minutes)},
        "fair": plain(fair),
        "run_times": runs,
        **pages(offset, 25, total),
    }


@routes.page("/queues/{name}", "queue.html", _queue)
@routes.api("/api/queues/{name}/jobs", "queue_jobs", QueueJobs, params=(_OFFSET, _JOBS, _ORDER))
async def queue_jobs(request: Request) -> QueueJobs:
    """A page of the jobs waiting in a queue, the next to run first (or the newest)."""
    name = await known_queue(request)
    order = _ORDER.read(request)
    offset, limit = _OFFSET.read(request), _JOBS.read(request)
    view = await inspect.queue_view(client_of(request), name, offset, limit, order == "newest")
    return mirror(QueueJobs, view, jobs=[mirror(QueuedJob, j) for j in view.jobs])


@routes.api("/api/queues/{name}/stats", "queue_stats", NameStats, params=(_MINUTES,))
async def name_stats(request: Request) -> NameStats:
    """A job name per UTC minute: processed, failed, mean run time."""
    return await _name_stats(client_of(request), await known_queue(request), _MINUTES.read(request))


async def _name_stats(client: Client, name: str, minutes: int) -> NameStats:
    out = []
    for minute in await name_minutes(client, name, minutes):
        done, ran = minute.counts["processed"], minute.counts["ms"]
        mean = round(ran / done, 1) if done else None
        out.append(NameMinute(ms(minute.start), done, minute.counts["failed"], ran, mean))
    return NameStats(name, out)


async def _done(request: Request, body: B, done: str, n: int | None = None) -> B | Response:
    """The API's answer, or the form's: back to its page, saying what was done."""
    return body if is_api(request) else await back(request, "/queues", done, n)


def _switch(verb: str, paused: bool) -> None:
    """Pause or resume a queue (a form and an API route), answered with its state."""

    @routes.action(
        f"/queues/{{name}}/{verb}", f"queue_{verb}", QueueState, summary=f"{verb.title()} a queue."
    )
    async def switch(request: Request) -> msgspec.Struct | Response:
        name, admin = await known_queue(request), client_of(request).admin
        await (admin.pause if paused else admin.resume)(name)
        return await _done(request, QueueState(name, paused), verb + "d")


_switch("pause", True)
_switch("resume", False)


@routes.action("/queues/{name}/clear", "queue_clear", Cleared)
async def clear(request: Request) -> msgspec.Struct | Response:
    """Clear a queue."""
    name = await known_queue(request)
    n = await client_of(request).admin.clear_queue(name)
    return await _done(request, Cleared(name, n), "cleared", n)


@routes.api("/api/queues/{name}/rate", "queue_rate", QueueRate, body=RateRequest, post=True)
async def set_rate(request: Request, body: RateRequest) -> msgspec.Struct:
    """Set or remove the rate limit of a queue (across all pools)."""
    name = await known_queue(request)
    try:
        await client_of(request).admin.set_rate(name, body.rate)
    except ValueError as exc:
        raise ApiError(422, str(exc)) from None
    (info,) = await client_of(request).admin.queues([name])
    return QueueRate(name, info.rate)


@routes.api("/api/queues/{name}/limit", "queue_limit", QueueLimit, body=LimitRequest, post=True)
async def set_limit(request: Request, body: LimitRequest) -> msgspec.Struct:
    """Set or remove the concurrency limit of a queue (across all pools)."""
    name = await known_queue(request)
    if body.limit is not None and not 1 <= body.limit <= MAX_LIMIT:
        raise ApiError(422, f"limit: give 1 to {MAX_LIMIT} jobs at once, or null for no limit")
    await client_of(request).admin.set_limit(name, body.limit)
    return QueueLimit(name, body.limit)


@routes.form("/queues/{name}/rate")
@routes.form("/queues/{name}/limit")
async def set_form(request: Request) -> Response:
    """A rate (none: removed) or a concurrency limit (a whole number from 1, or none)
    typed in the queues page's form."""
    name, what = await known_queue(request), request.url.path.rpartition("/")[2]
    value = (await request.form()).get(what)
    text = value.strip() if isinstance(value, str) else ""
    try:
        if what == "rate":
            await client_of(request).admin.set_rate(name, text or None)
        elif text and (not text.isdigit() or not 1 <= int(text) <= MAX_LIMIT):
            raise ValueError(
                f"the limit must be a whole number from 1 to {MAX_LIMIT}, not {text!r}"
            )
        else:
            await client_of(request).admin.set_limit(name, int(text) if text else None)
    except ValueError as exc:
        return await queues_page(request, error=f"{name}: {exc}")
    return await back(request, "/queues", f"{what}-set" if text else f"{what}-removed")
