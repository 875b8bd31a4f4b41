"""One job: everything about it (its page and JSON), its args or result as stored,
aborting it, and enqueueing one through the API."""

from __future__ import annotations

import math
import time
from typing import Annotated, Any, ClassVar, Final, Literal

import msgspec
from msgspec import Meta
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from rota import inspect
from rota.client import JobSpec, spec
from rota.client.debounce import MAX_DEBOUNCE_KEY, Debounce
from rota.client.spec import FAIR_KEY_RE, Enqueued, epoch_seconds, moment_seconds
from rota.client.workflow import GroupProgress as Progress
from rota.client.workflow import Related
from rota.errors import JobNotFound, PayloadTooLarge
from rota.protocol import bounds
from rota.protocol.job import NAME_RE
from rota.web.base import ApiError, JSONResponse, client_of, with_notice
from rota.web.declare import REFRESH, Ms, Routes, doc, found, is_api, json_answer, mirror, said
from rota.web.sets import JOB_SETS, MAX_IDS, RETRYABLE, JobTimes

__all__ = [
    "PRETTY_LIMIT",
    "EnqueueRequest",
    "GroupProgress",
    "JobDetail",
    "enqueue_body",
    "pretty",
    "routes",
]

routes = Routes()
NAME_PATTERN: Final = NAME_RE.pattern
# The ranges of the job's options (rota.protocol.bounds): the client's, the CLI's and the
# API's are one table.
MAX_DELAY: Final = bounds.MAX_DELAY
MAX_EPOCH: Final = spec.MAX_EPOCH  # 9999-12-31T23:59:59Z: one rule (rota.client.spec.epoch_seconds)
MAX_FAILS: Final = int(bounds.JOB["max_fails"].hi)
MIN_TIMEOUT: Final = bounds.JOB["timeout"].lo
MIN_EXPIRES: Final = bounds.JOB["expires_in"].lo
DEBOUNCE: Final = bounds.JOB["debounce_window"]
MAX_UNIQUE: Final = 1024
#: The longest indented rendering of a value sent: an 18 KB value nested 900 deep
#: indents to 16 MB. A value past it is shown as stored (and cut on the page).
PRETTY_LIMIT: Final = 64 * 1024
#: Nesting past this depth is not indented: each level adds two spaces to every line.
_PRETTY_DEPTH: Final = 16


class JobProgress(msgspec.Struct):
    """A running job's last ``ctx.progress``, read."""

    percent: float | None
    message: str


class GroupProgress(Progress, frozen=True):
    created_at: Ms | None  # when it was made; seconds in the Python type
    finished: Annotated[bool, said("every member complete, dead or aborted")]


class JobDetail(JobTimes, kw_only=True):
    """Everything about one job: its record's fields (the times in ms), its args and
    result decoded, its log lines and the jobs it is tied to."""

    args: Annotated[Any, said("the args decoded (null when they are not JSON)")]
    args_raw: str | None
    args_pretty: str | None
    result: Annotated[Any, said("the result decoded")]
    result_raw: str | None
    result_pretty: str | None
    progress: JobProgress | None
    progress_raw: str | None
    logs: list[str]
    parents: Annotated[list[Related], said("the jobs it waits for, in the order of after")]
    children: Annotated[
        list[Related], said("the jobs enqueued after it, oldest first (at most 500)")
    ]
    children_total: int
    unserved: Annotated[list[str], said("unfinished parents' names no pool serves")]
    callback: Annotated[Related | None, said("for a member of a group: the group's callback")]
    group_progress: Annotated[
        GroupProgress | None, said("the group it is a member or the callback of")
    ]


class Aborted(msgspec.Struct):
    id: str
    was: Annotated[str, said("its state before")]


#: A time an enqueue names: epoch seconds or ISO-8601 text (run_at, expires_at).
_Moment = (
    Annotated[float, doc(minimum=0, maximum=MAX_EPOCH)] | Annotated[str, doc(format="date-time")]
)


class EnqueueRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A job to enqueue; ``args`` or ``kwargs``, ``delay`` or ``run_at``."""

    #: What the fields' types cannot say, added to the document's schema.
    rules: ClassVar[dict[str, Any]] = {
        "not": {"anyOf": [{"required": ["args", "kwargs"]}, {"required": ["delay", "run_at"]}]}
    }

    name: Annotated[str, doc(pattern=NAME_PATTERN)]
    args: Annotated[list[Any] | None, said("positional args")] = None
    kwargs: Annotated[dict[str, Any] | None, said("keyword args")] = None
    delay: Annotated[float, doc(minimum=0, maximum=MAX_DELAY)] | None = None
    run_at: Annotated[
        _Moment | None, said("epoch seconds or an ISO-8601 time (UTC if no offset)")
    ] = None
    unique: Annotated[str, doc(minLength=1, maxLength=MAX_UNIQUE)] | None = None
    job_id: Annotated[
        Annotated[str, doc(pattern=NAME_PATTERN)] | None,
        Meta(
            description="this job's id (as the Python client's job_id): an id that exists"
            " enqueues nothing and answers 200 with that job, so a retry is safe"
        ),
    ] = None
    max_fails: Annotated[int, doc(minimum=1, maximum=MAX_FAILS)] | None = None
    timeout: Annotated[float, doc(minimum=MIN_TIMEOUT, maximum=MAX_DELAY)] | None = None
    expires_in: Annotated[
        Annotated[float, doc(minimum=MIN_EXPIRES, maximum=MAX_DELAY)] | None,
        said("seconds from now: not started by then, it never starts (it ends dead, expired)"),
    ] = None
    expires_at: Annotated[
        _Moment | None, said("as expires_in, a time: epoch seconds or ISO-8601 (UTC if no offset)")
    ] = None
    fair_key: Annotated[
        Annotated[str, doc(pattern=FAIR_KEY_RE.pattern)] | None,
        said("its fair key (a tenant): within the job name, keys take turns, FIFO within a key"),
    ] = None
    ordered: Annotated[
        bool,
        said(
            "route it by its name (as the setting ordered): the name's jobs share a shard"
            " and start in enqueue order"
        ),
    ] = False
    after: Annotated[
        Annotated[list[Annotated[str, doc(pattern=NAME_PATTERN)]], doc(maxItems=MAX_IDS)] | None,
        Meta(
            description="ids of jobs that must complete first; a job id that does not exist"
            " is a 422 and nothing is enqueued"
        ),
    ] = None
    debounce_key: Annotated[
        Annotated[str, doc(minLength=1, maxLength=MAX_DEBOUNCE_KEY)] | None,
        said("enqueues of this key within debounce_window become one job (200: absorbed)"),
    ] = None
    debounce_window: Annotated[
        Annotated[float, doc(minimum=DEBOUNCE.lo, maximum=DEBOUNCE.hi)] | None,
        said("seconds: the debounced job is due this long after (required with the key)"),
    ] = None
    debounce_mode: Annotated[
        Literal["first", "extend", "replace"],
        said("first: keep the pending job; extend: move its run time; replace: new args too"),
    ] = "extend"
    debounce_move: Annotated[bool, said("false: a replace keeps the pending job's run time")] = True


def _shown(field: str, text: str | None) -> dict[str, Any]:
    """A stored value's fields of :class:`JobDetail`: decoded, as stored, indented."""
    value, shown = pretty(text)
    return {field: value, f"{field}_raw": text, f"{field}_pretty": shown}


def pretty(text: str | None) -> tuple[Any, str | None]:
    """Decoded JSON and an indented rendering, None when that would pass
    :data:`PRETTY_LIMIT`; the text itself when it is not JSON (or nests deeper than
    the decoder goes)."""
    if text is None:
        return None, None
    try:
        value = msgspec.json.decode(text)
    except (msgspec.DecodeError, RecursionError):
        return None, text
    if len(text) > PRETTY_LIMIT // 2 or _deeper(value, _PRETTY_DEPTH):
        return value, None
    pretty = msgspec.json.format(text, indent=2)
    return value, pretty if len(pretty) <= PRETTY_LIMIT else None


def _deeper(value: Any, depth: int) -> bool:
    """Whether ``value`` nests more than ``depth`` arrays or objects deep (no recursion:
    a value may nest as deep as the decoder allows)."""
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            if level >= depth:
                return True
            stack += [(x, level + 1) for x in item if isinstance(x, list | dict)]
    return False


def _progress(text: str | None) -> JobProgress | None:
    if not text:
        return None
    head, _, message = text.partition(" ")
    try:
        return JobProgress(float(head), message)
    except ValueError:
        return JobProgress(None, text)


async def _page(request: Request, data: Any) -> dict[str, Any]:
    refresh = REFRESH if data["state"] in ("queued", "running", "waiting") else 0
    return {"job": data, "refresh": refresh, "sets": JOB_SETS, "retryable": RETRYABLE}


@routes.page("/jobs/{job_id}", "job.html", _page)
@routes.api("/api/jobs/{job_id}", "job", "Job")
async def job(request: Request) -> dict[str, Any]:
    """Everything about one job."""
    # The record's fields, then JobDetail's (replacing the times and args, result and
    # progress): a record's new field is sent, and documented, without a change here.
    client, job_id = client_of(request), request.path_params["job_id"]
    view = found(request, await inspect.job_view(client, job_id), "job", job_id)
    record, progress = view.record, view.group_progress
    detail = mirror(  # the record's times, in ms
        JobDetail,
        record,
        **_shown("args", record.args),
        **_shown("result", record.result),
        progress=_progress(record.progress),
        progress_raw=record.progress,
        **{f: getattr(view, f) for f in ("logs", "parents", "children", "children_total")},
        unserved=await inspect.unserved(client, view.parents),
        callback=view.callback,
        group_progress=None if progress is None else mirror(GroupProgress, progress),
    )
    return {**msgspec.structs.asdict(record), **msgspec.structs.asdict(detail)}


