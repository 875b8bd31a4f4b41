"""Every key carries the namespace hash tag; Lua and Python spell keys the same way."""

from __future__ import annotations

import re

import pytest

from rota.protocol.keys import LUA_KEYS, Keys, lua_prelude, validate_namespace
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
        k.names,
        k.paused,
        k.limits,
        k.priorities,
        k.pools,
        k.stats,
        k.sched_wake,
    ]
    assert all(n.startswith("{ns1}:") for n in names)
    assert len(set(names)) == len(names)


def test_lua_prelude_matches_python_keys() -> None:
    k = Keys("ns")
    prelude = lua_prelude()
    for kind, suffix in LUA_KEYS.items():
        if suffix.endswith(":"):
            assert getattr(k, kind)("X") == k.prefix + suffix + "X"
            assert f"local function key_{kind}(x) return P .. '{suffix}' .. x end" in prelude
        else:
            assert getattr(k, kind) == k.prefix + suffix
            assert f"local K_{kind.upper()} = P .. '{suffix}'" in prelude


def test_scripts_spell_no_key_names_of_their_own() -> None:
    for name in SCRIPT_NAMES:
        body = script(name).source.split("\n", len(LUA_KEYS) + 1)[-1]
        assert not re.search(r"'(job|queue|running|stats|wake|unique):'", body), name


@pytest.mark.parametrize("bad", ["", "a b", "a{b", "a}b", "a:b", "x" * 65])
def test_bad_namespaces_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid namespace"):
        validate_namespace(bad)
