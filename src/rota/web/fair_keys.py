"""Fair keys of a job name, the operator's side: the keys with the largest backlog
(their figures and settings) and the name's default key limit, and acting on one key
(pause, resume, a limit, a weight, a rate, clear) or on that default, from the queue
page's forms (a 303 back to the page) or the API (JSON). Every change goes through
``client.admin`` (:mod:`rota.client.fair`), so the web checks nothing the Python API
does not, in the same words; the security middlewares refuse the read-only credential,
a cross-site form and record each change in the audit log, as for every other action.

A key is any text of 1 to 200 printable ASCII characters (``/``, quotes and ``<``
included), so its path parameter takes the rest of the path up to the action
(``{key:path}``): a client sends it percent-encoded. Only the keys ``.`` and ``..``
cannot be named in a path (URLs treat them as steps): ``rota keys`` and the Python
API reach them.
"""

from __future__ import annotations

from typing import Annotated, Any, Final
from urllib.parse import quote

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from rota.client import Client
from rota.client.fair import FairKeyInfo
from rota.client.fair_jobs import FAIR_JOBS, FairKeyJob, FairKeyJobs
from rota.client.fair_reads import default_key_limit
from rota.client.spec import check_fair_key
from rota.protocol.bounds import FAIR
from rota.web.base import ApiError, back, client_of, known_queue
from rota.web.declare import Ms, Number, Routes, answer, doc, is_api, mirror, pages, said

__all__ = ["TOP", "FairKeys", "KeyJobs", "read", "routes"]

routes = Routes()
#: Keys the queue page lists (the API takes ``?top=`` up to 1000).
TOP: Final = 20
_TOP: Final = Number("top", TOP, 1, int(FAIR["top"].hi), "keys listed, the largest backlog first")
_LIMIT: Final = int(FAIR["limit"].hi)
_WEIGHT: Final = int(FAIR["weight"].hi)
#: A page of one key's jobs (the key's page shows 50 a page).
_OFFSET: Final = Number("offset", 0, 0, int(FAIR_JOBS["offset"].hi), "queued jobs skipped")
_COUNT: Final = Number(
    "count", 50, 1, int(FAIR_JOBS["count"].hi), "jobs listed (and running ones)", page=50
)
_KEY: Final = "/api/queues/{name}/keys/{key:path}/"
_FORM: Final = "/queues/{name}/keys/{key:path}/"


class FairKeys(msgspec.Struct):
    """The fair keys of a job name with the largest backlog, largest first, then those
    with jobs running and none queued, and the limit of every key without its own."""

    name: str
    default_limit: Annotated[int | None, said("every key's limit unless its own (null: none)")]
    keys: list[FairKeyInfo]


class KeyJob(FairKeyJob, frozen=True):
    """One job of a fair key, its times in ms."""

    enqueued_at: Ms | None = None
    started_at: Ms | None = None
    deadline: Ms | None = None


class KeyJobs(FairKeyJobs, frozen=True):
    """A page of the queued jobs of one fair key, the next to run first, and its first
    running jobs (the soonest lease deadline first)."""

    jobs: list[KeyJob]  # type: ignore[assignment]
    running_jobs: list[KeyJob]  # type: ignore[assignment]


KeyState = answer("KeyState", __name__, name=str, key=str, paused=bool)
KeyLimit = answer("KeyLimit", __name__, name=str, key=str | None, limit=int | None)
KeyWeight = answer("KeyWeight", __name__, name=str, key=str, weight=int | None)
KeyRate = answer("KeyRate", __name__, name=str, key=str, rate=str | None)
KeyCleared = answer("KeyCleared", __name__, name=str, key=str, deleted=int)


class KeyLimitRequest(msgspec.Struct, forbid_unknown_fields=True):
    limit: Annotated[
        Annotated[int, doc(minimum=1, maximum=_LIMIT)] | None,
        said("most jobs of the key running at once across all pools; null: no limit"),
    ]


