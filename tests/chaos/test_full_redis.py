"""A Redis that says "not now" to worker processes: out of memory, then a replica.

Out of memory: a private redis-server with ``maxmemory-policy noeviction`` holds a
backlog of jobs whose handler keeps no result (``keep_result=0``), and a few jobs that
go dead. Its ``maxmemory`` is then set below the memory the server uses even with an
empty namespace, so Redis refuses every write that grows memory for the whole run,
however much the pools drain. Worker processes start on that full Redis (a third one
while the condition holds), and every job completes exactly once: fetching and
finishing a job that keeps nothing frees memory, so Redis runs them. Producers get
``RedisRefused``; pause, resume, and dead-job retry and delete work. Once the limit is
raised, enqueues work again and the pools carry on.

A replica: the Redis the pools use (A) becomes a replica of another (B) with
``REPLICAOF``. It refuses writes, and at the sync its data set is replaced by B's: the
jobs B holds arrive, the jobs A held are gone. The pools wait, and once A is a primary
again (``REPLICAOF NO ONE``) they run B's jobs and the jobs enqueued afterwards, each
exactly once, without a worker process restarting.

Each worker process writes a ledger line per attempt (see ``tests/chaos/app.py``); the
count of every job comes from it, since a complete ``drain`` job leaves no record.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any, cast

import anyio
import pytest
import redis
import redis.exceptions

from rota import Client, JobSpec, RedisRefused
from tests.chaos.harness import (
    Fleet,
    Ledger,
    Worker,
    enqueue,
    leftovers,
    pick,
    poll,
    records,
    report,
)
from tests.redis_server import RedisServer

pytestmark = pytest.mark.chaos

OOM_START = "Redis refuses writes: out of memory"
REPLICA_START = "Redis refuses writes: the server is a read-only replica"
END = "Redis takes every command again: the pool carries on"

#: Seconds within which a pool says the condition ended (heartbeats every 0.5 s, and a
#: refused task tries again within 1 s).
END_WITHIN = 5.0

#: Jobs of the ``drain`` handler (1 ms each, keep_result=0) in the backlog of a full Redis.
JOBS = pick(20_000, 100_000)
#: Jobs that go dead (args that do not fit ``work``): one retried, one deleted, one left.
DEAD = 3
#: Jobs enqueued once the limit is raised.
AFTER = 200
#: Jobs counted in the replica scenario: on B before the switch, on A after it.
ON_B = pick(500, 5_000)
ON_A_AFTER = pick(500, 5_000)


# -- helpers ---------------------------------------------------------------------------


def drains(n: int, ms: float = 1.0) -> list[JobSpec]:
    return [JobSpec(name="drain", kwargs={"ms": ms}) for _ in range(n)]


def log_lines(worker: Worker) -> list[dict[str, Any]]:
    """The JSON lines of a worker's log (anything else is left out)."""
    out = []
    for line in worker.log.read_text(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            out.append(event)
    return out


def lines_starting(worker: Worker, prefix: str) -> list[dict[str, Any]]:
    return [e for e in log_lines(worker) if str(e.get("event", "")).startswith(prefix)]


def logged_at(line: dict[str, Any]) -> float:
    """The epoch time of a log line (its ISO timestamp, UTC)."""
    return datetime.fromisoformat(line["timestamp"]).timestamp()


def late_ends(workers: Sequence[Worker], since: float) -> dict[int, float]:
    """Seconds from ``since`` (when the condition ended) to each pool's end line, for
    the pools that logged it later than ``END_WITHIN`` seconds."""
    lags = {w.pid: logged_at(lines_starting(w, END)[-1]) - since for w in workers}
    return {pid: round(lag, 2) for pid, lag in lags.items() if lag > END_WITHIN}


def troubles(worker: Worker) -> list[str]:
    """Tracebacks and error or critical lines in a worker's log."""
    text = worker.log.read_text(errors="replace")
    bad = [line for line in text.splitlines() if "Traceback" in line]
    bad += [json.dumps(e) for e in log_lines(worker) if e.get("level") in ("error", "critical")]
    return bad


def pool_pids(r: redis.Redis, namespace: str) -> set[int]:
    """The pids of the pools in the pools set (members are ``host:pid:suffix``)."""
    members = cast(list[bytes], r.zrange("{" + namespace + "}:pools", 0, -1))
    return {int(m.decode().rsplit(":", 2)[1]) for m in members}


def count_runs(ledger: Ledger, ids: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
    """Of ``ids``: the ones with no "done" line (lost), the ones started more than once,
    and the ones done more than once."""
    starts, dones = ledger.by_job("start"), ledger.by_job("done")
    lost = [j for j in ids if not dones.get(j)]
    twice = [j for j in ids if len(starts.get(j, [])) > 1]
    done_twice = [j for j in ids if len(dones.get(j, [])) > 1]
    return lost, twice, done_twice


def all_done(ledger: Ledger, ids: Sequence[str]) -> bool:
    dones = ledger.by_job("done")
    return all(j in dones for j in ids)


def refuses_writes(r: redis.Redis) -> bool:
    """Whether a plain SET is refused for memory (what every producer would see)."""
    try:
        r.set("probe", "x")
    except redis.exceptions.OutOfMemoryError:
        return True
    r.delete("probe")
    return False


def refused_enqueue(url: str, namespace: str) -> tuple[RedisRefused, RedisRefused]:
    """Try an enqueue and an enqueue_many; both must be refused."""

    async def run() -> tuple[RedisRefused, RedisRefused]:
        async with Client.from_url(url, namespace) as client:
            with pytest.raises(RedisRefused, match=r"^Redis refuses writes: ") as one:
                await client.enqueue("drain", ms=1)
            with pytest.raises(RedisRefused, match=r"^Redis refuses writes: ") as many:
                await client.enqueue_many(drains(3))
        return one.value, many.value

    return anyio.run(run)


def admin(url: str, namespace: str, call: str, *args: Any) -> Any:
    """One client call (``pause``, ``resume``, ``retry``, ``delete``...) of its own."""

    async def run() -> Any:
        async with Client.from_url(url, namespace) as client:
            return await getattr(client.admin, call)(*args)

    return anyio.run(run)


def stable(read: Any, for_s: float, within: float, what: str, details: Any) -> None:
    """Wait until ``read()`` gives the same value for ``for_s`` seconds in a row."""
    deadline = time.monotonic() + within
    last, since = read(), time.monotonic()
    while time.monotonic() - since < for_s:
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: still changing after {within} s\n{details()}")
        time.sleep(0.1)
        now = read()
        if now != last:
            last, since = now, time.monotonic()


# -- out of memory ---------------------------------------------------------------------


@pytest.fixture
def full_server() -> Iterator[RedisServer]:
    # comfortably above what the backlog needs until the test lowers it
    server = RedisServer(["--maxmemory-policy", "noeviction", "--maxmemory", "512mb"])
    try:
        yield server
    finally:
        server.close()


@pytest.mark.timeout(pick(120, 600))
def test_full_redis(full_server: RedisServer, namespace: str, fleet: Fleet, ledger: Ledger) -> None:
    url = full_server.url
    r = full_server.client(socket_timeout=10)
    p = "{" + namespace + "}:"
    started = time.monotonic()
    try:
        # What the server uses with nothing in it: a limit below this holds the
        # condition however much the pools drain.
        empty = int(r.info("memory")["used_memory"])
        ids = enqueue(url, namespace, drains(JOBS))
        bad = enqueue(url, namespace, [JobSpec(name="work", kwargs={"ms": "x"})] * DEAD)
        used = int(r.info("memory")["used_memory"])
        limit = empty * 3 // 4
        r.config_set("maxmemory", str(limit))
        assert refuses_writes(r), r.info("memory")
        one, many = refused_enqueue(url, namespace)
        assert one.condition == "out_of_memory" and "out of memory" in str(one), one
        assert many.condition == "out_of_memory" and many.written == 0, many
        assert r.llen(p + "queue:drain") == JOBS

        # two worker processes start on the full Redis
        first = [fleet.start(url, namespace) for _ in range(2)]
        poll(
            lambda: ledger.count("done") >= 200 and r.zcard(p + "dead") == DEAD,
            within=30,
            what="two pools draining a full Redis, the bad jobs dead",
            details=fleet.tails,
        )
        recs = records(r, namespace, bad)
        assert {(x["state"], x["reason"]) for x in recs.values()} == {("dead", "invalid_args")}

        # pause: the pools take no more jobs of the name (the ones they hold finish)
        admin(url, namespace, "pause", "drain")
        stable(
            lambda: (ledger.count("start"), r.llen(p + "queue:drain")),
            for_s=1.0,
            within=20,
            what="the pools stop taking paused jobs",
            details=fleet.tails,
        )
        paused_at = (ledger.count("start"), r.llen(p + "queue:drain"))
        assert paused_at[1] > 0, "the backlog drained before the pause: nothing was tested"

        # a dead job retried runs again (and is dead again); another is deleted
        retried, deleted, left = bad
        assert admin(url, namespace, "retry", "dead", [retried]) == 1
        poll(
            lambda: (
                records(r, namespace, [retried])[retried].get("attempts") == "2"
                and r.zscore(p + "dead", retried) is not None
            ),
            within=20,
            what="the retried dead job ran again",
            details=fleet.tails,
        )
        assert records(r, namespace, [retried])[retried]["reason"] == "invalid_args"
        assert admin(url, namespace, "delete", "dead", [deleted]) == 1
        assert set(r.zrange(p + "dead", 0, -1)) == {retried.encode(), left.encode()}
        assert not r.exists(p + "job:" + deleted)

        # a third pool starts during the condition and joins the others
        third = fleet.start(url, namespace)
        poll(
            lambda: pool_pids(r, namespace) == {w.pid for w in fleet.workers},
            within=30,
            what="three pools in the pools set",
            details=fleet.tails,
        )
        assert (ledger.count("start"), r.llen(p + "queue:drain")) == paused_at
        admin(url, namespace, "resume", "drain")
        poll(
            lambda: all_done(ledger, ids),
            within=pick(60, 400),
            what=f"all {JOBS} jobs done",
            details=fleet.tails,
        )
        drained = time.monotonic() - started
        # the condition held all along, and no process died of it
        assert refuses_writes(r), r.info("memory")
        assert int(r.info("memory")["used_memory"]) > limit
        assert [w.alive for w in fleet.workers] == [True] * 3, fleet.tails()
        poll(
            lambda: all(lines_starting(w, OOM_START) for w in fleet.workers),
            within=10,
            what="every pool logs the out-of-memory line",
            details=fleet.tails,
        )
        for w in fleet.workers:
            (line,) = lines_starting(w, OOM_START)
            assert "pools keep running" in line["event"], line
            assert line["maxmemory_policy"] == "noeviction", line

        # the limit raised: enqueues work again and their jobs run
        r.config_set("maxmemory", "0")
        raised = time.time()
        assert not refuses_writes(r)
        later = enqueue(url, namespace, drains(AFTER))
        poll(
            lambda: all_done(ledger, later),
            within=30,
            what="the jobs enqueued after the limit was raised",
            details=fleet.tails,
        )
        poll(
            lambda: all(lines_starting(w, END) for w in fleet.workers),
            within=15,
            what="every pool logs the end of the condition",
            details=fleet.tails,
        )
        poll(
            lambda: r.zcard(p + "running:drain") == 0,
            within=10,
            what="every finish recorded",
            details=fleet.tails,
        )

        alive = [w.alive for w in fleet.workers]
        assert alive == [True] * 3, fleet.tails()
        pids = {w.pid for w in fleet.workers}
        lost, twice, done_twice = count_runs(ledger, ids + later)
        assert (lost, twice, done_twice) == ([], [], []), (len(lost), len(twice), fleet.tails())
        entries = ledger.entries()
        assert {e.pid for e in entries} <= pids, "a job ran in a process the test did not start"
        drain_ids = set(ids)
        by_pid = {w.pid: 0 for w in fleet.workers}
        for e in entries:
            if e.kind == "done" and e.job_id in drain_ids:
                by_pid[e.pid] += 1
        assert all(by_pid.values()), f"a pool ran none of the backlog: {by_pid}"
        stats = {
            k.decode(): int(v) for k, v in cast(dict[bytes, bytes], r.hgetall(p + "stats")).items()
        }
        assert stats["processed:drain"] == JOBS + AFTER, stats
        sizes = leftovers(r, namespace, ["drain", "work"])
        assert sizes.pop("dead") == 2, sizes
        assert set(sizes.values()) == {0}, sizes
        for w in fleet.workers:
            assert troubles(w) == [], f"pid {w.pid}:\n" + "\n".join(troubles(w)[:20])
            assert len(lines_starting(w, END)) == 1, lines_starting(w, END)
        assert late_ends(fleet.workers, raised) == {}, fleet.tails()
        fleet.close()
        report(
            "full_redis",
            {
                "jobs": JOBS,
                "processes": len(fleet.workers),
                "used_memory_with_backlog": used,
                "maxmemory_set": limit,
                "lost": len(lost),
                "ran_twice": len(twice),
                "done_per_pool": sorted(by_pid.values()),
                "third_pool_done": by_pid[third.pid],
                "backlog_done_after_s": round(drained, 1),
                "first_pids": [w.pid for w in first],
            },
        )
    finally:
        r.close()


# -- a replica -------------------------------------------------------------------------


@pytest.fixture
def other_server() -> Iterator[RedisServer]:
    # the primary A syncs from: at once, instead of waiting 5 s for more replicas
    server = RedisServer(["--repl-diskless-sync-delay", "0"])
    try:
        yield server
    finally:
        server.close()


def link_up(r: redis.Redis) -> bool:
    info = r.info("replication")
    return info.get("role") == "slave" and info.get("master_link_status") == "up"


@pytest.mark.timeout(pick(120, 400))
def test_replica_redis(
    fresh_redis_server: RedisServer,
    other_server: RedisServer,
    namespace: str,
    fleet: Fleet,
    ledger: Ledger,
) -> None:
    a, b = fresh_redis_server, other_server
    ra, rb = a.client(socket_timeout=10), b.client(socket_timeout=10)
    p = "{" + namespace + "}:"
    try:
        # A has work and two pools at it
        before = enqueue(a.url, namespace, drains(pick(300, 3_000), ms=2))
        workers = [fleet.start(a.url, namespace) for _ in range(2)]
        poll(
            lambda: all_done(ledger, before),
            within=30,
            what="the first jobs done",
            details=fleet.tails,
        )
        # B holds the jobs A will have after the sync
        on_b = enqueue(b.url, namespace, drains(ON_B))
        # jobs in flight at the switch: A's record of them goes with A's data
        in_flight = enqueue(a.url, namespace, drains(10, ms=1500))
        poll(
            lambda: all(j in ledger.by_job("start") for j in in_flight),
            within=15,
            what="the long jobs running",
            details=fleet.tails,
        )

        ra.replicaof("127.0.0.1", b.port)
        switched = time.time()
        poll(lambda: link_up(ra), within=20, what="A in sync with B")
        poll(
            lambda: all(lines_starting(w, REPLICA_START) for w in workers),
            within=15,
            what="every pool logs the read-only replica",
            details=fleet.tails,
        )
        one, _ = refused_enqueue(a.url, namespace)
        assert one.condition == "read_only", one
        time.sleep(2.0)  # a few heartbeats and leases long
        assert all(w.alive for w in workers), fleet.tails()
        assert ra.llen(p + "queue:drain") == ON_B  # B's data; a replica hands out nothing

        ra.replicaof("NO", "ONE")
        promoted = time.time()
        after = enqueue(a.url, namespace, drains(ON_A_AFTER))
        counted = on_b + after
        poll(
            lambda: all_done(ledger, counted),
            within=pick(60, 300),
            what="B's jobs and the later ones done on A",
            details=fleet.tails,
        )
        poll(
            lambda: all(lines_starting(w, END) for w in workers),
            within=15,
            what="every pool logs the end of the condition",
            details=fleet.tails,
        )
        poll(
            lambda: (
                ra.zcard(p + "running:drain") == 0
                and pool_pids(ra, namespace) == {w.pid for w in workers}
            ),
            within=15,
            what="every finish recorded, both pools beating on A again",
            details=fleet.tails,
        )

        assert all(w.alive for w in workers), fleet.tails()
        lost, twice, done_twice = count_runs(ledger, before + counted)
        assert (lost, twice, done_twice) == ([], [], []), (len(lost), len(twice), fleet.tails())
        entries = ledger.entries()
        assert {e.pid for e in entries} <= {w.pid for w in workers}
        # nothing started while A was a replica
        during = [e for e in entries if e.kind == "start" and switched < e.t < promoted]
        assert during == [], during[:5]
        # the jobs in flight at the switch ran once: A's data no longer knew them after
        # their finishes, held while A refused them, were stale once it took them again
        starts, dones = ledger.by_job("start"), ledger.by_job("done")
        assert all(len(starts[j]) == 1 for j in in_flight), [starts[j] for j in in_flight]
        assert all(dones[j][0].t > switched for j in in_flight), [dones[j] for j in in_flight]
        stats = {
            k.decode(): int(v) for k, v in cast(dict[bytes, bytes], ra.hgetall(p + "stats")).items()
        }
        assert stats["processed:drain"] == len(counted), stats
        assert stats.get("stale", 0) == len(in_flight), stats
        sizes = leftovers(ra, namespace, ["drain"])
        assert set(sizes.values()) == {0}, sizes
        for w in workers:
            assert troubles(w) == [], f"pid {w.pid}:\n" + "\n".join(troubles(w)[:20])
        end_lags = {}
        for w in workers:
            end_lags[w.pid] = round(logged_at(lines_starting(w, END)[-1]) - promoted, 2)
        fleet.close()
        report(
            "replica_redis",
            {
                "jobs_counted": len(before) + len(counted),
                "lost": len(lost),
                "ran_twice": len(twice),
                "in_flight_at_switch": len(in_flight),
                "stale_finishes": stats.get("stale", 0),
                "replica_s": round(promoted - switched, 1),
                "end_line_after_promotion_s": end_lags,
            },
        )
        assert late_ends(workers, promoted) == {}, "the end line came late"
    finally:
        ra.close()
        rb.close()
