"""Shard tags: one shard is the one-slot layout, and the tags of several spread evenly
over the slot space."""

from __future__ import annotations

from collections import Counter

import pytest
from redis.crc import key_slot

from rota.protocol.keys import Keys
from rota.protocol.shards import SLOTS, shard_tags

K = 4


def test_one_shard_is_the_one_slot_layout_and_others_have_their_own_tags() -> None:
    assert Keys("app").queue("q") == "{app}:queue:q"
    assert Keys("app", 0, K).prefix == "{app}:"
    tags = shard_tags("app", K)
    assert Keys("app", 3, K).queue("q") == "{" + tags[3] + "}:queue:q"
    assert all(t.startswith(("app~1", "app~2", "app~3")) for t in tags[1:])
    # Every key of a shard carries that shard's tag, so each script stays in one slot.
    assert Keys("app", 2, K).job("x").startswith("{" + tags[2] + "}:")


@pytest.mark.parametrize("shards", [2, 3, 6, 12, 64])
@pytest.mark.parametrize("namespace", ["rota", "app", "orders.eu-1"])
def test_the_tags_spread_evenly_over_the_slot_space(namespace: str, shards: int) -> None:
    """Each of K equal runs of slots holds one shard: a cluster whose N primaries own
    equal runs (as redis-cli --cluster create makes them) holds K / N on each."""
    tags = shard_tags(namespace, shards)
    runs = sorted(int(key_slot(t.encode()) // (SLOTS / shards)) for t in tags)
    assert runs == list(range(shards))
    assert tags[0] == namespace and len(set(tags)) == shards
    for nodes in (n for n in (2, 3) if shards % n == 0):
        per_node = Counter(key_slot(t.encode()) * nodes // SLOTS for t in tags)
        assert set(per_node.values()) == {shards // nodes}
