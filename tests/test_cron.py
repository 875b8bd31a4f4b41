"""Periodic jobs: cron parsing, next fire times, and one run per fire time across pools."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from rota import Client, JobContext, WorkerPool
from rota.worker.cron import Cron
from tests.helpers import pool_settings
from tests.unit.test_cron_expressions import T0


def _field_matches(spec: str, value: int, lowest: int) -> bool:
    """The simple field forms the search below generates, read by hand."""
    if spec == "*":
        return True
    if spec.startswith("*/"):
        return (value - lowest) % int(spec[2:]) == 0
    if "-" in spec:
        a, b = spec.split("-")
        return int(a) <= value <= int(b)
    return value in {int(v) for v in spec.split(",")}


def _brute(expression: str, t: datetime) -> datetime:
    minute, hour, dom, _, dow = expression.split()
    t = t.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while True:
        on_dom = _field_matches(dom, t.day, 1)
        on_dow = _field_matches(dow, t.isoweekday() % 7, 0)
        day = (on_dom and on_dow) if "*" in (dom, dow) else (on_dom or on_dow)
        if day and _field_matches(hour, t.hour, 0) and _field_matches(minute, t.minute, 0):
            return t
        t += timedelta(minutes=1)


field = st.one_of(
    st.just("*"), st.integers(0, 5).map(str), st.integers(1, 20).map(lambda s: f"*/{s}")
)


@settings(max_examples=200, deadline=None)
@given(
    minute=field,
    hour=st.sampled_from(["*", "3", "*/6", "1-4"]),
    dom=st.sampled_from(["*", "1", "15", "28"]),
    dow=st.sampled_from(["*", "1", "0,6"]),
    offset=st.integers(0, 10**7),
)
def test_next_fire_matches_a_minute_by_minute_search(
    minute: str, hour: str, dom: str, dow: str, offset: int
) -> None:
    expression = f"{minute} {hour} {dom} * {dow}"
    start = T0 + timedelta(seconds=offset * 7)
    assert Cron(expression).next_after(start) == _brute(expression, start)


async def test_periodic_job_fires_once_per_time_across_pools(
    client: Client, redis_url: str, namespace: str
) -> None:
    runs: Counter[str] = Counter()

    def make_pool() -> WorkerPool:
        pool = WorkerPool(settings=pool_settings(redis_url, namespace))

        @pool.periodic("* * * * * *", kwargs={"label": "tick"})  # every second
        async def heartbeat_job(ctx: JobContext, label: str) -> None:
            runs[ctx.id] += 1

        return pool

    async with make_pool().running(), make_pool().running():
        await anyio.sleep(3.5)
    assert 3 <= len(runs) <= 4, runs
    assert set(runs.values()) == {1}
    assert all(job_id.startswith("cron:heartbeat_job:") for job_id in runs)
