"""``rota shards resize N``: change the shard count of a namespace in use, pools and
producers running (see :mod:`rota.protocol.reshard` for the record, and "Changing the
shard count" in docs/operations.md for the procedure).

1. The record ``OLD>NEW@G+1`` is written into every shard of the union of the old and
   new sets, shard 0 last, and the pools are told (they serve the union from then on;
   producers learn it from their next enqueue's refusal). Concurrency limits and rates
   are placed over the union by the rebalancer (a new shard's part starts at 0).
2. The shards only the old count has are drained by the pools: the command waits until
   they hold no queued, scheduled, retry, waiting or running job (new jobs go to the
   new shards; what a job from before needs, its group, its unique or debounce key, its
   parents, stays in its old home until it ends).
3. What is left there (dead and complete jobs, kept results, logs, groups, unique and
   debounce keys, counters) is copied to its new home; the records of jobs that ended
   are deleted there with their set entries, so that a reader by id finds a job in one
   shard or the other (:func:`rota.client.shard_move.move_rest`: a job that reached the
   shard after the drain's last look stays and runs there, the rest is deleted in 5).
4. The record ``NEW@G+2`` is written into every shard of the union (a retired shard keeps
   it, so that a producer that still routes to it is refused), shard 0 last.
5. The pools retire the old shards (:mod:`rota.worker.retire`) once the jobs they run
   there have ended: the command waits until no live pool's heartbeat is in a retired
   shard, then moves again what is left there (an outcome written by a job that ended
   after step 3; the pools set and the heartbeats' keys are deleted), so that a retired
   shard holds its record only. The retired tags are noted in shard 0 (``{ns}:retired``,
   :attr:`rota.protocol.keys.Keys.retired`) before step 4 and the note deleted after this
   step: the record ``NEW@G+2`` does not say the old count.

Every step can be run again: a command cut short is resumed by running it again (after
step 4 too: it does step 5 for the noted tags).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import anyio
import msgspec

from rota.client.balance import parse_part, read_totals, set_whole, set_whole_rate
from rota.client.rate_shares import read_rate_totals
from rota.client.shard import Shard
from rota.client.shard_move import glob, move_rest
from rota.protocol import operator_calls
from rota.protocol.job import reply_text
from rota.protocol.keys import tag_of
from rota.protocol.rate import Rate
from rota.protocol.reshard import RESHARD_MESSAGE, ShardRecord
from rota.protocol.shards import MAX_SHARDS, is_shard_tag, shard_tags
from rota.protocol.snapshot import PoolSnapshot

if TYPE_CHECKING:
    from rota.client.client import Client

__all__ = ["Resized", "live_jobs", "live_pools", "pools_serving", "resize", "settle_retired"]


class Resized(msgspec.Struct, frozen=True):
    """Where a ``resize`` left the namespace: its record, whether the change is done,
    the live jobs left in each shard being retired (by tag), the records moved, and
    the pools whose heartbeat was still in a retired shard when the command gave up
    waiting (by tag; empty: the retired shards hold their record only)."""

    record: str
    done: bool
    live: dict[str, int]
    moved: int = 0
    lingering: dict[str, list[str]] = msgspec.field(default_factory=dict)


async def resize(
    client: Client,
    to: int,
    *,
    wait: bool = True,
    timeout: float = 600.0,  # noqa: ASYNC109 - the drain's time, not one call's
    say: Callable[[str], None] = lambda line: None,
) -> Resized:
    """Change ``client``'s namespace to ``to`` shards, or resume a change cut short;
    ``say`` is told the progress, a line at a time. Without ``wait`` it returns after
    step 1 (or the check of step 2) while old shards still hold live jobs: run it again
    later. ``timeout``: the seconds step 2 waits at most, and step 5 again (the pools
    that still serve a retired shard then are in :attr:`Resized.lingering`)."""
    if isinstance(to, bool) or not isinstance(to, int) or not 1 <= to <= MAX_SHARDS:
        raise ValueError(f"shards: a count from 1 to {MAX_SHARDS}, got {to!r}")
    admin = client.admin
    record = await admin.follower.reread()
    if record.changing and record.new != to:
        raise ValueError(
            f"{admin.shards[0].keys.shards}: a change from {record.old} to {record.new}"
            f" shards is under way: finish it first (rota shards resize {record.new})"
        )
    if not record.changing:
        if record.new == to:
            if not await admin.shards[0].redis.exists(admin.shards[0].keys.retired):
                say(f"namespace {client.namespace!r} spans {to} shard(s): nothing to change")
                return Resized(record.text(), True, {})
            say(f"done: {record.text()} (resumed: the pools leave the retired shards)")
            lingering, live, again = await _settle_noted(client, wait, timeout, say)
            if record.new == 1 and not lingering:
                await _wholes_to_one(admin.shards[0])
            return Resized(record.text(), True, live, again, lingering)
        record = record.started(to)
        admin.follower.follow(record)
        await _limits_over_union(admin.shards, record.old)
        await _fair_settings(admin.shards, record.old, admin.follower.route.named)
        say(f"started: {record.text()} (serving {len(admin.shards)} shards meanwhile)")
    await _write(admin.shards, record)  # again when resumed: a write cut short
    retiring = list(admin.shards[record.new :])
    deadline = time.monotonic() + timeout
    while True:
        live = {tag_of(s.keys.prefix): await live_jobs(s) for s in retiring}
        say("live jobs left: " + (", ".join(f"{t} {n}" for t, n in live.items()) or "none"))
        if not any(live.values()):
            break
        if not wait or time.monotonic() >= deadline:
            return Resized(record.text(), False, live)
        await anyio.sleep(0.5)
    moved = 0
    for shard in retiring:
        n = await move_rest(shard, admin.follower.route.named, admin.shards[0], final=False)
        say(f"moved {n} record(s) from {tag_of(shard.keys.prefix)}")
        moved += n
    if any([await live_jobs(s) for s in retiring]):  # a job came back meanwhile: again
        return await resize(client, to, wait=wait, timeout=timeout, say=say)
    final = record.ended()
    if final.new == 1:
        await _wholes_to_one(admin.shards[0])
    if retiring:  # kept until they are settled, so that a command cut short resumes it
        await admin.shards[0].redis.sadd(
            admin.shards[0].keys.retired, *(tag_of(s.keys.prefix) for s in retiring)
        )
    await _write(admin.shards, final)
    admin.follower.follow(final)
    say(f"done: {final.text()}")
    lingering, live, again = await _settle_noted(client, wait, timeout, say)
    if final.new == 1 and not lingering:
        # Again once no pool serves a retired shard: a rebalancer pass of the old count
        # under way at the first write may have lowered shard 0's part since, and one
        # shard has no rebalancer to raise it back.
        await _wholes_to_one(admin.shards[0])
    return Resized(final.text(), True, live, moved + again, lingering)


async def _settle_noted(
    client: Client,
    wait: bool,
    timeout: float,  # noqa: ASYNC109 - the pools' time, not one call's
    say: Callable[[str], None],
) -> tuple[dict[str, list[str]], dict[str, int], int]:
    """:func:`settle_retired` over the shards the changes retired that are not settled
    yet (noted in shard 0 at each change's end, one not named again since); the note is
    deleted once they hold their record only."""
    admin = client.admin
    first = admin.shards[0]
    named = {tag_of(s.keys.prefix) for s in admin.shards}
    noted = {reply_text(t) for t in await first.redis.smembers(first.keys.retired)}
    # Only this namespace's own tags: a member written by hand names no shard to settle
    # (settling deletes keys), and is said once and left.
    own = {t for t in noted if is_shard_tag(first.keys.namespace, t)}
    for tag in sorted(noted - own):
        say(f"ignored {tag!r} in {first.keys.retired}: not a shard of this namespace")
    retired = [admin.follower.shard(t) for t in sorted(own) if t not in named]
    said = await settle_retired(
        retired, admin.follower.route.named, first, wait=wait, timeout=timeout, say=say
    )
    if not said[0] and not said[1]:
        await first.redis.delete(first.keys.retired)
    return said


async def live_pools(shard: Shard, first: Shard | None = None) -> list[str]:
    """The ids of the pools whose heartbeat is in ``shard`` and alive: their snapshot,
    which expires three heartbeat intervals after the pool's last beat, is there, or in
    shard 0 ``first`` (a pool over several shards writes it there only)."""
    ids = [reply_text(p) for p in await shard.redis.zrange(shard.keys.pools, 0, -1)]
    where = [shard] if first is None else [shard, first]
    return [p for p in ids if any([await s.redis.exists(s.keys.pool(p)) for s in where])]


async def pools_serving(first: Shard, tags: Sequence[str]) -> dict[str, list[str]]:
    """The live pools whose snapshot in shard 0 ``first`` says their heartbeat runs in
    one of ``tags``, by tag: a pool that has not yet read the end of a change, or still
    runs a job of a retired shard."""
    ids = [reply_text(p) for p in await first.redis.zrange(first.keys.pools, 0, -1)]
    raws = await first.redis.mget([first.keys.pool(p) for p in ids]) if ids else []
    out: dict[str, list[str]] = {}
    for pool_id, raw in zip(ids, raws, strict=True):
        try:
            snap = msgspec.json.decode(raw, type=PoolSnapshot) if raw else None
        except msgspec.DecodeError:
            snap = None
        for tag in (snap.shards or []) if snap is not None else []:
            if tag in tags:
                out.setdefault(tag, []).append(pool_id)
    return out


async def settle_retired(
    retired: Sequence[Shard],
    home: Callable[[str], Shard],
    first: Shard,
    *,
    wait: bool = True,
    timeout: float = 600.0,  # noqa: ASYNC109 - the pools' time, not one call's
    say: Callable[[str], None] = lambda line: None,
) -> tuple[dict[str, list[str]], dict[str, int], int]:
    """After a change ended: wait (``timeout`` seconds at most; not at all without
    ``wait``) until no live pool's heartbeat is in a ``retired`` shard (there, or as
    its snapshot in shard 0 ``first`` says: see :func:`pools_serving`), then move what
    is left there to its ``home`` (counters into ``first``). The pools still there by
    tag (then nothing is moved), the live jobs found there by tag (a job a pool that
    died left running: nothing is moved), the records moved."""
    deadline = time.monotonic() + timeout
    said: dict[str, list[str]] | None = None
    if not retired:  # a change that only added shards
        return {}, {}, 0
    tags = [tag_of(s.keys.prefix) for s in retired]
    while True:
        pools = await pools_serving(first, tags)
        for shard, tag in zip(retired, tags, strict=True):
            for pool_id in await live_pools(shard, first):
                if pool_id not in pools.setdefault(tag, []):
                    pools[tag].append(pool_id)
        pools = {tag: sorted(ids) for tag, ids in pools.items() if ids}
        if pools != said:
            said = pools
            lines = [f"{tag} {', '.join(ids)}" for tag, ids in pools.items()]
            say("pools still in retired shards: " + ("; ".join(lines) or "none"))
        if not pools:
            break
        if not wait or time.monotonic() >= deadline:
            return pools, {}, 0
        await anyio.sleep(0.5)
    live = {tag_of(s.keys.prefix): await live_jobs(s) for s in retired}
    live = {tag: n for tag, n in live.items() if n}
    if live:
        say(
            "live jobs in retired shards (left there): "
            + ", ".join(f"{t} {n}" for t, n in live.items())
        )
        return {}, live, 0
    moved = 0
    for shard in retired:
        moved += await move_rest(shard, home, first)
    if moved:
        say(f"moved {moved} record(s) written after the move")
    return {}, {}, moved


async def live_jobs(shard: Shard) -> int:
    """The jobs ``shard`` holds that are still to run: queued, running, scheduled, in
    retry or waiting for others."""
    names = await shard.names()
    backlog = await shard.backlog(names) if names else {}
    sizes = await shard.job_set_sizes()
    held = sum(q + r for q, r in backlog.values())
    return held + sum(sizes.get(s, 0) for s in ("scheduled", "retry", "waiting"))


async def _write(shards: Sequence[Shard], record: ShardRecord) -> None:
    """``record`` into every shard's copy, shard 0's (what clients read) last; then the
    pools are told."""
    for shard in (*shards[1:], shards[0]):
        await shard.redis.set(shard.keys.shards, record.text())
    first = shards[0]
    await first.redis.publish(first.keys.pool_commands_told, RESHARD_MESSAGE)


async def _limits_over_union(shards: Sequence[Shard], old: int) -> None:
    """Each name's concurrency limit and rate over every shard served, paused names
    paused in the new shards too. The whole of each is kept in shard 0 (one shard of
    the old count keeps it as its part) and placed by the rebalancer
    (:mod:`rota.client.balance`): a new shard starts with a part of 0, so that the
    parts never add up to more than the whole while they move."""
    first = shards[0]
    paused = await first.redis.smembers(first.keys.paused)
    for shard in shards:
        if paused:
            await shard.redis.sadd(shard.keys.paused, *paused)
    scopes = [s.scope for s in shards]
    if old > 1:  # the wholes kept in shard 0
        limits, rates = await read_totals(first.scope), await read_rate_totals(first.scope)
    else:  # one shard's parts are the wholes (what shard 0 kept of an earlier change is not)
        limits, rates = {}, {}
        for name, part in (await first.redis.hgetall(first.keys.limits)).items():
            whole, garbage = parse_part(part)
            if whole and not garbage:
                limits[reply_text(name)] = whole
        for name, raw in (await first.redis.hgetall(first.keys.rates)).items():
            if (rate := Rate.from_stored(reply_text(raw))) is not None:
                rates[reply_text(name)] = rate
    for name, whole in limits.items():
        await set_whole(scopes, name, whole)
    for name, rate in rates.items():
        await set_whole_rate(scopes, name, rate)


async def _wholes_to_one(first: Shard) -> None:
    """After a change to one shard: each name's whole limit and rate are its parts
    there (one shard has no rebalancer)."""
    for name, whole in (await read_totals(first.scope)).items():
        await first.set_limit(name, whole)
    for name, rate in (await read_rate_totals(first.scope)).items():
        await first.set_rate(name, rate)


async def _fair_settings(shards: Sequence[Shard], old: int, home: Callable[[str], Shard]) -> None:
    """Each fair key's settings (weight, limit, rate, pause: ``fset:<name>``) copied from
    the old shards to the key's new home, where it did not have them; a name's default
    key limit to every shard. A setting changed during the change is written to both."""
    tags = set(shard_tags(shards[0].keys.namespace, old))
    for shard in (s for s in shards if tag_of(s.keys.prefix) in tags):
        # Every name's, not only those of the names set: a setting may come before jobs.
        found = shard.redis.scan_iter(match=glob(shard.keys.fair_set("")) + "*", count=500)
        for name in [reply_text(k)[len(shard.keys.fair_set("")) :] async for k in found]:
            settings = await shard.redis.hgetall(shard.keys.fair_set(name))
            for raw, value in settings.items():
                field = reply_text(raw)
                kind, _, key = field.partition("/")
                for dest in shards if kind == "l*" else [home(key)] if key else []:
                    if dest is shard:
                        continue
                    copied = await dest.redis.hsetnx(dest.keys.fair_set(name), field, value)
                    if copied and kind in ("l", "l*"):  # the key's jobs running there count
                        await operator_calls.fair_key(dest.scope, "recount", name, key)
