"""The schemas of the JSON API's bodies, for the OpenAPI document (:mod:`rota.web.openapi`).

Generated from the types the API sends and takes (:mod:`rota.web.bodies`), so that they
cannot drift from them. Two bodies are not types of their own but a job record with
changes, and are put together here the way the views put the JSON together:
``Job`` is :class:`~rota.protocol.job.JobRecord`'s fields overlaid with
:class:`~rota.web.bodies.JobDetail`'s, and ``JobSummary`` the record's fields named by
:data:`SUMMARY`, with the times of :class:`~rota.web.bodies.JobTimes`. A body that
mirrors one of rota's types (:data:`~rota.web.bodies.MIRRORS`) has its fields described
as that type describes them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, NamedTuple, TypeVar

import msgspec
from starlette.requests import Request

from rota.protocol.job import JobRecord
from rota.web.base import int_param
from rota.web.bodies import BODIES, MIRRORS, REF, SUMMARY, JobDetail, JobTimes, ms_fields

__all__ = [
    "ID_PATTERN",
    "INT",
    "STR",
    "Body",
    "Number",
    "Operation",
    "Schema",
    "components",
    "documented",
    "json_answer",
    "query",
    "ref",
]

ID_PATTERN: Final = r"^[A-Za-z0-9_.:\-]{1,200}$"

Schema = dict[str, Any]
#: A body: its type, or the name of a component put together here (``Job``).
Body = type[msgspec.Struct] | str

INT: Final[Schema] = {"type": "integer"}
STR: Final[Schema] = {"type": "string"}
E = TypeVar("E", bound=Callable[..., Any])


class Operation(NamedTuple):
    """What the OpenAPI document says of an endpoint beside its docstring's summary
    (see :func:`documented`): its path parameters come from the route."""

    op_id: str
    #: The 200 answer's body; None: JSON of any shape.
    answer: Body | None
    #: The error statuses it may answer besides 401 and 503 (and a POST's 403).
    codes: tuple[int, ...]
    parameters: tuple[Schema, ...]
    request: Body | None
    #: Answers that replace the 200 one.
    answers: dict[str, Any] | None


class Number(NamedTuple):
    """An integer query parameter, declared once: the OpenAPI document says its bounds
    and default (:func:`documented`), and the endpoint reads it by the same (:meth:`read`:
    a 400 outside them), so the two cannot drift."""

    name: str
    default: int
    lo: int
    hi: int
    about: str = ""

    def read(self, request: Request) -> int:
        return int_param(request, self.name, self.default, self.lo, self.hi)

    def schema(self) -> Schema:
        said = f"{self.about} (default {self.default})" if self.about else f"default {self.default}"
        return query(self.name, {**INT, "minimum": self.lo, "maximum": self.hi}, said)


def documented(
    op_id: str,
    answer: Body | None,
    *codes: int,
    parameters: tuple[Schema | Number, ...] = (),
    request: Body | None = None,
    answers: dict[str, Any] | None = None,
) -> Callable[[E], E]:
    """Mark an API endpoint with its :class:`Operation`: :mod:`rota.web.openapi` walks
    the routes and refuses an API route whose endpoint has none, so none goes
    undocumented."""

    said = tuple(p.schema() if isinstance(p, Number) else p for p in parameters)

    def mark(endpoint: E) -> E:
        endpoint.openapi = Operation(op_id, answer, codes, said, request, answers)  # type: ignore[attr-defined]
        return endpoint

    return mark


def json_answer(schema: Body | None, description: str = "OK") -> dict[str, Any]:
    """An answer of JSON: a body's schema, or any JSON (a value as stored) for None."""
    body = ref(schema) if schema is not None else {}
    return {"description": description, "content": {"application/json": {"schema": body}}}


def query(name: str, schema: Schema, description: str) -> Schema:
    """A query parameter, never required."""
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


def ref(kind: Body) -> Schema:
    """A reference to the component of a body type (or of a component's name)."""
    return {"$ref": REF.format(name=kind if isinstance(kind, str) else kind.__name__)}


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


def components() -> dict[str, Schema]:
    """Every body's schema, under its type's name."""
    _, found = msgspec.json.schema_components(
        (*BODIES, JobRecord, JobDetail, JobTimes), ref_template=REF
    )
    record, detail, times = found.pop("JobRecord"), found.pop("JobDetail"), found.pop("JobTimes")
    found["Job"] = _overlay(record, detail, detail["description"])
    summary = "A job of a set, as its page lists it (a part of its record)."
    found["JobSummary"] = _overlay(record, times, summary, SUMMARY)
    for kind in BODIES:
        found[kind.__name__].update(getattr(kind, "rules", {}))
    _describe_mirrored(found)
    for schema in found.values():  # a docstring's description, on one line
        if "description" in schema:
            schema["description"] = " ".join(schema["description"].split())
    # As the served document carries them: a default of () is [].
    plain: dict[str, Schema] = msgspec.json.decode(msgspec.json.encode(found))
    return plain
