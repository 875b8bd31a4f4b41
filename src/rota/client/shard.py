"""One shard of a namespace (see :mod:`rota.protocol.shards`): a :class:`Shard` holds
the redis-py client of the server that owns its hash tag, the hot path's connection to
it, its keys, its script mode and scopes, and reads and changes that shard alone (the
operator's one-shard reads in :mod:`rota.client.shard_ops`). What spans the shards is
:mod:`rota.client.routing`'s; the worker runs over one Shard, not the client that routes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import anyio
import msgspec

from rota.client.shard_ops import ShardOperations
from rota.client.spec import Enqueued
from rota.client.workflow import RELATED_FIELDS, GroupProgress, Related, decoded, read_related
from rota.errors import JobFailed, JobNotFound
from rota.protocol import calls
from rota.protocol.calls import Scope
from rota.protocol.job import JobRecord, field_text, reply_text
from rota.protocol.keys import Keys
from rota.protocol.reshard import RESHARDED
from rota.protocol.rows import EnqueueRow
from rota.protocol.scripts import ScriptMode
from rota.redis.outage import refused
from rota.wire.conn import Conn, RedisPyConn, hash_pairs, hot_path
from rota.wire.redispy import Redis, ReplyError, wrong_type

__all__ = ["Resharded", "Shard"]


class Resharded(Exception):
    """An enqueue refused by its shard: the producer routes by another generation of
    the namespace's shard record than the shard's copy (see
    :mod:`rota.protocol.reshard`). It reads the record again and sends anew."""


class Shard(ShardOperations):
    """One hash tag's handle, and its one-shard reads and writes (see the module)."""

    def __init__(self, redis: Redis, keys: Keys, total: int, *, owns_redis: bool = False) -> None:
        self.redis = redis
        self.keys = keys
        #: Its place among the namespace's shards, and how many the namespace spans.
        self.index, self.total = keys.shard, total
        #: The generation of the shard record its client routes by, passed with every
        #: enqueue (see :mod:`rota.protocol.reshard`); None checks nothing.
        self.generation: int | None = 0
        self._owns_redis = owns_redis
        #: What the hot path sends through: a Link to the server of ``redis`` (the same
        #: credentials, TLS and timeouts), else the redis-py client itself.
        self.conn: Conn = hot_path(redis)
        #: How scripts are called on this server, by FCALL until it refuses functions:
        #: per shard, as one process may talk to servers that differ (Redis 6.2 and 7,
        #: users with other rights); the pool's fetcher connection shares it.
        self.script_mode = ScriptMode()
        #: Script calls on the redis-py client, and on the hot path's connection.
        self.scope = Scope(RedisPyConn(redis), keys.prefix, self.script_mode)
        self.hot = self.scope.on(self.conn)

    def place(self, index: int, total: int, generation: int) -> None:
        """Its place among the ``total`` shards its client serves, after the client read
        the namespace's shard record again (see :mod:`rota.client.routing`)."""
        self.index = self.keys.shard = index
        self.total, self.generation = total, generation

    async def close(self) -> None:
        """Close the link; and the redis-py client too when this shard owns it (a shard
        that shares another's leaves it to that one)."""
        await self.conn.aclose()
        if self._owns_redis:
            await self.redis.aclose()

    async def send(self, rows: Sequence[EnqueueRow], conn: Redis | None = None) -> list[Enqueued]:
        """Enqueue ``rows`` here (over ``conn`` when given): one by the ``enqueue``
        script, more (or one of a group) by ``enqueue_batch`` calls, all in one
        pipeline, in order."""
        scope = self.hot if conn is None else self.scope.on(RedisPyConn(conn))
        if len(rows) <= 1 and not (rows and (rows[0].group or rows[0].waits_group)):
            if not rows:
                return []
            try:
                job_id, created = await calls.enqueue(scope, rows[0], self.generation)
            except ReplyError as exc:
                raise _enqueue_error(exc, "the job was not enqueued", 0) from exc
            return [Enqueued(job_id, rows[0].name, created)]
        jobs, failed = await calls.enqueue_batch(scope, list(rows), self.generation)
        if failed is not None:  # every call is atomic: all of its jobs or none
            what = f"{len(jobs)} of {len(rows)} jobs of the batch were written"
            raise _enqueue_error(failed, what, len(jobs)) from failed
        return [Enqueued(i, row.name, c) for (i, c), row in zip(jobs, rows, strict=True)]

    # -- one job -----------------------------------------------------------------------

    async def job(self, job_id: str) -> JobRecord | None:
        try:
            h = await self.redis.hgetall(self.keys.job(job_id))
        except ReplyError as exc:
            if wrong_type(exc):  # the key is not a hash: not a job
                return None
            raise
        return JobRecord.from_hash(job_id, h) if h else None

    async def stored(self, job_id: str, field: Literal["args", "result"]) -> bytes | None:
        try:
            name, text = await self.redis.hmget(self.keys.job(job_id), ["name", field])
        except ReplyError as exc:
            if wrong_type(exc):  # the key is not a hash: not a job
                return None
            raise
        if name is None:
            return None
        return text.encode() if isinstance(text, str) else (text or b"")

    async def job_log(self, job_id: str) -> list[str]:
        return [
            reply_text(line) for line in await self.redis.lrange(self.keys.joblog(job_id), 0, -1)
        ]

    async def wait(self, job_id: str, timeout: float | None) -> Any:  # noqa: ASYNC109
        with anyio.fail_after(timeout):
            async with self.redis.pubsub(ignore_subscribe_messages=True) as pubsub:
                await pubsub.subscribe(self.keys.done(job_id))
                answer = await calls.wait(self.scope, job_id)
                if not answer:
                    raise JobNotFound(job_id)
                state, result, error, reason = (field_text(v) for v in answer)
                while state not in ("complete", "dead", "aborted"):
                    message = await pubsub.get_message(timeout=None)
                    if message is None or message["type"] != "message":
                        continue
                    state, _, result = reply_text(message["data"]).partition("\n")
                    if state != "complete":
                        record = await self.job(job_id)
                        error = record.error if record else None
                        reason = record.reason if record else state
        if state == "complete":
            return msgspec.json.decode(result) if result else None
        raise JobFailed(job_id, state, reason, error)

    async def abort(self, job_id: str, keep: float) -> str:
        return await calls.abort(self.scope, job_id, int(keep * 1000))

    # -- a job's ties --------------------------------------------------------------------

    async def related(self, ids: Sequence[str]) -> list[Related]:
        """Each job's name and state, in one round trip."""
        jobs = [self.keys.job(i) for i in ids]
        rows = await self.piped(lambda p: [p.hmget(j, *RELATED_FIELDS) for j in jobs], errors=False)
        return [read_related(i, row) for i, row in zip(ids, rows, strict=True)]

    async def group_progress(self, group_id: str) -> GroupProgress:
        raw = await self.redis.hmget(self.keys.group(group_id), GroupProgress.FIELDS)
        progress = GroupProgress.read(group_id, raw)
        if progress is None:
            raise JobNotFound(f"no group {group_id!r} (never enqueued, or expired)")
        return progress

    async def group_members(self, group_id: str, offset: int, count: int) -> list[str]:
        raw = await self.redis.lrange(self.keys.group_members(group_id), offset, offset + count - 1)
        return [reply_text(r) for r in raw]

    async def dependency_results(self, job_id: str) -> dict[str, Any]:
        """The results of the jobs ``job_id`` waited for, by id: its parents' (copied into
        its record as each completed) in the order of ``after``, then, for a group's
        callback, the members' in the order they were enqueued. What a worker reads
        before the job's handler runs: on the hot path's connection, no pool checkout."""
        reply = await self.conn.execute_command("HGETALL", self.keys.job(job_id))
        raw = {reply_text(k): v for k, v in hash_pairs(reply)}
        out = {
            p: decoded(raw["r:" + p])
            for p in reply_text(raw.get("after", b"")).split()
            if "r:" + p in raw
        }
        out.update({k[2:]: decoded(v) for k, v in raw.items() if k.startswith("r:")})
        gid = raw.get("waits_group")
        if gid:
            k, g = self.keys, reply_text(gid)
            read = lambda p: (p.lrange(k.group_members(g), 0, -1), p.hgetall(k.group_results(g)))  # noqa: E731
            order, results = await self.piped(read)
            members = {reply_text(k): v for k, v in results.items()}
            out.update(
                {
                    reply_text(m): decoded(members[reply_text(m)])
                    for m in order
                    if reply_text(m) in members
                }
            )
        return out

    async def children(self, job_id: str) -> list[str]:
        return sorted(reply_text(m) for m in await self.redis.smembers(self.keys.children(job_id)))


def _enqueue_error(exc: BaseException, what: str, written: int) -> BaseException:
    """What an enqueue raises for an error reply: a parent that does not exist is
    :class:`~rota.JobNotFound`, a refusal :class:`~rota.RedisRefused`."""
    text = str(exc)
    if text.startswith(RESHARDED + " "):
        return Resharded(text.split(" script:", 1)[0])
    if text.startswith("NOPARENT "):
        return JobNotFound(text.removeprefix("NOPARENT ").split(" script:", 1)[0])
    if text.startswith("GROUPMISMATCH "):
        return ValueError(text.removeprefix("GROUPMISMATCH ").split(" script:", 1)[0])
    return refused(exc, what, written) or exc
