"""The operator's actions on one job wherever it waits, and the clean of a set by age:
a queued job moved to the front of its queue ("run next") or deleted, a job of the
retry set killed (to the dead set now, reason ``killed``), and the jobs of the dead,
retry and scheduled sets or the kept complete jobs older than an age deleted. Each from
a page's form (a 303 back, with a notice) or the API (JSON), through
:class:`rota.client.admin_jobs.JobActions`.

A job no longer where the operator saw it (a pool took it, it finished, the scheduler
queued it) is a 404 saying so, and nothing is done to it. Every action is a POST: the
security middleware refuses it to the read-only credential, checks where it comes from
(CSRF) and writes the audit entry, which names the job (its path, and ``ids``) or the
clean's filter and how many jobs it deleted (``filter``, ``count``).

"Run now" of a queued job is this module's "to the front" (see
:mod:`rota.client.admin_jobs`): one action under one name; "Run now" of a scheduled job
is the set's retry (:mod:`rota.web.sets`).
"""

from __future__ import annotations

import math
from typing import Annotated, Final

import msgspec
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from rota.client.admin_jobs import CLEANED, MAX_AGE, MAX_KILL, Cleaned
from rota.web.base import ApiError, JSONResponse, back, client_of
from rota.web.declare import Routes, doc, is_api, said

__all__ = ["UNITS", "routes"]

routes = Routes()
#: The units a page's clean form offers, in seconds.
UNITS: Final = {"seconds": 1, "minutes": 60, "hours": 3600, "days": 86400}


class Fronted(msgspec.Struct):
    id: str
    front: Annotated[bool, said("true: the job is the next its queue gives")] = True


class Unqueued(msgspec.Struct):
    deleted: int


class Kill(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The jobs of the retry set to kill."""

    ids: Annotated[list[str], doc(minItems=1, maxItems=MAX_KILL)]


class Killed(msgspec.Struct):
    killed: int


class Clean(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Delete the jobs older than ``older_than`` seconds, of job name ``name`` only when
    given."""

    older_than: Annotated[
        float,
        doc(minimum=0, maximum=MAX_AGE),
        said("seconds: the dead and complete jobs by when they ended, the others by enqueue"),
    ]
    name: str | None = None


class CleanedJobs(msgspec.Struct):
    deleted: int


def _refuse(request: Request, status: int, text: str) -> Exception:
    """A refusal in the API's form (JSON) or a page's (its error page)."""
    return ApiError(status, text) if is_api(request) else HTTPException(status, text)


def _one(action: str, summary: str) -> None:
    """A queued job's action: its form and its API endpoint."""

    async def act(request: Request) -> Response:
        job_id = request.path_params["job_id"]
        admin = client_of(request).admin
        done = await (admin.jobs.to_front if action == "front" else admin.jobs.delete_queued)(
            job_id
        )
        if not done:
            raise _refuse(request, 404, f"job {job_id} is not queued (taken, finished or gone)")
        request.state.audit_ids = [job_id]
        if is_api(request):
            return JSONResponse(Fronted(job_id) if action == "front" else Unqueued(1))
        notice = "fronted" if action == "front" else "deleted"
        if action == "front":
            return await back(request, f"/jobs/{job_id}", notice, 1)
        return await back(request, "/queues", notice, 1, f"/jobs/{job_id}")

    answer = Fronted if action == "front" else Unqueued
    routes.action(f"/queued/{{job_id}}/{action}", f"queued_{action}", answer, summary=summary)(act)


_one(
    "front",
    "Move a queued job to the front of its queue and wake a pool: run it next (run now).",
)
_one("delete", "Delete a queued job (404 when a pool took it meanwhile).")


@routes.form("/retry/{job_id}/kill")
async def kill_one(request: Request) -> Response:
    """Kill one job of the retry set from a page."""
    job_id = request.path_params["job_id"]
    n = request.state.audit_count = await client_of(request).admin.jobs.kill([job_id])
    if n == 0:
        raise HTTPException(404, f"no job {job_id} among the retry jobs")
    request.state.audit_ids = [job_id]
    return await back(request, "/retry", "killed", n)


@routes.api("/api/retry/kill", "retry_kill", Killed, 404, body=Kill, post=True)
async def kill(request: Request, body: Kill) -> Killed:
    """Move jobs of the retry set to the dead set now, reason killed, without another
    try (404 naming the ids the set does not hold; nothing is done then)."""
    ids = list(dict.fromkeys(body.ids))
    if not 1 <= len(ids) <= MAX_KILL:
        raise ApiError(422, f"ids: give 1 to {MAX_KILL} job ids")
    admin = client_of(request).admin
    held = set(await admin.in_set("retry", ids))
    missing = [i for i in ids if i not in held]
    if missing:
        raise ApiError(404, f"not among the retry jobs: {', '.join(missing[:10])}")
    request.state.audit_ids = ids
    request.state.audit_count = n = await admin.jobs.kill(ids)
    return Killed(n)


async def _clean(request: Request, which: Cleaned, older_than: float, name: str | None) -> int:
    """The clean, its audit entry's filter and count; a bad value a 400 (422 in the
    API) of one line naming it."""
    try:
        n = await client_of(request).admin.jobs.clean(which, older_than, name)
    except ValueError as exc:
        raise _refuse(request, 422 if is_api(request) else 400, str(exc)) from None
    given = {"older_than": older_than, "name": name}
    request.state.audit_filter = {k: v for k, v in given.items() if v is not None}
    request.state.audit_count = n
    return n


def _age(form_value: object, unit: object) -> float:
    """A form's age (a number and a unit) in seconds, else a 400 naming the field."""
    text = form_value.strip() if isinstance(form_value, str) else ""
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or unit not in UNITS:
        shown = repr(text[:40]) if unit in UNITS else f"unit {str(unit)[:20]!r}"
        raise HTTPException(400, f"older_than: a number of {', '.join(UNITS)}, not {shown}")
    return number * UNITS[str(unit)]


def _declare_clean(which: Cleaned) -> None:
    page = "/complete" if which == "complete" else f"/{which}"

    @routes.form(f"{page}/clean")
    async def form(request: Request) -> Response:
        got = await request.form()
        name = got.get("name")
        name = name.strip() if isinstance(name, str) and name.strip() else None
        n = await _clean(request, which, _age(got.get("older_than"), got.get("unit")), name)
        return await back(request, page, "cleaned", n)

    @routes.api(
        f"/api/{which}/clean",
        f"{which}_clean",
        CleanedJobs,
        body=Clean,
        post=True,
        summary=f"Delete the {which} jobs older than an age (of one name): how many.",
    )
    async def api(request: Request, body: Clean) -> CleanedJobs:
        return CleanedJobs(await _clean(request, which, body.older_than, body.name))


for _which in CLEANED:
    _declare_clean(_which)
