"""The console's job editor over HTTP: the enqueue form (the client's refusal shown in
its words, never a trace; a job that exists after a good one), duplicate, edit then
retry (form and API), a periodic job run now, ordered and windowed job sets and
queues; CSRF, read-only credentials and the audit log on each write; hostile text
shown escaped. Real Redis, the app over an ASGI transport."""

from __future__ import annotations

import re

import httpx
import pytest
from starlette.applications import Starlette

from rota import Client, JobContext, Settings, WorkerPool
from rota.web import Auth, create_app
from tests.helpers import pool_settings, step_pool, wait_until
from tests.web.conftest import BASE

pytestmark = pytest.mark.timeout(60)

FORM = {"origin": BASE, "sec-fetch-site": "same-origin", "accept": "text/html"}
EMPTY = dict.fromkeys(
    ("delay", "run_at", "unique", "fair_key", "max_fails", "timeout", "expires_in", "after"), ""
)


def _job_id(reply: httpx.Response) -> str:
    assert reply.status_code == 303, reply.text
    found = re.match(r"/jobs/([^?]+)\?done=", reply.headers["location"])
    assert found, reply.headers["location"]
    return found.group(1)


async def test_the_form_shows_the_clients_refusal_and_enqueues_a_good_job(
    http: httpx.AsyncClient, client: Client
) -> None:
    page = await http.get("/enqueue", headers=FORM)
    assert page.status_code == 200 and 'name="args"' in page.text and "data-json" in page.text
    for args, status, said in [
        ('{"to": 1,', 422, "args: it is not JSON: Expecting property name enclosed in double"),
        ('{"a": 1, "a": 2}', 422, "args: the key &#39;a&#39; is given twice"),
        ("[NaN]", 422, "NaN"),
        ("42", 422, "args: a JSON array (positional args) or object, not int"),
    ]:
        body = {**EMPTY, "name": "mail", "args": args}
        reply = await http.post("/enqueue", data=body, headers=FORM)
        assert reply.status_code == status, reply.text
        assert said in reply.text and "Traceback" not in reply.text
        assert 'class="error"' in reply.text  # the form again, as sent
    bad = {**EMPTY, "name": "bad name!", "args": "[]"}
    reply = await http.post("/enqueue", data=bad, headers=FORM)
    assert reply.status_code == 422 and "job name" in reply.text.lower()
    not_int = {**EMPTY, "name": "mail", "max_fails": "x"}
    reply = await http.post("/enqueue", data=not_int, headers=FORM)
    assert reply.status_code == 422 and "max_fails: a whole number, not &#39;x&#39;" in reply.text
    assert await client.admin.names() == []  # nothing enqueued by any of them

    good = {**EMPTY, "name": "mail", "args": '{"to": "ada"}', "max_fails": "3", "unique": "u1"}
    job_id = _job_id(await http.post("/enqueue", data=good, headers=FORM))
    record = await client.job(job_id)
    assert record is not None
    assert (record.name, record.args, record.max_fails) == ("mail", '{"to":"ada"}', 3)
    again = await http.post("/enqueue", data=good, headers=FORM)  # the unique key is held
    assert _job_id(again) == job_id and "done=enqueued-held" in again.headers["location"]
    audit = (await http.get("/api/audit")).json()["entries"]
    assert [e["path"] for e in audit][:2] == ["/enqueue", "/enqueue"]


async def test_a_post_without_the_csrf_token_is_refused(settings: Settings, client: Client) -> None:
    app = create_app(settings, client=client, auth=Auth(token="tok-1"))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as web:
        csrf = (await web.get("/login")).cookies.get("rota_csrf")
        await web.post("/login", data={"token": "tok-1", "csrf": csrf, "next": "/"})
        body = {**EMPTY, "name": "mail", "args": "[]"}
        refused = await web.post("/enqueue", data=body, headers={"accept": "text/html"})
        assert refused.status_code == 403, refused.text
        cross = {**FORM, "sec-fetch-site": "cross-site"}
        sent = {**body, "csrf": csrf}
        assert (await web.post("/enqueue", data=sent, headers=cross)).status_code == 403
        assert await client.admin.names() == []
        ok = await web.post("/enqueue", data=sent, headers={"accept": "text/html"})
        assert ok.status_code == 303, ok.text


