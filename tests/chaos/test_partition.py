"""A worker cut off from Redis for 5 s: its late finishes are rejected, nothing is lost.

Pool A reaches Redis through a TCP proxy, pool B directly. The proxy is cut for 5 s:
it closes every open connection and closes new ones as soon as it accepts them. A's
leases expire, B's reaper gives A's jobs back to the queue and B runs them. When the
proxy is back, A sends the finishes it kept; their fencing tokens were retired, so they
are counted as stale and change nothing. Every job is complete exactly once, and its
stored result is the one of the attempt that was accepted.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import cast

import pytest
import redis

from tests.chaos.harness import (
    Audit,
    Fleet,
    Ledger,
    durations,
    enqueue_work,
    leftovers,
    pick,
    poll,
    pool_pid,
    processed,
    report,
    stats,
)
from tests.redis_server import RedisServer

pytestmark = pytest.mark.chaos

JOBS = pick(1200, 3000)
CUT = 5.0


class Proxy:
    """A TCP proxy to a local port that can be cut and restored."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)
        self.port = self.listener.getsockname()[1]
        self.cut_off = threading.Event()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._spawn(self._accept)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _spawn(self, target: object, *args: object) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        self._threads.append(t)
        t.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self.cut_off.is_set():
                _close(client)
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=2)
            except OSError:
                _close(client)
                continue
            client.settimeout(None)
            upstream.settimeout(None)
            with self._lock:
                self._open |= {client, upstream}
            self._spawn(self._pump, client, upstream)
            self._spawn(self._pump, upstream, client)

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            self._drop(src, dst)

    def _drop(self, *socks: socket.socket) -> None:
        with self._lock:
            for s in socks:
                self._open.discard(s)
        for s in socks:
            _close(s)

    def cut(self) -> None:
        """Close every connection; from now on, close new ones at once."""
        self.cut_off.set()
        with self._lock:
            socks = list(self._open)
        self._drop(*socks)

    def restore(self) -> None:
        self.cut_off.clear()

    def close(self) -> None:
        self._closed.set()
        self.cut()
        for t in self._threads:
            t.join(timeout=5)
        self.listener.close()


def _close(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    s.close()


@pytest.fixture
def proxy(fresh_redis_server: RedisServer) -> Iterator[Proxy]:
    p = Proxy(fresh_redis_server.port)
    try:
        yield p
    finally:
        p.close()


@pytest.mark.timeout(pick(150, 400))
def test_cut_off_worker_cannot_overwrite_newer_attempts(
    fresh_redis_server: RedisServer,
    r: redis.Redis,
    namespace: str,
    fleet: Fleet,
    ledger: Ledger,
    proxy: Proxy,
) -> None:
    ids = enqueue_work(fresh_redis_server.url, namespace, durations(JOBS, 40, 60))
    settings = {"concurrency": 5, "lease": 2, "heartbeat_interval": 0.5}
    a = fleet.start(proxy.url, namespace, **settings)
    b = fleet.start(fresh_redis_server.url, namespace, **settings)

    def a_done() -> int:
        return sum(1 for e in ledger.entries() if e.kind == "done" and e.pid == a.pid)

    poll(
        lambda: a_done() >= 20 and processed(r, namespace) >= JOBS // 5,
        within=60,
        what="both pools at work",
        details=fleet.tails,
    )
    proxy.cut()
    cut_at = time.time()
    time.sleep(CUT)
    proxy.restore()
    restored_at = time.time()

    def a_beats_again() -> bool:
        pools = cast(
            list[tuple[bytes, float]], r.zrange("{" + namespace + "}:pools", 0, -1, withscores=True)
        )
        return any(
            f":{a.pid}:" in member.decode() and score > restored_at * 1000
            for member, score in pools
        )

    poll(a_beats_again, within=30, what="pool A back after the cut", details=fleet.tails)
    poll(lambda: processed(r, namespace) >= JOBS, within=120, what="all done", details=fleet.tails)

    # A works again: give both pools more jobs until A has started one
    def a_started_after_cut() -> bool:
        return any(e.pid == a.pid and e.t > restored_at for e in ledger.entries())

    deadline = time.monotonic() + 40
    while not a_started_after_cut():
        assert time.monotonic() < deadline, f"A took no job after the cut\n{fleet.tails()}"
        ids += enqueue_work(fresh_redis_server.url, namespace, [200.0] * 10)
        time.sleep(1.0)
    poll(
        lambda: processed(r, namespace) >= len(ids),
        within=60,
        what="the last jobs done",
        details=fleet.tails,
    )

    # A's attempts that finished while cut off and were done again by B: late finishes
    audit = Audit.of(r, namespace, ledger, ids)
    late = [
        j
        for j in ids
        if any(e.pid == a.pid for e in audit.dones.get(j, [])) and pool_pid(audit.recs[j]) != a.pid
    ]
    poll(
        lambda: stats(r, namespace).get("stale", 0) >= max(1, len(late)),
        within=30,
        what=f"A's {len(late)} late finishes rejected as stale",
        details=fleet.tails,
    )
    assert a.alive and b.alive, fleet.tails()
    fleet.close()

    counters = stats(r, namespace)
    assert audit.lost == [], audit.explain(audit.lost, fleet)
    assert counters["processed"] == len(ids), counters
    assert set(leftovers(r, namespace, ["work"]).values()) == {0}
    # no complete job was overwritten: each result is that of its accepted attempt
    wrong = [j for j in ids if not audit.accepted_result_ok(j)]
    assert wrong == [], [audit.describe(j) for j in wrong[:5]]
    assert late, "A finished no job while cut off: the scenario tested nothing"
    for j in late:
        rec = audit.recs[j]
        assert int(rec["lost"]) >= 1 and pool_pid(rec) == b.pid, audit.describe(j)
    report(
        "partition",
        {
            "jobs": len(ids),
            "cut_s": CUT,
            "cut_at_done": sum(1 for e in ledger.entries() if e.kind == "done" and e.t < cut_at),
            "lost": len(audit.lost),
            "late_finishes_of_cut_pool": len(late),
            "stale_finishes": counters.get("stale", 0),
            "reclaimed_leases": counters.get("lost", 0),
            "duplicate_runs": audit.duplicate_runs,
            "completed": counters["processed"],
            "cut_pool_worked_after_s": round(
                min(e.t for e in ledger.entries() if e.pid == a.pid and e.t > restored_at)
                - restored_at,
                2,
            ),
        },
    )
