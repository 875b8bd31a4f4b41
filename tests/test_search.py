"""Searching a job set, from the client, the CLI and the API: by id or name, over the
whole set, or saying where it stopped."""

from __future__ import annotations

import pytest

from rota import Client, JobSpec
from tests.cli_helpers import run_rota


@pytest.fixture
async def scheduled(client: Client) -> list[str]:
    """1,200 scheduled jobs; the last (in the set's order) is the one named 'needle'."""
    specs = [
        JobSpec(name="hay" if i < 1199 else "needle", delay=3600 + i, job_id=f"j{i:04d}")
        for i in range(1200)
    ]
    return [j.id for j in await client.enqueue_many(specs)]


async def test_a_search_reads_the_whole_set(client: Client, scheduled: list[str]) -> None:
    found = await client.admin.search("scheduled", "NEEDLE")
    assert (found.total, found.searched, found.size, found.complete) == (1, 1200, 1200, True)
    assert [j.id for j in found.jobs] == ["j1199"]
    by_id = await client.admin.search("scheduled", "j11", offset=10, count=5)
    assert by_id.total == 100
    assert [j.id for j in by_id.jobs] == [f"j11{i:02d}" for i in range(10, 15)]


async def test_a_search_that_stops_says_where(client: Client, scheduled: list[str]) -> None:
    found = await client.admin.search("scheduled", "needle", scan=700)
    assert (found.total, found.searched, found.size, found.complete) == (0, 700, 1200, False)


async def test_the_cli_searches_and_says_how_far(
    client: Client, scheduled: list[str], redis_url: str, namespace: str
) -> None:
    conn = ("--redis-url", redis_url, "--namespace", namespace)
    done = run_rota("scheduled", "list", "--search", "needle", *conn)
    assert done.returncode == 0, done.stderr
    assert "1 scheduled jobs matching 'needle' among all 1200" in done.stdout
    assert "j1199" in done.stdout and "j0001" not in done.stdout
