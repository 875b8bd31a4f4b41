"""What a keyed job costs Redis, counted where nothing but the scripts can move it.

``python -m bench.cost --fair-keys N`` runs a pool of one worker: one job per fetch,
whose count of commands follows the pool's timing by a few hundredths. This runs the
scripts themselves, as a pool of concurrency 20 calls them: fetches of ``--batch`` jobs
over ``--keys`` keys (the name's jobs spread over them in turn), each followed by the
finish of the oldest batch once two are leased, on a private redis-server, and counts
the commands Redis runs per job (``INFO commandstats``: the script calls and every
command inside them), the same for as many jobs without a key, in one run. The count
is the same from run to run but for a run that crosses a minute or a ten-minute slot
(whose hashes get their expiry once), so ``tests/test_cost_guard.py`` holds it to the
figure of ``[per_keyed_job]`` in ``bench/budget.toml`` within a hundredth: one command
more per keyed job fails it. ``--record`` writes the figure measured plus that
hundredth. ``--callgrind`` runs the server under valgrind and adds the instructions it
runs per job of the same loop (the enqueue left out), which no host's load moves
either (see :mod:`bench.callgrind`).
"""

from __future__ import annotations

import argparse
import json
import tomllib
from collections.abc import Callable
from typing import Final

import anyio
import redis

from bench.callgrind import CallgrindRedis
from bench.cost import BUDGET
from bench.redis_server import RedisServer
from rota import Client, JobSpec
from rota.protocol import calls
from rota.protocol.rows import Complete, Fetched

__all__ = ["keyed_budget", "keyed_over", "measure_keyed"]

SECTION: Final = "per_keyed_job"


async def _run(
    url: str, keys: int, jobs: int, batch: int, namespace: str, mark: Callable[[str], None]
) -> float:
    client = Client.from_url(url, namespace)
    specs = [JobSpec(name="noop", fair_key=f"k{i % keys}" if keys else None) for i in range(jobs)]
    for i in range(0, jobs, 5000):
        await client.enqueue_many(specs[i : i + 5000])
    scope = client.admin.shards[0].scope
    lessee = calls.Lessee(600_000, "cost", 1 << 20)
    r = redis.Redis.from_url(url)
    r.config_resetstat()
    mark("start")
    held: list[Fetched] = []
    done = 0
    while True:
        reply = await calls.fetch(scope, lessee, ["noop"] * batch, [])
        if not reply.jobs and not held:
            break
        held += reply.jobs
        if len(held) > batch or not reply.jobs:
            ending, held = held[:batch], held[batch:]
            outcomes = [Complete(j.id, j.name, j.token, "", "0", "") for j in ending]
            await calls.finish(scope, outcomes, complete_max=100_000)
            done += len(ending)
    mark("end")
    stats = r.info("commandstats")
    r.close()
    await client.close()
    skip = ("cmdstat_info", "cmdstat_config|resetstat")
    return sum(int(v["calls"]) for k, v in stats.items() if k not in skip) / done


def measure_keyed(keys: int = 100, jobs: int = 2000, batch: int = 10) -> dict[str, float]:
    """Commands per job of fetch and finish for ``jobs`` jobs over ``keys`` fair keys
    (``keyed``) and as many without a key (``plain``), in batches of ``batch``."""
    with RedisServer() as server:
        keyed = anyio.run(_run, server.url, keys, jobs, batch, "cost-keyed", _no_mark)
        plain = anyio.run(_run, server.url, 0, jobs, batch, "cost-plain", _no_mark)
    return {"keyed": round(keyed, 3), "plain": round(plain, 3)}


def measure_instructions(keys: int = 100, jobs: int = 2000, batch: int = 10) -> dict[str, float]:
    """The same loops as :func:`measure_keyed` on a server under callgrind: commands and
    instructions (``keyed_ins``, ``plain_ins``) per job."""
    out: dict[str, float] = {}
    with CallgrindRedis() as cg:
        for label, n in (("keyed", keys), ("plain", 0)):
            seen: list[str] = []

            def mark(at: str, label: str = label, seen: list[str] = seen) -> None:
                seen.append(f"{label}-{at}")
                cg.mark(seen[-1])

            out[label] = round(anyio.run(_run, cg.url, n, jobs, batch, f"cost-{label}", mark), 3)
            out[f"{label}_ins"] = round(cg.instructions(f"{label}-end") / jobs)
    return out


def _no_mark(at: str) -> None:
    """No phase to mark: a server not under callgrind."""


def keyed_budget() -> float:
    data = tomllib.loads(BUDGET.read_text(encoding="utf-8"))
    return float(data[SECTION]["redis"])


def keyed_over(measured: dict[str, float], allowed: float) -> list[str]:
    """A sentence when a keyed job costs more commands than its budget (which keeps a
    hundredth of slack: the count moves only when a run crosses a minute or a
    ten-minute slot, whose hashes get their expiry once)."""
    if measured["keyed"] <= allowed:
        return []
    return [
        f"redis: {measured['keyed']} commands per keyed job, budget {allowed}"
        f" ({measured['plain']} per job without a key): find the cause"
        " (python -m bench.fair_cost), or raise the budget in bench/budget.toml"
        " and say why in the commit"
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fair_cost", description=__doc__)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--callgrind", action="store_true", help="instructions per job too")
    parser.add_argument("--record", action="store_true", help="write the budget's figure")
    args = parser.parse_args(argv)
    if args.callgrind:
        counted = measure_instructions(args.keys, args.jobs, args.batch)
        print(json.dumps(counted))  # noqa: T201
        return 0
    measured = measure_keyed(args.keys, args.jobs, args.batch)
    if args.json:
        print(json.dumps(measured))  # noqa: T201
        return 0
    print(f"redis: {measured['keyed']} commands per keyed job, {measured['plain']} without")  # noqa: T201
    if args.record:
        text = BUDGET.read_text(encoding="utf-8")
        head = text.split(f"[{SECTION}]")[0].rstrip("\n")
        BUDGET.write_text(f"{head}\n{_section(measured['keyed'])}", encoding="utf-8")
        print(f"recorded in {BUDGET}")  # noqa: T201
    return 0


def _section(keyed: float) -> str:
    return (
        f"[{SECTION}]\n"
        "# Commands Redis runs per keyed job, fetched 10 at a time over 100 keys and\n"
        "# finished (python -m bench.fair_cost --record): the figure measured and a\n"
        "# hundredth, for a run that crosses a minute or a ten-minute slot.\n"
        f"redis = {round(keyed + 0.01, 3)}\n"
    )


if __name__ == "__main__":
    raise SystemExit(main())
