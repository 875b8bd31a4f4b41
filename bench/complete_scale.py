"""The finished jobs view and the content search at scale: a private redis-server with
``--complete`` kept complete jobs over ``--names`` job names (as a pool leaves them: a
record with its result and times, the id in ``{ns}:complete``) and ``--dead`` dead jobs
with an error, then each page over HTTP, the median of ``--reps`` loads after a warm-up.

    python -m bench.complete_scale [--complete 100000] [--dead 10000] [--names 5000]
"""

from __future__ import annotations

import argparse
import sys
import time

import anyio
import httpx

from bench import positive_int
from bench.redis_server import RedisServer
from bench.web_scale import BIG_BYTES, SLOW_MS, _measure, _Server
from rota import Client, Settings
from rota.protocol.job import now_ms
from rota.web import create_app

NS = "complete"


async def _fill(url: str, complete: int, dead: int, names: int) -> None:
    client = Client.from_url(url, NS)
    shard = client.admin.shards[0]
    k, now = shard.keys, now_ms()
    pipe = shard.redis.pipeline(transaction=False)
    for i in range(complete):
        job_id, at = f"c{i:07d}", now - (complete - i) * 30
        record = {
            "name": f"job_{i % names:05d}",
            "state": "complete",
            "args": f'{{"n":{i},"note":"order {i}"}}',
            "result": f'{{"total":{i * 3},"pad":"{"x" * 100}"}}',
            "started_at": at - 20,
            "finished_at": at,
            "attempts": 1,
        }
        pipe.hset(k.job(job_id), mapping=record)  # type: ignore[arg-type]
        pipe.zadd(k.complete, {job_id: at})
        if len(pipe) >= 4000:
            await pipe.execute()
    for i in range(dead):
        job_id = f"d{i:07d}"
        record = {
            "name": f"job_{i % names:05d}",
            "state": "dead",
            "args": f'{{"n":{i}}}',
            "error": f"TimeoutError: the gateway did not answer for order {i}",
            "reason": "error",
            "finished_at": now - i,
        }
        pipe.hset(k.job(job_id), mapping=record)  # type: ignore[arg-type]
        pipe.zadd(k.dead, {job_id: now - i})
        if len(pipe) >= 4000:
            await pipe.execute()
    await pipe.execute()
    await client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.complete_scale", description=__doc__)
    parser.add_argument("--complete", type=positive_int, default=100_000)
    parser.add_argument("--dead", type=positive_int, default=10_000)
    parser.add_argument("--names", type=positive_int, default=5000)
    parser.add_argument("--reps", type=positive_int, default=3)
    args = parser.parse_args(argv)
    half = now_ms() - args.complete * 15  # the older half of the window
    paths = [
        "/complete",
        "/complete?offset=5000",
        f"/complete?until={half}",
        "/complete?order=oldest",
        "/complete?name=job_00042",
        f"/complete?name=job_00042&until={half}",
        "/complete?q=order+4242&fields=content",
        "/api/complete?count=500",
        "/dead?q=order+4242&fields=content",
        "/dead?q=job_00042",
    ]
    with RedisServer() as server:
        started = time.perf_counter()
        anyio.run(_fill, server.url, args.complete, args.dead, args.names)
        sys.stdout.write(f"filled in {time.perf_counter() - started:.1f} s\n")
        app = create_app(Settings(redis_url=server.url, namespace=NS))
        with _Server(app) as web:
            rows = _measure(web.url, paths, args.reps)
            read = {}
            for path in paths:  # how far a scan read in its time
                if "q=" in path or "name=" in path:
                    api = "/api" + path.removeprefix("/api")
                    body = httpx.get(web.url + api, timeout=60).json()
                    read[path] = f"read {body.get('searched')} of {body.get('size')}"
    sys.stdout.write(f"{'page':<44} {'status':>6} {'ms':>8} {'KB':>8}\n")
    for path, status, ms, size in rows:
        flag = ", ".join(
            f for f, bad in ((f"> {SLOW_MS} ms", ms > SLOW_MS), ("big", size > BIG_BYTES)) if bad
        )
        more = f"{flag} {read.get(path, '')}"
        line = f"{path[:44]:<44} {status:>6} {ms:>8.1f} {size / 1000:>8.1f}  {more}"
        sys.stdout.write(line.rstrip() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
