"""Times as the CLI shows and takes them: with their offset, "in 5m" for one to come,
and durations as people write them."""

from __future__ import annotations

import re
import time

import pytest

from rota import Client
from tests.cli_helpers import rota_env, run_rota


@pytest.fixture
def conn(redis_url: str, namespace: str) -> tuple[str, ...]:
    return ("--redis-url", redis_url, "--namespace", namespace)


async def test_job_show_prints_utc_with_its_offset_and_a_future_time_as_in(
    conn: tuple[str, ...], client: Client
) -> None:
    job = await client.enqueue_in(2 * 3600 + 300, "report")
    run_at = time.gmtime((await client.job(job.id)).run_at)  # type: ignore[union-attr]
    done = run_rota("job", "show", job.id, *conn, env=rota_env(TZ="Asia/Tokyo"))
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.strip().startswith("run_at"))
    assert time.strftime("%Y-%m-%d %H:%M", run_at) in line  # UTC, whatever TZ says
    assert "+00:00" in line
    assert re.search(r"\(in 2h0[45]m\)", line), line
    enqueued = next(x for x in done.stdout.splitlines() if x.strip().startswith("enqueued_at"))
    assert re.search(r"\(\d+(\.\d)?s ago\)", enqueued), enqueued


async def test_local_time_shows_the_zone_by_its_offset_and_name(
    conn: tuple[str, ...], client: Client
) -> None:
    job = await client.enqueue_in(3600, "report")
    run_at = (await client.job(job.id)).run_at  # type: ignore[union-attr]
    assert run_at is not None
    done = run_rota(
        "--local-time", "scheduled", "list", *conn, env=rota_env(TZ="Asia/Tokyo", COLUMNS="200")
    )
    assert done.returncode == 0, done.stderr
    tokyo = time.strftime("%Y-%m-%d %H:%M", time.gmtime(run_at + 9 * 3600))
    assert f"{tokyo}" in done.stdout and "+09:00 JST" in done.stdout, done.stdout
    utc = run_rota("scheduled", "list", *conn, env=rota_env(TZ="Asia/Tokyo", COLUMNS="200"))
    assert "+00:00" in utc.stdout and "JST" not in utc.stdout, utc.stdout


async def test_in_takes_compound_durations_and_names_itself_when_wrong(
    conn: tuple[str, ...], client: Client
) -> None:
    before = time.time()
    done = run_rota("enqueue", "report", "--in", "1h30m", "--json", *conn)
    assert done.returncode == 0, done.stderr
    ids = await client.admin.shards[0].redis.zrange(
        client.admin.shards[0].keys.scheduled, 0, -1, withscores=True
    )
    assert len(ids) == 1
    assert before + 5400 - 5 <= float(ids[0][1]) / 1000 <= time.time() + 5400
    bad = run_rota("enqueue", "report", "--in", "1h30", *conn)
    assert bad.returncode == 2
    assert "--in" in bad.stderr and "1h30m" in bad.stderr, bad.stderr
