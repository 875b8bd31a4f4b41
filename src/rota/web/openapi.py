"""The OpenAPI 3.1 document of the JSON API, served at ``/api/openapi.json``: derived
from the endpoints' declarations (:mod:`rota.web.declare`), so that it cannot drift from
them.

Each API route's summary is its docstring's first paragraph, the rest its
:class:`~rota.web.declare.Operation`, its path parameters the route's; an API route
without one stops the document being made. The components are the bodies the routes
send and take, and the types those refer to. Two are a job record with changes, put
together here as the views put the JSON together: ``Job`` is
:class:`~rota.protocol.job.JobRecord`'s fields overlaid with
:class:`~rota.web.jobs.JobDetail`'s, and ``JobSummary`` the record's fields named by
:data:`~rota.web.sets.SUMMARY`, with the times of :class:`~rota.web.sets.JobTimes`. A
body that mirrors one of rota's types (:data:`MIRRORS`) has its fields described as that
type describes them.
"""

from __future__ import annotations

import copy
import functools
import inspect
import re
from collections.abc import Sequence
from typing import Any, Final

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from rota.client.spec import FAIR_KEY_RE
from rota.protocol.job import NAME_RE, JobRecord
from rota.version import __version__
from rota.web import (
    access,
    actions,
    complete,
    cron,
    dashboard,
    editor,
    fair_keys,
    flows,
    jobs,
    pools,
    queues,
    run_times,
    sets,
    shards,
)  # fmt: skip
from rota.web.base import JSONResponse
from rota.web.declare import REF, Error, Operation, Schema, json_answer, ms_fields, ref
from rota.web.jobs import JobDetail
from rota.web.sets import SUMMARY, JobTimes

__all__ = ["ID_PATTERN", "MIRRORS", "RESOURCES", "ROUTES", "components", "paths", "serve", "spec"]

#: The modules of the resources, each declaring its endpoints (``actions`` before
#: ``sets``: its ``/retry/{job_id}/kill`` before the sets' ``/{set}/{job_id}/{action}``).
RESOURCES: Final = (
    dashboard, queues, run_times, fair_keys, jobs, editor, actions, sets, complete, flows, cron,
    shards, access, pools,
)  # fmt: skip
#: Their routes, from which the document is derived.
ROUTES: Final[list[BaseRoute]] = [route for module in RESOURCES for route in module.routes]

ID_PATTERN: Final = r"^[A-Za-z0-9_.:\-]{1,200}$"
#: The bodies that mirror one of rota's types (``mirrors``), as their modules declare
#: them: a new one is described as its type without a list to add it to.
MIRRORS: Final[tuple[Any, ...]] = tuple(
    kind
    for module in RESOURCES
    for kind in vars(module).values()
    if isinstance(kind, type) and kind.__module__ == module.__name__ and hasattr(kind, "mirrors")
)
#: The pattern of each path parameter.
_PATTERNS: Final = {
    "name": NAME_RE.pattern,
    "job_id": ID_PATTERN,
    "group_id": ID_PATTERN,
    "key": FAIR_KEY_RE.pattern,
    "pool_id": ID_PATTERN,
    "host": r"^[A-Za-z0-9_.\-]{1,253}$",
}
#: A path parameter's converter (``{key:path}``), which the document does not show.
_CONVERTER: Final = re.compile(r"\{(\w+):\w+\}")
_ERRORS: Final = {
    400: "bad parameters or a body that is not JSON",
    401: "authentication required",
    403: "cross-site request refused",
    404: "no such job, queue or group (or live pool, or host with one)",
    409: "the pool was told to stop: a stop cannot be taken back",
    413: "args too large",
    415: "the body is not application/json",
    422: "a body that does not fit (or an after= parent that does not exist)",
    503: "Redis is unavailable, or refuses the request for now (out of memory, a"
    " read-only replica, loading its data set...); the error says which",
}


def _path(name: str) -> Schema:
    schema: Schema = {"type": "string", "minLength": 1}
    if name in _PATTERNS:
        schema["pattern"] = _PATTERNS[name]
    return {"name": name, "in": "path", "required": True, "schema": schema}


def _operations(routes: Sequence[BaseRoute]) -> list[tuple[Route, str, Operation]]:
    """Each API route and method (the document itself left out), with its declaration."""
    out = []
    for route in routes:
        if not isinstance(route, Route) or not route.path.startswith("/api/"):
            continue
        if route.path == "/api/openapi.json":
            continue
        for method in sorted(set(route.methods or ()) - {"HEAD"}):
            op: Operation | None = getattr(route.endpoint, "openapi", None)
            if op is None:
                raise TypeError(f"{method} {route.path}: its endpoint is not @documented")
            out.append((route, method.lower(), op))
    return out


