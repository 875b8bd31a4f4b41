"""Key names: each has the namespace's hash tag, scripts spell none of their own, bad
namespaces are refused."""

from __future__ import annotations

import re

import pytest

from rota.protocol.keys import Keys, key_rest, lua_prelude, renamed, tag_of, validate_namespace
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
    assert tag_of(Keys("ns1").prefix) == "ns1"
    assert tag_of(Keys("ns1", 2, 4).prefix).startswith("ns1~")
    assert f"{{{tag_of(Keys('ns1', 2, 4).prefix)}}}:" == Keys("ns1", 2, 4).prefix
    assert tag_of(Keys.of_tag("ns1", "ns1~3.8", 3).prefix) == "ns1~3.8"


def test_a_key_renamed_into_another_shard_keeps_its_kind_and_argument() -> None:
    """A change of the shard count copies a key to its new home under that prefix."""
    old, new = Keys.of_tag("ns1", "ns1~1.2", 1), Keys("ns1")
    assert renamed(old.job("j1"), old.prefix, new.prefix) == new.job("j1")
    assert renamed(old.stats_bucket("20260101"), old.prefix, new.prefix) == new.stats_bucket(
        "20260101"
    )
    assert renamed(old.shards, old.prefix, new.prefix) == new.shards
    assert key_rest(old.joblog("j1"), old.prefix) == "log:j1"
    with pytest.raises(ValueError, match="not a key of"):
        renamed(new.job("j1"), old.prefix, new.prefix)  # another shard's key: never blindly
