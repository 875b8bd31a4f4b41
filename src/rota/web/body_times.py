"""Times in the JSON API: ms since the epoch (:data:`Ms`), where rota's Python API has
seconds, and :func:`mirror`, which builds a body from one of rota's types, turning its
times into ms. Kept apart from the bodies so that every module of bodies can use them.
"""

from __future__ import annotations

import functools
import typing
from typing import Annotated, Any, Final, TypeVar

import msgspec
from msgspec import Meta

from rota.protocol.job import MAX_MS

__all__ = ["MS", "REF", "Ms", "mirror", "ms", "ms_fields"]

#: Where the OpenAPI document keeps the schema of a body type.
REF: Final = "#/components/schemas/{name}"

S = TypeVar("S", bound=msgspec.Struct)

#: What marks a time in ms.
MS: Final = Meta(description="ms since the epoch")
#: A time as the JSON API carries it (rota's Python API has seconds).
Ms = Annotated[int, MS]


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
    same names (fields or properties), its times (:func:`ms_fields`) from seconds into
    ms."""
    times = ms_fields(kind)
    for name in kind.__struct_fields__:
        if name not in fields:
            v = getattr(value, name)
            fields[name] = ms(v) if name in times and v is not None else v
    return kind(**fields)
