"""Every key carries the namespace hash tag; Lua and Python spell keys the same way."""

from __future__ import annotations

import re

import pytest
import redis

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


def test_lua_prelude_matches_python_keys(redis_sync: redis.Redis) -> None:
    k = Keys("ns")
    lua, want = [], []
    for kind, suffix in LUA_KEYS.items():
        if suffix.endswith(":"):
            lua.append(f"key_{kind}('X')")
            want.append(getattr(k, kind)("X"))
        else:
            lua.append(f"K_{kind.upper()}")
            want.append(getattr(k, kind))
    code = lua_prelude() + "set_prefix(KEYS[1])\nreturn {" + ", ".join(lua) + "}"
    got = redis_sync.eval(code, 1, k.prefix)
    assert [g.decode() for g in got] == want


def test_scripts_spell_no_key_names_of_their_own() -> None:
    for name in SCRIPT_NAMES:
        body = script(name).source[len(lua_prelude()) :]
        assert not re.search(r"'(job|queue|running|stats|wake|unique):'", body), name


@pytest.mark.parametrize("bad", ["", "a b", "a{b", "a}b", "a:b", "x" * 65])
def test_bad_namespaces_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid namespace"):
        validate_namespace(bad)
