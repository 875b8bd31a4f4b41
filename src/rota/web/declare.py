"""How an endpoint is declared, once: its path, the body it takes and the one it answers
with (msgspec types), its query parameters and its errors. From the declaration come the
route, the decoding of its body, the JSON answer, the HTML page of a read (the same view
rendered by a template), and its entry in the OpenAPI document (:mod:`rota.web.openapi`).

Times are ms since the epoch throughout the JSON API (:data:`Ms`), as Redis keeps them,
where rota's Python API has seconds. A body that shows one of rota's types subclasses it
or ``mirrors`` it (the same fields in the same order, the times as :data:`Ms`):
:func:`mirror` builds either, turning the times from seconds into ms.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Final, NamedTuple, TypeVar

import msgspec
from msgspec import Meta
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from rota.protocol import codec
from rota.protocol.job import MAX_MS
from rota.web.base import ApiError, JSONResponse, int_param, render

__all__ = [
    "INT",
    "MS",
    "REF",
    "STR",
    "Body",
    "Error",
    "Ms",
    "Number",
    "Operation",
    "Routes",
    "Schema",
    "doc",
    "documented",
    "found",
    "is_api",
    "json_answer",
    "mirror",
    "ms",
    "ms_fields",
    "plain",
    "query",
    "ref",
]

#: Where the OpenAPI document keeps the schema of a body type.
REF: Final = "#/components/schemas/{name}"
#: What marks a time in ms.
MS: Final = Meta(description="ms since the epoch")
#: A time as the JSON API carries it (rota's Python API has seconds).
Ms = Annotated[int, MS]
#: Seconds between refreshes of a page's figures.
REFRESH: Final = 5

Schema = dict[str, Any]
#: A body: its type, or the name of a component put together by the document (``Job``).
Body = type[msgspec.Struct] | str
INT: Final[Schema] = {"type": "integer"}
STR: Final[Schema] = {"type": "string"}
S = TypeVar("S", bound=msgspec.Struct)
View = Callable[..., Awaitable[Any]]
V = TypeVar("V", bound=View)


class Error(msgspec.Struct):
    """Every refusal: a 4xx (or 503) status and what was wrong."""

    error: str


def ms(seconds: float) -> int:
    """A time as the JSON API and the pages carry it: ms since the epoch, within
    ±:data:`~rota.protocol.job.MAX_MS` (a record may hold 1e300 or infinity, which JSON's
    integers cannot carry; the pages show a time past the year 9999 as malformed); NaN
    as 0."""
    if seconds != seconds:
        return 0
    return round(max(-MAX_MS, min(MAX_MS + 1000, seconds * 1000)))


def _is_ms(hint: Any) -> bool:
    # By identity: another type's field may say "ms since the epoch" and hold ms already.
    arms = (hint, *typing.get_args(hint))
    return any(m is MS for t in arms for m in getattr(t, "__metadata__", ()))


@functools.cache
def ms_fields(kind: type[msgspec.Struct]) -> frozenset[str]:
    """The fields of ``kind`` that are times in ms (:data:`Ms`, or ``Ms | None``)."""
    hints = typing.get_type_hints(kind, include_extras=True)
    return frozenset(name for name in kind.__struct_fields__ if _is_ms(hints[name]))


def mirror(kind: type[S], value: object, **fields: Any) -> S:
    """A ``kind`` with ``fields``, and for its other fields ``value``'s attributes of the
    same names, its times (:func:`ms_fields`) from seconds into ms."""
    times = ms_fields(kind)
    for name in kind.__struct_fields__:
        if name not in fields:
            v = getattr(value, name)
            fields[name] = ms(v) if name in times and v is not None else v
    return kind(**fields)


def plain(body: object) -> Any:
    """A body as its JSON carries it (dicts, lists, text): what a page renders."""
    return msgspec.to_builtins(body)


def doc(**schema: Any) -> Meta:
    """Limits shown in the document only: the endpoint checks them itself, in its words."""
    return Meta(extra_json_schema=schema)


def is_api(request: Request) -> bool:
    return request.url.path.startswith("/api/")


def found(request: Request, value: Any, what: str, key: str, why: str = "") -> Any:
    """``value``; None is a 404 saying there is no such ``what`` (the key quoted in JSON)."""
    if value is None:
        raise ApiError(
            404, f"no {what} {key!r}{why}" if is_api(request) else f"no {what} {key}{why}"
        )
    return value


def json_answer(schema: Body | None, description: str = "OK") -> dict[str, Any]:
    """An answer of JSON: a body's schema, or any JSON (a value as stored) for None."""
    body = ref(schema) if schema is not None else {}
    return {"description": description, "content": {"application/json": {"schema": body}}}


def ref(kind: Body) -> Schema:
    """A reference to the component of a body type (or of a component's name)."""
    return {"$ref": REF.format(name=kind if isinstance(kind, str) else kind.__name__)}


