"""How an endpoint is declared, once: its path, the body it takes and answers with
(msgspec types), its query parameters and errors. From the declaration come the route,
the body's decoding, the JSON answer, the page of a read (the same view, rendered), and
its entry in the OpenAPI document (:mod:`rota.web.openapi`).

Times are ms since the epoch in the JSON API (:data:`Ms`), as Redis keeps them, where
rota's Python API has seconds. A body that shows one of rota's types subclasses it or
``mirrors`` it (the same fields in order, the times as :data:`Ms`); :func:`mirror` builds
either, turning seconds into ms.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Final, Generic, NamedTuple, TypeVar

import msgspec
from msgspec import Meta
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from rota.protocol import codec
from rota.protocol.job import MAX_MS
from rota.web.base import ApiError, JSONResponse, render

__all__ = [
    "REF",
    "REFRESH",
    "Choice",
    "Error",
    "Ms",
    "Number",
    "Operation",
    "Routes",
    "mirror",
    "ms",
]

#: Where the OpenAPI document keeps the schema of a body type.
REF: Final = "#/components/schemas/{name}"
MS: Final = Meta(description="ms since the epoch")
#: A time as the JSON API carries it (rota's Python API has seconds).
Ms = Annotated[int, MS]
#: Seconds between refreshes of a page's figures.
REFRESH: Final = 5
Schema = dict[str, Any]
#: A body: its type, or the name of a component put together by the document (``Job``).
Body = type[msgspec.Struct] | str
STR: Final[Schema] = {"type": "string"}
S = TypeVar("S", bound=msgspec.Struct)
V = TypeVar("V", bound=Callable[..., Awaitable[Any]])
W = TypeVar("W", bound=str)
Context = Callable[[Request, Any], Awaitable[dict[str, Any]]]


class Error(msgspec.Struct):
    """Every refusal: a 4xx (or 503) status and what was wrong."""

    error: str


def said(description: str) -> Meta:
    return Meta(description=description)


def answer(kind: str, module: str, /, **fields: Any) -> type[msgspec.Struct]:
    """The body of a small answer (what an action did), its ``fields`` in order, a type
    of ``module`` (its ``__name__``): one line where a class takes four."""
    return msgspec.defstruct(kind, fields.items(), module=module)


def doc(**schema: Any) -> Meta:
    """Limits shown in the document only: the endpoint checks them itself, in its words."""
    return Meta(extra_json_schema=schema)


def ms(seconds: float) -> int:
    """A time in ms since the epoch, within ±``MAX_MS`` (a record may hold 1e300 or
    infinity, which JSON's integers cannot carry; the pages show a time past the year
    9999 as malformed); NaN as 0."""
    if seconds != seconds:
        return 0
    return round(max(-MAX_MS, min(MAX_MS + 1000, seconds * 1000)))


@functools.cache
def ms_fields(kind: type[msgspec.Struct]) -> frozenset[str]:
    """The fields of ``kind`` typed :data:`Ms` (or ``Ms | None``); by identity: another
    type's field may say "ms since the epoch" and hold ms already."""
    hints = typing.get_type_hints(kind, include_extras=True)
    arms = {f: (hints[f], *typing.get_args(hints[f])) for f in kind.__struct_fields__}
    return frozenset(
        f
        for f, types in arms.items()
        if any(MS is m for t in types for m in getattr(t, "__metadata__", ()))
    )


def mirror(kind: type[S], value: object, **fields: Any) -> S:
    """A ``kind`` with ``fields``, its other fields ``value``'s attributes of the same
    names, its times (:func:`ms_fields`) from seconds into ms."""
    for name in kind.__struct_fields__:
        if name not in fields:
            v = getattr(value, name)
            fields[name] = ms(v) if name in ms_fields(kind) and v is not None else v
    return kind(**fields)


def plain(body: object) -> Any:
    """A body as its JSON carries it (dicts, lists, text): what a page renders."""
    return msgspec.to_builtins(body)


def is_api(request: Request) -> bool:
    return request.url.path.startswith("/api/")


def found(request: Request, value: Any, what: str, key: str, why: str = "") -> Any:
    """``value``; None is a 404 saying there is no such ``what`` (the key quoted in JSON)."""
    if value is None:
        shown = repr(key) if is_api(request) else key
        raise ApiError(404, f"no {what} {shown}{why}")
    return value


def pages(offset: int, size: int, total: int) -> dict[str, int | None]:
    """The offsets of a page's links to the previous and the next page (None: none)."""
    after = offset + size < total
    return {
        "prev_offset": max(0, offset - size) if offset else None,
        "next_offset": offset + size if after else None,
    }


def json_answer(schema: Body | None, description: str = "OK") -> dict[str, Any]:
    """An answer of JSON: a body's schema, or any JSON (a value as stored) for None."""
    body = ref(schema) if schema is not None else {}
    return {"description": description, "content": {"application/json": {"schema": body}}}


def ref(kind: Body) -> Schema:
    return {"$ref": REF.format(name=kind if isinstance(kind, str) else kind.__name__)}


def query(name: str, schema: Schema, about: str) -> Schema:
    """A query parameter, never required."""
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": about}


