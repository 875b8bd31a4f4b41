"""The pool's side of isolated handlers: a set of reusable child processes.

``@pool.job(isolated=True)`` runs a plain ``def`` handler in a child process
(:mod:`rota.worker.child`) instead of a thread: a CPU-bound handler no longer holds the
pool's interpreter lock, a timeout or an abort stops it, and a crash ends one attempt.
:class:`Children` starts ``child_processes`` of them when the pool starts (in the pool's
task group), hands each attempt to an idle one, and kills one whose attempt is cancelled
(SIGTERM, then SIGKILL after :data:`KILL_GRACE`): a timeout, an abort or the end of the
pool's ``grace`` ends the attempt with its reason as it does for any handler. A child that
dies under its attempt (a signal, ``os._exit``, the memory limit) ends it with
:class:`Crashed` (reason ``crashed``). Either way a fresh child takes the dead one's place.

Everything crosses the pipes as JSON lines; nothing is pickled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import msgspec
import structlog
from anyio.abc import Process, TaskGroup, TaskStatus
from anyio.streams.buffered import BufferedByteReceiveStream

from rota.errors import Abort, ConfigError, Retry
from rota.protocol.codec import encode_json
from rota.protocol.rows import Fetched

if TYPE_CHECKING:
    from rota.worker.registry import Handler

__all__ = ["KILL_GRACE", "ChildFailed", "Children", "Crashed", "JobContext", "check_target"]

log = structlog.get_logger("rota.pool")

#: Seconds a child has to end after SIGTERM before it is sent SIGKILL.
KILL_GRACE = 0.5
#: The longest line a child may send (a result as large as Redis's largest string).
_MAX_LINE = 600 * 1024 * 1024
_decoder = msgspec.json.Decoder()
#: The log levels a child's line may name (any other is written at info).
_LEVELS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception"})


class JobContext(Protocol):
    """What is read here of the attempt's context (rota.worker.context.JobContext,
    which imports the runtime, which imports this module)."""

    id: str
    name: str
    attempt: int
    token: str
    enqueued_at: float
    started_at: float
    parent_results: Mapping[str, Any]

    async def progress(self, percent: float, message: str = "") -> None: ...
    async def checkin(self, message: str = "") -> bool: ...
    async def job_log(self, message: str) -> None: ...


class Crashed(Exception):
    """The child died under its attempt: reason ``crashed``."""


class ChildFailed(Exception):
    """The handler raised in its child: ``kind`` is its exception's type name and
    ``trace`` the child's traceback, as the job's log keeps it."""

    def __init__(self, kind: str, message: str, trace: str) -> None:
        super().__init__(message)
        self.kind, self.trace = kind, trace


def check_target(handler: Handler) -> None:
    """At the pool's start: the handler is what its path names (a ConfigError if not)."""
    from rota.worker.child import resolve

    try:
        found = resolve(handler.target)
    except Exception as exc:
        raise ConfigError(
            f"job {handler.name!r}: isolated: {handler.target} cannot be imported: {exc}"
        ) from None
    if getattr(found, "__wrapped__", found) is not handler.func and found is not handler.func:
        raise ConfigError(
            f"job {handler.name!r}: isolated: {handler.target} names another object than"
            " the registered handler"
        )


class _Child:
    """One child process and its two pipes."""

    def __init__(self, proc: Process) -> None:
        self.proc = proc
        assert proc.stdout is not None and proc.stdin is not None
        self.lines = BufferedByteReceiveStream(proc.stdout)
        self.pid = proc.pid

    async def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        await self.proc.stdin.send(encode_json(message) + b"\n")

    async def receive(self) -> Any:
        """The next message, or None when the child has gone. A line that is no message
        (not JSON, no ``t``, past :data:`_MAX_LINE`) is :class:`Crashed`: what follows
        it on the pipe cannot be trusted, so the child is killed with its attempt."""
        try:
            line = await self.lines.receive_until(b"\n", _MAX_LINE)
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
            return None
        except anyio.DelimiterNotFound:
            raise Crashed(f"child process {self.pid} sent a line past {_MAX_LINE} bytes") from None
        try:
            msg = _decoder.decode(line)
        except msgspec.DecodeError:
            msg = None
        if not isinstance(msg, dict) or not isinstance(msg.get("t"), str):
            raise Crashed(f"child process {self.pid} sent a malformed line: {line[:80]!r}")
        return msg

    async def death(self) -> str:
        """How the child ended, once it has."""
        code = await self.proc.wait()
        if code < 0:
            return f"child process {self.pid} killed by {signal.Signals(-code).name}"
        return f"child process {self.pid} exited with code {code}"

    async def kill(self) -> None:
        """SIGTERM, then SIGKILL after :data:`KILL_GRACE`; the pipes closed."""
        with anyio.CancelScope(shield=True):
            if self.proc.returncode is None:
                try:
                    self.proc.terminate()
                    with anyio.move_on_after(KILL_GRACE):
                        await self.proc.wait()
                    if self.proc.returncode is None:
                        self.proc.kill()
                except ProcessLookupError:
                    pass
            await self.proc.aclose()