def query(name: str, schema: Schema, description: str) -> Schema:
    """A query parameter, never required."""
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


class Number(NamedTuple):
    """An integer query parameter, declared once: the document says its bounds and
    default, and the API reads it by the same (a 400 outside them). A page brings a value
    into range instead, and uses ``page`` when given (its fixed page size)."""

    name: str
    default: int
    lo: int
    hi: int
    about: str = ""
    page: int | None = None

    def read(self, request: Request) -> int:
        if is_api(request):
            return int_param(request, self.name, self.default, self.lo, self.hi)
        if self.page is not None:
            return self.page
        try:
            return max(
                self.lo, min(self.hi, int(request.query_params.get(self.name, self.default)))
            )
        except ValueError:
            return self.default

    def schema(self) -> Schema:
        said = f"{self.about} (default {self.default})" if self.about else f"default {self.default}"
        return query(self.name, {**INT, "minimum": self.lo, "maximum": self.hi}, said)


class Operation(NamedTuple):
    """What the OpenAPI document says of an endpoint beside its docstring's summary: its
    path parameters come from the route."""

    op_id: str
    #: The 200 answer's body; None: JSON of any shape.
    answer: Body | None
    #: The error statuses it may answer besides 401 and 503 (and a POST's 403).
    codes: tuple[int, ...]
    parameters: tuple[Schema, ...]
    request: type[msgspec.Struct] | None
    #: Answers that replace the 200 one.
    answers: dict[str, Any] | None


def documented(endpoint: Callable[..., Any], op: Operation) -> None:
    """Mark an API endpoint with its declaration: the document refuses an API route
    whose endpoint has none (:mod:`rota.web.openapi`), so none goes undocumented."""
    endpoint.openapi = op  # type: ignore[attr-defined]


async def read_body(request: Request, kind: type[S]) -> S:
    """The request's JSON body as ``kind``: 415 unless it is JSON, 400 when it does not
    parse, 422 when it does not fit."""
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() != "application/json":
        raise ApiError(415, "send the body as application/json")
    raw = await request.body()
    try:
        codec.parse_input(raw)  # not UTF-8, too deep, a key given twice: say which
        msgspec.json.decode(raw)  # and what JSON itself refuses (NaN, Infinity)
    except (ValueError, msgspec.DecodeError) as exc:
        raise ApiError(400, f"the body is not valid JSON: {exc}") from None
    try:
        return msgspec.json.decode(raw, type=kind)
    except msgspec.ValidationError as exc:
        raise ApiError(422, str(exc)) from None


class Routes(list[BaseRoute]):
    """A resource's routes, each added by the declaration of its endpoint."""

    def api(
        self,
        path: str,
        op_id: str,
        answer: Body | None,
        *codes: int,
        params: tuple[Schema | Number, ...] = (),
        request: type[msgspec.Struct] | None = None,
        answers: dict[str, Any] | None = None,
        method: str = "GET",
        summary: str | None = None,
    ) -> Callable[[V], V]:
        """A JSON endpoint: the view gets the request (and the body decoded as ``request``)
        and returns the answer's body (or a response of its own)."""
        said = tuple(p.schema() if isinstance(p, Number) else p for p in params)

        def mark(view: V) -> V:
            async def endpoint(req: Request) -> Response:
                args = (await read_body(req, request),) if request is not None else ()
                out = await view(req, *args)
                return out if isinstance(out, Response) else JSONResponse(out)

            endpoint.__doc__ = summary or view.__doc__
            documented(endpoint, Operation(op_id, answer, codes, said, request, answers))
            self.append(Route(path, endpoint, methods=[method]))
            return view

        return mark

    def form(self, path: str, methods: tuple[str, ...] = ("POST",)) -> Callable[[V], V]:
        """A page's form action, or a page of its own."""

        def mark(view: V) -> V:
            self.append(Route(path, view, methods=list(methods)))
            return view

        return mark

    def page(
        self,
        path: str,
        template: str,
        op_id: str,
        answer: Body | None,
        *codes: int,
        api: str | None = None,
        params: tuple[Schema | Number, ...] = (),
        context: Callable[[Request, Any], Awaitable[dict[str, Any]]] | None = None,
    ) -> Callable[[V], V]:
        """A read, answered as JSON at ``api`` (``/api`` + ``path`` by default) and as the
        page ``template`` at ``path``: the view's body as ``data``, with ``context``."""

        def mark(view: V) -> V:
            async def html(request: Request) -> Response:
                data = plain(await view(request))
                query = f"?{request.url.query}" if request.url.query else ""
                base = {"data": data, "api": "/api" + request.url.path + query, "refresh": REFRESH}
                more = await context(request, data) if context is not None else {}
                status = more.pop("status", 200)
                return render(request, template, {**base, **more}, status)

            self.append(Route(path, html))
            return self.api(api or "/api" + path, op_id, answer, *codes, params=params)(view)

        return mark
