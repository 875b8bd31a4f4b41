"""Moves due scheduled and retry jobs into their queues, fires periodic jobs, and trims
the dead set.

It sleeps until the next due time (at most ``scheduler_interval``) on a local timer, and
wakes early when the scheduler wake list, which enqueue_in/at and every retry push to,
gets a token. The timer is local because Redis ends a blocking read's timeout only at
its next ``hz`` tick: a ``BLPOP`` timing out at the due time started jobs 7-102 ms late
with the default ``hz 10``; a local timer starts them within a millisecond or two.
A listener task keeps one ``BLPOP`` on the wake list open for that. Any pool moves any
due job, whether or not it handles that job name; the script is idempotent, so many pools
may run it.

A periodic job fires once per fire time across any number of pools: each pool that
registered it tries to claim the time with ``SET NX``, and only the winner enqueues. A
name turned off (``Keys.cron_off``, from the web's cron page) is looked up when one of
its times comes, by every pool, and that time passes without a claim or a job.

Over several shards, shard 0's tick also asks with one ``EXISTS`` (one call of the
function ``look`` per node of a cluster) whether any other shard holds a scheduled,
retry or expiring job (rota.worker.idle); while none does, the other shards' ticks at
their timer skip their own ``EXISTS``. A tick that a wake token or a known due time
started always looks: a job enqueued for later pushes a token, so only a token taken by
a pool that died before its tick waits for the next look (one ``scheduler_interval``
more at most). Shard 0's trim of the dead set (once a
minute) asks alike whether any other shard holds a dead job; while none does, theirs
skip the trim.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import anyio
import structlog

from rota.client import JobSpec
from rota.protocol import calls, codec
from rota.protocol.job import now_ms, reply_text
from rota.protocol.snapshot import Schedule
from rota.wire.conn import block_within
from rota.worker.idle import ShardLook
from rota.worker.registry import Periodic
from rota.worker.rounds import TICK, rounds_of
from rota.worker.runtime import PoolRuntime

__all__ = ["Scheduler", "listen_for_schedulers"]

# Jobs per promote or trim call: a call blocks the shard, 50 keep it near 1 ms (a tick
# whose call moved that many goes again at once).
_LIMIT = 50
_TRIM_EVERY_MS = 60_000


log = structlog.get_logger("rota.pool")


def _ms(t: datetime) -> int:
    return int(t.timestamp() * 1000)


class Scheduler:
    def __init__(
        self, rt: PoolRuntime, periodic: list[Periodic] | None = None, *, listen: bool = True
    ) -> None:
        self.rt = rt
        #: Whether it waits on its wake list itself (else the listener shared by the
        #: shards of one server wakes it: see :func:`listen_for_schedulers`).
        self.listen = listen
        self._woken = anyio.Event()
        self._next_trim = 0
        start = datetime.now(UTC)
        self._periodic = [(p, _ms(p.cron.next_after(start))) for p in periodic or []]
        self._last: dict[str, int] = {}
        self.rounds = rounds_of(rt.pool_id)
        #: The look over the pool's other shards (on shard 0's server, or per node):
        #: shard 0's tick takes it, theirs follow it at their timer (None: every tick
        #: looks itself).
        self.look: ShardLook | None = None
        self._timed = False  # this tick began at the timer's cap, nothing known due
        if self._periodic:
            self._tell()

    def _tell(self) -> None:
        """What the heartbeat publishes of the periodic jobs (the web's cron page): in
        place, as the runtimes of a pool's other shards share the list (every shard's
        heartbeat publishes it; the periodic jobs fire from shard 0's scheduler)."""
        self.rt.schedules[:] = [
            Schedule(
                p.name,
                p.cron.expression,
                str(p.cron.tz),
                fire,
                self._last.get(p.name, 0),
                codec.encode_args(p.args, dict(p.kwargs)).decode(),
            )
            for p, fire in self._periodic
        ]

    async def fire_periodic(self, now: int) -> int | None:
        """Enqueue the periodic jobs that are due (but those turned off); return the next
        fire time (ms)."""
        rt = self.rt
        for i, (p, fire) in enumerate(self._periodic):
            if fire > now:
                continue
            if await rt.redis.hexists(rt.keys.cron_off, p.name):
                log.info("periodic job turned off: not enqueued", job_name=p.name, fire_at=fire)
            else:
                await self._claim_and_enqueue(p, fire, now)
                self._last[p.name] = fire
            nxt = p.cron.next_after(datetime.fromtimestamp(fire / 1000, UTC))
            self._periodic[i] = (p, _ms(nxt))
            self._tell()
        return min((fire for _, fire in self._periodic), default=None)

    async def _claim_and_enqueue(self, p: Periodic, fire: int, now: int) -> None:
        rt = self.rt
        ttl = max(3_600_000, 2 * (now - fire))
        claim = rt.keys.cron(f"{p.name}:{fire}")
        # The claim's holder enqueues; a holder whose enqueue was refused (Redis out of
        # memory) finds its own claim and tries again: the job id is the fire time's, so
        # an enqueue that did land is not repeated.
        won = await rt.redis.set(claim, rt.pool_id, nx=True, px=ttl)
        if won or await rt.redis.get(claim) == rt.pool_id.encode():
            spec = JobSpec(
                name=p.name, args=p.args, kwargs=dict(p.kwargs), job_id=f"cron:{p.name}:{fire}"
            )
            await rt.client.enqueue_many([spec])
            log.info("periodic job enqueued", job_name=p.name, fire_at=fire)

    async def run(self) -> None:
        self.rounds.nudges[TICK, self.rt.position] = self.wake
        try:
            await self._run()
        finally:
            del self.rounds.nudges[TICK, self.rt.position]  # nothing to nudge any more

    async def _run(self) -> None:
        async with anyio.create_task_group() as tg:
            if self.listen:
                tg.start_soon(listen_for_schedulers, self.rt, [self])
            while True:
                # A new event before the tick: a token that comes during it ends the wait.
                self._woken = anyio.Event()
                self.rounds.begin(TICK, self.rt.position)
                wait = await self.rt.watch.keep_trying("scheduler", self.tick)
                self.rounds.end(TICK, self.rt.position)
                self._timed = False
                if wait > 0:
                    with anyio.move_on_after(wait):
                        await self._woken.wait()
                    cap = self.rt.settings.scheduler_interval
                    self._timed = wait >= cap and not self._woken.is_set()

    def wake(self) -> None:
        """A token came: tick now."""
        self._woken.set()

    async def tick(self) -> float:
        """Move what is due and fire periodic jobs; how long to wait for the next due
        time (0: more are due now)."""
        rt = self.rt
        now = now_ms()
        moved, due, buried = calls.PromoteReply(0, -1, [])
        # One command says whether the promote call has anything to look at: an idle
        # shard costs one EXISTS a tick instead of the script's call and its reads, and
        # none at its timer while shard 0's look finds nothing in any other shard.
        look = self.look
        if rt.position == 0 and look is not None:
            await look.look_scheduled()
        skip = look is not None and rt.position != 0 and self._timed and look.nothing_scheduled(rt)
        if not skip and await rt.redis.exists(rt.keys.scheduled, rt.keys.retry, rt.keys.expiring):
            dropping = [name for name, h in rt.handlers.items() if h.skip_dead]
            moved, due, buried = await calls.promote(rt.shard.scope, now, _LIMIT, dropping)
        for job_id in buried:
            log.warning("job due past the year 9999 made dead", job_id=job_id)
        if now >= self._next_trim:
            self._next_trim = now + _TRIM_EVERY_MS
            if rt.position == 0 and look is not None:
                await look.look_dead()
            if look is None or rt.position == 0 or not look.nothing_dead(rt):
                s = rt.settings
                max_age = int(s.dead_max_age * 1000)
                await calls.trim_dead(rt.shard.scope, now, max_age, s.dead_max_count, _LIMIT)
        next_fire = await self.fire_periodic(now_ms())
        if moved >= _LIMIT:
            return 0  # more are due: go again at once
        cap = rt.settings.scheduler_interval
        if next_fire is not None:
            due = next_fire if due < 0 else min(due, next_fire)
        return cap if due < 0 else min(cap, max(0.001, (due - now_ms()) / 1000))


async def listen_for_schedulers(rt: PoolRuntime, schedulers: Sequence[Scheduler]) -> None:
    """Wait on the scheduler wake lists of ``schedulers`` with one BLPOP (one scheduler's
    own, or those of the shards of one server) and wake the scheduler whose list got a
    token.

    It waits out Redis's bad days without telling the pool's watch: a blocking read
    that works again says so only when it returns, seconds later, and the schedulers'
    own calls report the condition already."""
    owner = {s.rt.keys.sched_wake: s for s in schedulers}

    async def wait_token() -> Any:
        return await rt.redis.blpop(
            list(owner), timeout=block_within(rt.redis, rt.settings.scheduler_interval)
        )

    while True:
        reply = await rt.watch.keep_trying("scheduler wake", wait_token, tell=False)
        if reply:
            scheduler = owner.get(reply_text(reply[0]))
            if scheduler is not None:
                scheduler.wake()
