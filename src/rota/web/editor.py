"""The console's job editor: enqueue a job from a form (its args typed as JSON), the
same form filled with a job's name, args and options (duplicate), and edit then retry
a job that failed (its args replaced, in place: see :mod:`rota.client.console`).

The form enqueues through :func:`rota.web.jobs.enqueue_body`, the code of ``POST
/api/jobs``: the same checks and the client's own refusals, shown on the page as the
one line the client says (never a trace). Args are parsed by the client's parser of
typed JSON (:func:`rota.protocol.codec.parse_input`), which names what is wrong."""

from __future__ import annotations

import re
from typing import Annotated, Any, Final
from urllib.parse import quote

import msgspec
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from rota.client import console
from rota.client.console import EDITABLE, Editable
from rota.errors import JobNotFound, PayloadTooLarge
from rota.protocol import codec
from rota.protocol.job import JobRecord
from rota.web.base import ApiError, client_of, render, with_notice
from rota.web.declare import Routes, found, said
from rota.web.jobs import EnqueueRequest, enqueue_body, pretty

__all__ = ["FIELDS", "EditRequest", "Edited", "routes"]

routes = Routes()
#: The form's fields, as ``POST /api/jobs`` names them.
FIELDS: Final = (
    *("name", "args", "delay", "run_at", "unique", "fair_key"),
    *("max_fails", "timeout", "expires_in", "after"),
)
_NUMBERS: Final = {"delay": float, "max_fails": int, "timeout": float, "expires_in": float}


class EditRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The new args of a job to retry or a dead job."""

    args: Annotated[
        list[Any] | dict[str, Any], said("a JSON array (positional args) or object (keyword args)")
    ]


class Edited(msgspec.Struct):
    id: str
    was: Annotated[str, said("the set it was in: retry or dead")]
    state: Annotated[str, said("queued: it runs again with the new args")] = "queued"


def _args(text: str) -> Any:
    """The args typed in the editor: a JSON array or object (empty: no args)."""
    if not text.strip():
        return []
    try:
        value = codec.parse_input(text)
    except ValueError as exc:
        raise ApiError(422, f"args: {exc}") from None
    if not isinstance(value, list | dict):
        kind = "null" if value is None else type(value).__name__
        raise ApiError(422, f"args: a JSON array (positional args) or object, not {kind}")
    return value


def _number(values: dict[str, str], field: str) -> Any:
    text = values[field].strip()
    if not text:
        return None
    try:
        return _NUMBERS[field](text)
    except ValueError:
        kind = "a whole number" if _NUMBERS[field] is int else "a number of seconds"
        raise ApiError(422, f"{field}: {kind}, not {text[:40]!r}") from None


def _body(values: dict[str, str]) -> EnqueueRequest:
    """The form's fields as the body ``POST /api/jobs`` takes (empty fields: absent)."""
    args = _args(values["args"])
    text = {f: values[f].strip() or None for f in ("run_at", "unique", "fair_key")}
    after = re.split(r"[\s,]+", values["after"].strip()) if values["after"].strip() else None
    return EnqueueRequest(
        name=values["name"].strip(),
        args=args if isinstance(args, list) and args else None,
        kwargs=args if isinstance(args, dict) else None,
        delay=_number(values, "delay"),
        run_at=text["run_at"],
        unique=text["unique"],
        fair_key=text["fair_key"],
        max_fails=_number(values, "max_fails"),
        timeout=_number(values, "timeout"),
        expires_in=_number(values, "expires_in"),
        after=after,
    )


def _filled(record: JobRecord) -> dict[str, str]:
    """The form filled as ``record`` was enqueued: its name, args (indented) and the
    options that describe the job rather than one run of it (not its id, its run time
    or its parents)."""
    args = pretty(record.args)[1] or record.args or ""
    out = dict.fromkeys(FIELDS, "")
    out.update(name=record.name, args=args, unique=record.unique_key or "")
    out.update(fair_key=record.fair_key or "")
    out.update(max_fails="" if record.max_fails is None else str(record.max_fails))
    out.update(timeout="" if record.timeout is None else f"{record.timeout:g}")
    return out


def _form(
    request: Request, values: dict[str, str], error: str | None = None, code: int = 200, **ctx: Any
) -> Response:
    context = {"values": values, "error": error, "source": None, **ctx}
    return render(request, "enqueue.html", context, code)


@routes.form("/enqueue", "GET", "POST")
async def enqueue(request: Request) -> Response:
    """The enqueue form (``?from=<id>``: filled as that job was: duplicate), and its
    post: a 303 to the job enqueued, or the form again with the client's refusal."""
    if request.method == "GET":
        source = request.query_params.get("from")
        if not source:
            return _form(request, dict.fromkeys(FIELDS, "") | {"args": "[]"})
        record = found(request, await client_of(request).job(source), "job", source)
        return _form(request, _filled(record), source=source)
    form = await request.form()
    values = {f: v if isinstance(v := form.get(f), str) else "" for f in FIELDS}
    try:
        job = await enqueue_body(request, _body(values))
    except ApiError as exc:
        return _form(request, values, exc.message, exc.status)
    done = "enqueued" if job.created else "enqueued-held"
    return RedirectResponse(with_notice(f"/jobs/{quote(job.id, safe=':')}", done), 303)


async def _edit(request: Request, job_id: str, args: Any) -> str:
    """Edit then retry ``job_id``: the set it was in; an :class:`ApiError` in the
    client's words (404 no job, 409 not in an editable set or left it, 413, 422)."""
    client = client_of(request)
    record = found(request, await client.job(job_id), "job", job_id)
    if record.state not in EDITABLE:
        raise ApiError(409, f"job {job_id} is {record.state}: only a job to retry or a dead job")
    which: Editable = "retry" if record.state == "retry" else "dead"
    try:
        await console.retry_edited(client, which, job_id, args)
    except JobNotFound as exc:
        raise ApiError(409, str(exc)) from None
    except PayloadTooLarge as exc:
        raise ApiError(413, str(exc)) from None
    except (ValueError, TypeError) as exc:
        raise ApiError(422, str(exc)) from None
    return which


@routes.form("/jobs/{job_id}/edit", "GET", "POST")
async def edit(request: Request) -> Response:
    """The args of a job to retry or a dead job in the editor, and its post: the job
    queued again with the args posted, or the editor again saying why not."""
    job_id = request.path_params["job_id"]
    record = found(request, await client_of(request).job(job_id), "job", job_id)
    if request.method == "GET":
        text = pretty(record.args)[1] or record.args or ""
        return render(request, "edit.html", {"job": record, "args": text, "error": None})
    field = (await request.form()).get("args")
    text = field if isinstance(field, str) else ""
    try:
        await _edit(request, job_id, _args(text))
    except ApiError as exc:
        context = {"job": record, "args": text, "error": exc.message}
        return render(request, "edit.html", context, exc.status)
    return RedirectResponse(with_notice(f"/jobs/{quote(job_id, safe=':')}", "edited"), 303)


@routes.api("/api/jobs/{job_id}/edit", "edit_retry", Edited, 409, 413, body=EditRequest, post=True)
async def edit_api(request: Request, body: EditRequest) -> Edited:
    """Edit then retry a job to retry or a dead job: its args replaced, queued again."""
    job_id = request.path_params["job_id"]
    return Edited(job_id, await _edit(request, job_id, body.args))
