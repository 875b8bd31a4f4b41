"""A namespace over four shards on a cluster, as an operator and a producer see it: a
client's connection printed, and the web and the CLI while the primary of shard 0 is
down (its slots unserved, the other primaries answering)."""

from __future__ import annotations

import os

import pytest

from rota import Client
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
        assert "owner=?" in repr(client.redis)  # nothing sent yet
        for part in client.parts:
            await part.redis.ping()
            for shown in (repr(part.redis), str(part.redis), repr(part.redis.connection_pool)):
                assert "s3cret" not in shown
                assert f"redis+cluster://app:***@{url.partition('@')[2]}" in shown
                assert "owner=127.0.0.1:" in shown  # located by the PING
