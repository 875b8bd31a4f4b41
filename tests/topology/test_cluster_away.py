"""A namespace over four shards on a cluster, as an operator and a producer see it: a
client's connection printed, and the web and the CLI while the primary of shard 0 is
down (its slots unserved, the other primaries answering)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import msgspec
import pytest
from redis.crc import key_slot

from rota import Client, Enqueued, JobContext, JobSpec, WorkerPool
from rota.protocol.shards import shard_of, shard_tags
from tests.chaos.harness import poll
from tests.cli_helpers import rota_env, run_rota
from tests.helpers import pool_settings
from tests.redis_server import free_port
from tests.topology_servers import ClusterGroup

pytestmark = pytest.mark.topology

K = 4


async def test_a_cluster_client_prints_its_url_with_the_password_masked(
    cluster_group: ClusterGroup,
) -> None:
    """Printing a client's connection (a producer logging it during a failover) shows
    the cluster's URL with the password masked, the slot and its owner; it printed the
    connection pool again inside itself, without end."""
    for server in cluster_group.servers:
        with server.client() as r:
            r.acl_setuser(
                "app", enabled=True, passwords=["+s3cret"], keys=["*"], commands=["+@all"]
            )
    url = cluster_group.url.replace("://", "://app:s3cret@")
    ns = "repr" + os.urandom(3).hex()
    async with Client.from_url(url, ns, shards=K) as client:
        assert "owner=?" in repr(client.admin.shards[0].redis)  # nothing sent yet
        for part in client.admin.shards:
            await part.redis.ping()
            pool = part.redis.connection_pool
            for shown in (repr(part.redis), str(part.redis), repr(pool), repr(part.conn)):
                assert "s3cret" not in shown
                assert f"redis+cluster://app:***@{url.partition('@')[2]}" in shown
                assert "owner=127.0.0.1:" in shown  # located by the PING


def _get(port: int, path: str) -> httpx.Response:
    return httpx.get(f"http://127.0.0.1:{port}{path}", headers={"accept": "text/html"}, timeout=10)


def _web_answers(port: int) -> bool:
    try:
        return _get(port, "/api/shards").status_code == 200
    except httpx.TransportError:
        return False


async def _record_and_enqueue(url: str, ns: str) -> list[Enqueued]:
    """A pool's start records the shard count; then 40 jobs spread over the shards."""
    pool = WorkerPool(settings=pool_settings(url, ns, shards=K))
    pool.job(name="n")(_noop)
    async with pool.running():
        pass
    async with Client.from_url(url, ns, shards=K) as client:
        return await client.enqueue_many([JobSpec(name="n") for _ in range(40)])


@pytest.mark.timeout(180)
def test_the_web_and_the_cli_serve_the_other_shards_while_shard_0_is_down(tmp_path: Path) -> None:
    """With the primary of shard 0 killed (no replica: its slots stay unserved), `rota
    web` starts and shows that shard away, a command that needs only the other shards
    works, and one that needs every shard says in one line which is away. Before, both
    exited at their start: the first thing they read is shard 0's."""
    with ClusterGroup(replicas=0) as cluster:
        for server in cluster.servers:  # the other slots are served while one is down
            with server.client() as r:
                r.config_set("cluster-require-full-coverage", "no")
        ns = "away" + os.urandom(3).hex()
        jobs = anyio.run(_record_and_enqueue, cluster.url, ns)
        tags = shard_tags(ns, K)
        down = cluster.owner(key_slot(tags[0].encode()))
        away = [s for s in range(K) if cluster.owner(key_slot(tags[s].encode())) is down]
        there = next(j for j in jobs if shard_of(j.id, K) not in away)
        down.kill()
        env = rota_env(ROTA_REDIS_URL=cluster.url, ROTA_NAMESPACE=ns, ROTA_SHARDS=str(K))

        listed = run_rota("shards", "--json", env=env)
        assert listed.returncode == 0, listed.stderr
        rows = msgspec.json.decode(listed.stdout)["shards"]
        assert [r["shard"] for r in rows if r["away"]] == away
        assert sum(r["queued"] for r in rows) == sum(shard_of(j.id, K) not in away for j in jobs)
        shown = run_rota("job", "show", there.id, env=env)
        assert shown.returncode == 0, shown.stderr
        named = ", ".join(map(str, away))
        line = f"rota: shard{'s' if len(away) > 1 else ''} {named} of namespace {ns!r}"
        for needs_all in (("status",), ("dead", "list")):
            done = run_rota(*needs_all, env=env)
            assert done.returncode == 1, done.stderr
            assert len(done.stderr.splitlines()) == 1, done.stderr
            assert done.stderr.startswith(line) and "cannot be read now" in done.stderr

        # Without the count, which shard 0 holds, the other shards cannot be found: the
        # one line says which node is away and what to set.
        unset = run_rota("status", env=rota_env(ROTA_REDIS_URL=cluster.url, ROTA_NAMESPACE=ns))
        assert unset.returncode == 1, unset.stderr
        assert len(unset.stderr.splitlines()) == 1, unset.stderr
        assert f"the cluster names 127.0.0.1:{down.port} its primary" in unset.stderr
        assert "set shards (ROTA_SHARDS)" in unset.stderr

        port = free_port()
        log = tmp_path / "web.log"
        with log.open("wb") as out:
            web = subprocess.Popen(
                [sys.executable, "-m", "rota", "web", "--bind", f"127.0.0.1:{port}"],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            poll(lambda: web.poll() is not None or _web_answers(port), 30, "rota web answers")
            assert web.poll() is None, log.read_text()
            body = _get(port, "/api/shards").json()
            assert [s["shard"] for s in body["shards"] if s["away"]] == away
            page = _get(port, "/shards")
            assert page.status_code == 200 and f"Shard {away[0]} cannot be read now" in page.text
            dashboard = _get(port, "/")
            assert dashboard.status_code == 503
            assert f"shard{'s' if len(away) > 1 else ''} {named} of namespace" in dashboard.text
        finally:
            web.terminate()
            web.wait(10)


async def _noop(ctx: JobContext) -> None:
    return None
