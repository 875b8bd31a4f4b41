"""Cron expressions: next fire times, names, L, # and ?, seconds, time zones and
daylight-saving days, and bad expressions refused at registration."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from rota import JobContext, WorkerPool
from rota.worker.cron import Cron

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


BERLIN = ZoneInfo("Europe/Berlin")


def _fires(cron: Cron, start: datetime, n: int) -> list[datetime]:
    out = [cron.next_after(start)]
    while len(out) < n:
        out.append(cron.next_after(out[-1]))
    return out


def test_a_half_past_two_job_fires_once_on_both_daylight_saving_days() -> None:
    cron = Cron("30 2 * * *", "Europe/Berlin")
    spring = _fires(cron, datetime(2026, 3, 28, 12, tzinfo=BERLIN), 3)
    # 2026-03-29: 02:00 -> 03:00, there is no 02:30: the job fires once, at 03:00
    assert [t.astimezone(BERLIN).isoformat() for t in spring] == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
        "2026-03-31T02:30:00+02:00",
    ]
    autumn = _fires(cron, datetime(2026, 10, 24, 12, tzinfo=BERLIN), 3)
    # 2026-10-25: 03:00 -> 02:00, 02:30 comes twice: the job fires once
    assert [t.astimezone(BERLIN).isoformat() for t in autumn] == [
        "2026-10-25T02:30:00+02:00",
        "2026-10-26T02:30:00+01:00",
        "2026-10-27T02:30:00+01:00",
    ]


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("0 9 * * MON-FRI", datetime(2026, 3, 16, 9, tzinfo=UTC)),  # T0 is a Saturday
        ("0 0 1 JAN *", datetime(2027, 1, 1, tzinfo=UTC)),
        ("0 0 L * *", datetime(2026, 3, 31, tzinfo=UTC)),
        ("0 0 * * 5#2", datetime(2026, 4, 10, tzinfo=UTC)),  # the 13th was the 2nd Friday
        ("0 12 ? * SUN", datetime(2026, 3, 15, 12, tzinfo=UTC)),
        ("15 0 9 * * *", datetime(2026, 3, 15, 9, 0, 15, tzinfo=UTC)),
    ],
)
def test_names_last_day_nth_weekday_question_mark_and_seconds(
    expr: str, expected: datetime
) -> None:
    assert Cron(expr).next_after(T0) == expected


def test_reboot_and_bad_expressions_name_the_job_at_registration() -> None:
    pool = WorkerPool()
    with pytest.raises(ValueError, match=r"periodic job 'nightly'.*@reboot"):
        pool.periodic("@reboot", name="nightly")(_noop)
    with pytest.raises(ValueError, match=r"periodic job '_noop'.*61 \* \* \* \*"):
        pool.periodic("61 * * * *")(_noop)
    assert not pool.handlers


async def _noop(ctx: JobContext) -> None:
    return None
