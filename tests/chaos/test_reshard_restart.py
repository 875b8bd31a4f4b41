"""Redis killed with SIGKILL and started again (its append-only file kept) in the middle
of a change of the shard count, 2 -> 4 and back, while a producer enqueues and two
pools run: no job is lost, a job runs twice only when its attempt was cut off by an
outage (none did in the runs so far), and the change completes when the operator runs
the command again (what docs/operations.md tells to do after a command cut short).
"""

from __future__ import annotations

import random
import time

import anyio
import pytest

from rota import Client
from rota.client.resize import Resized, resize
from rota.protocol.shards import shard_tags
from rota.redis.outage import condition
from tests.chaos.harness import Fleet, Ledger, pick, report
from tests.chaos.reshard import ids_in, ran_once_or_after_a_kill, retiring, say, tag_keys, up
from tests.helpers import wait_until
from tests.redis_server import RedisServer

pytestmark = pytest.mark.chaos

#: Jobs of the old shards running at each kill (seconds each): the change is then
#: still draining, whatever the producer does.
HELD, HELD_MS = 4, 3000
SETTINGS = {"shards": 2, "lease": 2, "heartbeat_interval": 0.5, "concurrency": 20}
ROUNDS = pick(2, 3)


#: Where in the command the server is killed, one change after the other: in the drain
#: (the record written, the pools serving the union), in the move (one old shard's
#: records moved, the others not), once the end is written (the command waits for the
#: pools to leave the retired shards).
STEPS = ("live jobs left: ", "moved ", "done: ")


class Outage:
    """Kills the server as the command says the line of the step it was armed for (at
    once: the command goes no further before the kill), and starts it again a second
    later."""

    def __init__(self, server: RedisServer) -> None:
        self.server = server
        self.armed: tuple[str, anyio.Event] | None = None
        self.windows: list[tuple[float, float]] = []  # (kill, back), epoch seconds

    def say(self, line: str) -> None:
        say(line)
        if self.armed is not None and line.startswith(self.armed[0]):
            step, killed = self.armed
            self.armed = None
            say(f"redis killed ({step.strip()})")
            self.windows.append((time.time(), 0.0))
            self.server.kill()
            killed.set()

    async def run(self, step: str) -> None:
        killed = anyio.Event()
        self.armed = (step, killed)
        await killed.wait()
        await anyio.sleep(1.0)
        await anyio.to_thread.run_sync(self.server.start)
        self.windows[-1] = (self.windows[-1][0], time.time())


async def again_until_done(op: Client, to: int, outage: Outage) -> tuple[Resized, int]:
    """``rota shards resize to`` as an operator runs it: again after each error that
    says Redis is away, until it is done; the result and the runs that were cut short."""
    cut = 0
    while True:
        try:
            return await resize(op, to, timeout=120, say=outage.say), cut
        except Exception as exc:
            if condition(exc) is None:
                raise
            say(f"cut short ({type(exc).__name__}): run again")
            cut += 1
            await anyio.sleep(0.5)


@pytest.mark.timeout(pick(240, 600))
async def test_redis_restarted_in_the_middle_of_a_change_loses_no_job(
    aof_server: RedisServer, namespace: str, fleet: Fleet, ledger: Ledger
) -> None:
    url, r = aof_server.url, aof_server.client(socket_timeout=5)
    namespace, _ = retiring(namespace, 2, 4)
    rng = random.Random(7)
    sent: list[str] = []
    stop, stopped = anyio.Event(), anyio.Event()
    outage = Outage(aof_server)
    cuts: list[int] = []
    async with Client.from_url(url, namespace) as op:
        await resize(op, 2, say=say)
        for _ in range(2):
            fleet.start(url, namespace, **SETTINGS)
        await wait_until(lambda: up(r, namespace) == 2, within=30)
        producer = Client.from_url(url, namespace, shards=2)

        async def produce() -> None:
            i = 0
            while not stop.is_set():
                job_id = f"p{i}"
                try:  # an id of its own: sent again after an error, it runs once
                    await producer.enqueue("work", ms=rng.uniform(5, 50), job_id=job_id)
                except Exception as exc:
                    if condition(exc) is None:
                        raise
                    await anyio.sleep(0.1)
                    continue
                sent.append(job_id)
                i += 1
                await anyio.sleep(0.005)
            stopped.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(produce)
            for n in range(ROUNDS):
                for frm, to in ((2, 4), (4, 2)):
                    gone = [
                        t for t in shard_tags(namespace, frm) if t not in shard_tags(namespace, to)
                    ]
                    tag = gone[0]
                    for job_id in ids_in(namespace, tag, frm, HELD, f"h{n}.{to}."):
                        await op.enqueue("work", ms=HELD_MS, job_id=job_id)
                        sent.append(job_id)
                    tg.start_soon(outage.run, STEPS[len(cuts) % len(STEPS)])
                    done, cut = await again_until_done(op, to, outage)
                    assert done.done and done.live == {} and done.lingering == {}, done
                    for t in gone:
                        assert tag_keys(r, t) == set(), t
                    cuts.append(cut)
            stop.set()
            await stopped.wait()
        await producer.close()
        everything = set(sent)
        await wait_until(lambda: set(ledger.by_job("done")) >= everything, within=60)
        lost, again = await ran_once_or_after_a_kill(op, ledger, sent, set(), outage.windows)
    r.close()
    assert lost == [], fleet.tails()
    assert [w for w in fleet.workers if not w.alive] == [], fleet.tails()
    report(
        "reshard_redis_restart",
        {"jobs": len(sent), "lost": len(lost), "run_again": again, "commands_cut": cuts},
    )
