"""One job's actions and the clean by age in a real headless Chromium: a queued job run
next and another deleted from the queue's page, a job to retry killed from its set's
page, a job's own page offering what its state allows, the dead jobs of one name
cleaned by the set's form; each in the audit log."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from rota import Client
from tests.web.conftest import Site, Tab
from tests.web.test_browser import SHOTS
from tests.web.test_browser_operate import _dead, _row

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


async def _retry(client: Client, name: str, n: int) -> list[str]:
    """``n`` jobs of ``name`` in the retry set, as a failed attempt leaves them."""
    shard = client.admin.shards[0]
    ids = []
    for i in range(n):
        job = await client.enqueue(name, i)
        await shard.redis.lrem(shard.keys.queue(name), 0, job.id)
        await shard.redis.hset(shard.keys.job(job.id), mapping={"state": "retry", "error": "E"})
        await shard.redis.zadd(shard.keys.retry, {job.id: 4102444800000 + i})
        ids.append(job.id)
    return ids


@pytest.mark.one_shard("writes shard 0's keys; a queue's page over shards is merged by time")
def test_run_next_delete_kill_and_clean_from_the_pages(site: Site, tab: Tab) -> None:
    page = tab.page
    ids = [site.call(site.client.enqueue, "parcel", i).id for i in range(3)]
    page.goto(site.url + "/queues/parcel?order=oldest")
    expect(page.locator("table.queued tbody tr")).to_have_count(3)
    with page.expect_navigation():
        _row(page, ids[2]).get_by_role("button", name="Run next").click()
    expect(page.locator(".notice")).to_have_text(
        "Job moved to the front of its queue: it runs next."
    )
    page.goto(site.url + "/queues/parcel?order=oldest")
    expect(page.locator("table.queued tbody td.mono a")).to_have_text([ids[2], ids[0], ids[1]])
    with page.expect_navigation():
        _row(page, ids[0]).get_by_role("button", name="Delete").click()
    assert tab.dialogs == ["Delete this queued job for good?"]
    expect(page.locator(".notice")).to_have_text("1 jobs deleted.")
    assert site.state(ids[0]) is None and site.state(ids[1]) == "queued"

    # a queued job's own page: run next, which keeps the operator on it
    page.goto(site.url + f"/jobs/{ids[1]}")
    with page.expect_navigation():
        page.get_by_role("button", name="Run next (to the front)").click()
    expect(page.locator(".notice")).to_have_text(
        "Job moved to the front of its queue: it runs next."
    )
    assert page.url.startswith(site.url + f"/jobs/{ids[1]}")

    # a job to retry, killed from its set's page
    doomed, spared = site.call(_retry, site.client, "courier", 2)
    page.goto(site.url + "/retry")
    with page.expect_navigation():
        _row(page, doomed).get_by_role("button", name="Kill").click()
    assert tab.dialogs[-1] == "Move this job to the dead set now, without another try?"
    expect(page.locator(".notice")).to_have_text("1 jobs killed: moved to the dead set.")
    record = site.call(site.client.job, doomed)
    assert record is not None and (record.state, record.reason) == ("dead", "killed")
    assert site.state(spared) == "retry"
    page.goto(site.url + f"/jobs/{spared}")
    expect(page.get_by_role("button", name="Kill")).to_have_count(1)

    # the dead jobs of one name cleaned by the form of the dead set's page
    old = site.call(_dead, site.client, "stale", 3)  # died in 2023
    page.goto(site.url + "/dead")
    form = page.locator("form#clean")
    form.get_by_label("age", exact=True).fill("30")
    form.get_by_label("unit of the age").select_option("days")
    form.get_by_label("job name (empty: every name)").fill("stale")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / "dead-clean.png", full_page=True)
    with page.expect_navigation():
        form.get_by_role("button", name="Clean").click()
    assert tab.dialogs[-1] == "Delete these jobs for good?"
    expect(page.locator(".notice")).to_have_text("3 jobs older than the age deleted.")
    assert [site.state(i) for i in old] == [None, None, None]
    assert site.state(doomed) == "dead"  # killed today: not that old, and another name

    page.goto(site.url + "/audit")
    what = page.locator('#audit tbody tr td[data-label="What"]').all_inner_texts()
    assert what[0].startswith("POST /dead/clean")
    assert what[1].startswith(f"POST /retry/{doomed}/kill")
    assert what[2].startswith(f"POST /queued/{ids[1]}/front")
    assert tab.errors == []
