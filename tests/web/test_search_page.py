"""A search of a large set, from the client and the web: it stops at a time budget,
says where, and goes on from there."""

from __future__ import annotations

import html
import re

import httpx
import pytest

from rota import Client, JobSpec
from rota.web import sets as views
from tests.web.test_pages import FORM


@pytest.fixture
async def many(client: Client) -> None:
    """5,001 scheduled jobs; the last (in the set's order) is the one named 'needle'."""
    for start in range(0, 5001, 1000):
        specs = [
            JobSpec(name="hay" if i < 5000 else "needle", delay=3600 + i, job_id=f"m{i:05d}")
            for i in range(start, min(start + 1000, 5001))
        ]
        await client.enqueue_many(specs)


async def test_a_search_out_of_time_says_where_and_goes_on_from_there(
    client: Client, many: None
) -> None:
    found = await client.admin.search("scheduled", "needle", budget=0)
    assert (found.total, found.start, found.size, found.complete) == (0, 0, 5001, False)
    assert 0 < found.searched < 5001  # a round trip's worth, then it stopped
    reads = 1
    while found.searched < found.size:
        found = await client.admin.search("scheduled", "needle", start=found.searched, budget=0)
        reads += 1
    assert reads > 1 and found.total == 1 and [j.id for j in found.jobs] == ["m05000"]
    assert not found.complete  # it read the end of the set only
    whole = await client.admin.search("scheduled", "needle")  # no budget: the whole set
    assert (whole.total, whole.searched, whole.complete) == (1, 5001, True)


async def test_the_web_page_says_where_a_search_stopped_and_links_on(
    client: Client, many: None, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(views, "SEARCH_BUDGET", 0)
    page = await http.get("/scheduled?q=needle", headers={"accept": "text/html"})
    assert "0 matching “needle” among jobs 1–" in page.text
    assert "the search stopped there" in page.text
    seen = 0
    while (link := re.search(r'id="search-on" href="([^"]+)"', page.text)) is not None:
        page = await http.get(
            "/scheduled" + html.unescape(link[1]), headers={"accept": "text/html"}
        )
        seen += 1
    assert seen >= 1
    assert "1 matching “needle” among jobs" in page.text and "m05000" in page.text
    api = (await http.get("/api/scheduled?q=needle&from=5000")).json()
    assert (api["total"], api["start"], api["searched"], api["size"]) == (1, 5000, 5001, 5001)


async def test_a_bulk_button_under_a_stopped_search_acts_on_what_it_read(
    client: Client, many: None, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(views, "SEARCH_BUDGET", 0)
    page = await http.get("/scheduled?q=m0", headers={"accept": "text/html"})
    summary = re.sub(r"(?<=\d)\W(?=\d{3})", "", page.text)  # no thousands separators
    shown = re.search(r"(\d+) matching “m0” among jobs 1–(\d+) of 5001", summary)
    assert shown is not None and shown[1] == shown[2]
    read = int(shown[2])
    form = page.text[page.text.index('action="/scheduled/delete-all"') :].split("</form>")[0]
    fields = dict(re.findall(r'name="(\w+)" value="([^"]*)"', form))
    assert (fields["q"], fields["from"], fields["to"]) == ("m0", "0", str(read))
    done = await http.post("/scheduled/delete-all", data=fields, headers=FORM)
    assert done.status_code == 303 and f"n={read}" in done.headers["location"]
    assert (await client.admin.page("scheduled")).total == 5001 - read  # the rest untouched
