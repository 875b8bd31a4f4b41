"""The OpenAPI 3.1 document of the JSON API, served at ``/api/openapi.json``.

Its paths are generated from the API's routes (as Starlette's ``SchemaGenerator``
walks them): each endpoint's summary is its docstring's first paragraph, the rest its
:class:`~rota.web.schemas.Operation` (``@documented``), its path parameters the
route's. An API route without one stops the document being made: none goes missing.
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Sequence
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from rota.version import __version__
from rota.web import api
from rota.web import bodies as b
from rota.web import request_bodies as r
from rota.web.base import JSONResponse
from rota.web.schemas import ID_PATTERN, Operation, Schema, components, json_answer, ref

__all__ = ["paths", "serve", "spec"]

#: The pattern of each path parameter.
_PATTERNS: Final = {"name": r.NAME_PATTERN, "job_id": ID_PATTERN, "group_id": ID_PATTERN}
_ERRORS: Final = {
    400: "bad parameters or a body that is not JSON",
    401: "authentication required",
    403: "cross-site request refused",
    404: "no such job, queue or group",
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


def _operation(route: Route, method: str) -> dict[str, Any]:
    op: Operation | None = getattr(route.endpoint, "openapi", None)
    if op is None:
        raise TypeError(f"{method.upper()} {route.path}: its endpoint is not @documented")
    codes = dict.fromkeys((*op.codes, *((403,) if method == "post" else ()), 401, 503))
    doc = inspect.getdoc(route.endpoint) or ""
    out: dict[str, Any] = {
        "operationId": op.op_id,
        "summary": " ".join(doc.split("\n\n")[0].split()),
        "responses": {
            **(op.answers or {"200": json_answer(op.answer)}),
            **{str(c): json_answer(b.Error, _ERRORS[c]) for c in codes},
        },
    }
    parameters = [_path(p) for p in route.param_convertors] + list(op.parameters)
    if parameters:
        out["parameters"] = parameters
    if op.request is not None:
        content = {"application/json": {"schema": ref(op.request)}}
        out["requestBody"] = {"required": True, "content": content}
    return out


def paths(routes: Sequence[BaseRoute]) -> dict[str, Any]:
    """One entry per API route and method (the document itself left out)."""
    out: dict[str, Any] = {}
    for route in routes:
        if not isinstance(route, Route) or not route.path.startswith("/api/"):
            continue
        if route.path == "/api/openapi.json":
            continue
        for method in sorted(set(route.methods or ()) - {"HEAD"}):
            out.setdefault(route.path, {})[method.lower()] = _operation(route, method.lower())
    return out


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
        "paths": paths(api.routes),
        "components": {
            "schemas": components(),
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