async def test_read_only_credentials_see_the_editor_and_change_nothing(
    settings: Settings, client: Client
) -> None:
    job = await client.enqueue("mail", to="ada")
    auth = Auth(token="tok-1", readonly_token="look-1")
    app = create_app(settings, client=client, auth=auth)
    look = {"authorization": "Bearer look-1", "accept": "text/html"}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE, headers=look) as web:
        for path in ("/enqueue", f"/enqueue?from={job.id}", f"/jobs/{job.id}/edit", "/cron"):
            page = await web.get(path)
            assert page.status_code == 200, path
        assert "disabled" in (await web.get("/enqueue")).text
        for path, kw in [
            ("/enqueue", {"data": {**EMPTY, "name": "mail", "args": "[]"}}),
            (f"/jobs/{job.id}/edit", {"data": {"args": "[]"}}),
            (f"/api/jobs/{job.id}/edit", {"json": {"args": []}}),
            ("/api/cron/tick/run", {}),
        ]:
            refused = await web.post(path, **kw)  # type: ignore[arg-type]
            assert refused.status_code == 403 and "read-only" in refused.text, path
    assert (await client.admin.queue_page())[0] == 1


async def test_duplicate_fills_the_form_and_hostile_text_stays_text(
    http: httpx.AsyncClient, client: Client
) -> None:
    hostile = "<script>alert(1)</script>"
    job = await client.enqueue("mail", note=hostile, fair_key="t1", max_fails=4, timeout=30)
    page = await http.get(f"/enqueue?from={job.id}", headers=FORM)
    assert page.status_code == 200
    assert hostile not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    assert 'value="mail"' in page.text and 'value="t1"' in page.text
    assert 'name="max_fails" value="4"' in page.text and 'name="timeout" value="30"' in page.text
    assert (await http.get("/enqueue?from=nosuch", headers=FORM)).status_code == 404
    # Sent as filled: a new job, with the same name, args and options.
    fields = dict(re.findall(r'name="(\w+)" value="([^"]*)"', page.text))
    textarea = re.search(r'<textarea[^>]*name="args"[^>]*>(.*?)</textarea>', page.text, re.S)
    assert textarea
    args = textarea.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&#34;", '"')
    body = {**EMPTY, **{k: fields.get(k, "") for k in EMPTY}, "name": "mail", "args": args}
    copy = _job_id(await http.post("/enqueue", data=body, headers=FORM))
    record, original = await client.job(copy), await client.job(job.id)
    assert record is not None and original is not None and copy != job.id
    assert (record.args, record.fair_key, record.max_fails, record.timeout) == (
        original.args,
        "t1",
        4,
        30.0,
    )


async def test_edit_then_retry_through_the_form_and_the_api(
    http: httpx.AsyncClient, client: Client, redis_url: str, namespace: str
) -> None:
    jobs = [(await client.enqueue("step", label=f"fail-{i}")).id for i in range(2)]

    async def dead() -> bool:
        return len(await client.admin.in_set("dead", jobs)) == 2

    async with step_pool(redis_url, namespace).running():
        await wait_until(dead, within=15)
    first, second = jobs
    page = await http.get(f"/jobs/{first}", headers=FORM)
    assert f'href="/jobs/{first}/edit"' in page.text and f"/enqueue?from={first}" in page.text
    editor = await http.get(f"/jobs/{first}/edit", headers=FORM)
    assert "fail-0" in editor.text and "data-json" in editor.text
    bad = await http.post(f"/jobs/{first}/edit", data={"args": "{oops"}, headers=FORM)
    assert bad.status_code == 422 and "args: it is not JSON" in bad.text
    assert await client.admin.in_set("dead", [first]) == [first]
    done = await http.post(f"/jobs/{first}/edit", data={"args": '{"label": "ok"}'}, headers=FORM)
    assert done.status_code == 303 and "done=edited" in done.headers["location"]
    record = await client.job(first)
    assert record is not None and (record.state, record.args) == ("queued", '{"label":"ok"}')
    # It left the set: the editor says so, and changes nothing.
    late = await http.post(f"/jobs/{first}/edit", data={"args": '{"label": "x"}'}, headers=FORM)
    assert late.status_code == 409 and "only a job to retry or a dead job" in late.text
    gone = await http.post(f"/api/jobs/{first}/edit", json={"args": {"label": "x"}})
    assert gone.status_code == 409, gone.text
    assert (await http.post("/api/jobs/nosuch/edit", json={"args": []})).status_code == 404
    wrong = await http.post(f"/api/jobs/{second}/edit", json={"args": "text"})
    assert wrong.status_code == 422
    ok = await http.post(f"/api/jobs/{second}/edit", json={"args": ["positional"]})
    assert ok.status_code == 200 and ok.json() == {"id": second, "was": "dead", "state": "queued"}
    record = await client.job(second)
    assert record is not None and record.args == '["positional"]'
    audit = (await http.get("/api/audit")).json()["entries"]
    assert [e["path"] for e in audit][:2] == [f"/api/jobs/{second}/edit", f"/jobs/{first}/edit"]


