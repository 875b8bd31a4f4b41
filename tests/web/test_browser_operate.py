"""What an operator does beyond the lists, in a real headless Chromium: read a queue's
contents a page at a time; tick jobs of a set and retry or delete those only; see that
a job waits for a parent no pool serves; read what became of a group's callback. A real
server on a loopback port, real Redis; screenshots go to artifacts/screenshots/."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from rota import Client, JobContext, JobSpec, WorkerPool
from tests.helpers import pool_settings
from tests.web.conftest import Site, Tab
from tests.web.test_browser import SHOTS

# Slow (a headless Chromium): `make test` runs it, `make check` does not.
pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


def _fits_a_phone(browser: Browser, url: str, shot: str) -> None:
    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    small = phone.new_page()
    small.goto(url)
    small.screenshot(path=SHOTS / shot, full_page=True)
    width = small.evaluate("document.documentElement.scrollWidth")
    phone.close()
    assert width <= 400, f"{url} is {width}px wide on a phone"


def _job_ids(page: Page) -> list[str]:
    found: list[str] = page.locator("table.queued tbody td.mono a").all_inner_texts()
    return found


def test_a_queues_jobs_page_by_page(site: Site, tab: Tab, browser: Browser) -> None:
    ids = [site.call(site.client.enqueue, "letters", i).id for i in range(30)]
    page = tab.page
    page.goto(site.url + "/queues")
    with page.expect_navigation():
        page.locator("td.name").get_by_role("link", name="letters", exact=True).click()
    assert page.url == site.url + "/queues/letters"
    expect(page.locator("h1")).to_have_text("Queue letters")
    expect(page.locator("#queue-summary")).to_contain_text("30 jobs waiting")
    expect(page.locator("#queue-summary .no-pool")).to_have_text("no pool")
    assert _job_ids(page) == ids[:25]  # the next to run first
    expect(page.locator("table.queued tbody tr").first).to_contain_text("[0]")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / "queue.png", full_page=True)
    with page.expect_navigation():
        page.get_by_role("link", name="next →").click()
    assert _job_ids(page) == ids[25:]
    with page.expect_navigation():
        page.locator("#order-newest").click()
    assert _job_ids(page) == ids[::-1][:25]
    with page.expect_navigation():
        page.get_by_role("link", name="last »").click()
    assert _job_ids(page) == ids[::-1][25:]
    # a job that runs leaves the list; the page follows by itself
    page.goto(site.url + "/queues/letters")
    page.evaluate("window.stillHere = true")
    site.call(
        site.client.admin.shards[0].redis.rpop, site.client.admin.shards[0].keys.queue("letters")
    )
    expect(page.locator("#queue-summary")).to_contain_text("29 jobs waiting", timeout=20_000)
    assert page.evaluate("window.stillHere") is True
    assert _job_ids(page) == ids[1:26]
    with page.expect_navigation():
        page.get_by_role("button", name="Pause").click()
    expect(page.locator(".notice")).to_have_text("Queue paused.")
    assert page.url.startswith(site.url + "/queues/letters")
    assert tab.errors == []
    _fits_a_phone(browser, site.url + "/queues/letters", "phone-queue.png")


async def _dead(client: Client, name: str, n: int) -> list[str]:
    """``n`` dead jobs of ``name``, as a pool leaves them (no pool needed)."""
    ids = []
    for i in range(n):
        job = await client.enqueue(name, i)
        await client.admin.shards[0].redis.lrem(client.admin.shards[0].keys.queue(name), 0, job.id)
        await client.admin.shards[0].redis.hset(
            client.admin.shards[0].keys.job(job.id), mapping={"state": "dead", "error": "E"}
        )
        await client.admin.shards[0].redis.zadd(
            client.admin.shards[0].keys.dead, {job.id: 1700000000000 + i}
        )
        ids.append(job.id)
    return ids


def _row(page: Page, job_id: str) -> Any:
    return page.locator("tr", has=page.locator(f'a[href="/jobs/{job_id}"]'))


def _tick(page: Page, job_id: str) -> None:
    _row(page, job_id).get_by_role("checkbox").check()


def test_retry_and_delete_the_ticked_jobs_under_a_search(site: Site, tab: Tab) -> None:
    parcels = site.call(_dead, site.client, "parcel", 4)
    others = site.call(_dead, site.client, "other", 2)
    page = tab.page
    page.goto(site.url + "/dead?q=parcel")
    expect(page.locator("table.jobs tbody tr")).to_have_count(4)
    retry = page.get_by_role("button", name="Retry selected")
    expect(retry).to_be_disabled()  # nothing ticked yet
    _tick(page, parcels[0])
    _tick(page, parcels[2])
    expect(page.locator("#selected-count")).to_have_text("2 selected")
    expect(page.get_by_label("select every job of this page")).to_have_js_property(
        "indeterminate", True
    )
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / "dead-selected.png", full_page=True)
    with page.expect_navigation():
        retry.click()
    assert tab.dialogs == ["Queue the 2 selected jobs again?"]
    expect(page.locator(".notice")).to_have_text("2 jobs queued again.")
    assert page.url.startswith(site.url + "/dead?q=parcel")  # the search is kept
    states = [site.state(i) for i in parcels + others]
    assert states == ["queued", "dead", "queued", "dead", "dead", "dead"]

    # "every job of this page" ticks the rows listed (the search's), and no other
    expect(page.locator("table.jobs tbody tr")).to_have_count(2)
    page.get_by_label("select every job of this page").check()
    expect(page.locator("#selected-count")).to_have_text("2 selected")
    with page.expect_navigation():
        page.get_by_role("button", name="Delete selected").click()
    assert tab.dialogs[-1] == "Delete the 2 selected jobs for good?"
    expect(page.locator(".notice")).to_have_text("2 jobs deleted.")
    states = [site.state(i) for i in parcels + others]
    assert states == ["queued", None, "queued", None, "dead", "dead"]

    # the page's refresh comes in place, without a reload
    page.goto(site.url + "/dead")
    page.evaluate("window.stillHere = true")
    (late,) = site.call(_dead, site.client, "late", 1)
    expect(_row(page, late)).to_have_count(1, timeout=20_000)
    assert page.evaluate("window.stillHere") is True

    # the audit log says which jobs each action took
    page.goto(site.url + "/audit")
    rows = page.locator("#audit tbody tr")
    for row, action, ids in ((0, "delete", parcels[1::2]), (1, "retry", parcels[::2])):
        text = rows.nth(row).locator('td[data-label="What"]').inner_text()
        head, _, listed = text.partition(" · 2 jobs: ")
        assert head == f"POST /dead/{action}-selected"
        assert sorted(listed.split(", ")) == sorted(ids)
    assert tab.errors == []


def test_a_job_whose_parent_no_pool_serves_says_so(site: Site, tab: Tab, browser: Browser) -> None:
    settings = pool_settings(site.redis_url, site.namespace, heartbeat_interval=1.0)
    pool = WorkerPool(settings=settings)

    @pool.job
    async def stray(ctx: JobContext, n: int) -> None:
        pass

    site.call(site.client.admin.pause, "stray")  # queued, and served once the pool runs
    parent = site.call(site.client.enqueue, "stray", 1)
    kid = site.call(site.client.enqueue, "kid", 1, after=[parent.id])
    page = tab.page
    page.goto(site.url + f"/jobs/{kid.id}")
    expect(page.locator("#job-no-pool")).to_contain_text("No live pool serves stray")
    expect(page.locator("#job-parents li .no-pool")).to_have_text("no pool")
    expect(page.locator("#job-parents li")).to_contain_text(parent.id)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / "job-no-pool.png", full_page=True)
    with page.expect_navigation():
        page.locator("#flow-link").click()
    expect(page.locator("#flow-no-pool")).to_contain_text("No live pool serves kid, stray")
    # a pool that serves the parent's name starts: the warning goes, in place
    page.evaluate("window.stillHere = true")
    with site.portal.wrap_async_context_manager(pool.running()):
        expect(page.locator("#flow-no-pool")).to_contain_text(
            "No live pool serves kid:", timeout=20_000
        )
        assert page.evaluate("window.stillHere") is True
        page.goto(site.url + f"/jobs/{kid.id}")
        expect(page.locator("#job-parents li")).to_contain_text(parent.id)
        expect(page.locator("#job-no-pool")).to_have_count(0)
        expect(page.locator(".no-pool")).to_have_count(0)
    assert tab.errors == []
    _fits_a_phone(browser, site.url + f"/flows/{kid.id}", "phone-flow-no-pool.png")


def test_a_group_whose_callback_was_aborted_says_so(site: Site, tab: Tab) -> None:
    members = [JobSpec(name="member", kwargs={"n": i}) for i in range(3)]
    g = site.call(site.client.group, members, then=JobSpec(name="after"))
    assert g.then is not None
    page = tab.page
    page.goto(site.url + f"/groups/{g.id}")
    expect(page.locator("#group-state")).to_have_text("running")
    with page.expect_navigation():
        page.locator("#group-callback").get_by_role("link", name=g.then.id).click()
    with page.expect_navigation():
        page.get_by_role("button", name="Abort").click()
    expect(page.locator(".notice")).to_have_text("Abort requested.")
    page.goto(site.url + f"/groups/{g.id}")
    expect(page.locator("#group-callback .badge")).to_have_text("aborted")
    expect(page.locator("#group-state")).to_have_text(
        "members still to run; the callback was aborted: it will not run"
    )
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / "group-callback-aborted.png", full_page=True)
    assert tab.errors == []


async def _dead_now(client: Client, name: str) -> str:
    """A job made dead now: the newest of ``/dead``, listed first."""
    job = await client.enqueue(name)
    await client.admin.shards[0].redis.lrem(client.admin.shards[0].keys.queue(name), 0, job.id)
    await client.admin.shards[0].redis.hset(
        client.admin.shards[0].keys.job(job.id), mapping={"state": "dead", "error": "E"}
    )
    await client.admin.shards[0].redis.zadd(
        client.admin.shards[0].keys.dead, {job.id: 1900000000000}
    )
    return job.id


def test_rows_stay_under_a_resting_pointer(site: Site, tab: Tab) -> None:
    site.call(_dead, site.client, "still", 5)
    page = tab.page
    page.goto(site.url + "/dead?q=still")
    rows = page.locator("table.jobs tbody tr")
    expect(rows).to_have_count(5)
    target = rows.nth(2)
    target.hover()
    under = target.inner_text()
    target.evaluate("row => { row.dataset.marked = 'yes'; }")
    newer = site.call(_dead_now, site.client, "still")
    page.wait_for_timeout(7_000)  # past the 5 s refresh
    expect(_row(page, newer)).to_have_count(0)  # the list did not change under the pointer
    box = target.bounding_box()
    assert box is not None
    mark = page.evaluate(
        "([x, y]) => document.elementFromPoint(x, y).closest('tr').dataset.marked",
        [box["x"] + box["width"] / 2, box["y"] + box["height"] / 2],
    )
    assert mark == "yes"  # the very element, where it was
    assert rows.nth(2).inner_text() == under
    expect(page.locator("#refresh-status")).to_contain_text("held")

    page.locator("h1").hover()  # the pointer leaves the table: the refresh comes at once
    expect(_row(page, newer)).to_have_count(1, timeout=3_000)
    expect(rows).to_have_count(6)
    assert tab.errors == []


def test_the_refresh_pauses_while_rows_are_ticked(site: Site, tab: Tab) -> None:
    ids = site.call(_dead, site.client, "ticked", 3)
    page = tab.page
    page.goto(site.url + "/dead?q=ticked")
    rows = page.locator("table.jobs tbody tr")
    expect(rows).to_have_count(3)
    _tick(page, ids[0])
    page.locator("h1").hover()  # the pointer is off the table, and focus off the box
    page.locator("h1").click()
    newer = site.call(_dead_now, site.client, "ticked")
    status = page.locator("#refresh-status")
    expect(status).to_have_text("paused while rows are ticked", timeout=7_000)
    expect(status).to_have_class("paused")
    page.wait_for_timeout(6_000)  # past another refresh: still nothing moved
    expect(_row(page, newer)).to_have_count(0)
    expect(rows).to_have_count(3)
    expect(_row(page, ids[0]).get_by_role("checkbox")).to_be_checked()
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / "dead-paused-while-ticked.png", full_page=True)

    _row(page, ids[0]).get_by_role("checkbox").uncheck()  # the last box: it goes on
    page.locator("h1").click()
    expect(status).not_to_have_class("paused")
    expect(_row(page, newer)).to_have_count(1, timeout=7_000)
    expect(rows).to_have_count(4)
    assert tab.errors == []


async def _group_in_states(client: Client) -> tuple[str, dict[str, list[str]]]:
    """A group of 40 members: the 30th to 33rd dead (one of them aborted), the 34th and
    35th running, the 36th to 40th complete, the rest queued; their ids by state."""
    g = await client.group([JobSpec(name="member", kwargs={"n": i}) for i in range(40)])
    ids = [m.id for m in g.jobs]
    states = ["queued"] * 29 + ["dead"] * 3 + ["aborted"] + ["running"] * 2 + ["complete"] * 5
    for job_id, state in zip(ids, states, strict=True):
        if state != "queued":
            await client.admin.shards[0].redis.hset(
                client.admin.shards[0].keys.job(job_id), "state", state
            )
    by: dict[str, list[str]] = {"dead": ids[29:33], "running": ids[33:35]}
    by |= {"complete": ids[35:], "waiting": ids[:29]}
    return g.id, by


def test_a_groups_members_filtered_by_state(site: Site, tab: Tab) -> None:
    group_id, by = site.call(_group_in_states, site.client)
    page = tab.page
    page.goto(site.url + f"/groups/{group_id}")
    rows = page.locator("table.members tbody tr")
    expect(rows).to_have_count(25)  # a page of all of them: no dead one among the first 25
    filters = page.locator("#member-filter")
    expect(filters.locator(".current")).to_have_text("all")
    for state in ("dead", "running", "complete"):
        with page.expect_navigation():
            filters.get_by_role("link", name=state, exact=True).click()
        expect(filters.locator(".current")).to_have_text(state)
        expect(rows).to_have_count(len(by[state]))
        assert [r.split("\t")[1] for r in rows.all_inner_texts()] == by[state]
        expect(page.locator("#member-count")).to_have_text(
            f"{len(by[state])} {state} of 40 members"
        )
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / "group-members-complete.png", full_page=True)
    with page.expect_navigation():
        filters.get_by_role("link", name="waiting", exact=True).click()
    expect(rows).to_have_count(25)
    with page.expect_navigation():
        page.get_by_role("link", name="next →").click()
    assert "state=waiting" in page.url
    expect(rows).to_have_count(4)  # 29 waiting: the second page holds the last 4
    assert [r.split("\t")[1] for r in rows.all_inner_texts()] == by["waiting"][25:]
    api = site.call(_get_json, site.url + f"/api/groups/{group_id}?state=dead")
    assert (api["state"], api["matching"], api["scanned"]) == ("dead", 4, 40)
    assert tab.errors == []


async def _get_json(url: str) -> Any:
    async with httpx.AsyncClient() as http:
        return (await http.get(url)).json()
