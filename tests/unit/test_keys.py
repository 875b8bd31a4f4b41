"""Key names: each has the namespace's hash tag, scripts spell none of their own, bad
namespaces are refused."""

from __future__ import annotations

import re

import pytest

from rota.protocol.keys import Keys, lua_prelude, validate_namespace
from rota.protocol.scripts import SCRIPT_NAMES, script


def test_every_key_has_the_hash_tag() -> None:
    k = Keys("ns1")
    names = [
        k.job("a"),
        k.queue("q"),
        k.running("q"),
        k.unique("u"),
        k.pool("p"),
        k.stats_bucket("20260101"),
        k.wake("q"),
        k.joblog("a"),
        k.scheduled,
        k.retry,
        k.dead,
        k.complete,
        k.names,
        k.paused,
        k.ready,
        k.leased,
        k.limits,
        k.priorities,
        k.pools,
        k.stats,
        k.sched_wake,
    ]
    assert all(n.startswith("{ns1}:") for n in names)
    assert len(set(names)) == len(names)


def test_scripts_spell_no_key_names_of_their_own() -> None:
    for name in SCRIPT_NAMES:
        body = script(name).source[len(lua_prelude()) :]
        assert not re.search(r"'(job|queue|running|stats|wake|unique):'", body), name


@pytest.mark.parametrize("bad", ["", "a b", "a{b", "a}b", "a:b", "x" * 65])
def test_bad_namespaces_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid namespace"):
        validate_namespace(bad)


def test_a_shards_tag_is_its_prefix_without_braces() -> None:
    """What an operator and the retired note call a shard: its hash tag, bare."""
    assert Keys("ns1").tag == "ns1"
    assert Keys("ns1", 2, 4).tag == Keys("ns1", 2, 4).prefix[1:-2]
    assert Keys("ns1", 2, 4).tag.startswith("ns1~")
    assert Keys.of_tag("ns1", "ns1~3.8", 3).tag == "ns1~3.8"


def test_a_key_moved_into_another_shard_keeps_its_kind_and_argument() -> None:
    """A change of the shard count copies a key to its new home under that prefix."""
    old, new = Keys.of_tag("ns1", "ns1~1.2", 1), Keys("ns1")
    assert old.moved(old.job("j1"), new) == new.job("j1")
    assert old.moved(old.stats_bucket("20260101"), new) == new.stats_bucket("20260101")
    assert old.moved(old.shards, new) == new.shards
    assert old.rest(old.joblog("j1")) == "log:j1"
    with pytest.raises(ValueError, match="not a key of"):
        old.moved(new.job("j1"), old)  # another shard's key: never renamed blindly