class Children:
    """``size`` reusable child processes; an attempt waits for an idle one."""

    def __init__(self, size: int, memory_mb: int) -> None:
        self.size = size or os.cpu_count() or 1
        self.memory_mb = memory_mb
        self._idle: list[_Child] = []
        self._busy: dict[int, _Child] = {}
        self._free = anyio.Semaphore(self.size)
        self._tg: TaskGroup | None = None
        self._stopping = False
        #: The isolated jobs the pool holds (leased, not ended): the fetcher leases no
        #: more than :meth:`room` leaves, so that jobs waiting for a child never take
        #: every worker from the other handlers' jobs.
        self.held = 0
        #: Room taken by fetches under way, each as many jobs as its batch holds (every
        #: one could be isolated): a pool over several shards fetches from each at once,
        #: and each leased the whole room when it went by ``held`` alone.
        self.taking = 0
        #: Called when room frees up again (the fetchers' nudges: see rota.worker.run).
        self.on_room: list[Callable[[], None]] = []

    def room(self) -> int:
        """How many more isolated jobs the pool may lease: a child's worth each, and as
        many again waiting, so that a child that ends a job finds the next one here."""
        return 2 * self.size - self.held - self.taking

    def take(self, count: int) -> None:
        """A fetch under way may lease up to ``count`` isolated jobs."""
        self.taking += count

    def leased(self, count: int, taken: int = 0) -> None:
        """A fetch that took ``taken`` of the room leased ``count`` isolated jobs: what
        it took and did not lease is free again, for a fetch it kept out."""
        full = self.room() <= 0
        self.held += count
        self.taking -= taken
        if full and self.room() > 0:
            for nudge in self.on_room:
                nudge()

    def ended(self) -> None:
        """An isolated job the pool held has ended (or gone back)."""
        self.held -= 1
        if self.room() == 1:  # it was full: a fetcher may wait on its wake lists
            for nudge in self.on_room:
                nudge()

    async def serve(self, stopping: anyio.Event, *, task_status: TaskStatus[None]) -> None:
        """Start the children, tell them when the pool stops (their ``ctx.checkin``
        returns True), and kill them all when the pool ends (this task's cancellation)."""
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                for _ in range(self.size):
                    tg.start_soon(self._replace)
                task_status.started()
                await stopping.wait()
                self._stopping = True
                for child in list(self._busy.values()):
                    with (
                        anyio.move_on_after(1),
                        contextlib.suppress(anyio.BrokenResourceError, OSError),
                    ):
                        await child.send({"t": "stopping"})
                await anyio.sleep_forever()
        finally:
            self._tg = None
            with anyio.CancelScope(shield=True):
                for child in [*self._idle, *self._busy.values()]:
                    await child.kill()
                self._idle.clear()

    async def _spawn(self) -> _Child:
        """A new child, once it says it is ready."""
        env = dict(os.environ)
        # The child imports handlers as this process does: from the same paths.
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        proc = await anyio.open_process(
            [sys.executable, "-m", "rota.worker.child", str(self.memory_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            env=env,
            # The pool's session, and a process group of the child's own (the child sets
            # it first thing: rota.worker.child): a terminal's Ctrl-C (SIGINT to the
            # foreground process group) reaches the pool, which drains its children, not
            # the children themselves. Not a session of its own: where the kernel shares
            # CPU by session (autogroup), each child's session weighed as much as the
            # pool's, and the pool's event loop waited behind CPU-bound children
            # (bench.isolation, one run: async p99 start 209-264 ms in sessions of their
            # own, 6-49 ms in the pool's).
        )
        child = _Child(proc)
        try:
            ready = await child.receive()
        except BaseException:  # cancelled while it starts: no child left behind
            await child.kill()
            raise
        if ready is None:
            why = await child.death()
            await child.kill()
            raise Crashed(f"{why} before it was ready")
        return child

    async def _replace(self) -> None:
        """One more idle child (at the start, and in place of one that died)."""
        try:
            child = await self._spawn()
        except Exception as exc:  # the next attempt starts one of its own
            log.warning("child process not started", error=str(exc))
            return
        await self._keep(child)

    async def _keep(self, child: _Child) -> None:
        """Keep ``child`` for the next attempt, unless the pool has its ``size`` of them
        (one started on demand while a replacement was starting too)."""
        if len(self._idle) + len(self._busy) < self.size:
            self._idle.append(child)
        else:
            await child.kill()

    async def _take(self) -> _Child:
        while self._idle:
            child = self._idle.pop()
            if child.proc.returncode is None:
                return child
            await child.kill()  # died while idle: a fresh one instead
        return await self._spawn()

    def _soon_replace(self) -> None:
        if self._tg is not None and len(self._idle) + len(self._busy) < self.size:
            self._tg.start_soon(self._replace)

    async def run(self, handler: Handler, ctx: JobContext, job: Fetched) -> Any:
        """Run ``handler`` for the attempt ``ctx`` in an idle child: its result, or
        what it raised (:class:`ChildFailed`, ``Retry``, ``Abort``), or
        :class:`Crashed`. A cancellation (timeout, abort, shutdown) kills the child."""
        async with self._free:
            child = await self._take()
            self._busy[child.pid] = child
            keep = False
            try:
                result, keep = await self._attempt(child, handler, ctx, job)
                return result
            finally:
                del self._busy[child.pid]
                if keep and child.proc.returncode is None:
                    await self._keep(child)
                elif self._tg is not None:  # the outcome does not wait for its end
                    self._tg.start_soon(child.kill)
                    self._soon_replace()
                else:
                    await child.kill()

    async def _attempt(
        self, child: _Child, handler: Handler, ctx: JobContext, job: Fetched
    ) -> tuple[Any, bool]:
        fields = {
            "id": ctx.id,
            "name": ctx.name,
            "args": msgspec.Raw(job.args),
            "attempt": ctx.attempt,
            "token": ctx.token,
            "enqueued_at": ctx.enqueued_at,
            "started_at": ctx.started_at,
            "parent_results": dict(ctx.parent_results),
        }
        request = {"t": "run", "target": handler.target, "name": handler.name, "ctx": fields}
        try:
            await child.send({**request, "stopping": self._stopping})
        except (anyio.BrokenResourceError, OSError):
            raise Crashed(await child.death()) from None
        while True:
            msg = await child.receive()
            if msg is None:
                raise Crashed(await child.death())
            kind = msg["t"]
            if kind == "done":
                return msg["result"], True
            if kind == "error":
                raise ChildFailed(msg["type"], msg["message"], msg["traceback"])
            if kind == "retry":
                raise Retry(msg["delay"], msg["message"])
            if kind == "abort":
                raise Abort(msg["message"])
            if kind == "crash":
                await child.death()
                raise Crashed(f"{msg['message']} (child process {child.pid})")
            await _relay(ctx, child.pid, msg)


async def _relay(ctx: JobContext, pid: int, msg: Any) -> None:
    """Carry out what the child asked of its ``ctx``, or write its log line."""
    kind = msg["t"]
    try:
        if kind == "log":
            logger = structlog.get_logger(msg["logger"])
            fields = {**msg["fields"], "job_id": ctx.id, "job_name": ctx.name, "child_pid": pid}
            level = msg["level"]  # the child's word: only a logging method is called
            method = getattr(logger, level) if level in _LEVELS else logger.info
            method(msg["event"], **fields)
        elif kind == "progress":
            await ctx.progress(msg["percent"], msg["message"])
        elif kind == "checkin":
            await ctx.checkin(msg["message"])
        elif kind == "joblog":
            await ctx.job_log(msg["message"])
    except Exception as exc:  # the child's job goes on, as a thread's would not know
        log.warning("child's request failed", request=kind, job_id=ctx.id, error=str(exc))
