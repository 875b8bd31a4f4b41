"""The producer's side after an enqueue: read a job, its log lines, wait for its result,
abort it. :class:`Reads` is a base of :class:`rota.Client`, which provides the
connection (``redis``) and the key names (``keys``).
"""

from __future__ import annotations

from typing import Any, Literal

import anyio
import msgspec

from rota.errors import JobFailed, JobNotFound
from rota.protocol import calls
from rota.protocol.job import JobRecord, field_text, reply_text
from rota.scripted import Scripted
from rota.wire.redispy import ReplyError, wrong_type

__all__ = ["Reads"]


class Reads(Scripted):
    async def job(self, job_id: str) -> JobRecord | None:
        """The job's record, or None when there is none (never enqueued, or expired)."""
        try:
            h = await self.redis.hgetall(self.keys.job(job_id))
        except ReplyError as exc:
            if wrong_type(exc):  # the key is not a hash: not a job
                return None
            raise
        return JobRecord.from_hash(job_id, h) if h else None

    async def stored(self, job_id: str, field: Literal["args", "result"]) -> bytes | None:
        """A job's args or result as stored (JSON text, byte for byte), ``b""`` for a
        job without one; None when there is no such job."""
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
        """The lines the job's handler kept with ``ctx.job_log`` (the last 100), oldest
        first."""
        return [
            reply_text(line) for line in await self.redis.lrange(self.keys.joblog(job_id), 0, -1)
        ]

    async def wait(self, job_id: str, timeout: float | None = None) -> Any:  # noqa: ASYNC109
        """Wait until the job finishes and return its result (None if it returned none).

        No polling: the finish is announced on the job's channel. Raises
        :class:`JobFailed` when it ends dead or aborted, :class:`JobNotFound` when there
        is no such job, and ``TimeoutError`` after ``timeout`` seconds. A job whose handler
        keeps no result (``keep_result=0``) and that finished before the call is gone:
        that is :class:`JobNotFound` too.
        """
        try:
            return await self._wait(job_id, timeout)
        except TimeoutError as exc:
            if str(exc):
                raise
            raise TimeoutError(
                f"job {job_id} did not finish within {timeout} s (it still runs or waits;"
                " wait again, or read it with client.job)"
            ) from None

    async def _wait(self, job_id: str, timeout: float | None) -> Any:  # noqa: ASYNC109
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

    async def abort(self, job_id: str, *, keep: float = 3600.0) -> str:
        """Abort a job: a waiting one is removed now, a running one is cancelled by its
        pool within milliseconds. Returns the state the job was in ('missing' if none);
        a job already complete, dead or aborted is left as it is. ``keep``: seconds the
        aborted record stays readable."""
        return await calls.abort(self.scope, job_id, int(keep * 1000))
