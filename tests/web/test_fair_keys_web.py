"""Fair keys in the web UI and its API: the keys with the largest backlog of a name,
acting on one key and on the default limit, by the API (JSON) and by the queue page's
forms; refusals (a cross-site form, a missing CSRF token, the read-only credential, a
value out of range) change nothing; hostile key text is escaped on the page and reached
in a path. Real Redis; the changes are read back through ``client.admin``."""

from __future__ import annotations

from urllib.parse import quote

import httpx
from markupsafe import escape
from prometheus_client.parser import text_string_to_metric_families

from rota import Client, JobSpec, Settings
from rota.web import Auth, create_app
from rota.web.metrics import KEYS
from rota.web.middleware.csrf import CSRF_COOKIE
from tests.redis_server import RedisServer
from tests.test_acl import admin, server, settings_for  # noqa: F401 - fixtures
from tests.web.conftest import BASE

HTML = {"accept": "text/html"}
HOSTILE = "<script>alert('x')</script>\"&/?#%"


async def _keyed(client: Client, counts: dict[str, int]) -> None:
    await client.enqueue_many(
        JobSpec(name="hook", args=(i,), fair_key=key) for key, n in counts.items() for i in range(n)
    )


def _path(key: str) -> str:
    return "/api/queues/hook/keys/" + quote(key, safe="")


async def test_the_keys_with_the_largest_backlog_and_their_settings(
    http: httpx.AsyncClient, client: Client
) -> None:
    await _keyed(client, {"a": 3, "b": 5, "c": 1})
    await client.admin.fair.set_weight("hook", "a", 4)
    await client.admin.fair.set_key_limit("hook", None, 7)
    got = (await http.get("/api/queues/hook/keys?top=2")).json()
    assert got["name"] == "hook" and got["default_limit"] == 7
    rows = [(k["key"], k["queued"], k["limit"], k["weight"]) for k in got["keys"]]
    assert rows == [("b", 5, 7, 1), ("a", 3, 7, 4)]
    bad = await http.get("/api/queues/hook/keys?top=1001")
    assert bad.status_code == 400 and "top" in bad.json()["error"]
    assert (await http.get("/api/queues/nope/keys")).status_code == 404


async def test_acting_on_one_key_by_the_api(http: httpx.AsyncClient, client: Client) -> None:
    await _keyed(client, {"a": 3, "b": 2})
    assert (await http.post(_path("a") + "/pause")).json() == {
        "name": "hook",
        "key": "a",
        "paused": True,
    }
    done = await http.post(_path("a") + "/limit", json={"limit": 2})
    assert done.json() == {"name": "hook", "key": "a", "limit": 2}
    assert (await http.post(_path("a") + "/weight", json={"weight": 9})).status_code == 200
    assert (await http.post(_path("a") + "/rate", json={"rate": "10/s"})).status_code == 200
    (a,) = [k for k in await client.admin.fair.of("hook") if k.key == "a"]
    assert (a.paused, a.limit, a.weight, a.rate) == (True, 2, 9, "10/s")
    assert (await http.post(_path("a") + "/resume")).json()["paused"] is False
    done = await http.post("/api/queues/hook/key-limit", json={"limit": 3})
    assert done.json() == {"name": "hook", "key": None, "limit": 3}
    cleared = await http.post(_path("b") + "/clear")
    assert cleared.json() == {"name": "hook", "key": "b", "deleted": 2}
    rows = {k.key: k for k in await client.admin.fair.of("hook")}
    assert set(rows) == {"a"} and not rows["a"].paused
    for what, body in (
        ("limit", {"limit": 0}),
        ("weight", {"weight": 1001}),
        ("rate", {"rate": "x"}),
    ):
        refused = await http.post(_path("a") + "/" + what, json=body)
        assert refused.status_code == 422, (what, refused.text)
        assert what in refused.json()["error"] or "rate" in refused.json()["error"]
    (a,) = await client.admin.fair.of("hook")
    assert (a.limit, a.weight, a.rate) == (2, 9, "10/s")
    assert (await http.post("/api/queues/hook/keys/with%20space/pause")).status_code == 404