class WeightRequest(msgspec.Struct, forbid_unknown_fields=True):
    weight: Annotated[
        Annotated[int, doc(minimum=1, maximum=_WEIGHT)] | None,
        said("the key's turns for each one of a key of weight 1; null: back to 1"),
    ]


class KeyRateRequest(msgspec.Struct, forbid_unknown_fields=True):
    rate: Annotated[
        str | None,
        said("jobs of the key that may start per second, minute or hour, e.g. '10/s'; null: none"),
    ]


async def read(client: Client, name: str, top: int = TOP) -> FairKeys:
    """The section of the queue page and the API's answer."""
    keys = await client.admin.fair.of(name, top)
    return FairKeys(name, await default_key_limit(client, name), keys)


@routes.api("/api/queues/{name}/keys", "queue_keys", FairKeys, params=(_TOP,))
async def keys(request: Request) -> FairKeys:
    """The fair keys of a queue with the largest backlog, with their settings."""
    return await read(client_of(request), await known_queue(request), _TOP.read(request))


async def _key_page(request: Request, data: Any) -> dict[str, Any]:
    """The key's page: its paging links and the JSON it shows."""
    name, key, offset = data["name"], data["key"], data["offset"]
    here = f"/queues/{quote(name)}/keys/{quote(key, safe='')}/jobs"
    return {
        "api": "/api" + here + (f"?offset={offset}" if offset else ""),
        **pages(offset, data["count"], data["queued"]),
    }


@routes.page("/queues/{name}/keys/{key:path}/jobs", "fair_key.html", _key_page)
@routes.api(_KEY + "jobs", "queue_key_jobs", KeyJobs, params=(_OFFSET, _COUNT))
async def key_jobs(request: Request) -> KeyJobs:
    """A page of the queued jobs of one fair key, the next to run first, and its first
    running jobs."""
    name, key = await _named(request)
    offset, count = _OFFSET.read(request), _COUNT.read(request)
    view = await client_of(request).admin.fair.jobs(name, key, offset, count)
    return mirror(
        KeyJobs,
        view,
        jobs=[mirror(KeyJob, j) for j in view.jobs],
        running_jobs=[mirror(KeyJob, j) for j in view.running_jobs],
    )


async def _named(request: Request) -> tuple[str, str]:
    """The queue and the key the path names: a 404 for a queue that is not one, or for
    text that is no fair key."""
    name, key = await known_queue(request), request.path_params["key"]
    try:
        check_fair_key(key, "key")
    except ValueError:
        raise ApiError(404, f"no fair key {key[:80]!r}") from None
    return name, key


async def _done(request: Request, name: str, body: Any, done: str, n: int | None = None) -> Any:
    """The API's answer, or the form's: back to the queue's page, saying what was done."""
    return body if is_api(request) else await back(request, f"/queues/{quote(name)}", done, n)


def _switch(verb: str, paused: bool, summary: str) -> None:
    """Pause or resume one fair key (a form and an API route), answered with its state."""

    @routes.action(_FORM + verb, f"queue_key_{verb}", KeyState, summary=summary)
    async def switch(request: Request) -> Any:
        name, key = await _named(request)
        fair = client_of(request).admin.fair
        await (fair.pause_key if paused else fair.resume_key)(name, key)
        return await _done(request, name, KeyState(name, key, paused), f"key-{verb}d")


_switch(
    "pause", True, "Pause one fair key of a queue: its jobs stay queued, its running ones finish."
)
_switch("resume", False, "Resume one fair key of a queue.")


@routes.action(_FORM + "clear", "queue_key_clear", KeyCleared)
async def clear(request: Request) -> Any:
    """Delete the queued jobs of one fair key of a queue (running ones finish)."""
    name, key = await _named(request)
    n = await client_of(request).admin.fair.clear_key(name, key)
    return await _done(request, name, KeyCleared(name, key, n), "key-cleared", n)


