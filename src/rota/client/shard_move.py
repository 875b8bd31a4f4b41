"""What ``rota shards resize`` moves out of a shard it retires (see
:mod:`rota.client.resize`, steps 3 and 5): job records to their new home, the keys a
job from before needs copied there, counters added into shard 0."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from rota.client.shard import Shard
from rota.protocol.job import reply_text
from rota.protocol.keys import key_rest, renamed

__all__ = ["CHUNK", "glob", "move_rest"]

#: Ids moved per round trip.
CHUNK: Final = 200


async def move_rest(
    shard: Shard, home: Callable[[str], Shard], first: Shard, *, final: bool = True
) -> int:
    """Copy what ``shard`` still holds (no live job) to its new home, then delete it
    here; how many records moved. Run again, it copies again what is still here.

    Before the end (not ``final``: step 3) a job may still reach the shard after the
    drain's last look (a child sent to its parent's old home, a member to its group's):
    only the records of jobs that ended move then, and the rest is copied, not deleted
    (its queue, running set, group, ...), so that such a job runs there and the command
    waits for it again; the rest is deleted after the end (step 5), when the record
    sends nothing there any more. Counters are added once, and deleted then."""
    moved = 0
    k = shard.keys
    for which in ("dead", "complete"):
        key = k.dead if which == "dead" else k.complete
        while entries := await shard.redis.zrange(key, 0, CHUNK - 1, withscores=True):
            ids = [(reply_text(e[0]), float(e[1])) for e in entries]
            for job_id, score in ids:
                dest = home(job_id)
                await _move_job(shard, dest, job_id)
                to = dest.keys.dead if which == "dead" else dest.keys.complete
                await dest.redis.zadd(to, {job_id: score})
            await shard.redis.zrem(key, *[i for i, _ in ids])
            await shard.redis.delete(*[k.job(i) for i, _ in ids])
            moved += len(ids)
    async for raw in shard.redis.scan_iter(match=glob(k.prefix) + "*", count=500):
        key = reply_text(raw)
        kind, _, arg = key_rest(key, k.prefix).partition(":")
        if kind == "job":
            if not final and not await _ended(shard, arg):
                continue  # a job that came after the drain's look: it runs here first
            await _move_job(shard, home(arg), arg)
            await shard.redis.delete(k.job(arg))
            moved += 1
        elif kind in ("group", "gresults", "gmembers", "log", "children"):
            await _copy(shard, home(arg), key, replace=True)
        elif kind in ("unique", "debounce"):
            await _copy(shard, home(arg), key, replace=False)
        elif kind == "stats":
            await _add_counts(shard, first, key)
            await shard.redis.delete(key)  # added once
        elif kind == "quarantine":
            await _copy(shard, first, key, replace=True)
        elif key == k.shards:
            continue  # the record stays: a producer that still routes here is refused
        if final:
            await shard.redis.delete(key)
    return moved


async def _ended(shard: Shard, job_id: str) -> bool:
    """Whether the job's record says it ended (complete, dead or aborted)."""
    state = await shard.redis.hget(shard.keys.job(job_id), "state")
    return state is not None and reply_text(state) in ("complete", "dead", "aborted")


async def _move_job(src: Shard, dest: Shard, job_id: str) -> None:
    """The job's record, log and children set into ``dest``; the record is deleted by
    the caller (with its set's member), the other two here."""
    k = src.keys
    for key in (k.job(job_id), k.joblog(job_id), k.children(job_id)):
        await _copy(src, dest, key, replace=True)
        if key != k.job(job_id):
            await src.redis.delete(key)


async def _copy(src: Shard, dest: Shard, key: str, *, replace: bool) -> None:
    """The key ``key`` of ``src`` into ``dest`` under its prefix, with its time to
    live; over one of ``dest`` only when ``replace``."""
    dumped = await src.redis.dump(key)
    if dumped is None:
        return
    ttl = max(0, await src.redis.pttl(key))
    to = renamed(key, src.keys.prefix, dest.keys.prefix)
    if not replace and await dest.redis.exists(to):
        return
    await dest.redis.restore(to, ttl, dumped, replace=True)


async def _add_counts(src: Shard, first: Shard, key: str) -> None:
    """A counters hash added into shard 0's of the same name (its time to live kept)."""
    counts = await src.redis.hgetall(key)
    to = renamed(key, src.keys.prefix, first.keys.prefix)
    pipe = first.redis.pipeline(transaction=False)
    for field, n in counts.items():
        pipe.hincrby(to, field, int(n))
    ttl = await src.redis.pttl(key)
    if ttl > 0:
        pipe.pexpire(to, ttl)
    await pipe.execute()


def glob(text: str) -> str:
    """``text`` as a SCAN pattern that matches it only."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)
