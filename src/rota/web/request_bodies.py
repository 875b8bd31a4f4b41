"""The bodies the JSON API takes, as msgspec types: the API decodes requests into them,
and the OpenAPI document is generated from them (:mod:`rota.web.schemas`), as it is from
the bodies it sends (:mod:`rota.web.bodies`).

Limits the API checks itself, to answer with its own words, are shown to the document
only (``extra_json_schema``), with the same constants as the checks; what the fields'
types cannot say (which fields go together) is each type's ``rules``.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final

import msgspec
from msgspec import Meta

from rota.client import spec
from rota.protocol import bounds
from rota.protocol.job import NAME_RE

__all__ = [
    "MAX_DELAY",
    "MAX_EPOCH",
    "MAX_FAILS",
    "MAX_IDS",
    "MAX_LIMIT",
    "MAX_POSITION",
    "MAX_SEARCH",
    "MAX_UNIQUE",
    "MIN_TIMEOUT",
    "NAME_PATTERN",
    "REQUESTS",
    "EnqueueRequest",
    "Ids",
    "LimitRequest",
    "RateRequest",
]

NAME_PATTERN: Final = NAME_RE.pattern
MAX_IDS: Final = 1000
# The ranges of the job's options and of a name's limit (rota.protocol.bounds): the
# client's, the CLI's and the API's are one table.
MAX_DELAY: Final = bounds.MAX_DELAY
MAX_EPOCH: Final = spec.MAX_EPOCH  # 9999-12-31T23:59:59Z: one rule (rota.client.spec.epoch_seconds)
MAX_FAILS: Final = int(bounds.JOB["max_fails"].hi)
MAX_LIMIT: Final = int(bounds.HANDLER["max_concurrency"].hi)
MIN_TIMEOUT: Final = bounds.JOB["timeout"].lo
MAX_UNIQUE: Final = 1024
#: A position in a set (where a search begins or ends), as the pages' ``from``.
MAX_POSITION: Final = 10**9
#: The longest search text, as the pages' ``q``.
MAX_SEARCH: Final = 200


def _doc(**schema: Any) -> Meta:
    """Limits shown in the document only: the API checks them itself."""
    return Meta(extra_json_schema=schema)


class RateRequest(msgspec.Struct, forbid_unknown_fields=True):
    rate: Annotated[
        str | None,
        Meta(
            description="jobs that may start per second, minute or hour, e.g. '100/s',"
            " '30/min', '2/hour'; null removes the limit"
        ),
    ]


class LimitRequest(msgspec.Struct, forbid_unknown_fields=True):
    limit: Annotated[
        Annotated[int, _doc(minimum=1, maximum=MAX_LIMIT)] | None,
        Meta(description="most jobs of the name running at once; null: no limit"),
    ]


class Ids(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The jobs to act on: {"ids": [...]} or {"all": true}."""

    #: What the fields' types cannot say, added to the document's schema.
    rules: ClassVar[dict[str, Any]] = {
        "oneOf": [
            {"required": ["ids"]},
            {"required": ["all"], "properties": {"all": {"const": True}}},
        ]
    }

    ids: Annotated[list[str], _doc(minItems=1, maxItems=MAX_IDS)] | None = None
    all: Annotated[bool, Meta(description="true: every job of the set")] = False


class EnqueueRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A job to enqueue; ``args`` or ``kwargs``, ``delay`` or ``run_at``."""

    rules: ClassVar[dict[str, Any]] = {
        "not": {"anyOf": [{"required": ["args", "kwargs"]}, {"required": ["delay", "run_at"]}]}
    }

    name: Annotated[str, _doc(pattern=NAME_PATTERN)]
    args: Annotated[list[Any] | None, Meta(description="positional args")] = None
    kwargs: Annotated[dict[str, Any] | None, Meta(description="keyword args")] = None
    delay: Annotated[float, _doc(minimum=0, maximum=MAX_DELAY)] | None = None
    run_at: Annotated[
        Annotated[float, _doc(minimum=0, maximum=MAX_EPOCH)]
        | Annotated[str, _doc(format="date-time")]
        | None,
        Meta(description="epoch seconds or an ISO-8601 time (UTC if no offset)"),
    ] = None
    unique: Annotated[str, _doc(minLength=1, maxLength=MAX_UNIQUE)] | None = None
    job_id: Annotated[
        Annotated[str, _doc(pattern=NAME_PATTERN)] | None,
        Meta(
            description="this job's id (as the Python client's job_id): an id that exists"
            " enqueues nothing and answers 200 with that job, so a retry is safe"
        ),
    ] = None
    max_fails: Annotated[int, _doc(minimum=1, maximum=MAX_FAILS)] | None = None
    timeout: Annotated[float, _doc(minimum=MIN_TIMEOUT, maximum=MAX_DELAY)] | None = None
    after: Annotated[
        Annotated[list[Annotated[str, _doc(pattern=NAME_PATTERN)]], _doc(maxItems=MAX_IDS)] | None,
        Meta(
            description="ids of jobs that must complete first; a job id that does not exist"
            " is a 422 and nothing is enqueued"
        ),
    ] = None


#: Every body the API takes.
REQUESTS: Final[tuple[type[msgspec.Struct], ...]] = (
    RateRequest,
    LimitRequest,
    Ids,
    EnqueueRequest,
)
