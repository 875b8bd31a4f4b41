"""OpenTelemetry tracing of jobs, when the ``rota[otel]`` extra is installed.

An enqueue runs in a *producer* span and stores that span's W3C trace context in the job
(the ``traceparent`` and ``tracestate`` fields of the protocol, so a producer in another
language can set them too); each attempt of the job runs in a *consumer* span whose
parent is that context and which links to it, so one trace spans the request that
enqueued a job and every run of it. Names and attributes follow OpenTelemetry's
messaging semantic conventions (``send <name>``, ``process <name>``,
``messaging.system = rota``, the job name as the destination, the job id as the message
id), plus the attempt number and the outcome.

Without opentelemetry-api installed, :data:`ENABLED` is False and every function here
returns at once: a pool pays one boolean test per attempt. With the API installed but no
tracer provider set (no SDK configured), nothing is traced either: a non-recording span
cost an enqueue about a fifth of its client time, for nothing anyone could see.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any, Final

__all__ = ["ENABLED", "TraceContext", "active", "consumer_span", "producer_span"]

try:
    from opentelemetry import context as _context
    from opentelemetry import propagate as _propagate
    from opentelemetry import trace as _trace
except ImportError:  # the extra is not installed
    ENABLED: Final[bool] = False
else:
    ENABLED = True  # type: ignore[misc]

#: ``(traceparent, tracestate)`` as stored in a job; ``("", "")`` for none.
TraceContext = tuple[str, str]
_NONE: Final[TraceContext] = ("", "")
_SYSTEM: Final = "rota"


def active() -> bool:
    """Whether jobs are traced: the extra is installed and the application set a tracer
    provider (until it does, OpenTelemetry hands out its proxy, whose spans record
    nothing)."""
    if not ENABLED:
        return False
    provider = _trace.get_tracer_provider()
    return not isinstance(provider, _trace.ProxyTracerProvider | _trace.NoOpTracerProvider)


@functools.cache
def _tracer() -> Any:
    """rota's tracer, made once: a tracer got before the application sets its provider
    is a proxy that follows it."""
    from rota.version import __version__

    return _trace.get_tracer("rota", __version__)


@contextlib.contextmanager
def producer_span(name: str, count: int = 1) -> Iterator[TraceContext]:
    """A ``send`` span around an enqueue of ``count`` jobs of ``name`` (``""`` when
    they have several names), giving the trace context to store in them."""
    if not active():
        yield _NONE
        return
    attributes: dict[str, Any] = {
        "messaging.system": _SYSTEM,
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
    }
    if name:
        attributes["messaging.destination.name"] = name
    if count != 1:
        attributes["messaging.batch.message_count"] = count
    span_name = f"send {name}" if name else "send"
    kind = _trace.SpanKind.PRODUCER
    with _tracer().start_as_current_span(span_name, kind=kind, attributes=attributes):
        carrier: dict[str, str] = {}
        _propagate.inject(carrier)
        yield carrier.get("traceparent", ""), carrier.get("tracestate", "")


def _parent(trace: TraceContext) -> tuple[Any, list[Any]]:
    """The context an attempt's span is a child of, and its links: the enqueue's."""
    if not trace[0]:
        return None, []
    carrier = {"traceparent": trace[0]}
    if trace[1]:
        carrier["tracestate"] = trace[1]
    parent = _propagate.extract(carrier, context=_context.Context())
    span_context = _trace.get_current_span(parent).get_span_context()
    if not span_context.is_valid:
        return None, []  # a malformed traceparent starts a trace of its own
    return parent, [_trace.Link(span_context)]


@contextlib.contextmanager
def consumer_span(
    job_id: str, name: str, attempt: int, trace: TraceContext
) -> Iterator[dict[str, Any] | None]:
    """A ``process`` span around one attempt, child of and linked to the enqueue's
    trace context when the job carries one. Yields a dict: put ``outcome`` (and
    ``reason``) in it before the block ends, and they become attributes. None when
    tracing is off."""
    if not active():
        yield None
        return
    parent, links = _parent(trace)
    attributes: dict[str, Any] = {
        "messaging.system": _SYSTEM,
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": name,
        "messaging.message.id": job_id,
        "rota.job.attempt": attempt,
    }
    result: dict[str, Any] = {}
    with _tracer().start_as_current_span(
        f"process {name}",
        context=parent,
        kind=_trace.SpanKind.CONSUMER,
        attributes=attributes,
        links=links,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield result
        finally:
            outcome = result.get("outcome")
            if outcome:
                span.set_attribute("rota.job.outcome", outcome)
            if result.get("reason"):
                span.set_attribute("rota.job.reason", result["reason"])
            if result.get("error"):
                span.set_status(_trace.Status(_trace.StatusCode.ERROR, result["error"]))
                span.set_attribute("error.type", result.get("reason") or "error")