async def test_hostile_key_text_is_escaped_and_reached(
    http: httpx.AsyncClient, client: Client
) -> None:
    await _keyed(client, {HOSTILE: 2, "plain": 1})
    page = await http.get("/queues/hook", headers=HTML)
    assert page.status_code == 200
    assert HOSTILE not in page.text and "<script>alert" not in page.text
    assert f'aria-label="jobs of key {escape(HOSTILE)}">{escape(HOSTILE)}</a></td>' in page.text
    api = await http.get("/api/queues/hook/keys")
    assert api.json()["keys"][0]["key"] == HOSTILE
    done = await http.post(_path(HOSTILE) + "/pause")
    assert done.json()["key"] == HOSTILE
    # the page's form, at the address the page gives
    action = f"/queues/hook/keys/{quote(HOSTILE)}/weight"
    assert f'action="{escape(action)}' in page.text
    sent = await http.post(action, data={"value": "3", "next": "/queues/hook"})
    assert (sent.status_code, sent.headers["location"]) == (303, "/queues/hook?done=key-weight-set")
    rows = {k.key: k for k in await client.admin.fair.of("hook")}
    assert (rows[HOSTILE].paused, rows[HOSTILE].weight) == (True, 3)


async def test_the_page_shows_the_keys_and_its_forms_act(
    http: httpx.AsyncClient, client: Client
) -> None:
    await _keyed(client, {"t1": 4, "t2": 1})
    page = await http.get("/queues/hook", headers=HTML)
    assert 'id="fair-keys"' in page.text and ">t1</a></td>" in page.text
    for what, value, done in (
        ("limit", "5", "key-limit-set"),
        ("rate", "2/s", "key-rate-set"),
        ("limit", "none", "key-limit-removed"),
    ):
        sent = await http.post(f"/queues/hook/keys/t1/{what}", data={"value": value})
        assert (sent.status_code, sent.headers["location"]) == (303, f"/queues/hook?done={done}")
    for typed in ("0", "1001", "\u00b2", "\u0661\u0662", "1e3", "-1", "9" * 5000):
        bad = await http.post("/queues/hook/keys/t1/weight", data={"value": typed}, headers=HTML)
        assert bad.status_code == 400 and "the weight must be a whole number" in bad.text
    sent = await http.post("/queues/hook/key-limit", data={"value": "2"})
    assert sent.headers["location"] == "/queues/hook?done=key-default-set"
    sent = await http.post("/queues/hook/keys/t2/clear", data={"next": "/queues/hook"})
    assert sent.headers["location"] == "/queues/hook?done=key-cleared&n=1"
    (t1,) = await client.admin.fair.of("hook")
    assert (t1.key, t1.limit, t1.rate, t1.weight) == ("t1", 2, "2/s", 1)
    page = await http.get("/queues/hook?done=key-default-set", headers=HTML)
    assert "Default key limit set." in page.text