def paths(routes: Sequence[BaseRoute]) -> dict[str, Any]:
    """One entry per API route and method."""
    out: dict[str, Any] = {}
    for route, method, op in _operations(routes):
        codes = dict.fromkeys((*op.codes, *((403,) if method == "post" else ()), 401, 503))
        doc = inspect.getdoc(route.endpoint) or ""
        entry: dict[str, Any] = {
            "operationId": op.op_id,
            "summary": " ".join(doc.split("\n\n")[0].split()),
            "responses": {
                **(op.answers or {"200": json_answer(op.answer)}),
                **{str(c): json_answer(Error, _ERRORS[c]) for c in codes},
            },
        }
        parameters = [_path(p) for p in route.param_convertors] + list(op.parameters)
        if parameters:
            entry["parameters"] = parameters
        if op.request is not None:
            content = {"application/json": {"schema": ref(op.request)}}
            entry["requestBody"] = {"required": True, "content": content}
        out.setdefault(_CONVERTER.sub(r"{\1}", route.path), {})[method] = entry
    return out


def _overlay(base: Schema, over: Schema, description: str, only: tuple[str, ...] = ()) -> Schema:
    """An object whose fields are ``base``'s, replaced or added to by ``over``'s (only
    those in ``only`` when given): the schema of ``{**base, **over}``."""
    props = {**base["properties"], **over["properties"]}
    required = [f for f in base["required"] if f not in over["properties"]] + over["required"]
    if only:
        props = {f: props[f] for f in only}
        required = [f for f in only if f in required]
    return {"type": "object", "description": description, "properties": props, "required": required}


def _describe_mirrored(found: dict[str, Schema]) -> None:
    """Describe a field a body mirrors as rota's type describes it; a time, as that and
    then in ms."""
    _, theirs = msgspec.json.schema_components([k.mirrors for k in MIRRORS], ref_template=REF)
    for kind in MIRRORS:
        props = found[kind.__name__]["properties"]
        for name, their in theirs[kind.mirrors.__name__]["properties"].items():
            said, own = their.get("description"), props[name].get("description")
            if said is not None and (own is None or name in ms_fields(kind)):
                props[name]["description"] = said if own is None else f"{said}, {own}"


def components(routes: Sequence[BaseRoute]) -> dict[str, Schema]:
    """Every body's schema, under its type's name."""
    bodies: list[type[msgspec.Struct]] = [Error]
    for _, _, op in _operations(routes):
        for answer in op.answer, op.request:
            if isinstance(answer, type) and answer not in bodies:
                bodies.append(answer)
    _, found = msgspec.json.schema_components(
        (*bodies, JobRecord, JobDetail, JobTimes), ref_template=REF
    )
    record, detail, times = found.pop("JobRecord"), found.pop("JobDetail"), found.pop("JobTimes")
    found["Job"] = _overlay(record, detail, detail["description"])
    summary = "A job of a set, as its page lists it (a part of its record)."
    found["JobSummary"] = _overlay(record, times, summary, SUMMARY)
    for kind in bodies:
        found[kind.__name__].update(getattr(kind, "rules", {}))
    _describe_mirrored(found)
    for schema in found.values():  # a docstring's description, on one line
        if "description" in schema:
            schema["description"] = " ".join(schema["description"].split())
    # As the served document carries them: a default of () is [].
    plain: dict[str, Schema] = msgspec.json.decode(msgspec.json.encode(found))
    return plain


def spec() -> dict[str, Any]:
    """The document (a fresh copy); its operations need auth only when the server was
    started with it."""
    return copy.deepcopy(_spec())


@functools.cache
def _spec() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "rota",
            "version": __version__,
            "description": "Queues, pools and jobs of one rota namespace. POSTs from a browser"
            " must be same-origin; see docs/web.md.",
        },
        "paths": paths(ROUTES),
        "components": {
            "schemas": components(ROUTES),
            "securitySchemes": {
                "basic": {"type": "http", "scheme": "basic"},
                "bearer": {"type": "http", "scheme": "bearer"},
            },
        },
        "security": [{}, {"basic": []}, {"bearer": []}],
    }


async def serve(request: Request) -> Response:
    """The document, at ``/api/openapi.json``."""
    return JSONResponse(spec())
