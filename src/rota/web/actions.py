"""The form actions behind the pages' buttons: each answers with a 303 redirect back to
the page it came from (a refused form of /queues renders that page again, with the
error). Split from :mod:`rota.web.pages`, which renders the pages.
"""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from rota.client.shard_ops import SEARCH_LIMIT
from rota.web import views
from rota.web.base import client_of, known_queue, local_path, with_notice
from rota.web.pages import queues
from rota.web.request_bodies import MAX_IDS, MAX_LIMIT, MAX_POSITION, MAX_SEARCH

__all__ = ["routes"]


async def _next(request: Request, default: str) -> str:
    form = await request.form()
    value = form.get("next")
    return local_path(value if isinstance(value, str) else None, default)


async def queue_action(request: Request) -> Response:
    action = request.path_params["action"]
    if action not in ("pause", "resume", "clear", "rate", "limit"):
        raise HTTPException(404, f"no action {action}")
    name = await known_queue(request)
    client = client_of(request)
    target = await _next(request, "/queues")
    n = None
    if action in ("rate", "limit"):
        value = (await request.form()).get(action)
        text = value.strip() if isinstance(value, str) else ""
        try:
            if action == "rate":
                await client.admin.set_rate(name, text or None)
            else:
                await client.admin.set_limit(name, _limit(text))
        except ValueError as exc:
            return await queues(request, error=f"{name}: {exc}")
        done = f"{action}-set" if text else f"{action}-removed"
        return RedirectResponse(with_notice(target, done), 303)
    if action == "pause":
        await client.admin.pause(name)
    elif action == "resume":
        await client.admin.resume(name)
    else:
        n = await client.admin.clear_queue(name)
    done = {"pause": "paused", "resume": "resumed", "clear": "cleared"}[action]
    return RedirectResponse(with_notice(target, done, n), status_code=303)


def _limit(text: str) -> int | None:
    """A concurrency limit typed in the form: a whole number from 1, or nothing."""
    if not text:
        return None
    if not text.isdigit() or not 1 <= int(text) <= MAX_LIMIT:
        raise ValueError(f"the limit must be a whole number from 1 to {MAX_LIMIT}, not {text!r}")
    return int(text)


def set_action(which: views.JobSet) -> Any:
    async def act(request: Request) -> Response:
        job_id, action = request.path_params["job_id"], request.path_params["action"]
        client = client_of(request)
        actions = ("retry", "delete") if which in views.RETRYABLE else ("delete",)
        if action not in actions or [job_id] != await client.admin.in_set(which, [job_id]):
            raise HTTPException(404, f"no job {job_id} among the {which} jobs")
        target = await _next(request, f"/{which}")
        if target.startswith(f"/jobs/{job_id}") and action == "delete":
            target = f"/{which}"
        if action == "retry":
            n = await client.admin.retry(which, [job_id])
        else:
            n = await client.admin.delete(which, [job_id])
        return RedirectResponse(
            with_notice(target, "retried" if action == "retry" else "deleted", n), 303
        )

    act.__name__ = f"{which}_action"
    return act


async def _act(
    request: Request, which: views.JobSet, action: str, ids: list[str] | None
) -> Response:
    """Retry or delete ``ids`` of a set (None: all of it), and go back to the page."""
    client = client_of(request)
    target = await _next(request, f"/{which}")
    if ids == []:
        n = 0
    elif action == "retry":
        n = await client.admin.retry(which, ids)
    else:
        n = await client.admin.delete(which, ids)
    request.state.audit_count = n
    done = "retried" if action == "retry" else "deleted"
    return RedirectResponse(with_notice(target, done, n), status_code=303)


def set_all_action(which: views.JobSet, action: str) -> Any:
    """Retry or delete every job of a set, or, when the form carries the page's search
    (``q``), only the jobs that match it: a bulk button under a search acts on what the
    operator sees listed, never on the whole set; under a search that stopped, on the
    matching jobs of the part of the set it read (``from``, ``to``). A field out of its
    range is refused (400, naming it) before anything is done; the audit entry records
    the filter and how many jobs were acted on."""

    async def act(request: Request) -> Response:
        form = await request.form()
        q = _search(form.get("q"))
        start, end = _position(form.get("from"), "from"), _position(form.get("to"), "to")
        ids: list[str] | None = None
        if q:
            scan = SEARCH_LIMIT if end is None else max(0, end - (start or 0))
            found = await client_of(request).admin.search(
                which, q, 0, SEARCH_LIMIT, start=start or 0, scan=scan
            )
            ids = [j.id for j in found.jobs]
            given = {"q": q, "from": start, "to": end}
            request.state.audit_filter = {k: v for k, v in given.items() if v is not None}
        return await _act(request, which, action, ids)

    act.__name__ = f"{which}_{action}_all"
    return act


def _search(field: object) -> str:
    """The search text of a bulk action's form ('' for none)."""
    if field is None:
        return ""
    if not isinstance(field, str) or len(field) > MAX_SEARCH:
        raise HTTPException(400, f"q: a search text of at most {MAX_SEARCH} characters")
    return field.strip()


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


def set_selected_action(which: views.JobSet, action: str) -> Any:
    """Retry or delete the jobs ticked on a page of a set (the form's ``id`` fields),
    those of them still in the set, and nothing else: a search or another page does not
    widen it. The ids go into the audit log's entry."""

    async def act(request: Request) -> Response:
        ticked = (await request.form()).getlist("id")
        ids = list(dict.fromkeys(i for i in ticked if isinstance(i, str) and i))
        if len(ids) > MAX_IDS:
            raise HTTPException(400, f"select at most {MAX_IDS} jobs at once")
        if not ids:
            target = await _next(request, f"/{which}")
            return RedirectResponse(with_notice(target, "none-selected"), status_code=303)
        there = await client_of(request).admin.in_set(which, ids)
        request.state.audit_ids = there
        return await _act(request, which, action, there)

    act.__name__ = f"{which}_{action}_selected"
    return act


async def abort(request: Request) -> Response:
    job_id = request.path_params["job_id"]
    if await client_of(request).abort(job_id) == "missing":  # the script says so: no read
        raise HTTPException(404, f"no job {job_id}")
    return RedirectResponse(with_notice(f"/jobs/{job_id}", "aborted"), status_code=303)


def _routes() -> list[BaseRoute]:
    out: list[BaseRoute] = [
        Route("/queues/{name}/{action}", queue_action, methods=["POST"]),
        Route("/jobs/{job_id}/abort", abort, methods=["POST"]),
    ]
    for which in views.JOB_SETS:
        # a waiting job runs when its parents complete: it is deleted, never retried
        for action in ("retry", "delete") if which in views.RETRYABLE else ("delete",):
            out += [
                Route(f"/{which}/{action}-all", set_all_action(which, action), methods=["POST"]),
                Route(
                    f"/{which}/{action}-selected",
                    set_selected_action(which, action),
                    methods=["POST"],
                ),
            ]
        out.append(Route(f"/{which}/{{job_id}}/{{action}}", set_action(which), methods=["POST"]))
    return out


routes = _routes()
