"""Waiting out a Redis outage: what keep_trying waits out and what it raises, an error
reply logged once, and the heartbeat's probe waking the other tasks."""

from __future__ import annotations

import re
from collections.abc import Iterator, MutableMapping
from typing import Any

import anyio
import pytest
import redis
import redis.exceptions
from structlog.testing import capture_logs

from rota.redis.outage import Condition
from rota.redis.watch import Watch


def events(logs: list[MutableMapping[str, Any]], prefix: str) -> list[MutableMapping[str, Any]]:
    return [e for e in logs if str(e["event"]).startswith(prefix)]


async def test_keep_trying_waits_out_conditions_and_raises_the_rest() -> None:
    watch = Watch("p", settle=0)  # the first success after a failure ends the episode
    failures: Iterator[Exception | None] = iter([redis.exceptions.ConnectionError("gone"), None])
    seen: list[Condition | None] = []

    async def step() -> str:
        seen.append(watch.current)
        error = next(failures)
        if error is not None:
            raise error
        return "done"

    assert await watch.keep_trying("t", step) == "done"
    assert seen == [None, Condition.UNREACHABLE] and watch.current is None  # told, then over
    failures = iter([redis.exceptions.ConnectionError("gone"), None])
    seen.clear()
    assert await watch.keep_trying("t", step, tell=False) == "done"
    assert seen == [None, None]  # waited out without a word
    for tell, replies in ((True, False), (False, True)):
        failures = iter([redis.exceptions.ResponseError("WRONGTYPE a bug")])
        with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE a bug"):
            await watch.keep_trying("t", step, tell=tell, replies=replies)
    for error in (KeyError("a bug of rota's"), redis.exceptions.DataError("bad argument")):
        failures = iter([error])
        with pytest.raises(type(error), match=re.escape(error.args[0])):
            await watch.keep_trying("t", step)  # not a reply of Redis: a bug, raised


async def test_an_error_reply_is_logged_once_and_waited_out_not_raised() -> None:
    """No error reply may end a pool (a role missing a permission, a script a user
    broke): the task logs it once and tries again until Redis takes the command."""
    watch = Watch("p")
    refusal = redis.exceptions.NoPermissionError("NOPERM this user has no permissions")
    failures = iter([refusal, refusal, None])
    delays: list[float] = []

    async def step() -> str:
        error = next(failures)
        if error is not None:
            raise error
        return "done"

    real_failed = watch.failed

    async def failed(task: str, exc: BaseException, *, replies: bool = True) -> float:
        delays.append(await real_failed(task, exc, replies=replies))
        return 0.0

    watch.failed = failed  # type: ignore[method-assign]
    with capture_logs() as logs:
        assert await watch.keep_trying("acker", step) == "done"
    assert len(delays) == 2 and all(d > 0 for d in delays)
    assert len(events(logs, "Redis answered an error")) == 1
    assert watch.current is None  # an error reply is no outage


async def test_the_heartbeat_probes_and_wakes_the_other_tasks_when_redis_answers() -> None:
    """While Redis is away a task waits its growing delay, but not longer than it takes
    another task of the pool to get through: then it tries again at once."""
    watch = Watch("p", settle=0)
    gone = redis.exceptions.ConnectionError("gone")
    # The other task has failed often: its next delay is seconds.
    for _ in range(8):
        await watch.failed("fetcher", gone)
    tries = 0

    async def fetch() -> str:
        nonlocal tries
        tries += 1
        if tries == 1:
            raise gone
        return "fetched"

    async def probe() -> str:
        await anyio.sleep(0.2)
        return "beat"

    with anyio.fail_after(3):  # the fetcher's own delay would be 5 s
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch.keep_trying, "fetcher", fetch)
            await anyio.sleep(0.05)
            await watch.failed("heartbeat", gone)
            assert await watch.keep_trying("heartbeat", probe, probe=True) == "beat"
    assert tries == 2 and watch.current is None
