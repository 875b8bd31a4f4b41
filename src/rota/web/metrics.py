"""``/metrics``: cluster-wide figures read from Redis at each scrape, in Prometheus'
text format.

A scrape reads the namespace through the client (a few round trips whatever the number
of queues) and Redis's own figures (``INFO memory`` and ``INFO replication`` in one
round trip), then a :class:`RotaCollector` turns that reading into metric families.

``rota_redis_refusing_writes`` says whether Redis refuses writes and why, as Redis's
figures show it: ``out_of_memory`` when it is at its ``maxmemory`` with the
``noeviction`` policy (enqueues fail; pools go on draining), ``read_only`` when it is a
replica (everything that writes fails). A Redis that refuses ``INFO`` (an ACL) leaves
these gauges and the memory ones out of the scrape.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response

from rota import inspect
from rota.client import Client, QueueInfo
from rota.inspect import RedisFigures
from rota.operations import LivePool
from rota.redis.outage import Condition
from rota.web.base import client_of

__all__ = [
    "COUNTERS",
    "REFUSALS",
    "RotaCollector",
    "metrics",
    "read",
]

#: Counters of the stats hash exported per job name, as ``rota_jobs_<field>_total``.
COUNTERS = ("processed", "failed", "dead", "lost", "aborted")
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: The conditions ``rota_redis_refusing_writes`` reports, each 1 or 0 at every scrape.
REFUSALS = (Condition.OUT_OF_MEMORY, Condition.READ_ONLY)


@dataclass(frozen=True)
class Reading:
    namespace: str
    queues: list[QueueInfo]
    stats: dict[str, int]
    pools: list[LivePool]
    sets: dict[str, int]
    roundtrip: float
    scrape_seconds: float
    redis: RedisFigures | None = None  # None: Redis refused INFO


async def read(client: Client) -> Reading:
    started = time.perf_counter()
    roundtrip = await inspect.ping(client)
    figures = await inspect.redis_figures(client)
    queues = await client.queues()
    stats = await client.stats()
    pools = await client.pools()
    sets = await client.job_set_sizes()
    return Reading(
        client.namespace,
        queues,
        stats,
        pools,
        sets,
        roundtrip,
        time.perf_counter() - started,
        figures,
    )


class RotaCollector(Collector):
    """Metric families of one reading of the namespace."""

    def __init__(self, reading: Reading) -> None:
        self.reading = reading

    def collect(self) -> Iterator[Metric]:
        r = self.reading
        ns = [r.namespace]
        per_queue: dict[str, tuple[str, Callable[[QueueInfo], float]]] = {
            "rota_queue_size": ("Jobs waiting in the queue.", lambda q: q.size),
            "rota_queue_latency_seconds": (
                "Age of the oldest queued job.",
                lambda q: q.latency,
            ),
            "rota_queue_running": ("Jobs of the name running now.", lambda q: q.running),
            "rota_queue_paused": ("1 when the queue is paused.", lambda q: int(q.paused)),
        }
        for metric, (doc, value) in per_queue.items():
            family = GaugeMetricFamily(metric, doc, labels=["namespace", "name"])
            for q in r.queues:
                family.add_metric([r.namespace, q.name], float(value(q)))
            yield family
        names = {q.name for q in r.queues}
        for field in COUNTERS:
            counter = CounterMetricFamily(
                f"rota_jobs_{field}", f"Jobs {field}, per job name.", labels=["namespace", "name"]
            )
            for name in sorted(names):
                counter.add_metric([r.namespace, name], r.stats.get(f"{field}:{name}", 0))
            yield counter
        sets = GaugeMetricFamily(
            "rota_jobs_in_set",
            "Jobs scheduled, to retry, dead, or waiting for other jobs.",
            labels=["namespace", "set"],
        )
        for which, n in r.sets.items():
            sets.add_metric([r.namespace, which], n)
        yield sets
        yield _gauge("rota_pools", "Live worker pools.", ns, len(r.pools))
        yield _gauge(
            "rota_workers", "Workers of all live pools.", ns, sum(p.concurrency for p in r.pools)
        )
        yield _gauge(
            "rota_busy_workers", "Workers running a job.", ns, sum(q.running for q in r.queues)
        )
        yield _gauge(
            "rota_redis_roundtrip_seconds", "Round trip of a PING to Redis.", ns, r.roundtrip
        )
        yield _gauge(
            "rota_scrape_duration_seconds", "Time spent reading Redis.", ns, r.scrape_seconds
        )
        if r.redis is not None:
            yield from _redis_families(r.namespace, r.redis)


def _redis_families(namespace: str, figures: RedisFigures) -> Iterator[Metric]:
    refusing = GaugeMetricFamily(
        "rota_redis_refusing_writes",
        "1 when Redis refuses writes for this condition (out_of_memory: at maxmemory with"
        " noeviction; read_only: a replica), else 0.",
        labels=["namespace", "condition"],
    )
    for cond in REFUSALS:
        refusing.add_metric([namespace, cond.value], int(cond in figures.refusing))
    yield refusing
    yield _gauge(
        "rota_redis_memory_used_bytes",
        "Memory Redis uses (used_memory).",
        [namespace],
        figures.used_memory,
    )
    yield _gauge(
        "rota_redis_memory_max_bytes",
        "Redis's memory limit (maxmemory; 0: no limit).",
        [namespace],
        figures.maxmemory,
    )


def _gauge(name: str, doc: str, labels: list[str], value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=["namespace"])
    family.add_metric(labels, value)
    return family


async def metrics(request: Request) -> Response:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RotaCollector(await read(client_of(request))))
    return Response(generate_latest(registry), media_type=CONTENT_TYPE)
