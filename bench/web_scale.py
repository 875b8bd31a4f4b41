"""How the web UI holds up with many job names and many jobs.

``python -m bench.web_scale [--names 5000] [--jobs 100000] [--reps 3]`` starts a private
redis-server and fills one namespace: ``--jobs`` jobs spread over ``--names`` job names
(a tenth scheduled an hour ahead, a tenth dead, the rest queued), a group of 1,000
members, and an hour of per-minute stats for every name (processed, failed and run time,
as the finish script keeps them: the dashboard and the queues' figures read these
hashes). It then serves the UI with uvicorn on a loopback port and loads every page, and
the JSON twins of the biggest, over HTTP, ``--reps`` times each after one warm-up, and
prints the median time and the size of each (``--only PATH``: that page alone). A page
over 300 ms or 500 KB is flagged.

Figures on a shared machine move; the flags are what to look at.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import threading
import time
from typing import Any

import anyio
import httpx
import uvicorn

from bench import positive_int
from bench.redis_server import RedisServer
from rota import Client, JobSpec, Settings
from rota.protocol.job import now_ms
from rota.web import create_app
from rota.web.server import listen, url_of

__all__ = ["main"]

NS = "scale"
SLOW_MS = 300
BIG_BYTES = 500_000


async def _fill(url: str, names: int, jobs: int) -> dict[str, str]:
    """The namespace; what some pages need to name (a job, a group, a busy name)."""
    client = Client.from_url(url, NS)
    started = time.perf_counter()
    now = now_ms()
    dead: list[str] = []
    batch: list[JobSpec] = []
    for i in range(jobs):
        name = f"job_{i % names:05d}"
        kind = i % 10
        run_at = time.time() + 3600 if kind == 1 else None
        batch.append(JobSpec(name=name, kwargs={"n": i, "note": "x" * 40}, run_at=run_at))
        if len(batch) == 1000 or i == jobs - 1:
            enqueued = await client.enqueue_many(batch)
            dead += [j.id for j, s in zip(enqueued, batch, strict=True) if s.kwargs["n"] % 10 == 2]
            batch = []
    # a tenth made dead, as a pool leaves them (out of their queue, in the dead set)
    pipe = client.admin.shards[0].redis.pipeline(transaction=False)
    for n, job_id in enumerate(dead):
        name = f"job_{(n * 10 + 2) % names:05d}"
        pipe.lrem(client.admin.shards[0].keys.queue(name), 1, job_id)
        pipe.hset(
            client.admin.shards[0].keys.job(job_id),
            mapping={"state": "dead", "error": "ValueError: broke", "reason": "error"},
        )
        pipe.zadd(client.admin.shards[0].keys.dead, {job_id: now - n})
        if len(pipe) >= 3000:
            await pipe.execute()
    await pipe.execute()
    group = await client.group(
        [JobSpec(name="job_00000", kwargs={"n": i}) for i in range(1000)],
        then=JobSpec(name="job_00001"),
    )
    # an hour of per-minute stats for every name
    minute = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)
    for m in range(60):
        key = client.admin.shards[0].keys.stats_bucket(
            (minute - dt.timedelta(minutes=m)).strftime("%Y%m%d%H%M")
        )
        fields: dict[str, int] = {"processed": 10 * names, "failed": names}
        for i in range(names):
            fields[f"processed:job_{i:05d}"] = 10
            fields[f"failed:job_{i:05d}"] = 1
            fields[f"ms:job_{i:05d}"] = 500
        await client.admin.shards[0].redis.hset(key, mapping=fields)  # type: ignore[arg-type]
        await client.admin.shards[0].redis.expire(key, 7200)
    sys.stdout.write(f"filled in {time.perf_counter() - started:.1f} s\n")
    await client.close()
    return {"job": dead[0], "group": group.id, "name": "job_00000"}


def _pages(ids: dict[str, str], names: int) -> list[str]:
    last = (names - 1) // 100 * 100
    return [
        "/",
        "/queues",
        f"/queues?offset={last}",
        f"/queues/{ids['name']}",
        f"/queues/{ids['name']}?order=newest&offset=0",
        "/pools",
        "/cron",
        "/busy",
        "/waiting",
        "/scheduled",
        "/retry",
        "/dead",
        "/dead?q=job_00042",
        "/scheduled?q=job_00042",
        f"/jobs/{ids['job']}",
        f"/groups/{ids['group']}",
        f"/groups/{ids['group']}?state=waiting",
        f"/flows/{ids['group']}-then",
        "/redis",
        "/shards",
        "/audit",
        "/metrics",
        "/api/dashboard",
        "/api/queues",
        f"/api/queues/{ids['name']}/jobs",
        f"/api/queues/{ids['name']}/stats",
        "/api/dead",
        f"/api/groups/{ids['group']}",
    ]


class _Server:
    """uvicorn serving ``app`` on a free loopback port in a thread."""

    def __init__(self, app: Any) -> None:
        self.sock = listen("127.0.0.1", 0)
        self.url = url_of(self.sock)
        config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> _Server:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(15)
        self.sock.close()


def _measure(url: str, paths: list[str], reps: int) -> list[tuple[str, int, float, int]]:
    """(path, status, median ms, bytes) per page."""
    out = []
    with httpx.Client(base_url=url, timeout=60, headers={"accept": "text/html"}) as http:
        for path in paths:
            http.get(path)  # warm-up
            times, size, status = [], 0, 0
            for _ in range(reps):
                started = time.perf_counter()
                reply = http.get(path)
                times.append((time.perf_counter() - started) * 1000)
                size, status = len(reply.content), reply.status_code
            out.append((path, status, statistics.median(times), size))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.web_scale", description=__doc__)
    parser.add_argument("--names", type=positive_int, default=5000)
    parser.add_argument("--jobs", type=positive_int, default=100_000)
    parser.add_argument("--reps", type=positive_int, default=3)
    parser.add_argument(
        "--only", action="append", metavar="PATH", help="load this page only (repeatable)"
    )
    args = parser.parse_args(argv)
    with RedisServer() as server:
        ids = anyio.run(_fill, server.url, args.names, args.jobs)
        app = create_app(Settings(redis_url=server.url, namespace=NS))
        with _Server(app) as web:
            paths = args.only or _pages(ids, args.names)
            rows = _measure(web.url, paths, args.reps)
    sys.stdout.write(f"{'page':<44} {'status':>6} {'ms':>8} {'KB':>8}\n")
    flagged = 0
    for path, status, ms, size in rows:
        flag = []
        if ms > SLOW_MS:
            flag.append(f"> {SLOW_MS} ms")
        if size > BIG_BYTES:
            flag.append(f"> {BIG_BYTES // 1000} KB")
        flagged += bool(flag)
        line = f"{path[:44]:<44} {status:>6} {ms:>8.1f} {size / 1000:>8.1f}  {', '.join(flag)}"
        sys.stdout.write(line.rstrip() + "\n")
    sys.stdout.write(f"{flagged} of {len(rows)} pages flagged\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
