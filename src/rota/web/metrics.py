"""``/metrics``: cluster-wide figures read from Redis at each scrape, in Prometheus'
text format.

A scrape reads the namespace through the client (a few round trips whatever the number
of queues) and Redis's own figures (``INFO memory`` and ``INFO replication`` in one
round trip), then a :class:`RotaCollector` turns that reading into metric families.

Series per job name are bounded: a scrape details the :data:`NAMES` names with the most
jobs queued and running (their figures and counters), and gives the namespace's totals
over every name beside them; ``/metrics?names=all`` details every name. 5,000 names made
a scrape of 2.7 MB and 45,000 series, read with 40,000 commands. The ranking is one call a
shard (:meth:`Shard.backlog`, which counts every name inside Redis), the counters only the fields of
the totals and of the detailed names (the hash holds five for every name).

Fair keys are opt-in: ``/metrics?keys=top`` adds, for each detailed name, its :data:`KEYS`
keys with the most jobs queued (``rota_fair_key_queued`` and ``rota_fair_key_running``,
labelled by key), however many keys it has: a tenant per key must not make a series per
tenant. It costs two round trips per shard whatever the number of names and keys (every
detailed name's ranking in one pipeline, then the running count and settings of the keys
found in one more), which a scrape without it does not pay.

Run times are opt-in too: ``/metrics?run_times=hour`` (or ``day``) adds, for each
detailed name, its attempts over that window and its p50, p95 and p99
(``rota_job_run_time_attempts``, ``rota_job_run_time_seconds`` with a ``quantile``
label; see :mod:`rota.client.run_times`): four series per name, every detailed name's
read in one round trip per shard. They are gauges over a window that rolls (its counts drop
as old slots leave it), not a Prometheus histogram, whose counters may only grow.

``rota_redis_refusing_writes`` says whether Redis refuses writes and why, as Redis's
figures show it: ``out_of_memory`` when it is at its ``maxmemory`` with the
``noeviction`` policy (enqueues fail; pools go on draining), ``read_only`` when it is a
replica (everything that writes fails). A Redis that refuses ``INFO`` (an ACL) leaves
these gauges and the memory ones out of the scrape.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from rota import inspect
from rota.client import Client, QueueInfo
from rota.client.fair import FairKeyInfo
from rota.client.run_times import RunTimes
from rota.client.status import LivePool
from rota.inspect import RedisFigures
from rota.inspect.figures import stats_totals
from rota.protocol.run_times import Window
from rota.redis.outage import Condition
from rota.web.base import client_of

__all__ = [
    "COUNTERS",
    "KEYS",
    "NAMES",
    "QUANTILES",
    "REFUSALS",
    "RotaCollector",
    "metrics",
    "read",
]

#: Counters of the stats hash exported per job name, as ``rota_jobs_<field>_total``.
COUNTERS = ("processed", "failed", "dead", "lost", "aborted")
#: Job names with series of their own in a scrape (``?names=all``: every name).
NAMES = 100
#: Fair keys of each detailed name with series of their own (``?keys=top``), the largest
#: backlog first.
KEYS = 10
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: The quantiles ``rota_job_run_time_seconds`` reports (``?run_times=hour|day``), by
#: the field of :class:`RunTimes` that holds each.
QUANTILES = {"0.5": "p50_ms", "0.95": "p95_ms", "0.99": "p99_ms"}
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
    server: RedisFigures | None = None  # None: Redis refused INFO
    names: int = 0  # job names of the namespace, detailed in `queues` or not
    queued: int = 0  # jobs queued, over every name
    running: int = 0  # jobs running, over every name
    # ?keys=top: the top fair keys of each detailed name that has keys
    top_keys: dict[str, list[FairKeyInfo]] = dataclasses.field(default_factory=dict)
    # ?run_times=hour|day: the run times of each detailed name
    run_times: list[RunTimes] = dataclasses.field(default_factory=list)


async def read(
    client: Client,
    detailed: int | None = NAMES,
    keys: bool = False,
    run_times: Window | None = None,
) -> Reading:
    """The figures of a scrape: ``detailed`` names (None: all) in full, those with the
    most jobs queued and running, ranked by one call a shard (see
    :meth:`Shard.backlog`); of the counters since the namespace began, the totals and
    the detailed names' only (the hash holds five fields for every name). ``keys``: the
    :data:`KEYS` fair keys of each detailed name with the most jobs queued too, read
    for all of them at once; ``run_times``: each detailed name's run times over that
    window."""
    started = time.perf_counter()
    roundtrip = await inspect.ping(client)
    figures = await inspect.redis_figures(client)
    names = await client.admin.names()
    counts = await inspect.backlog(client, names)
    ranked = sorted(names, key=lambda n: (-sum(counts[n]), n))
    queues = await client.admin.queues(ranked if detailed is None else ranked[:detailed])
    fields = [*COUNTERS, *(f"{c}:{q.name}" for q in queues for c in COUNTERS)]
    stats = await stats_totals(client, fields)
    pools = await client.admin.pools()
    sets = await client.admin.job_set_sizes()
    fair = await client.admin.fair.of_names([q.name for q in queues], KEYS) if keys else {}
    runs: list[RunTimes] = []
    if run_times is not None:
        runs = await client.admin.run_times.of_names([q.name for q in queues], run_times)
    return Reading(
        client.namespace,
        queues,
        stats,
        pools,
        sets,
        roundtrip,
        time.perf_counter() - started,
        figures,
        names=len(names),
        queued=sum(q for q, _ in counts.values()),
        running=sum(r for _, r in counts.values()),
        top_keys=fair,
        run_times=runs,
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
            "rota_queue_latency_seconds": ("Age of the oldest queued job.", lambda q: q.latency),
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
            every = f"Jobs {field}, over every job name."
            total = CounterMetricFamily(f"rota_namespace_jobs_{field}", every, labels=["namespace"])
            total.add_metric(ns, r.stats.get(field, 0))
            yield total
        sets = GaugeMetricFamily(
            "rota_jobs_in_set",
            "Jobs scheduled, to retry, dead, or waiting for other jobs.",
            labels=["namespace", "set"],
        )
        for which, n in r.sets.items():
            sets.add_metric([r.namespace, which], n)
        yield sets
        for name, text, figure in (
            ("rota_pools", "Live worker pools.", len(r.pools)),
            ("rota_workers", "Workers of all live pools.", sum(p.concurrency for p in r.pools)),
            ("rota_busy_workers", "Workers running a job.", r.running),
            ("rota_queued_jobs", "Jobs queued, over every job name.", r.queued),
            ("rota_job_names", "Job names of the namespace.", r.names),
            ("rota_redis_roundtrip_seconds", "Round trip of a PING to Redis.", r.roundtrip),
            ("rota_scrape_duration_seconds", "Time spent reading Redis.", r.scrape_seconds),
        ):
            yield _gauge(name, text, ns, figure)
        if r.top_keys:
            yield from _key_families(r.namespace, r.top_keys)
        if r.run_times:
            yield from _run_time_families(r.namespace, r.run_times)
        if r.server is not None:
            yield from _redis_families(r.namespace, r.server)


def _run_time_families(namespace: str, runs: list[RunTimes]) -> Iterator[Metric]:
    """The run times of each detailed name (``?run_times=hour|day``): a quantile is its
    bucket's upper bound (+Inf for the open bucket); none when nothing ran."""
    window = runs[0].window
    attempts = GaugeMetricFamily(
        "rota_job_run_time_attempts",
        f"Attempts that ran to an outcome over the last {window}.",
        labels=["namespace", "name"],
    )
    seconds = GaugeMetricFamily(
        "rota_job_run_time_seconds",
        f"Run time quantiles over the last {window}: the upper bound of the bucket holding"
        " each (at most 1.5 times the true value).",
        labels=["namespace", "name", "quantile"],
    )
    for run in runs:
        attempts.add_metric([namespace, run.name], run.count)
        if run.count:
            for q, field in QUANTILES.items():
                ms = getattr(run, field)
                value = math.inf if ms is None else ms / 1000
                seconds.add_metric([namespace, run.name, q], value)
    yield attempts
    yield seconds


