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
