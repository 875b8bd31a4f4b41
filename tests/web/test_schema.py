"""The OpenAPI document is valid, describes every field of the types the API sends and
takes, and requests generated from it (valid and invalid) never get a server error from
a real server on real Redis."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import msgspec
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.result import Ok

from rota import (
    Client,
    Enqueued,
    GroupProgress,
    JobRecord,
    JobSpec,
    LivePool,
    QueueInfo,
    RunningJob,
)
from rota.web import create_app
from rota.web.jobs import JobDetail
from rota.web.openapi import spec
from rota.web.sets import SUMMARY, JobTimes
from tests.helpers import pool_settings
from tests.redis_server import RedisServer
from tests.unit.test_web_schema import OWN
from tests.web.live import LiveServer, seed

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture(scope="module")
def live(redis_server: RedisServer) -> Iterator[str]:
    namespace = "t" + uuid.uuid4().hex[:12]

    async def seeded() -> None:
        async with Client.from_url(redis_server.url, namespace) as client:
            await seed(client, redis_server.url, namespace)

    anyio.run(seeded)
    app = create_app(pool_settings(redis_server.url, namespace))
    with LiveServer(app) as server:
        yield server.url


def test_served_document_is_the_same(live: str) -> None:
    assert httpx.get(live + "/api/openapi.json").json() == spec()


@pytest.mark.slow  # hundreds of generated requests: `make test` runs it, not `make check`
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_generated_requests_get_no_server_error(live: str, mode: GenerationMode) -> None:
    schema = schemathesis.openapi.from_dict(spec())
    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result.err()
        operations.append(result.ok())
    assert len(operations) >= 20
    if mode == GenerationMode.NEGATIVE:  # only what takes input can get invalid input
        operations = [op for op in operations if op.path_parameters or op.query or op.body]
    for operation in operations:

        @settings(
            max_examples=12,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy(generation_mode=mode))
        def check(case: schemathesis.Case[Any]) -> None:
            response = case.call(base_url=live, timeout=10)
            assert response.status_code < 500, (case.method, case.formatted_path, response.text)
            case.validate_response(response, checks=CHECKS)

        check()


#: The document's component that carries the fields of each of rota's types, beside
#: every type of the resources' modules under its own name. ``Job`` is a record with the
#: fields of ``JobDetail`` added, its times among them.
CARRIED_BY: list[tuple[str, type[msgspec.Struct]]] = [
    ("Queue", QueueInfo),
    ("Pool", LivePool),
    ("BusyWorker", RunningJob),
    ("GroupProgress", GroupProgress),
    ("Group", GroupProgress),
    ("Job", JobRecord),
    ("Job", JobDetail),
    ("Job", JobTimes),
    ("Enqueued", Enqueued),
]
CARRIED_BY += [(k.__name__, k) for k in OWN if k not in (JobDetail, JobTimes)]
#: Options of ``JobSpec`` that ``POST /api/jobs`` does not take: the server picks job
#: ids, and a unique key is held for the server's ``unique_ttl``.
# ``debounce`` is taken as its fields: debounce_key, debounce_window, debounce_mode...
NOT_TAKEN = {"job_id", "unique_ttl", "debounce"}


def _properties(document: dict[str, Any], component: str) -> set[str]:
    return set(document["components"]["schemas"][component]["properties"])


@pytest.mark.parametrize(("component", "kind"), CARRIED_BY, ids=lambda x: getattr(x, "__name__", x))
def test_served_document_has_every_field_of_the_types(
    live: str, component: str, kind: type[msgspec.Struct]
) -> None:
    document = httpx.get(live + "/api/openapi.json").json()
    missing = set(kind.__struct_encode_fields__) - _properties(document, component)
    assert not missing, f"{component} lacks the fields {sorted(missing)} of {kind.__name__}"


def test_a_summary_is_a_part_of_the_record_and_enqueue_takes_the_job_options(live: str) -> None:
    document = httpx.get(live + "/api/openapi.json").json()
    assert set(SUMMARY) <= set(JobRecord.__struct_fields__)
    assert _properties(document, "JobSummary") == set(SUMMARY)
    options = set(JobSpec.__struct_fields__) - NOT_TAKEN
    missing = options - _properties(document, "EnqueueRequest")
    assert not missing, f"POST /api/jobs does not take {sorted(missing)}: take or list them"


def test_answers_carry_the_documented_fields_and_no_others(live: str) -> None:
    document = httpx.get(live + "/api/openapi.json").json()
    enqueued = httpx.post(live + "/api/jobs", json={"name": "ok", "delay": 3600})
    job_id = enqueued.json()["id"]
    scheduled = httpx.get(live + "/api/scheduled").json()
    httpx.post(live + "/api/jobs", json={"name": "ok", "kwargs": {"n": 1}})
    queued = httpx.get(live + "/api/queues/ok/jobs").json()
    answers = {
        "Enqueued": [enqueued.json()],
        "Queue": httpx.get(live + "/api/queues").json()["queues"],
        "Pools": [httpx.get(live + "/api/pools").json()],
        "JobPage": [scheduled],
        "JobSummary": scheduled["jobs"],
        "QueueJobs": [queued],
        "QueuedJob": queued["jobs"],
        "Job": [httpx.get(f"{live}/api/jobs/{job_id}").json()],
        "Flow": [httpx.get(f"{live}/api/flows/{job_id}").json()],
        "Dashboard": [httpx.get(live + "/api/dashboard").json()],
        "Redis": [httpx.get(live + "/api/redis").json()],
    }
    for component, found in answers.items():
        assert found, component
        for answer in found:
            assert set(answer) == _properties(document, component), component


def test_every_integer_parameter_is_read_within_the_bounds_it_documents(live: str) -> None:
    """The document and the endpoint take a parameter's bounds from one declaration: the
    largest and smallest value documented are taken, one past either is a 400. Every
    read with an integer parameter is asked, a queue's at the seeded queue ``ok`` (its
    fair key ``k``); a group's (no group is seeded) shares the declarations of the
    others' paging."""
    tried = 0
    for template, item in spec()["paths"].items():
        op = item.get("get")
        path = template.replace("{name}", "ok").replace("{key}", "k")  # a key with no jobs
        if op is None or "{" in path:
            assert (
                template == "/api/groups/{group_id}"
                or op is None
                or not any(p["schema"].get("type") == "integer" for p in op.get("parameters", []))
            ), template
            continue
        for p in op.get("parameters", []):
            s = p["schema"]
            if s.get("type") != "integer":
                continue
            lo, hi = s["minimum"], s["maximum"]
            for value, status in ((lo, 200), (hi, 200), (lo - 1, 400), (hi + 1, 400)):
                got = httpx.get(live + path, params={p["name"]: value}).status_code
                assert got == status, (path, p["name"], value, got)
            tried += 1
    assert tried >= 20  # dashboard 2, queues 2, a queue 3, four job sets 12, audit 2
