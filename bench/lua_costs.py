"""What the parts of a script call cost Redis, in instructions (callgrind).

``python -m bench.lua_costs`` loads a small function library into a private
redis-server under valgrind and calls each function 50 times; each runs its one step
100 times. It prints the instructions per call of an empty function, and per step of
the others: a ``redis.call`` (with one reply entry), the same under ``pcall``, a reply
of 6 and of 13 entries, an ``HSET`` of 1 and of 5 pairs into a new hash, a ``DEL``, a
Lua function call, a new table, a concatenation, a number printed, and a reply entry
handed back to the caller. These set the floor under rota's scripts: a job leased and
finished needs a few commands, and every argument and reply entry of each costs its
share whatever the script around them does (see docs/performance.md).
"""

from __future__ import annotations

import sys

import redis

from bench.callgrind import CallgrindRedis

__all__ = ["main"]

_STEPS = 100
_CALLS = 50
_FIELDS13 = "'name', 'state', 'token', 'attempts', 'failures', 'lost', 'enqueued_at', " + (
    "'max_fails', 'timeout', 'deps', 'traceparent', 'tracestate', 'args'"
)
# name -> (what one step does, its Lua body run _STEPS times)
_BODIES: dict[str, tuple[str, str]] = {
    "loop": ("an empty loop turn", "x = i"),
    "hget": ("redis.call HGET, one reply entry", "redis.call('HGET', 'h', 'name')"),
    "pcall_hget": ("the same in pcall", "pcall(redis.call, 'HGET', 'h', 'name')"),
    "hgetall": ("HGETALL of 3 pairs (6 entries)", "redis.call('HGETALL', 'h')"),
    "hmget13": ("HMGET of 13 fields (3 held)", f"redis.call('HMGET', 'h', {_FIELDS13})"),
    "hset1": (
        "HSET of 1 new pair (a hash of 3)",
        "redis.call('HSET', keys[i], 'state', 'running')",
    ),
    "hset5": (
        "HSET of 5 new pairs (a hash of 3)",
        "redis.call('HSET', keys[i], 'state', 'running', 'token', '1', 'attempts', '1',"
        " 'started_at', '1732484400000', 'pool', 'vm:1234:abcdef')",
    ),
    "del": ("DEL of a hash of 3 pairs", "redis.call('DEL', keys[i])"),
    "fn": ("a Lua function call", "x = f(i)"),
    "table": ("a new table", "x = {}"),
    "concat": ("a concatenation (a new text)", "x = 'job:' .. a[1] .. keys[i]"),
    "number": ("a number printed", "x = tostring(i + 0.5)"),
    "reply": ("an entry of the reply to the caller", "out[i] = 'x'"),
}


def _library() -> str:
    lines = ["#!lua name=lua_costs", "local keys = {}", f"for i = 1, {_STEPS} do"]
    lines += ["  keys[i] = 'k' .. i", "end", "local function f(v) return v end"]
    lines.append("redis.register_function('empty', function(k, a) return 0 end)")
    # What the steps that write start from: 100 hashes as a queued job's (3 pairs).
    lines.append(
        f"redis.register_function('setup', function(k, a) for i = 1, {_STEPS} do"
        " redis.call('DEL', keys[i]) redis.call('HSET', keys[i], 'name', 'noop', 'args',"
        " '[1.5]', 'enqueued_at', '1732484400000') end return 0 end)"
    )
    for name, (_, body) in _BODIES.items():
        lines.append(
            f"redis.register_function('{name}', function(k, a) local x local out = {{}}"
            f" for i = 1, {_STEPS} do {body} end return out end)"
        )
    return "\n".join(lines) + "\n"


def _per_call(
    profiled: CallgrindRedis, r: redis.Redis, function: str, setup: float | None = None
) -> float:
    """Instructions per call of ``function``; with ``setup`` (what a call of the setup
    function costs), each call follows one of the setup function, whose cost is taken
    out. Each function is measured once: its name labels its dump."""
    profiled.mark(f"{function}:before")
    pipe = r.pipeline(transaction=False)
    for _ in range(_CALLS):
        if setup is not None:
            pipe.fcall("setup", 0)
        pipe.fcall(function, 0, "abcdefghijklmnopq")
    pipe.execute()
    profiled.mark(function)
    return profiled.instructions(function) / _CALLS - (setup or 0.0)


def main() -> int:
    with CallgrindRedis() as profiled:
        r = redis.Redis.from_url(profiled.url, socket_timeout=profiled.SOCKET_TIMEOUT)
        r.function_load(_library(), replace=True)
        r.hset("h", mapping={"name": "noop", "args": "[1.5]", "enqueued_at": "1732484400000"})
        empty = _per_call(profiled, r, "empty")
        setup = _per_call(profiled, r, "setup")
        out = [f"an empty function call: {empty:,.0f} instructions"]
        loop = (_per_call(profiled, r, "loop") - empty) / _STEPS
        out.append(f"{_BODIES['loop'][0]:40s} {loop:8,.0f}")
        for name, (what, _) in _BODIES.items():
            if name == "loop":
                continue
            writes = setup if name in ("hset1", "hset5", "del") else None
            step = (_per_call(profiled, r, name, writes) - empty) / _STEPS - loop
            out.append(f"{what:40s} {step:8,.0f}")
        r.close()
    sys.stdout.write("instructions per step, the loop's own turn taken out\n" + "\n".join(out))
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
