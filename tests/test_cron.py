"""Periodic jobs: cron parsing, next fire times, and one run per fire time across pools."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rota import Client, JobContext, WorkerPool
from rota.worker.cron import Cron
from tests.helpers import pool_settings

T0 = datetime(2026, 3, 14, 15, 9, 26, tzinfo=UTC)  # a Saturday


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("* * * * *", datetime(2026, 3, 14, 15, 10, tzinfo=UTC)),
        ("*/15 * * * *", datetime(2026, 3, 14, 15, 15, tzinfo=UTC)),
        ("0 9 * * 1-5", datetime(2026, 3, 16, 9, 0, tzinfo=UTC)),  # next Monday
        ("30 2 29 2 *", datetime(2028, 2, 29, 2, 30, tzinfo=UTC)),  # next leap day
        ("0 0 1 * *", datetime(2026, 4, 1, tzinfo=UTC)),
        ("@hourly", datetime(2026, 3, 14, 16, 0, tzinfo=UTC)),
        ("@weekly", datetime(2026, 3, 15, tzinfo=UTC)),  # Sunday
        ("0 12 13 * 5", datetime(2026, 3, 20, 12, 0, tzinfo=UTC)),  # Friday OR the 13th
        ("*/10 * * * * *", datetime(2026, 3, 14, 15, 9, 30, tzinfo=UTC)),
        ("0 0 * * 7", datetime(2026, 3, 15, tzinfo=UTC)),  # 7 is Sunday too
    ],
)
def test_next_fire_times(expr: str, expected: datetime) -> None:
    assert Cron(expr).next_after(T0) == expected


def test_time_zones() -> None:
    fire = Cron("0 9 * * *", tz="Europe/Paris").next_after(T0)
    assert fire.astimezone(UTC) == datetime(2026, 3, 15, 8, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "* * * *",
        "61 * * * *",
        "* 24 * * *",
        "*/0 * * * *",
        "a * * * *",
        "5-1 * * * *",
        "0 0 31 2 *",
    ],
)
def test_bad_expressions_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match=r"cron|field|fires"):
        Cron(bad).next_after(T0)


def _brute(cron: Cron, t: datetime) -> datetime:
    t = t.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while True:
        dom = t.day in cron.fields[3]
        dow = (t.isoweekday() % 7) in cron.fields[5]
        day = (dom and dow) if (cron._dom_any or cron._dow_any) else (dom or dow)
        if (
            t.month in cron.fields[4]
            and day
            and t.hour in cron.fields[2]
            and t.minute in cron.fields[1]
        ):
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
    cron = Cron(f"{minute} {hour} {dom} * {dow}")
    start = T0 + timedelta(seconds=offset * 7)
    assert cron.next_after(start) == _brute(cron, start)


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