async def test_job_sets_and_queues_in_order_and_in_a_window(
    http: httpx.AsyncClient, client: Client
) -> None:
    base = 2_000_000_000  # 2033
    ids = [(await client.enqueue_at(base + 3600 * i, "later", i=i)).id for i in range(5)]
    window: dict[str, str | int] = {"since": (base + 3600) * 1000, "until": "2033-05-18T05:33:20Z"}
    got = (await http.get("/api/scheduled", params={**window, "order": "newest"})).json()
    assert (got["total"], [j["id"] for j in got["jobs"]]) == (2, [ids[2], ids[1]])
    bounds = ((base + 3600) * 1000, (base + 7200) * 1000)
    assert (got["order"], got["since"], got["until"]) == ("newest", *bounds)
    got = (await http.get("/api/scheduled")).json()
    assert ([j["id"] for j in got["jobs"]], got["order"]) == (ids, "oldest")
    assert (await http.get("/api/scheduled?order=name")).status_code == 400
    assert (await http.get("/api/dead?since=yesterday")).status_code == 400
    deep = await http.get("/api/scheduled?order=newest&offset=2000000")
    assert deep.status_code == 400 and "offset" in deep.json()["error"]
    deep = await http.get("/scheduled?order=newest&offset=2000000", headers=FORM)
    assert deep.status_code == 400
    page = await http.get("/scheduled", params={**window, "order": "newest"}, headers=FORM)
    assert page.status_code == 200
    assert page.text.index(ids[2]) < page.text.index(ids[1]) and ids[0] not in page.text
    assert 'id="sort-time"' in page.text and "order=oldest" in page.text

    for name in ("bbb", "bbb", "aaa"):
        await client.enqueue(name)
    got = (await http.get("/api/queues?order=name")).json()
    assert ([q["name"] for q in got["queues"]], got["order"]) == (["aaa", "bbb", "later"], "name")
    got = (await http.get("/api/queues?order=size")).json()
    assert [q["name"] for q in got["queues"]] == ["bbb", "aaa", "later"]  # scheduled: none queued
    assert (await http.get("/api/queues?order=age")).status_code == 400
    listed = (await http.get("/queues?order=name", headers=FORM)).text
    assert 'href="?order=busy" aria-current="true">Name</a>' in listed


async def test_run_a_periodic_job_now_through_the_api_and_the_page(
    http: httpx.AsyncClient, client: Client, redis_url: str, namespace: str
) -> None:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, heartbeat_interval=2.0))

    @pool.periodic("0 0 1 1 *", name="nightly", args=(3,))
    async def nightly(ctx: JobContext, n: int) -> None:
        pass

    async with pool.running():

        async def listed() -> bool:
            return bool((await http.get("/api/cron")).json()["periodic"])

        await wait_until(listed, within=10)
        page = (await http.get("/cron", headers=FORM)).text
        assert 'action="/cron/nightly/run"' in page
        ran = await http.post("/api/cron/nightly/run")
        assert ran.status_code == 200, ran.text
        assert ran.json()["id"].startswith("cron:nightly:") and ran.json()["name"] == "nightly"
        form = await http.post("/cron/nightly/run", headers=FORM)
        assert form.status_code == 303 and "done=cron-run" in form.headers["location"]
    audit = (await http.get("/api/audit")).json()["entries"]
    assert [e["path"] for e in audit][:2] == ["/cron/nightly/run", "/api/cron/nightly/run"]


async def test_run_a_periodic_job_now_refuses_an_unknown_name(http: httpx.AsyncClient) -> None:
    refused = await http.post("/api/cron/nosuch/run")
    assert refused.status_code == 404 and "no periodic job nosuch" in refused.json()["error"]
    assert (await http.post("/cron/nosuch/run", headers=FORM)).status_code == 404


def test_the_new_endpoints_are_in_the_document(app: Starlette) -> None:
    from rota.web import openapi

    paths = openapi.spec()["paths"]
    assert set(paths["/api/jobs/{job_id}/edit"]) == {"post"}
    assert set(paths["/api/cron/{name}/run"]) == {"post"}
    names = [p["name"] for p in paths["/api/scheduled"]["get"]["parameters"]]
    assert {"order", "since", "until"} <= set(names)
    assert "order" in [p["name"] for p in paths["/api/queues"]["get"]["parameters"]]
