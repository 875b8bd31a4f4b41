"""A small value never makes a large page: ten 900-deep empty arrays (an 18 KB body)
rendered, indented, as a 16 MB job page and a 16 MB API answer. Now args nest at most
500 deep, the indentation is bounded, the page shows the start of a large value with a
link to it as stored, and the API answer stays near the stored size."""

from __future__ import annotations

import json
from typing import Any

import httpx

from rota import Client
from rota.web.base import SHOWN_LIMIT
from rota.web.jobs import PRETTY_LIMIT

DEEP: list[Any] = [[]]
for _ in range(448):
    DEEP = [DEEP]
TEN_DEEP = [DEEP] * 10  # 9 KB stored; indented, 4 MB


async def _enqueue(http: httpx.AsyncClient, args: Any) -> str:
    body = json.dumps({"name": "deep", "args": args}).encode()
    json_type = {"content-type": "application/json"}
    answer = await http.post("/api/jobs", content=body, headers=json_type)
    assert answer.status_code == 201, answer.text
    job_id: str = answer.json()["id"]
    return job_id


async def test_a_deep_value_makes_neither_a_large_page_nor_a_large_answer(
    http: httpx.AsyncClient, client: Client
) -> None:
    job_id = await _enqueue(http, TEN_DEEP)
    stored = await client.admin.stored(job_id, "args")
    assert stored is not None and 8_000 < len(stored) < 10_000
    api = await http.get(f"/api/jobs/{job_id}")
    assert api.status_code == 200
    assert len(api.content) < 4 * len(stored)  # was 16 MB
    assert api.json()["args_pretty"] is None and api.json()["args_raw"] == stored.decode()
    page = await http.get(f"/jobs/{job_id}")
    assert page.status_code == 200
    assert len(page.content) < 100_000  # was 16 MB
    raw = await http.get(f"/api/jobs/{job_id}/args")
    assert raw.status_code == 200 and raw.content == stored
    too_deep: list[Any] = DEEP
    for _ in range(60):
        too_deep = [too_deep]
    deeper = json.dumps({"name": "deep", "args": [too_deep]}).encode()
    refused = await http.post(
        "/api/jobs", content=deeper, headers={"content-type": "application/json"}
    )
    assert refused.status_code in (400, 422) and "deep" in refused.text, refused.text


async def test_a_long_value_is_cut_on_the_page_with_a_link_to_it_whole(
    http: httpx.AsyncClient, client: Client
) -> None:
    job_id = await _enqueue(http, ["x" * 50_000])
    page = await http.get(f"/jobs/{job_id}")
    assert page.status_code == 200
    assert "x" * SHOWN_LIMIT not in page.text and "x" * (SHOWN_LIMIT - 100) in page.text
    assert f'href="/api/jobs/{job_id}/args"' in page.text and 'id="args-cut"' in page.text
    assert (await http.get(f"/api/jobs/{job_id}/args")).json() == ["x" * 50_000]
    assert (await http.get("/api/jobs/nope/args")).status_code == 404


async def test_a_small_value_is_still_indented(http: httpx.AsyncClient) -> None:
    job_id = await _enqueue(http, [{"to": "ada", "n": [1, 2]}])
    pretty = (await http.get(f"/api/jobs/{job_id}")).json()["args_pretty"]
    assert pretty is not None and "\n  " in pretty and len(pretty) < PRETTY_LIMIT