class Number(NamedTuple):
    """An integer query parameter: the document says its bounds and default, and the API
    reads it by the same (a 400 outside them). A page brings a value into range instead,
    and uses ``page`` when given (its fixed page size)."""

    name: str
    default: int
    lo: int
    hi: int
    about: str = ""
    page: int | None = None

    def read(self, request: Request) -> int:
        text = request.query_params.get(self.name) or str(self.default)
        try:
            value = int(text)
        except ValueError:
            if is_api(request):
                raise ApiError(400, f"{self.name}: not an integer: {text[:40]!r}") from None
            value = self.default
        if not is_api(request):
            return self.page if self.page is not None else max(self.lo, min(self.hi, value))
        if not self.lo <= value <= self.hi:
            raise ApiError(
                400, f"{self.name}: must be between {self.lo} and {self.hi}, got {value}"
            )
        return value

    def schema(self) -> Schema:
        text = f"{self.about} (default {self.default})" if self.about else f"default {self.default}"
        return query(self.name, {"type": "integer", "minimum": self.lo, "maximum": self.hi}, text)


class Choice(NamedTuple, Generic[W]):
    """A query parameter of a few ``words``, the first its default: the document lists
    them; another word is a 400 naming them in the API, and on a page unless ``lenient``
    (a page then takes the default, or the ``default`` its read is given)."""

    name: str
    words: tuple[W, ...]
    about: str = ""
    lenient: bool = True

    def read(self, request: Request, default: W | None = None) -> W:
        fallback = self.words[0] if default is None else default
        asked = request.query_params.get(self.name) or fallback
        word = next((w for w in self.words if w == asked), None)
        if word is None and (is_api(request) or not self.lenient):
            two = len(self.words) == 2
            some = " or ".join(self.words) if two else "one of " + ", ".join(self.words)
            raise ApiError(400, f"{self.name}: {some}, not {asked[:40]!r}")
        return fallback if word is None else word

    def schema(self) -> Schema:
        about = self.about or f"default {self.words[0]}"
        return query(self.name, {"type": "string", "enum": list(self.words)}, about)


class Operation(NamedTuple):
    """What the document says of an endpoint beside its docstring's summary and the
    route's path parameters: ``answer`` (None: JSON of any shape), the error ``codes``
    besides 401 and 503 (and a POST's 403), ``answers`` that replace the 200 one."""

    op_id: str
    answer: Body | None
    codes: tuple[int, ...]
    parameters: tuple[Schema, ...]
    request: type[msgspec.Struct] | None
    answers: dict[str, Any] | None


def documented(endpoint: Callable[..., Any], op: Operation) -> None:
    """Mark an API endpoint with its declaration: the document refuses an API route
    whose endpoint has none, so none goes undocumented."""
    endpoint.openapi = op  # type: ignore[attr-defined]


async def read_body(request: Request, kind: type[S]) -> S:
    """The JSON body as ``kind``: 415 unless it is JSON, 400 when it does not parse, 422
    when it does not fit."""
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
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
        op: str,
        answer: Body | None,
        *codes: int,
        params: tuple[Schema | Number | Choice[Any], ...] = (),
        body: type[msgspec.Struct] | None = None,
        answers: dict[str, Any] | None = None,
        post: bool = False,
        summary: str | None = None,
    ) -> Callable[[V], V]:
        """A JSON endpoint: the view gets the request (and the ``body`` decoded) and
        returns the answer's body (or a response of its own). Its error ``codes`` are
        those its declaration implies (400 for parameters or a body, 404 for a path
        parameter, 415 and 422 for a body) and those given."""
        said = tuple(p.schema() if isinstance(p, Number | Choice) else p for p in params)
        implied = (400,) * bool(params or body) + (404,) * ("{" in path) + (415, 422) * bool(body)
        codes = tuple(sorted({*implied, *codes}))

        def mark(view: V) -> V:
            async def endpoint(request: Request) -> Response:
                args = (await read_body(request, body),) if body is not None else ()
                out = await view(request, *args)
                return out if isinstance(out, Response) else JSONResponse(out)

            endpoint.__doc__ = summary or view.__doc__
            documented(endpoint, Operation(op, answer, codes, said, body, answers))
            self.append(Route(path, endpoint, methods=["POST" if post else "GET"]))
            return view

        return mark

    def action(
        self, path: str, op: str, answer: Body, *codes: int, summary: str | None = None
    ) -> Callable[[V], V]:
        """An action that a page's form (at ``path``: a 303 back) and the API (at ``/api``
        + ``path``: its JSON answer) both take, one view answering each."""

        def mark(view: V) -> V:
            self.api("/api" + path, op, answer, *codes, post=True, summary=summary)(view)
            return self.form(path)(view)

        return mark

    def form(self, path: str, *methods: str) -> Callable[[V], V]:
        """A page's form action (POST), or a page of its own."""

        def mark(view: V) -> V:
            self.append(Route(path, view, methods=list(methods or ["POST"])))
            return view

        return mark

    def page(
        self, path: str, template: str, context: Context | None = None, api: str = ""
    ) -> Callable[[V], V]:
        """The page of a read declared by :meth:`api` (at ``api``, else ``/api`` +
        ``path``): the view's body as ``data`` in ``template``, with ``context``."""

        def mark(view: V) -> V:
            async def html(request: Request) -> Response:
                data = plain(await view(request))
                query = f"?{request.url.query}" if request.url.query else ""
                out = {
                    "data": data,
                    "api": api or "/api" + request.url.path + query,
                    "refresh": REFRESH,
                }
                out.update(await context(request, data) if context is not None else {})
                return render(request, template, out)

            self.append(Route(path, html))
            return view

        return mark