def _stored(field: Literal["args", "result"]) -> None:
    """A job's args or result as stored (the JSON text), whole: what a job page links
    to when it shows only the start of a large value."""

    async def read(request: Request) -> Response:
        job_id = request.path_params["job_id"]
        text = found(request, await client_of(request).admin.stored(job_id, field), "job", job_id)
        return Response(text or b"null", media_type="application/json")

    summary = f"A job's {field} as stored (JSON text)."
    routes.api(f"/api/jobs/{{job_id}}/{field}", field, None, summary=summary)(read)


_stored("args")
_stored("result")


@routes.action("/jobs/{job_id}/abort", "abort", Aborted)
async def abort(request: Request) -> Aborted | Response:
    """Abort a job."""
    job_id = request.path_params["job_id"]
    was = await client_of(request).abort(job_id)
    found(request, None if was == "missing" else was, "job", job_id)  # the script says so
    if is_api(request):
        return Aborted(job_id, was)
    return RedirectResponse(with_notice(f"/jobs/{job_id}", "aborted"), status_code=303)


def _run_at(body: EnqueueRequest) -> float | None:
    if body.delay is not None and body.run_at is not None:
        raise ApiError(422, 'give "delay" or "run_at", not both')
    if body.delay is not None:
        if not (math.isfinite(body.delay) and 0 <= body.delay <= MAX_DELAY):
            raise ApiError(422, f"delay: seconds from 0 to {MAX_DELAY:.0f}")
        return time.time() + body.delay
    try:
        if isinstance(body.run_at, str):
            return epoch_seconds("run_at", moment_seconds("run_at", body.run_at))
        return None if body.run_at is None else epoch_seconds("run_at", body.run_at)
    except ValueError as exc:  # the client's rule, and its words
        raise ApiError(422, str(exc)) from None


def _debounce(body: EnqueueRequest) -> Debounce | None:
    """The body's debounce (checked with the rest by the client: a 422 names it)."""
    if body.debounce_key is None and body.debounce_window is None:
        return None
    if body.debounce_key is None or body.debounce_window is None:
        raise ApiError(422, 'give "debounce_key" and "debounce_window" together')
    return Debounce(body.debounce_key, body.debounce_window, body.debounce_mode, body.debounce_move)


_ENQUEUED: Final = {
    "201": json_answer(Enqueued, "enqueued"),
    "200": json_answer(
        Enqueued, "nothing new: the unique key is held, or the debounce key's pending job took it"
    ),
}


@routes.api(
    "/api/jobs", "enqueue", Enqueued, 413, body=EnqueueRequest, answers=_ENQUEUED, post=True
)
async def enqueue(request: Request, body: EnqueueRequest) -> Response:
    """Enqueue a job."""
    job_ = await enqueue_body(request, body)
    return JSONResponse(job_, 201 if job_.created else 200)


async def enqueue_body(request: Request, body: EnqueueRequest) -> Enqueued:
    """What ``POST /api/jobs`` and the console's enqueue form (:mod:`rota.web.editor`)
    do with a body: checked, then enqueued by the client, whose refusals are an
    :class:`ApiError` in its words (413 too large, 422 anything else)."""
    if body.args is not None and body.kwargs is not None:
        raise ApiError(422, 'give "args" or "kwargs", not both')
    if body.max_fails is not None and not 1 <= body.max_fails <= MAX_FAILS:
        raise ApiError(422, f"max_fails: from 1 to {MAX_FAILS}")
    if body.timeout is not None and not (
        math.isfinite(body.timeout) and MIN_TIMEOUT <= body.timeout <= MAX_DELAY
    ):
        raise ApiError(422, f"timeout: seconds from {MIN_TIMEOUT} to {MAX_DELAY:.0f}")
    if body.unique is not None and not 1 <= len(body.unique) <= MAX_UNIQUE:
        raise ApiError(422, f"unique: 1 to {MAX_UNIQUE} characters")
    if body.after is not None and len(body.after) > MAX_IDS:
        raise ApiError(422, f"after: at most {MAX_IDS} job ids")
    spec_ = JobSpec(
        debounce=_debounce(body),
        name=body.name,
        args=tuple(body.args or ()),
        kwargs=body.kwargs or {},
        run_at=_run_at(body),
        unique=body.unique,
        job_id=body.job_id,
        max_fails=body.max_fails,
        timeout=body.timeout,
        after=tuple(body.after or ()),
        expires_in=body.expires_in,
        expires_at=body.expires_at,
        fair_key=body.fair_key,
        ordered=body.ordered,
    )
    try:
        (job_,) = await client_of(request).enqueue_many([spec_])
    except PayloadTooLarge as exc:
        raise ApiError(413, str(exc)) from None
    except (JobNotFound, ValueError, TypeError) as exc:  # a missing parent: nothing written
        raise ApiError(422, str(exc)) from None
    return job_
