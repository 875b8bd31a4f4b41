"""OpenTelemetry: one trace spans the enqueue and every run of the job.

The SDK's in-memory exporter collects the spans a real pool and client make on a real
Redis. A producer in another language sets the protocol's ``traceparent`` field itself.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rota import Client, JobContext, JobSpec, WorkerPool, tracing
from tests.helpers import pool_settings, wait_until

_EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The exporter of the process's one tracer provider (OpenTelemetry allows one)."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def _pool(redis_url: str, namespace: str) -> WorkerPool:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, keep_result=60))

    @pool.job
    async def work(ctx: JobContext, n: int) -> int:
        return n * 2

    @pool.job(max_fails=1)
    async def boom(ctx: JobContext) -> None:
        raise ValueError("no luck")

    return pool


def _named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_one_trace_spans_the_request_the_enqueue_and_the_run(
    spans: InMemorySpanExporter, client: Client, redis_url: str, namespace: str
) -> None:
    assert tracing.ENABLED
    tracer = trace.get_tracer("tests")
    with tracer.start_as_current_span("request") as request:
        job = await client.enqueue("work", n=21)
    async with _pool(redis_url, namespace).running(client=client):
        await wait_until(lambda: len(_named(spans, "process work")) == 1)
    (send,) = _named(spans, "send work")
    (process,) = _named(spans, "process work")
    trace_id = request.get_span_context().trace_id
    assert send.context is not None and process.context is not None
    assert send.context.trace_id == process.context.trace_id == trace_id
    assert send.kind == trace.SpanKind.PRODUCER and process.kind == trace.SpanKind.CONSUMER
    assert process.parent is not None and process.parent.span_id == send.context.span_id
    assert [link.context.span_id for link in process.links] == [send.context.span_id]
    assert _attrs(send) == {
        "messaging.system": "rota",
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.destination.name": "work",
    }
    assert _attrs(process) == {
        "messaging.system": "rota",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": "work",
        "messaging.message.id": job.id,
        "rota.job.attempt": 1,
        "rota.job.outcome": "complete",
    }
    assert process.status.status_code == trace.StatusCode.UNSET
    record = await client.job(job.id)
    assert record is not None and record.result_value == 42


async def test_a_failed_attempt_says_how_it_ended(
    spans: InMemorySpanExporter, client: Client, redis_url: str, namespace: str
) -> None:
    await client.enqueue("boom")
    async with _pool(redis_url, namespace).running(client=client):
        await wait_until(lambda: len(_named(spans, "process boom")) == 1)
    (process,) = _named(spans, "process boom")
    attrs = _attrs(process)
    assert (attrs["rota.job.outcome"], attrs["rota.job.reason"]) == ("dead", "error")
    assert attrs["error.type"] == "error"
    assert process.status.status_code == trace.StatusCode.ERROR
    assert "no luck" in (process.status.description or "")


async def test_a_batch_is_one_send_span_parent_of_every_run(
    spans: InMemorySpanExporter, client: Client, redis_url: str, namespace: str
) -> None:
    jobs = await client.enqueue_many([JobSpec(name="work", args=(i,)) for i in range(3)])
    async with _pool(redis_url, namespace).running(client=client):
        await wait_until(lambda: len(_named(spans, "process work")) == 3)
    (send,) = _named(spans, "send work")
    assert _attrs(send)["messaging.batch.message_count"] == 3
    runs = _named(spans, "process work")
    assert {_attrs(s)["messaging.message.id"] for s in runs} == {j.id for j in jobs}
    assert send.context is not None
    assert all(s.parent is not None and s.parent.span_id == send.context.span_id for s in runs)


async def test_a_producer_in_another_language_sets_the_trace_context(
    spans: InMemorySpanExporter,
    client: Client,
    redis_sync: redis.Redis,
    redis_url: str,
    namespace: str,
) -> None:
    """The plain-command enqueue of docs/protocol.md, with a traceparent field."""
    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    p = "{" + namespace + "}:"
    with redis_sync.pipeline(transaction=True) as pipe:
        pipe.hset(
            p + "job:from-node",
            mapping={
                "name": "work",
                "args": '{"n": 1}',
                "enqueued_at": 1,
                "state": "queued",
                "attempts": 0,
                "failures": 0,
                "lost": 0,
                "token": 0,
                "traceparent": f"00-{trace_id}-{parent_id}-01",
                "tracestate": "vendor=on",
            },
        )
        pipe.lpush(p + "queue:work", "from-node")
        pipe.sadd(p + "names", "work")
        pipe.execute()
    async with _pool(redis_url, namespace).running(client=client):
        await wait_until(lambda: len(_named(spans, "process work")) == 1)
    (process,) = _named(spans, "process work")
    assert process.context is not None and process.parent is not None
    assert f"{process.context.trace_id:032x}" == trace_id
    assert f"{process.parent.span_id:016x}" == parent_id
    assert process.parent.is_remote
    assert process.links[0].context.trace_state.get("vendor") == "on"


async def test_a_malformed_traceparent_starts_a_trace_of_its_own(
    spans: InMemorySpanExporter,
    client: Client,
    redis_sync: redis.Redis,
    redis_url: str,
    namespace: str,
) -> None:
    job = await client.enqueue("work", n=2)
    redis_sync.hset("{" + namespace + "}:job:" + job.id, "traceparent", "not-a-trace")
    async with _pool(redis_url, namespace).running(client=client):
        await wait_until(lambda: len(_named(spans, "process work")) == 1)
    (send,) = _named(spans, "send work")
    (process,) = _named(spans, "process work")
    assert process.parent is None and process.links == ()
    assert process.context is not None and send.context is not None
    assert process.context.trace_id != send.context.trace_id


def test_without_the_extra_tracing_is_off_and_costs_nothing() -> None:
    """With opentelemetry absent (the extra not installed), the module reports it off and
    its spans are no-ops; rota imports and enqueues as before."""
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "from rota import tracing\n"
        "assert tracing.ENABLED is False\n"
        "with tracing.producer_span('x') as trace: assert trace == ('', '')\n"
        "with tracing.consumer_span('id', 'x', 1, ('', '')) as span: assert span is None\n"
        "import rota; print('ok')\n"
    )
    _prints_ok(code)


def test_without_a_tracer_provider_nothing_is_traced() -> None:
    """The API installed but no provider set (no SDK configured): spans would record
    nothing, so none is made and jobs carry no trace context; setting a provider later
    turns tracing on."""
    code = (
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from rota import tracing\n"
        "assert tracing.ENABLED is True and tracing.active() is False\n"
        "with tracing.producer_span('x') as ctx: assert ctx == ('', '')\n"
        "with tracing.consumer_span('id', 'x', 1, ('', '')) as span: assert span is None\n"
        "trace.set_tracer_provider(TracerProvider())\n"
        "assert tracing.active() is True\n"
        "with tracing.producer_span('x') as ctx: assert ctx[0].startswith('00-'), ctx\n"
        "print('ok')\n"
    )
    _prints_ok(code)


def _prints_ok(code: str) -> None:
    """Run ``code`` in a fresh interpreter (OpenTelemetry's provider is set once per
    process) and check it printed ok."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
