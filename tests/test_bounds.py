"""Every number a user hands rota has a finite range: each entry point, given NaN,
infinity, a negative, 0, 1e300 or a value of the wrong kind, either takes it within
the documented range (rota.protocol.bounds) or refuses it with a message that names
the option, before anything reaches Redis."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import msgspec
import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from rota import Client, Debounce, JobSpec, Retry, Settings, WorkerPool
from rota.cli import main
from rota.protocol.bounds import JOB, MAX_DELAY, Bound
from rota.protocol.job import now_ms
from rota.web import create_app
from rota.web.jobs import EnqueueRequest
from tests.helpers import pool_settings, wait_until
from tests.unit.test_bounds import ODD, QUICK, WILD, _in_range, _judge

ODD += [10**30, time.time() * 1000, "5", "", True, False, None, [1], {"a": 1}]
#: What JSON can carry (no NaN, no infinity).
JSON_WILD = st.one_of(
    st.sampled_from([v for v in ODD if not (isinstance(v, float) and not math.isfinite(v))]),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False),
)


def _enqueue(redis_url: str, namespace: str, spec: JobSpec) -> Any:
    async def go() -> Any:
        client = Client.from_url(redis_url, namespace)
        try:
            return await client.enqueue_many([spec])
        finally:
            await client.close()

    return anyio.run(go)


@QUICK
@given(option=st.sampled_from(sorted(JOB)), value=WILD)
def test_enqueue_options_are_within_range_or_refused_naming_them(
    redis_url: str, namespace: str, option: str, value: Any
) -> None:
    extra: dict[str, Any] = {"unique": "k"} if option == "unique_ttl" else {}
    given = {option: value}
    if option == "debounce_window":  # an option of Debounce (None: no debounce)
        given = {"debounce": None if value is None else Debounce("k", value)}
    spec = JobSpec(name="nap", **{**given, **extra})
    taken, _ = _judge(
        lambda: _enqueue(redis_url, namespace, spec), (option,), (ValueError, TypeError)
    )
    assert taken == _in_range(value, JOB[option], nullable=True)


@pytest.fixture
def refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Callable[[list[str]], str]:
    """Run ``rota ARGS``: it must exit 2 with one line on stderr, which it returns. In
    a clean environment, as a user's: the suite's own ``ROTA_TEST_*`` are no settings."""
    for name in [k for k in os.environ if k.startswith("ROTA_")]:
        monkeypatch.delenv(name)

    def run(args: list[str]) -> str:
        assert main(args) == 2
        out, err = capsys.readouterr()
        assert out == "" and len(err.strip().splitlines()) == 1, err
        return err.strip()

    return run


NOWHERE = ["--redis-url", "redis://127.0.0.1:1/0"]


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["worker", "tests.cli_app:pool", "-c", "100000000"],
            "--concurrency: must be from 1 to 10000",
        ),
        (["worker", "tests.cli_app:pool", "--lease", "2d"], "--lease: must be from 0.1 to 86400"),
        (["status", "--watch", "nan"], "--watch: must be a finite number, got nan"),
        (["status", "--watch", "1e300"], "--watch: must be from 0.1 to 3600, got 1e+300"),
        (["queue", "limit", "nap", "100000000"], "N: must be at most 1000000"),
        (["dead", "list", "--offset", "99999999999999999999"], "--offset: must be at most"),
        (["web", "--session-ttl", "3650d"], "--session-ttl: must be from 1 to 31536000"),
        (
            ["enqueue", "nap", "--max-fails", "100000000"],
            "max_fails must be at least 1 and at most",
        ),
        (["enqueue", "nap", "--timeout", "36500d"], "timeout must be at least 0.001 seconds"),
        (["enqueue", "nap", "--in", "36500d"], "--in: seconds from 0 to 315360000"),
        (["enqueue", "nap", "--expires-in", "36500d"], "expires_in: must be from 0.001 to"),
        (["enqueue", "nap", "--expires-at", "noon"], "expires_at: 'noon' is not an ISO-8601"),
        (
            ["enqueue", "nap", "--debounce-key", "k", "--debounce-window", "31d"],
            "debounce_window: must be from 0.001 to 2592000",
        ),
        (["enqueue", "nap", "--debounce-key", "k"], "--debounce-key and --debounce-window go"),
    ],
)
def test_cli_flags_out_of_range_exit_2_naming_the_flag(
    refused: Callable[[list[str]], str], args: list[str], line: str
) -> None:
    """Told before Redis is reached: where none answers, the line names the flag."""
    assert line in refused([*args, *NOWHERE])


async def _post(settings_: Settings, client: Client, body: dict[str, Any]) -> httpx.Response:
    transport = httpx.ASGITransport(app=create_app(settings_, client=client))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:5040") as http:
        return await http.post("/api/jobs", json=body)


def _documented(field: str) -> Bound:
    """The range the OpenAPI document gives a field of an enqueue's body."""
    (_schema,), components = msgspec.json.schema_components([EnqueueRequest])
    number = components["EnqueueRequest"]["properties"][field]["anyOf"][0]
    return Bound(number["minimum"], number["maximum"], number["type"] == "integer")


@QUICK
@given(
    field=st.sampled_from(["delay", "timeout", "max_fails", "expires_in", "debounce_window"]),
    value=JSON_WILD,
)
def test_http_fields_are_within_their_documented_range_or_refused_naming_them(
    redis_url: str, namespace: str, field: str, value: Any
) -> None:
    """The document's range of each field is the table's, and the API takes a value
    within it only."""
    assert _documented(field) == JOB[field]

    async def go() -> httpx.Response:
        client = Client.from_url(redis_url, namespace)
        try:
            body = {"name": "nap", field: value}
            if field == "debounce_window" and value is not None:
                body["debounce_key"] = "k"  # the window goes with a key
            return await _post(pool_settings(redis_url, namespace), client, body)
        finally:
            await client.close()

    answer = anyio.run(go)
    if answer.status_code in (200, 201):
        assert _in_range(value, JOB[field], nullable=True)
    else:
        assert answer.status_code == 422, answer.text
        assert field in answer.json()["error"]
        assert not _in_range(value, JOB[field], nullable=True)


async def test_absurd_retry_delays_never_reach_the_retry_set_and_the_pool_carries_on(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    """``Retry(delay=time.time() * 1000)`` and a backoff of 1e300 once wrote scores no
    promote could read, and every worker of the namespace died at its start."""
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, scheduler_interval=0.05))
    ran: list[str] = []

    @pool.job(max_fails=3)
    async def epoch_ms() -> None:
        raise Retry(delay=time.time() * 1000)

    @pool.job(max_fails=3, backoff=lambda n: 1e300)
    async def huge() -> None:
        raise RuntimeError("once more")

    @pool.job
    async def after() -> None:
        ran.append("after")

    one = await client.enqueue("epoch_ms")
    two = await client.enqueue("huge")
    retry = {j.id: (await client.admin.shard_holding(j.id)).keys.retry for j in (one, two)}
    with capture_logs() as logs:
        async with pool.running():
            await wait_until(lambda: all(redis_sync.zscore(k, i) for i, k in retry.items()))
            await client.enqueue("after")
            await wait_until(lambda: ran == ["after"])
    score = redis_sync.zscore(retry[two.id], two.id)
    assert score is not None and 0 < score <= now_ms() + MAX_DELAY * 1000
    record = await client.job(one.id)
    assert record is not None and record.error is not None
    assert record.error.startswith("ValueError: Retry: delay: must be from 0 to 315360000")
    assert [e["job_name"] for e in logs if e["event"] == "backoff out of range"] == ["huge"]
