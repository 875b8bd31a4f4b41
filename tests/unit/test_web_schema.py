"""The OpenAPI document validates, each API route has its operation, and the bodies that
mirror a type carry its fields in order, times in ms."""

from __future__ import annotations

import re
import typing

import msgspec
import pytest
from openapi_spec_validator import validate
from starlette.routing import Route

from rota import (
    LivePool,
    PoolJob,
    RunningJob,
    Settings,
)
from rota.web import create_app, declare
from rota.web.dashboard import BusyWorker, Pool
from rota.web.declare import mirror, ms_fields
from rota.web.openapi import MIRRORS, RESOURCES, paths, spec


def test_document_validates() -> None:
    document = spec()
    validate(document)
    documented = {
        (path, method.upper()) for path, ops in document["paths"].items() for method in ops
    }
    served = {  # a path parameter's converter ({key:path}) is not in the document
        (re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path), method)
        for route in create_app(Settings()).routes
        if isinstance(route, Route) and route.path.startswith("/api/")
        for method in route.methods or ()
        if method != "HEAD" and route.path != "/api/openapi.json"
    }
    assert documented == served  # every API route is documented, and nothing else


def test_the_error_codes_follow_from_each_declaration() -> None:
    """An operation documents the errors its declaration implies (a body: 400, 415 and
    422; a path parameter: 404; a query parameter: 400), besides 401 and 503, and a
    POST's 403; the codes are in order."""
    for path, ops in spec()["paths"].items():
        for method, op in ops.items():
            codes = [int(c) for c in op["responses"] if c[0] in "45"]
            implied = {401, 503} | ({403} if method == "post" else set())
            if "requestBody" in op:
                implied |= {400, 415, 422}
            if "{" in path:
                implied.add(404)
            if any(p["in"] == "query" for p in op.get("parameters", ())):
                implied.add(400)
            assert implied <= set(codes), (method, path)
            own = [c for c in codes if c not in (401, 403, 503)]
            assert own == sorted(own), (method, path)


def test_an_api_route_without_its_operation_stops_the_document() -> None:
    async def endpoint(request: object) -> None: ...

    with pytest.raises(TypeError, match="GET /api/new: its endpoint is not @documented"):
        paths([Route("/api/new", endpoint)])


#: Every type defined in the modules of the resources and ``rota.web.declare``; ``JobDetail``
#: and ``JobTimes`` are parts of ``Job``, not components of their own.
OWN: list[type[msgspec.Struct]] = [
    kind
    for module in (*RESOURCES, declare)
    for kind in vars(module).values()
    if isinstance(kind, type) and issubclass(kind, msgspec.Struct)
    if kind.__module__ == module.__name__
]


#: The bodies of their own that mirror one of rota's types, its times in ms.
MIRRORING = [kind for kind in OWN if hasattr(kind, "mirrors")]


#: Fields a body carries in place of its type's field of the same name, with another
#: meaning: a pool's ``busy`` is how many jobs it runs, not the list of them.
REPLACED = {(Pool, "busy"), (Pool, "periodic")}


def test_the_bodies_that_mirror_a_type_are_listed() -> None:
    assert sorted(k.__name__ for k in MIRRORING) == sorted(k.__name__ for k in MIRRORS)
    assert {k.mirrors for k in MIRRORS} == {LivePool, RunningJob}


@pytest.mark.parametrize("kind", MIRRORS, ids=lambda k: k.__name__)
def test_a_body_carries_every_field_of_the_type_it_mirrors_in_order(
    kind: type[Pool | BusyWorker],
) -> None:
    """A field added to ``LivePool`` or ``RunningJob`` fails here until its body carries
    it, in the same place (the JSON keeps the type's order), as the same type or, for a
    time in seconds, as ms."""
    theirs = kind.mirrors.__struct_encode_fields__
    carried = [f for f in kind.__struct_encode_fields__ if f in theirs]
    assert carried == list(theirs), f"{kind.__name__} must carry {kind.mirrors.__name__}'s fields"
    own, their = typing.get_type_hints(kind), typing.get_type_hints(kind.mirrors)
    for name in theirs:
        if name in ms_fields(kind):
            assert their[name] in (float, float | None), (kind.__name__, name)
        elif (kind, name) not in REPLACED:
            assert own[name] == their[name], (kind.__name__, name)


def test_the_times_sent_in_ms_are_the_fields_typed_ms() -> None:
    """The fields typed ``Ms`` (which ``mirror`` turns from seconds into ms: see
    test_a_mirrored_body_has_the_times_in_ms) are these, and no other: a field that
    gains or loses the type changes what the API sends."""
    times = {k.__name__: sorted(ms_fields(k)) for k in OWN if ms_fields(k)}
    record_times = ["enqueued_at", "expires", "finished_at", "run_at", "started_at"]
    assert times == {
        "Bucket": ["start"],
        "Pool": ["heartbeat_at", "last_heartbeat", "started_at"],
        "BusyWorker": ["deadline", "heard_at", "since"],
        "JobTimes": record_times,
        "FinishedPage": ["next_since", "next_until", "since", "until"],
        "FinishedRow": ["finished_at", "started_at"],
        "QueuedJob": ["enqueued_at"],
        "KeyJob": ["deadline", "enqueued_at", "started_at"],
        "JobDetail": record_times,
        "GroupProgress": ["created_at"],
        "Group": ["created_at"],
        "CronJob": ["last_at", "next_at"],
        "NameMinute": ["start"],
    }


def test_a_mirrored_body_has_the_times_in_ms() -> None:
    live = LivePool(
        id="h:1:x",
        host="h",
        pid=1,
        version="1",
        namespace="n",
        concurrency=2,
        jobs=["a"],
        started_at=1700000000.25,
        heartbeat_at=1700000001.5,
        busy=[PoolJob("j", "a", 1700000000.75)],
        heartbeat_interval=5.0,
        last_heartbeat=1700000002.125,
        stale=False,
    )
    pool = msgspec.json.encode(mirror(Pool, live, busy=1, told=None))
    assert pool == (
        b'{"id":"h:1:x","host":"h","pid":1,"version":"1","namespace":"n","concurrency":2,'
        b'"jobs":["a"],"started_at":1700000000250,"heartbeat_at":1700000001500,'
        b'"heartbeat_interval":5.0,"busy":1,"periodic":[],"last_heartbeat":1700000002125,'
        b'"stale":false,"state":"running","told":null}'
    )
    running = RunningJob("j", "a", "h:1:x", 1700000000.75, 1700000030.0, "50", "hi", 1700000001.5)
    assert msgspec.json.encode(mirror(BusyWorker, running, silent=2.5)) == (
        b'{"job_id":"j","name":"a","pool":"h:1:x","since":1700000000750,'
        b'"deadline":1700000030000,"progress":"50","message":"hi",'
        b'"heard_at":1700000001500,"host":"h","pid":1,"silent":2.5}'
    )
