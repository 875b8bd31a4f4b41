"""The finish script sums, per job name and UTC minute, how long complete jobs ran
(``ms:<name>``, from the start of their lease), so a page can chart a name's durations."""

from __future__ import annotations

import datetime as dt

import redis

from rota import Client
from rota.protocol.job import reply_text
from rota.protocol.scripts import script
from tests.helpers import finish_args, lease_tokens


async def test_complete_jobs_add_their_run_time_to_the_minute(
    client: Client, redis_sync: redis.Redis, namespace: str
) -> None:
    for _ in range(3):
        await client.enqueue("resize")
    await client.enqueue("mail")
    tokens = await lease_tokens(client, "resize", 3)
    tokens_mail = await lease_tokens(client, "mail", 1)
    started = {
        i: int(redis_sync.hget(client.admin.shards[0].keys.job(i), "started_at") or 0)
        for i in [*tokens, *tokens_mail]
    }
    now = max(started.values()) + 60_000 - max(started.values()) % 60_000 + 5_000
    rows: list[str | int] = [now]
    failing = sorted(tokens)[0]
    for i, token in tokens.items():
        outcome: list[str | int] = (
            ["retry", now + 1000, "boom", "error"] if i == failing else ["complete", "", 0, ""]
        )
        rows += [i, "resize", token, *outcome]
    for i, token in tokens_mail.items():
        rows += [i, "mail", token, "complete", "", 0, ""]
    args = finish_args(rows[0], rows[1:])
    assert (
        await script("finish")(
            client.admin.shards[0].redis,
            client.admin.shards[0].keys.prefix,
            args,
            client.admin.shards[0].script_mode,
        )
        == []
    )

    minute = dt.datetime.fromtimestamp(now / 1000, dt.UTC).strftime("%Y%m%d%H%M")
    raw = redis_sync.hgetall(client.admin.shards[0].keys.stats_bucket(minute))
    bucket = {reply_text(k): int(v) for k, v in raw.items()}
    ran = sum(now - started[i] for i in tokens if i != failing)
    assert bucket["ms:resize"] == ran  # the failed attempt is not a duration of a complete job
    assert bucket["processed:resize"] == 2
    assert bucket["failed:resize"] == 1
    assert bucket["ms:mail"] == sum(now - started[i] for i in tokens_mail)
    # kept per minute only: the total and the day's hash have no durations
    day = minute[:8]
    for key in (client.admin.shards[0].keys.stats, client.admin.shards[0].keys.stats_bucket(day)):
        assert not [f for f in redis_sync.hkeys(key) if reply_text(f).startswith("ms")]
    assert redis_sync.ttl(client.admin.shards[0].keys.stats_bucket(minute)) > 0
