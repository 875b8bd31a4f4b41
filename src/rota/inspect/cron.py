"""Periodic jobs turned off, and turning them off and on again.

A name turned off is a field of one hash (``Keys.cron_off``: name -> since when, ms),
which every pool's scheduler looks up when a fire time of the name comes: the time passes
without a job on every pool, and the pools keep their schedules, so turning it on again
takes effect at its next fire time. Kept in Redis, it outlives the pools and the UI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rota.protocol.job import field_seconds, now_ms, reply_text

if TYPE_CHECKING:
    from rota.client import Client

__all__ = ["switch", "turned_off"]


async def turned_off(client: Client) -> dict[str, float]:
    """The periodic jobs turned off: name -> since when (seconds; 0: unknown)."""
    shard = client.admin.shards[0]
    raw = await shard.redis.hgetall(shard.keys.cron_off)
    return {reply_text(k): field_seconds(v) or 0.0 for k, v in raw.items()}


async def switch(client: Client, name: str, on: bool) -> None:
    """Turn the periodic job ``name`` on (again) or off, on every pool."""
    shard = client.admin.shards[0]
    if on:
        await shard.redis.hdel(shard.keys.cron_off, name)
    else:
        await shard.redis.hset(shard.keys.cron_off, name, now_ms())