async def test_refusals_change_nothing(settings: Settings, client: Client) -> None:
    await _keyed(client, {"t1": 1})
    auth = Auth(token="fair-tok", readonly_token="fair-look")
    app = create_app(settings, client=client, auth=auth)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as web:
        look = {"authorization": "Bearer fair-look"}
        page = await web.get("/queues/hook", headers={**look, **HTML})
        assert page.status_code == 200 and ">t1</a></td>" in page.text
        assert "/keys/t1/pause" not in page.text  # no actions for who may not act
        for path in ("/keys/t1/pause", "/keys/t1/clear", "/key-limit"):
            refused = await web.post("/api/queues/hook" + path, json={"limit": 1}, headers=look)
            assert refused.status_code == 403 and "read-only" in refused.text, path
        cross = {"authorization": "Bearer fair-tok", "sec-fetch-site": "cross-site"}
        assert (await web.post("/queues/hook/keys/t1/pause", headers=cross)).status_code == 403
        # a session without the CSRF token in its form
        await web.get("/login")
        csrf = web.cookies[CSRF_COOKIE]
        await web.post("/login", data={"token": "fair-tok", "csrf": csrf, "next": "/"})
        refused = await web.post("/queues/hook/keys/t1/pause", data={"next": "/queues/hook"})
        assert refused.status_code == 403
        (t1,) = await client.admin.fair.of("hook")
        assert not t1.paused
        done = await web.post("/queues/hook/keys/t1/pause", data={"csrf": csrf})
        assert done.status_code == 303
        log = (await web.get("/api/audit", headers={"authorization": "Bearer fair-tok"})).json()
    (t1,) = await client.admin.fair.of("hook")
    assert t1.paused
    acted = [(e["path"], e["status"]) for e in log["entries"] if "/keys/" in e["path"]]
    assert acted == [("/queues/hook/keys/t1/pause", 303)]


async def test_metrics_show_the_top_keys_only_when_asked(
    http: httpx.AsyncClient, client: Client
) -> None:
    """``?keys=top``: KEYS keys of a name with KEYS + 1 keys, the largest backlogs; a
    scrape without it has no series per key."""
    counts = {f"k{i:02}": i + 1 for i in range(KEYS + 1)}  # k00 has the fewest jobs
    await _keyed(client, counts)
    await client.admin.fair.set_key_limit("hook", "k05", 3)
    plain = await http.get("/metrics")
    assert "rota_fair_key" not in plain.text
    scrape = await http.get("/metrics?keys=top")
    assert scrape.status_code == 200
    families = {f.name: f for f in text_string_to_metric_families(scrape.text)}
    queued = {s.labels["key"]: s.value for s in families["rota_fair_key_queued"].samples}
    assert queued == {k: float(n) for k, n in counts.items() if k != "k00"}
    # Running: a series for the key a limit reaches only (the others keep no running
    # set, and a series would read a false 0).
    running = {s.labels["key"]: s.labels["name"] for s in families["rota_fair_key_running"].samples}
    assert running == {"k05": "hook"}
    assert (await http.get("/metrics?keys=all")).status_code == 400


async def test_the_web_operator_role_sets_a_key_and_the_read_only_one_is_refused(
    server: RedisServer,  # noqa: F811
    namespace: str,
    admin: Client,  # noqa: F811
) -> None:
    """Under the Redis users of ``rota acl web-operator`` and ``rota acl web``."""
    await _keyed(admin, {"t1": 1})
    for role, status in (("web", 403), ("web-operator", 200)):
        app = create_app(settings_for(server, role, namespace))
        transport = httpx.ASGITransport(app=app)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url=BASE) as web,
        ):
            assert (await web.get("/api/queues/hook/keys")).json()["keys"][0]["key"] == "t1"
            done = await web.post(_path("t1") + "/limit", json={"limit": 2})
            assert done.status_code == status, (role, done.text)
            assert (await web.post(_path("t1") + "/clear")).status_code == status
    assert await admin.admin.fair.of("hook") == []


async def test_the_queue_page_counts_the_keyed_jobs_beside_its_list(
    http: httpx.AsyncClient, client: Client
) -> None:
    # A name whose jobs all carry keys said "0 jobs waiting": its list holds none of them.
    await _keyed(client, {"a": 3, "b": 1})
    await client.enqueue_many([JobSpec(name="hook", args=(9,))] * 2)
    view = (await http.get("/api/queues/hook/jobs")).json()
    assert (view["total"], view["keyed"], len(view["jobs"])) == (2, 4, 2)
    page = (await http.get("/queues/hook", headers=HTML)).text
    assert "2 jobs waiting, and 4 with a fair key" in page
    assert "Delete the 6 queued jobs of hook?" in page
