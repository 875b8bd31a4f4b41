"""Fuzzing what other services may write into Redis, against one running pool.

Each example plants, under a fresh id, a job hash with missing, extra or mistyped
fields, a garbage queue entry, or a key of the wrong type under the job id, pushes the
entry to the queue and a wake token, and waits until the pool has dealt with it. Every
planted job ends complete, or dead with a reason (bad_payload, invalid_args, timeout,
error); an entry that cannot be a job id ends as a ``bad-<sha1>`` dead record; an entry
for a job already taken or finished is counted in ``stale_entries``. The pool never
crashes and still runs ordinary jobs afterwards.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import anyio.from_thread
import anyio.lowlevel
import msgspec
import pytest
import redis
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rota import Client, JobContext, WorkerPool
from rota.protocol.job import opt_int
from tests.chaos.harness import report
from tests.helpers import pool_settings
from tests.redis_server import RedisServer

pytestmark = pytest.mark.chaos

EXAMPLES = 2000
NAME = "fz"
MAX_ARGS = 512 * 1024
HUGE = b'{"b":"' + b"x" * (MAX_ARGS + 1024) + b'"}'
STALE_STATES = frozenset({"running", "complete", "dead", "aborted"})
REASONS = frozenset({"bad_payload", "invalid_args", "timeout", "error"})
SANE_ID = re.compile(rb"[A-Za-z0-9\-._:]{1,200}")
#: Fields whose meaning would change the outcome (an abort request) are not planted.
NEVER_PLANTED = frozenset({"abort"})
#: Fields of the protocol a planted hash may carry garbage in, besides the main ones.
OTHER_FIELDS = (
    "unique_key",
    "waiters",
    "result",
    "error",
    "reason",
    "progress",
    "pool",
    "run_at",
    "started_at",
    "finished_at",
    "max_lost",
)

# -- strategies ------------------------------------------------------------------------

small = st.integers(-1, 3).map(lambda n: str(n).encode())
garbage_number = st.one_of(
    small,
    st.sampled_from(
        [
            *(b"", b"x", b"nan", b"-nan", b"inf", b"-inf", b"1e400", b"1.5", b" 2 ", b"0x10"),
            *(b"1_0", b"\xff", "\U0001f4a5".encode(), b"0.000001", b"2.0", b"-0"),
            *(b"99999999999999", b"123456789012345678", b"-5e15"),
        ]
    ),
    st.floats().map(lambda f: repr(f).encode()),
    st.binary(max_size=6),
)


def _small_or_not_a_number(raw: bytes) -> bool:
    # as a pool reads it: b"415.0" is 415 attempts, text none (the handler's own)
    asked = opt_int(raw)
    return asked is None or asked <= 3


# a job may ask for as many attempts as it likes: keep them few, or each example runs long
max_fails_values = garbage_number.filter(_small_or_not_a_number)
timeouts = st.one_of(garbage_number, st.sampled_from([b"0", b"-1", b"5", b"30", b"1e-9"]))
ints = st.integers(-(2**31), 2**31)
texts = st.text(max_size=20)

fitting: st.SearchStrategy[dict[str, Any] | list[Any]] = st.one_of(
    st.fixed_dictionaries({}, optional={"a": ints, "b": texts}),
    st.tuples().map(list),
    st.tuples(ints).map(list),
    st.tuples(ints, texts).map(list),
)
misfitting = st.one_of(
    st.fixed_dictionaries(
        {
            "a": st.one_of(
                texts,
                st.booleans(),
                st.none(),
                st.lists(ints, max_size=2),
                st.floats(allow_nan=False, allow_infinity=False),
            )
        },
        optional={"b": texts},
    ),
    st.fixed_dictionaries({"b": st.one_of(ints, st.booleans(), st.none())}),
    st.dictionaries(
        st.text(max_size=5).filter(lambda k: k not in ("a", "b")), ints, min_size=1, max_size=3
    ),
    st.lists(ints, min_size=3, max_size=5),
    st.tuples(texts).map(list),
)
scalars = st.one_of(st.integers(), st.floats(allow_nan=False), texts, st.booleans(), st.none())


def _valid_json(raw: bytes) -> bool:
    try:
        msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return False
    return True


def _dumps(value: Any, ascii_only: bool) -> bytes:
    return json.dumps(value, ensure_ascii=ascii_only).encode()


args_values = st.one_of(
    st.tuples(st.just("fits"), fitting, st.booleans()),
    st.tuples(st.just("misfit"), misfitting, st.booleans()),
    st.tuples(st.just("scalar"), scalars, st.booleans()),
).map(lambda t: (t[0], _dumps(t[1], t[2])))
args_raw = st.one_of(
    args_values,
    args_values,  # twice as likely
    st.tuples(
        st.just("invalid_json"),
        st.one_of(
            st.sampled_from([b"{", b"{not json", b"[1,", b"", b"{'a': 1}", b"NaN", b"[1] x"]),
            st.sampled_from([b'{"a": 1e400}', b'{"a": Infinity}', b"nul"]),
            st.binary(max_size=20).map(lambda b: b"{" + b).filter(lambda b: not _valid_json(b)),
        ),
    ),
    st.tuples(st.just("bad_utf8"), st.binary(max_size=8).map(lambda b: b'{"b": "\xff' + b + b'"}')),
    st.tuples(st.just("huge"), st.just(HUGE)),
    st.tuples(st.just("missing"), st.none()),
)
names = st.sampled_from([b"fz"] * 7 + [b"other", b"FZ", b"fz ", b"", b"\xff\xfe", b"fz\x00", None])
states = st.one_of(
    st.none(),
    st.none(),
    st.sampled_from(["queued", "scheduled", "retry", "waiting", "", "garbage", *STALE_STATES]).map(
        str.encode
    ),
)
PLANTED_FIELDS = frozenset(
    {"name", "args", "state", "attempts", "token", "failures", "lost", "max_fails"}
    | {"timeout", "enqueued_at"}
)
extra_fields = st.dictionaries(
    st.one_of(
        st.sampled_from(OTHER_FIELDS),
        st.text(min_size=1, max_size=12).filter(
            lambda k: k not in NEVER_PLANTED and k not in PLANTED_FIELDS
        ),
    ),
    st.binary(max_size=30),
    max_size=3,
)


@dataclass
class Planted:
    """One example: what was written, and under which id or queue entry."""

    kind: str  # "job", "entry" or "wrong_type"
    entry: bytes
    fields: dict[str, bytes] = field(default_factory=dict)
    args_kind: str = ""
    key_type: str = ""


@st.composite
def planted_jobs(draw: st.DrawFn) -> Planted:
    fields: dict[str, bytes] = {}
    name = draw(names)
    if name is not None:
        fields["name"] = name
    args_kind, args = draw(args_raw)
    if args is not None:
        fields["args"] = args
    state = draw(states)
    if state is not None:
        fields["state"] = state
    # half the jobs carry no odd numbers at all, so that many get as far as their handler
    if draw(st.booleans()):
        for f in ("attempts", "token", "failures", "lost", "max_fails", "enqueued_at"):
            value = draw(st.none() | (max_fails_values if f == "max_fails" else garbage_number))
            if value is not None:
                fields[f] = value
        timeout = draw(st.none() | timeouts)
        if timeout is not None:
            fields["timeout"] = timeout
    for k, v in draw(extra_fields).items():
        fields[k] = v
    return Planted("job", ("fz" + uuid.uuid4().hex).encode(), fields, args_kind)


garbage_entries = st.one_of(
    st.binary(max_size=64),
    st.text(min_size=201, max_size=3000).map(str.encode),
    st.from_regex(rb"\A[A-Za-z0-9\-._:]{1,12}\Z"),
    st.text(max_size=30).map(str.encode),
).map(lambda e: Planted("entry", e))
wrong_types = st.tuples(
    st.sampled_from(["string", "list", "set", "zset", "stream"]), st.binary(min_size=1, max_size=20)
).map(
    lambda t: Planted(
        "wrong_type", ("fz" + uuid.uuid4().hex).encode(), {"value": t[1]}, key_type=t[0]
    )
)
examples = st.one_of(planted_jobs(), planted_jobs(), planted_jobs(), garbage_entries, wrong_types)


# -- what each example must end as -----------------------------------------------------


@dataclass
class Expect:
    kind: str  # "job", "record" (a dead record of this id, written now) or "stale"
    record_id: bytes = b""
    error: str = ""
    outcomes: frozenset[tuple[str, str]] = frozenset()  # (state, reason) for "job"
    result: Any = None


def _sha1(raw: bytes) -> bytes:
    return b"bad-" + hashlib.sha1(raw, usedforsecurity=False).hexdigest().encode()


def _timeout(raw: bytes | None) -> float | None:
    if not raw:
        return None
    try:
        t = float(raw)
    except ValueError:
        return None
    return None if math.isnan(t) else t


def expect_job(p: Planted) -> Expect:
    f = p.fields
    bad = frozenset({("dead", "bad_payload")})
    if not f:
        return Expect("record", p.entry, "job record missing")
    if f.get("state", b"").decode("utf-8", "replace") in STALE_STATES:
        return Expect("stale")
    if f.get("name") != NAME.encode() or "args" not in f or len(f["args"]) > MAX_ARGS:
        return Expect("job", outcomes=bad)
    if p.args_kind in ("invalid_json", "bad_utf8", "scalar"):
        return Expect("job", outcomes=bad)
    if p.args_kind == "misfit":
        return Expect("job", outcomes=frozenset({("dead", "invalid_args")}))
    assert p.args_kind == "fits", p
    value = json.loads(f["args"])
    if isinstance(value, list):
        a, b = [*value, 0, ""][len(value) : len(value) + 2] if len(value) < 2 else value
        a, b = (value[0], "") if len(value) == 1 else (a, b)
    else:
        a, b = value.get("a", 0), value.get("b", "")
    timeout = _timeout(f.get("timeout"))
    if timeout is not None and timeout <= 0:
        outcomes = frozenset({("dead", "timeout")})
    elif timeout is None or timeout >= 1:
        outcomes = frozenset({("complete", "")})
    else:  # a tiny timeout may or may not strike before the handler's first await
        outcomes = frozenset({("complete", ""), ("dead", "timeout")})
    return Expect("job", outcomes=outcomes, result=[a, b])


def expect_entry(r: redis.Redis, p: Planted, prefix: bytes) -> Expect:
    entry = p.entry
    if not SANE_ID.fullmatch(entry):
        return Expect("record", _sha1(entry), "queue entry is not a job id")
    key = prefix + b"job:" + entry
    kind = r.type(key)
    if kind == b"none":
        return Expect("record", entry, "job record missing")
    if kind != b"hash":
        return Expect("record", _sha1(entry), "job record is not a hash")
    # a hash under a garbage id is the dead record an earlier example left
    state = (cast(bytes | None, r.hget(key, "state")) or b"").decode()
    assume(state in STALE_STATES)
    return Expect("stale")


# -- the test --------------------------------------------------------------------------


@pytest.fixture
def fuzz_pool(
    fresh_redis_server: RedisServer, namespace: str
) -> Iterator[tuple[WorkerPool, anyio.from_thread.BlockingPortal]]:
    # The reaper draws its jitter from the global random module; Hypothesis objects when
    # that state changes while it generates an example, so the reaper must not run during
    # the test (no lease expires here anyway).
    settings = pool_settings(
        fresh_redis_server.url, namespace, keep_result=600, heartbeat_interval=300, lease=600
    )
    pool = WorkerPool(settings=settings)

    @pool.job(max_fails=1, backoff=lambda n: 0)
    async def fz(ctx: JobContext, a: int = 0, b: str = "") -> list[Any]:
        await anyio.lowlevel.checkpoint()
        return [a, b]

    with (
        anyio.from_thread.start_blocking_portal(backend_options={"use_uvloop": True}) as portal,
        portal.wrap_async_context_manager(pool.running()),
    ):
        yield pool, portal


@pytest.mark.timeout(600)
def test_whatever_others_write_ends_complete_or_dead_and_the_pool_goes_on(
    fresh_redis_server: RedisServer,
    namespace: str,
    fuzz_pool: tuple[WorkerPool, anyio.from_thread.BlockingPortal],
) -> None:
    pool, portal = fuzz_pool
    r = fresh_redis_server.client()
    prefix = ("{" + namespace + "}:").encode()
    queue, running = prefix + b"queue:" + NAME.encode(), prefix + b"running:" + NAME.encode()
    stats_key = prefix + b"stats"
    seen: dict[str, int] = {}

    def stale_entries() -> int:
        return int(r.hget(stats_key, "stale_entries") or 0)

    def plant(p: Planted) -> None:
        key = prefix + b"job:" + p.entry
        if p.kind == "job" and p.fields:
            r.hset(key, mapping=p.fields)  # type: ignore[arg-type]
        elif p.kind == "wrong_type":
            v = p.fields["value"]
            setters: dict[str, Callable[[], object]] = {
                "string": lambda: r.set(key, v),
                "list": lambda: r.rpush(key, v, b"b"),
                "set": lambda: r.sadd(key, v),
                "zset": lambda: r.zadd(key, {v: 1}),
                "stream": lambda: r.xadd(key, {v: b"1"}),
            }
            setters[p.key_type]()
        pipe = r.pipeline(transaction=True)  # as docs/protocol.md has a producer do
        pipe.lpush(queue, p.entry)
        pipe.sadd(prefix + b"ready", NAME)
        pipe.lpush(prefix + b"wake:" + NAME.encode(), b"1")
        pipe.execute()

    def settled(p: Planted, e: Expect, stale_before: int, t0: int) -> bool:
        if pool.runtime is None:
            raise AssertionError("the pool stopped")
        pipe = r.pipeline(transaction=False)
        pipe.lpos(queue, p.entry)  # type: ignore[arg-type]
        pipe.zscore(running, p.entry)
        pipe.zscore(prefix + b"retry", p.entry)
        pipe.hmget(prefix + b"job:" + (e.record_id or p.entry), ["state", "finished_at"])
        pipe.hget(stats_key, "stale_entries")
        queued, leased, retrying, (state, finished), stale = pipe.execute()
        if queued is not None or leased is not None or retrying is not None:
            return False
        if e.kind == "stale":
            return int(stale or 0) > stale_before
        if e.kind == "record":
            return state == b"dead" and int(finished or 0) >= t0
        return state in (b"complete", b"dead")

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
            HealthCheck.filter_too_much,
        ],
    )
    @given(examples)
    def one(p: Planted) -> None:
        if p.kind == "job":
            e = expect_job(p)
        elif p.kind == "wrong_type":
            e = Expect("record", _sha1(p.entry), "job record is not a hash")
        else:
            e = expect_entry(r, p, prefix)
        stale_before = stale_entries()
        t0 = int(time.time() * 1000)
        plant(p)
        deadline = time.monotonic() + 10
        while not settled(p, e, stale_before, t0):
            assert time.monotonic() < deadline, f"not settled: {p!r} expecting {e!r}"
            time.sleep(0.0005)

        key = prefix + b"job:" + (e.record_id or p.entry)
        h = {k.decode(): v for k, v in cast(dict[bytes, bytes], r.hgetall(key)).items()}
        if e.kind == "stale":
            assert stale_entries() == stale_before + 1
            if p.kind == "job":  # left as it was found
                assert h == p.fields, h
        elif e.kind == "record":
            assert (h["state"], h["reason"], h["error"]) == (
                b"dead",
                b"bad_payload",
                e.error.encode(),
            ), h
            if e.record_id != p.entry:
                assert h["raw"] == p.entry[:1024]
            assert r.zscore(prefix + b"dead", e.record_id) is not None
            if p.kind == "wrong_type":  # other data is not destroyed
                assert cast(bytes, r.type(prefix + b"job:" + p.entry)).decode() == p.key_type
        else:
            state, reason = h["state"].decode(), h.get("reason", b"").decode("utf-8", "replace")
            outcome = (state, reason if state == "dead" else "")
            assert outcome in e.outcomes, (p, h)
            assert state == "complete" or reason in REASONS
            if state == "complete":
                assert json.loads(h["result"]) == e.result, (p, h)
            else:
                assert r.zscore(prefix + b"dead", p.entry) is not None
        name = f"{p.kind}:{p.args_kind}" if p.kind == "job" else p.kind
        label = f"{name} -> {e.kind}"
        if e.kind == "job":
            label = f"{name} -> " + h["state"].decode()
            if h["state"] == b"dead":
                label += ":" + h["reason"].decode()
        seen[label] = seen.get(label, 0) + 1
        if p.fields.get("args") == HUGE:
            r.delete(key)  # keep the server small

    started = time.monotonic()
    try:
        one()
        elapsed = time.monotonic() - started
        # the pool still runs ordinary jobs
        client: Client = pool.runtime.client  # type: ignore[union-attr]
        job = portal.call(functools.partial(client.enqueue, NAME, a=7, b="ok"))
        result = portal.call(functools.partial(client.wait, job.id, timeout=10))
        assert result == [7, "ok"]
        assert r.llen(queue) == 0 and r.zcard(running) == 0
    finally:
        r.close()
    assert sum(seen.values()) >= EXAMPLES
    report(
        "fuzz_payloads",
        {
            "examples": sum(seen.values()),
            "ms_per_example": round(elapsed * 1000 / sum(seen.values()), 2),
            "outcomes": dict(sorted(seen.items())),
        },
    )
