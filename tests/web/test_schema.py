"""The OpenAPI document is valid, and requests generated from it (valid and invalid)
never get a server error from a real server on real Redis."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from openapi_spec_validator import validate
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.result import Ok
from starlette.routing import Route

from rota import Client, Settings
from rota.web import create_app
from rota.web.openapi import spec
from tests.helpers import pool_settings
from tests.redis_server import RedisServer
from tests.web.live import LiveServer, seed

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def test_document_validates() -> None:
    document = spec()
    validate(document)
    documented = {
        (path, method.upper()) for path, ops in document["paths"].items() for method in ops
    }
    served = {
        (route.path, method)
        for route in create_app(Settings()).routes
        if isinstance(route, Route) and route.path.startswith("/api/")
        for method in route.methods or ()
        if method != "HEAD" and route.path != "/api/openapi.json"
    }
    assert documented == served  # every API route is documented, and nothing else


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
