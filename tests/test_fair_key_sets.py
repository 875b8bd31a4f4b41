"""Fair keys: the sorted sets a fetch writes per key taken are kept in Redis's skiplist
encoding (a listpack scans every entry per write), and the member that converts them is
never left behind for a reader to see."""

from __future__ import annotations

import pytest
import redis

from rota import Client, JobSpec
from tests.helpers import lease_tokens

#: What add_leases (lua/_base.lua) adds to convert a set, and removes in the same call.
LONG_MEMBER = b"~" * 80


def specs(key: str, n: int) -> list[JobSpec]:
    return [JobSpec(name="hook", fair_key=key) for _ in range(n)]


@pytest.mark.one_shard("the keys are read in one shard")
async def test_ready_keys_backlogs_and_a_busy_keys_running_set_are_skiplists(
    client: Client, namespace: str, redis_sync: redis.Redis
) -> None:
    p = "{" + namespace + "}:"
    await client.admin.fair.set_key_limit("hook", None, 100)  # the keys keep running sets
    await client.enqueue_many(specs("busy", 10) + specs("calm", 1))
    for k in ("fkeys:hook", "fbacklog:hook"):
        assert redis_sync.object("encoding", p + k) == b"skiplist", k
    assert redis_sync.zrange(p + "fbacklog:hook", 0, -1, withscores=True) == [
        (b"calm", 1.0),
        (b"busy", 10.0),
    ]
    assert sorted(redis_sync.zrange(p + "fkeys:hook", 0, -1)) == [b"busy", b"calm"]
    # The busy key's turns come one after another once calm's one job is gone: it leases
    # several jobs in one call, its running set a skiplist; calm's one lease a listpack.
    leased = await lease_tokens(client, "hook", 8)
    assert len(leased) == 8
    assert redis_sync.object("encoding", p + "frun:hook/busy") == b"skiplist"
    assert redis_sync.object("encoding", p + "frun:hook/calm") == b"listpack"
    assert redis_sync.zcard(p + "frun:hook/busy") + redis_sync.zcard(p + "frun:hook/calm") == 8
    for k in ("fkeys:hook", "fbacklog:hook", "frun:hook/busy", "frun:hook/calm"):
        assert redis_sync.zscore(p + k, LONG_MEMBER) is None, k