def _key_families(namespace: str, keys: dict[str, list[FairKeyInfo]]) -> Iterator[Metric]:
    """The top fair keys of each detailed name (``?keys=top``)."""
    labels = ["namespace", "name", "key"]
    for metric, doc, value in (
        ("rota_fair_key_queued", f"Jobs queued of a fair key (the top {KEYS} of a name).", "q"),
        ("rota_fair_key_running", f"Jobs running of a fair key (the top {KEYS} of a name).", "r"),
    ):
        family = GaugeMetricFamily(metric, doc, labels=labels)
        for name, rows in keys.items():
            for row in rows:
                if value == "r" and row.limit is None:
                    continue  # no running set to read: no series rather than a false 0
                family.add_metric(
                    [namespace, name, row.key], row.queued if value == "q" else row.running
                )
        yield family


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
    used = "Memory Redis uses (used_memory)."
    yield _gauge("rota_redis_memory_used_bytes", used, [namespace], figures.used_memory)
    most = "Redis's memory limit (maxmemory; 0: no limit)."
    yield _gauge("rota_redis_memory_max_bytes", most, [namespace], figures.maxmemory)


def _gauge(name: str, doc: str, labels: list[str], value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=["namespace"])
    family.add_metric(labels, value)
    return family


async def metrics(request: Request) -> Response:
    """The scrape; ``?names=all`` details every job name, ``?keys=top`` adds the top fair
    keys of each, ``?run_times=hour|day`` their run times (see the module's docstring)."""
    every, keys = request.query_params.get("names"), request.query_params.get("keys")
    runs = request.query_params.get("run_times")
    if runs is not None and runs not in ("hour", "day"):
        raise HTTPException(400, f"run_times: 'hour', 'day' or nothing, not {runs[:40]!r}")
    if every not in (None, "all"):
        raise HTTPException(400, f"names: 'all' or nothing, not {every[:40]!r}")
    if keys not in (None, "top"):
        raise HTTPException(400, f"keys: 'top' or nothing, not {keys[:40]!r}")
    window: Window | None = "hour" if runs == "hour" else "day" if runs == "day" else None
    reading = await read(client_of(request), None if every else NAMES, keys is not None, window)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RotaCollector(reading))
    return Response(generate_latest(registry), media_type=CONTENT_TYPE)