async def _set(client: Client, what: str, name: str, key: str | None, value: Any) -> None:
    """One setting through the admin (a ValueError in its words for a value out of range)."""
    admin = client.admin
    if what == "limit":
        await admin.fair.set_key_limit(name, key, value)
    elif key is not None and what == "weight":
        await admin.fair.set_weight(name, key, value)
    elif key is not None:
        await admin.fair.set_key_rate(name, key, value)


_ACROSS: Final = " of one fair key (across all pools)."
#: A key's settings the API sets, each at ``…/keys/{key}/<setting>``: the body it takes
#: (one field, named as the setting), its answer, and what the document says of it.
_SETTINGS: Final[dict[str, tuple[type[msgspec.Struct], type[msgspec.Struct], str]]] = {
    "limit": (KeyLimitRequest, KeyLimit, "Set or remove the concurrency limit" + _ACROSS),
    "weight": (WeightRequest, KeyWeight, "Set the weight of one fair key (null: back to 1)."),
    "rate": (KeyRateRequest, KeyRate, "Set or remove the rate limit" + _ACROSS),
}


def _api_setting(what: str) -> None:
    asked, said, summary = _SETTINGS[what]

    @routes.api(_KEY + what, f"queue_key_{what}", said, body=asked, post=True, summary=summary)
    async def setting(request: Request, body: msgspec.Struct) -> msgspec.Struct:
        name, key = await _named(request)
        value = getattr(body, what)
        try:
            await _set(client_of(request), what, name, key, value)
        except ValueError as exc:
            raise ApiError(422, str(exc)) from None
        return said(name, key, value)


for _what in _SETTINGS:
    _api_setting(_what)


@routes.api(
    "/api/queues/{name}/key-limit",
    "queue_key_default_limit",
    KeyLimit,
    body=KeyLimitRequest,
    post=True,
)
async def set_default_limit(request: Request, body: KeyLimitRequest) -> msgspec.Struct:
    """Set or remove the concurrency limit of every fair key of a queue without its own."""
    name = await known_queue(request)
    try:
        await client_of(request).admin.fair.set_key_limit(name, None, body.limit)
    except ValueError as exc:
        raise ApiError(422, str(exc)) from None
    return KeyLimit(name, None, body.limit)


def _number(what: str, text: str, hi: int) -> int | None:
    """A limit or a weight typed in a form: empty or ``none`` for none."""
    if text.lower() in ("", "none"):
        return None
    # ASCII digits only: str.isdigit() takes "²" (no int) and "١٢" (12), and a number
    # of thousands of digits is past int()'s own limit; neither is a count anyone typed
    if not (text.isascii() and text.isdigit()) or len(text) > 9 or not 1 <= int(text) <= hi:
        raise ValueError(f"the {what} must be a whole number from 1 to {hi}, or none, not {text!r}")
    return int(text)


@routes.form(_FORM + "limit")
@routes.form(_FORM + "weight")
@routes.form(_FORM + "rate")
@routes.form("/queues/{name}/key-limit")
async def set_form(request: Request) -> Response:
    """A key's limit, weight or rate, or the default limit, typed in the queue page's
    form (empty or ``none``: removed); a value that does not fit is a 400 saying why."""
    default = "key" not in request.path_params
    name, key = (await known_queue(request), None) if default else await _named(request)
    what = "limit" if default else request.url.path.rpartition("/")[2]
    field = (await request.form()).get("value")
    text = field.strip() if isinstance(field, str) else ""
    try:
        value: Any = text if what == "rate" else None
        if what != "rate":
            value = _number(what, text, _WEIGHT if what == "weight" else _LIMIT)
        await _set(client_of(request), what, name, key, value or None)
    except ValueError as exc:
        raise ApiError(400, f"{name} {key or 'default'}: {exc}") from None
    done = f"key-{'default' if default else what}-{'set' if value else 'removed'}"
    return await back(request, f"/queues/{quote(name)}", done)
