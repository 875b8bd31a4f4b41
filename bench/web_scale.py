"""How the web UI holds up with many job names and many jobs.

``python -m bench.web_scale [--names 5000] [--jobs 100000] [--shards 1,4] [--reps 3]``
starts a private redis-server per shard count K and fills one namespace spread over K
shards (all on that one server): ``--jobs`` jobs over ``--names`` job names (a tenth
scheduled an hour ahead, a tenth dead, the rest queued), a group of 1,000 members, 1,000
jobs of one name over 100 fair keys, ``--complete`` kept complete jobs, the counters
since the namespace began (five for every name) and an hour of per-minute stats for
every name (processed, failed and run time, as the finish script keeps them: the
dashboard and the queues' figures read these hashes). It then serves
the UI with uvicorn on a loopback port and loads every page and API list the app
answers to ``GET`` (read from its routes, so a new page is measured without a change
here), and the opt-in forms of some (``/metrics?names=all``, ``/metrics?keys=top``,
``/metrics?run_times=``, a search, a last page...), over HTTP, ``--reps`` times each
after one warm-up, and prints the median time and the size of each, one column pair per
K (``--only PATH``: that page alone). A page over 300 ms or 500 KB is flagged.

``--against SRC`` compares in the same run: the UI of the rota package under ``SRC`` (the
``src`` directory of another checkout) is served beside this one, both in processes of
their own over the same Redis, and each page is loaded from one then the other; the
table has a column pair per version and K.

Figures on a shared machine move; the flags are what to look at.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

import anyio
import httpx
import uvicorn
from starlette.routing import Route

import rota
from bench import positive_int
from bench.redis_server import RedisServer
from rota import Client, JobSpec, Settings
from rota.protocol.job import now_ms
from rota.protocol.shards import shard_of
from rota.web import create_app
from rota.web.server import listen, url_of

__all__ = ["main"]

NS = "scale"
SLOW_MS = 300
BIG_BYTES = 500_000
#: Seconds a page may take before it is given up (and shown with status 0).
TIMEOUT = 30
#: A page whose first load took longer (seconds) is loaded once more, not ``--reps`` times.
SLOW_WARMUP = 3
#: Routes answered to GET that are no page or list of the console.
NOT_PAGES = ("/login", "/healthz", "/api/openapi.json", "/ns/{name}")


async def _fill(url: str, names: int, jobs: int, shards: int, complete: int) -> dict[str, str]:
    """The namespace; what some pages need to name (a job, a group, a busy name)."""
    client = Client.from_url(url, NS, shards=shards)
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
    keyed = [
        JobSpec(name="job_00003", kwargs={"n": i}, fair_key=f"t{i % 100}") for i in range(1000)
    ]
    await client.enqueue_many(keyed)
    # a tenth made dead, as a pool leaves them (out of their queue, in the dead set)
    pipes = [s.redis.pipeline(transaction=False) for s in client.admin.shards]
    for n, job_id in enumerate(dead):
        name = f"job_{(n * 10 + 2) % names:05d}"
        shard = client.admin.shards[shard_of(job_id, shards)]
        pipe = pipes[shard_of(job_id, shards)]
        pipe.lrem(shard.keys.queue(name), 1, job_id)
        pipe.hset(
            shard.keys.job(job_id),
            mapping={"state": "dead", "error": "ValueError: broke", "reason": "error"},
        )
        pipe.zadd(shard.keys.dead, {job_id: now - n})
        if len(pipe) >= 3000:
            await pipe.execute()
    # kept complete jobs, as a pool leaves them (a record, the id in the complete set)
    for i in range(complete):
        job_id, at = f"c{i:07d}", now - (complete - i) * 30
        shard = client.admin.shards[shard_of(job_id, shards)]
        pipe = pipes[shard_of(job_id, shards)]
        record = {"name": f"job_{i % names:05d}", "state": "complete", "args": f'{{"n":{i}}}'}
        record |= {"result": "1", "started_at": str(at - 20), "finished_at": str(at)}
        pipe.hset(shard.keys.job(job_id), mapping=record)  # type: ignore[arg-type]
        pipe.zadd(shard.keys.complete, {job_id: at})
        if len(pipe) >= 3000:
            await pipe.execute()
    for pipe in pipes:
        await pipe.execute()
    group = await client.group(
        [JobSpec(name="job_00000", kwargs={"n": i}) for i in range(1000)],
        then=JobSpec(name="job_00001"),
    )
    # the counters since the namespace began, five for every name (as the finish
    # script keeps them), and an hour of per-minute stats for every name
    totals: dict[str, int] = dict.fromkeys(("processed", "failed", "dead"), 10 * names)
    for i in range(names):
        totals |= {
            f"{c}:job_{i:05d}": 10 for c in ("processed", "failed", "dead", "lost", "aborted")
        }
    await client.admin.shards[0].redis.hset(client.admin.shards[0].keys.stats, mapping=totals)  # type: ignore[arg-type]
    minute = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)
    shard0 = client.admin.shards[0]
    for m in range(60):
        key = shard0.keys.stats_bucket((minute - dt.timedelta(minutes=m)).strftime("%Y%m%d%H%M"))
        fields: dict[str, int] = {"processed": 10 * names, "failed": names}
        for i in range(names):
            fields[f"processed:job_{i:05d}"] = 10
            fields[f"failed:job_{i:05d}"] = 1
            fields[f"ms:job_{i:05d}"] = 500
        await shard0.redis.hset(key, mapping=fields)  # type: ignore[arg-type]
        await shard0.redis.expire(key, 7200)
    sys.stdout.write(f"K={shards}: filled in {time.perf_counter() - started:.1f} s\n")
    await client.close()
    return {"job_id": dead[0], "group_id": group.id, "name": "job_00000", "key": "t7"}


def _pages(app: Any, ids: dict[str, str], names: int) -> list[str]:
    """Every page and API list of ``app`` answered to GET (its path's parameters named
    from ``ids``), then the opt-in and heavier forms of some."""
    paths = []
    for route in app.routes:
        get = isinstance(route, Route) and "GET" in (route.methods or ())
        if get and route.path not in NOT_PAGES:
            # a converter ({key:path}) names the parameter as the others do
            paths.append(re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path).format(**ids))
    last = (names - 1) // 100 * 100
    paths += [
        f"/queues?offset={last}",
        f"/api/queues?offset={last}",
        f"/queues/{ids['name']}?order=newest&offset=0",
        "/queues/job_00003",  # its fair keys' section
        "/api/queues/job_00003/keys",
        "/queues/job_00003/keys/t7/jobs",  # a key's page, of a key with jobs
        "/api/queues/job_00003/keys/t7/jobs",
        "/dead?q=job_00042",
        "/scheduled?q=job_00042",
        "/complete?name=job_00042",
        f"/groups/{ids['group_id']}?state=waiting",
        f"/flows/{ids['group_id']}-then",
        "/metrics?names=all",
        "/metrics?keys=top",
        "/metrics?names=all&keys=top",
        "/metrics?run_times=hour",
        "/metrics?run_times=day",
    ]
    return paths


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


#: A process serving the UI of the rota package on its ``sys.path`` (argv: Redis URL,
#: namespace, shards, port).
_SERVE = """
import sys, uvicorn
from rota import Settings
from rota.web import create_app
url, ns, shards, port = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
app = create_app(Settings(redis_url=url, namespace=ns, shards=shards))
uvicorn.run(app, host="127.0.0.1", port=port, log_config=None, access_log=False)
"""


class _Served:
    """The UI of the rota package under ``src`` served by a process of its own."""

    def __init__(self, src: str, redis_url: str, shards: int) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        env = {**os.environ, "PYTHONPATH": src}
        argv = [sys.executable, "-c", _SERVE, redis_url, NS, str(shards), str(port)]
        self.proc = subprocess.Popen(argv, env=env)

    def __enter__(self) -> _Served:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(self.url + "/healthz", timeout=1)
                return self
            except httpx.TransportError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.__exit__()
                    raise RuntimeError(f"the UI at {self.url} did not start") from None
                time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:  # still serving a page it was given up on
            self.proc.kill()
            self.proc.wait(5)


def _measure(
    url: str, paths: list[str], reps: int, label: str = ""
) -> list[tuple[str, int, float, int]]:
    """(path, status, median ms, bytes) per page, each also printed as it is measured
    (a status of 0: no answer within :data:`TIMEOUT` seconds). A page whose warm-up took
    over :data:`SLOW_WARMUP` seconds is loaded once more, not ``reps`` times."""
    out = []
    with httpx.Client(base_url=url, timeout=TIMEOUT, headers={"accept": "text/html"}) as http:
        for path in paths:
            times, size, status = [], 0, 0
            try:
                started = time.perf_counter()
                http.get(path)  # warm-up
                warm = time.perf_counter() - started
                for _ in range(1 if warm > SLOW_WARMUP else reps):
                    started = time.perf_counter()
                    reply = http.get(path)
                    times.append((time.perf_counter() - started) * 1000)
                    size, status = len(reply.content), reply.status_code
            except httpx.TimeoutException:
                times = [TIMEOUT * 1000]
            out.append((path, status, statistics.median(times), size))
            line = (
                f"{label}{path[:60]:<60} {status:>4} {out[-1][2]:>9.1f} ms {size / 1000:>8.1f} KB"
            )
            sys.stderr.write(line + "\n")
    return out


def _run(args: argparse.Namespace, shards: int) -> dict[str, list[tuple[str, int, float, int]]]:
    """The pages measured over a namespace of ``shards`` shards on one server, by
    version (this one, and ``--against``'s), each page loaded from one then the other."""
    here = str(os.path.dirname(os.path.dirname(rota.__file__)))
    sources = {"": here, **({"was ": args.against} if args.against else {})}
    with RedisServer() as server:
        ids = anyio.run(_fill, server.url, args.names, args.jobs, shards, args.complete)
        app = create_app(Settings(redis_url=server.url, namespace=NS, shards=shards))
        paths = args.only or _pages(app, ids, args.names)
        out: dict[str, list[tuple[str, int, float, int]]] = {v: [] for v in sources}
        with contextlib.ExitStack() as stack:
            webs = {
                v: stack.enter_context(_Served(src, server.url, shards))
                for v, src in sources.items()
            }
            for path in paths:
                for v, web in webs.items():
                    out[v] += _measure(web.url, [path], args.reps, f"{v}K={shards} ")
        return out


def _shard_counts(text: str) -> list[int]:
    counts = [int(k) for k in text.split(",")]
    if not counts or any(not 1 <= k <= 256 for k in counts):
        raise ValueError(f"shard counts from 1 to 256, comma-separated, not {text!r}")
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.web_scale", description=__doc__)
    parser.add_argument("--names", type=positive_int, default=5000)
    parser.add_argument("--jobs", type=positive_int, default=100_000)
    parser.add_argument("--complete", type=positive_int, default=20_000)
    parser.add_argument("--shards", type=_shard_counts, default=[1, 4], metavar="K,K...")
    parser.add_argument("--reps", type=positive_int, default=3)
    parser.add_argument(
        "--against", metavar="SRC", help="also serve the rota package under SRC, page by page"
    )
    parser.add_argument(
        "--only", action="append", metavar="PATH", help="load this page only (repeatable)"
    )
    args = parser.parse_args(argv)
    runs = {f"{v}K={k}": rows for k in args.shards for v, rows in _run(args, k).items()}
    head = "".join(f" {label + ' ms':>11} {'KB':>7}" for label in runs)
    sys.stdout.write(f"{'page':<40} {'status':>6}{head}\n")
    flagged = 0
    for i, (path, status, _, _) in enumerate(next(iter(runs.values()))):
        line, flag = f"{path[:40]:<40} {status:>6}", set()
        for rows in runs.values():
            _, _, ms, size = rows[i]
            line += f" {ms:>11.1f} {size / 1000:>7.1f}"
            if ms > SLOW_MS:
                flag.add(f"> {SLOW_MS} ms")
            if size > BIG_BYTES:
                flag.add(f"> {BIG_BYTES // 1000} KB")
        flagged += bool(flag)
        sys.stdout.write(f"{line}  {', '.join(sorted(flag))}".rstrip() + "\n")
    pages = len(next(iter(runs.values())))
    sys.stdout.write(f"{flagged} of {pages} pages flagged\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
