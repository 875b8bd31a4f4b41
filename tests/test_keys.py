"""Every key carries the namespace hash tag; Lua and Python spell keys the same way."""

from __future__ import annotations

import redis

from rota.protocol.keys import LUA_KEYS, Keys, lua_prelude


def test_lua_prelude_matches_python_keys(redis_sync: redis.Redis) -> None:
    k = Keys("ns")
    lua, want = [], []
    for kind, suffix in LUA_KEYS.items():
        if kind in ("fair_queue", "fair_running", "run_times"):
            lua.append(f"key_{kind}('X', 'Y')")  # a job name and a fair key or a slot
            want.append(getattr(k, kind)("X", "Y"))
        elif suffix.endswith(":"):
            lua.append(f"key_{kind}('X')")
            want.append(getattr(k, kind)("X"))
        else:
            lua.append(f"K_{kind.upper()}")
            want.append(getattr(k, kind))
    code = lua_prelude() + "set_prefix(KEYS[1])\nreturn {" + ", ".join(lua) + "}"
    got = redis_sync.eval(code, 1, k.prefix)
    assert [g.decode() for g in got] == want
