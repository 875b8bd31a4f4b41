"""The finished jobs (kept complete ones), newest first over every shard, and searching
jobs by their content: from the client and the CLI."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from rota import Client, JobContext, JobSpec, WorkerPool
from rota.client.finished import PREVIEW
from tests.cli_helpers import run_rota
from tests.helpers import pool_settings, wait_until


async def _processed(client: Client, n: int) -> None:
    async def done() -> bool:
        return (await client.admin.stats()).get("processed", 0) >= n

    await wait_until(done, within=20)


@pytest.fixture
async def finished(client: Client, redis_url: str, namespace: str) -> int:
    """40 complete jobs: 30 of ``answer`` (a result of 1,000 bytes and more), 10 of
    ``other``; their finish times spread over a few ms each."""
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, keep_result=3600.0))

    @pool.job
    async def answer(ctx: JobContext, n: int) -> dict[str, object]:
        return {"n": n, "pad": "é" * 600}

    @pool.job
    async def other(ctx: JobContext, n: int, note: str = "") -> str:
        return f"done {n} {note}"

    specs = [JobSpec(name="answer", args=(n,), job_id=f"a{n:03d}") for n in range(30)]
    specs += [
        JobSpec(name="other", kwargs={"n": n, "note": f"order {n}"}, job_id=f"o{n:03d}")
        for n in range(40, 50)
    ]
    async with pool.running():
        for spec in specs:  # one at a time: distinct finish times, mostly
            await client.enqueue_many([spec])
        await _processed(client, len(specs))
    return len(specs)


async def test_a_page_is_newest_first_with_run_time_and_a_preview(
    client: Client, finished: int
) -> None:
    whole = await client.admin.finished(count=100)
    assert (whole.total, whole.size, whole.searched, whole.complete) == (40, 40, 40, True)
    times = [j.finished_at for j in whole.jobs]
    assert times == sorted(times, reverse=True)
    assert {j.id for j in whole.jobs} == {*(f"a{n:03d}" for n in range(30))} | {
        f"o{n:03d}" for n in range(40, 50)
    }
    one = next(j for j in whole.jobs if j.id == "a007")
    assert one.run_time is not None and one.started_at is not None
    assert one.run_time == pytest.approx(one.finished_at - one.started_at)
    assert one.result is not None and one.result.startswith('{"n":7,"pad":"é')
    assert len(one.result.removesuffix("…").encode()) <= PREVIEW and one.result.endswith("…")
    assert one.result_size > 1200  # 600 two-byte characters
    first = await client.admin.finished(offset=0, count=15)
    second = await client.admin.finished(offset=15, count=15)
    assert [j.id for j in first.jobs] + [j.id for j in second.jobs] == [
        j.id for j in whole.jobs[:30]
    ]
    oldest = await client.admin.finished(order="oldest", count=100)
    assert [j.finished_at for j in oldest.jobs] == sorted(times)
    assert {j.id for j in oldest.jobs} == {j.id for j in whole.jobs}


async def test_a_time_window_keeps_the_jobs_finished_within(client: Client, finished: int) -> None:
    whole = (await client.admin.finished(count=100)).jobs
    since, until = whole[30].finished_at, whole[5].finished_at
    inside = [j.id for j in whole if since <= j.finished_at <= until]
    page = await client.admin.finished(since=since, until=until, count=100)
    assert page.total == page.size == len(inside) >= 26
    assert sorted(j.id for j in page.jobs) == sorted(inside)
    named = await client.admin.finished(name="answer", since=since, until=until, count=100)
    assert {j.id for j in named.jobs} == {i for i in inside if i.startswith("a")}
    assert (await client.admin.finished(since=until + 3600)).total == 0


async def test_a_page_of_one_name_stops_says_where_and_goes_on(
    client: Client, finished: int
) -> None:
    whole = await client.admin.finished(name="other", count=100)
    assert whole.complete and [j.name for j in whole.jobs] == ["other"] * 10
    times = [j.finished_at for j in whole.jobs]
    assert times == sorted(times, reverse=True)
    seen: list[str] = []
    until: float | None = None
    pages = 0
    while True:
        page = await client.admin.finished(name="other", until=until, scan=4, count=100)
        pages += 1
        seen += [j.id for j in page.jobs]
        assert page.searched <= page.size
        if page.complete:
            break
        assert page.next_until is not None
        until = page.next_until
    assert pages > 1
    assert seen == [j.id for j in whole.jobs]  # every one once, newest first


async def test_a_search_finds_a_job_by_a_kwarg_and_a_result(client: Client, finished: int) -> None:
    by_id = await client.admin.search("complete", "order 42")
    assert by_id.total == 0  # by id and name only: not there
    found = await client.admin.search("complete", "ORDER 42", fields="content")
    assert [j.id for j in found.jobs] == ["o042"] and found.complete
    page = await client.admin.finished(text="done 45", fields="content")
    assert [j.id for j in page.jobs] == ["o045"]
    with pytest.raises(ValueError, match="fields: 'id' or 'content'"):
        await client.admin.search("complete", "x", fields="all")  # type: ignore[arg-type]


async def test_a_search_and_a_page_name_a_number_out_of_its_range(client: Client) -> None:
    """Every number either scan takes fails where it enters, by name, before any read."""
    wild: list[tuple[str, dict[str, Any]]] = [
        ("offset", {"offset": -1}),
        ("count", {"count": 0}),
        ("start", {"start": 10**12}),
        ("scan", {"scan": -5}),
        ("budget", {"budget": float("inf")}),
        ("budget", {"budget": -1.0}),
    ]
    for word, kwargs in wild:
        with pytest.raises(ValueError, match=f"^{word}: "):
            await client.admin.search("complete", "x", **kwargs)
    later: list[tuple[str, dict[str, Any]]] = [
        ("budget", {"budget": float("nan")}),
        ("scan", {"scan": 0}),
    ]
    for word, kwargs in later:
        with pytest.raises(ValueError, match=f"^{word}: "):
            await client.admin.finished(text="x", **kwargs)


async def test_a_search_finds_a_dead_job_by_its_error_message(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace))

    @pool.job(max_fails=1)
    async def charge(ctx: JobContext, order: int) -> None:
        if order == 42:
            raise TimeoutError("the card gateway did not answer for order 42")
        raise ValueError("card declined")

    jobs = [await client.enqueue("charge", order=n) for n in (41, 42, 43)]
    async with pool.running():

        async def all_dead() -> bool:
            return (await client.admin.job_set_sizes())["dead"] == 3

        await wait_until(all_dead, within=20)
    found = await client.admin.search("dead", "gateway did not", fields="content")
    assert [j.id for j in found.jobs] == [jobs[1].id]
    by_type = await client.admin.search("dead", "timeouterror", fields="content")
    assert [j.id for j in by_type.jobs] == [jobs[1].id]
    assert (await client.admin.search("dead", "gateway")).total == 0


async def test_a_content_search_that_stops_says_where_and_goes_on(client: Client) -> None:
    specs = [
        JobSpec(name="hay", delay=3600 + i, kwargs={"ref": f"r{i}"}, job_id=f"s{i:04d}")
        for i in range(600)
    ]
    specs[-1] = JobSpec(name="hay", delay=9999, kwargs={"ref": "order 42"}, job_id="s0599")
    await client.enqueue_many(specs)
    found = await client.admin.search("scheduled", "order 42", fields="content", scan=300)
    assert (found.total, found.complete) == (0, False) and 0 < found.searched < 600
    while found.searched < found.size:
        found = await client.admin.search(
            "scheduled", "order 42", fields="content", start=found.searched
        )
    assert [j.id for j in found.jobs] == ["s0599"]


async def test_the_cli_lists_finished_jobs_and_searches_by_content(
    client: Client, finished: int, redis_url: str, namespace: str
) -> None:
    conn = ("--redis-url", redis_url, "--namespace", namespace)
    done = run_rota("complete", "list", "--name", "other", "--json", *conn)
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert [j["name"] for j in listed["jobs"]] == ["other"] * 10 and listed["complete"]
    table = run_rota("complete", "list", "--since", "1h", *conn)
    assert table.returncode == 0, table.stderr
    assert "a029" in table.stdout and "40 complete jobs" in table.stdout
    bad = run_rota("complete", "list", "--since", "soon", *conn)
    assert bad.returncode == 2 and "--since" in bad.stderr
    many = run_rota("complete", "list", "--limit", "1001", *conn)
    assert many.returncode == 2 and "--limit: at most 1000" in many.stderr
    with pytest.raises(ValueError, match="count: must be"):
        await client.admin.finished(count=0)
    searched = run_rota("scheduled", "list", "--search", "x", "--content", *conn)
    assert searched.returncode == 0, searched.stderr


async def test_a_complete_entry_at_infinity_or_with_a_wild_start_reads_as_a_time(
    client: Client, redis_sync: redis.Redis, namespace: str
) -> None:
    """A complete set's score and a record's started_at written by hand (infinity, 1e300,
    text) come back clamped or absent, never an error, in a page and in a search."""
    p = "{" + namespace + "}:"
    for jid, started in (("far", "1e300"), ("word", "soon"), ("huge", "9" * 40)):
        redis_sync.hset(p + "job:" + jid, mapping={"name": "nap", "started_at": started})
    redis_sync.zadd(p + "complete", {"far": float("inf"), "word": float("-inf"), "huge": 5})
    page = await client.admin.finished()
    assert sorted(j.id for j in page.jobs) == ["far", "huge", "word"]
    assert all(j.started_at is None or j.started_at < 1e12 for j in page.jobs)
    found = await client.admin.finished(text="far")
    assert [j.id for j in found.jobs] == ["far"]
    searched = await client.admin.search("complete", "word")
    assert [j.id for j in searched.jobs] == ["word"]
