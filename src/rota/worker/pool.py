"""``WorkerPool``: register handlers, then run them against Redis.

A :class:`WorkerPool` holds the handlers, their middleware, the lifespan and the
periodic jobs; running it builds the state its tasks share
(:class:`~rota.worker.runtime.PoolRuntime`) and hands it to a
:class:`~rota.worker.run.PoolRun`, which starts the tasks and drains them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from typing import Any, TypeVar, overload

import anyio
import structlog

from rota.client import Client
from rota.config import Settings, load_settings, setting_sources
from rota.errors import LIFESPAN_NOTE, ConfigError
from rota.logging import JobLine
from rota.protocol.bounds import SETTINGS as SETTINGS_BOUNDS
from rota.protocol.bounds import first_wrong
from rota.protocol.job import validate_name
from rota.redis.outage import rota_error
from rota.wire.redispy import one_quick_retry
from rota.worker.cron import Cron
from rota.worker.registry import Backoff, Handler, Middleware, Periodic, default_backoff
from rota.worker.run import PoolRun
from rota.worker.runtime import PoolRuntime
from rota.worker.threads import HandlerThreads

__all__ = ["WorkerPool"]

log = structlog.get_logger("rota.pool")

F = TypeVar("F", bound=Callable[..., Any])
Lifespan = Callable[[], AsyncGenerator[Mapping[str, Any], None]]


class WorkerPool:
    """Handlers of some job names, and how to run them.

    >>> pool = WorkerPool(concurrency=50)
    >>> @pool.job(priority=4, max_fails=4, timeout=30)
    ... async def send_email(ctx, to: str) -> None: ...
    >>> await pool.run("redis://localhost:6379/0")
    """

    def __init__(
        self,
        namespace: str | None = None,
        concurrency: int | None = None,
        *,
        settings: Settings | None = None,
        **overrides: Any,
    ) -> None:
        self._settings = settings
        self._overrides = {"namespace": namespace, "concurrency": concurrency, **overrides}
        wrong = first_wrong(self.code_settings, SETTINGS_BOUNDS)  # here, not at the run
        if wrong is not None:
            raise ConfigError(f"{wrong} (from code)")
        if settings is not None:
            self._settings = _by_code(
                settings, **{k: v for k, v in self._overrides.items() if v is not None}
            )
        self.handlers: dict[str, Handler] = {}
        self._middleware: list[Middleware] = []
        self._lifespan: Lifespan | None = None
        self.periodic_jobs: list[Periodic] = []
        self.runtime: PoolRuntime | None = None
        #: The run's tasks while the pool runs (which shards it serves: ``serving``).
        self.current_run: PoolRun | None = None
        #: Writes each attempt's summary line (``rota.logging.configure_logging``
        #: returns one for JSON output; the daemon sets it). None: through structlog.
        self.job_line: JobLine | None = None
        #: The threads of its plain ``def`` handlers, which may outlive a run (a thread
        #: cannot be stopped): the daemon exits without waiting for those still running.
        self.threads = HandlerThreads()
        #: Whether the last run ended because an operator told the pool to stop through
        #: Redis (see rota.worker.control): ``rota worker`` then exits with STOPPED.
        self.told_to_stop = False

    @property
    def settings(self) -> Settings:
        """Settings given, else loaded when first needed: the values passed to the
        constructor over the defaults, under the config file and ``ROTA_*`` variables."""
        if self._settings is None:
            self._settings = load_settings(base=self.code_settings)
        return self._settings

    @property
    def code_settings(self) -> dict[str, Any]:
        """The settings the application passed to the constructor."""
        return {k: v for k, v in self._overrides.items() if v is not None}

    def configure(self, settings: Settings) -> None:
        """Use these settings (the daemon builds them from every source)."""
        self._settings = settings

    # -- registration ---------------------------------------------------------------

    @overload
    def job(self, func: F, /) -> F: ...
    @overload
    def job(
        self,
        *,
        name: str | None = ...,
        priority: int = ...,
        max_fails: int = ...,
        skip_dead: bool = ...,
        timeout: float | None = ...,
        max_concurrency: int | None = ...,
        rate: str | None = ...,
        backoff: Backoff = ...,
        keep_result: float | None = ...,
        middleware: tuple[Middleware, ...] = ...,
        idle_timeout: float | None = ...,
        expires_in: float | None = ...,
        isolated: bool = ...,
    ) -> Callable[[F], F]: ...

    def job(self, func: Any = None, /, **options: Any) -> Any:  # type: ignore[misc]
        """Register a handler for the job name ``name`` (default: the function's name).

        ``priority`` (1-100000) weighs its queue in the round robin; ``max_fails``
        attempts before the job is dead (or dropped with ``skip_dead``); ``timeout`` in
        seconds per attempt; ``max_concurrency`` across every pool; ``rate`` how many
        start per second, minute or hour across every pool (``"100/s"``, ``"30/min"``,
        ``"2/hour"``); ``backoff(n)`` seconds before retry n; ``keep_result`` seconds (0
        deletes a complete job; set here, it also applies to the jobs that return None,
        which the pool otherwise keeps ``keep_none`` seconds); ``idle_timeout`` seconds
        an attempt may go without ``ctx.checkin`` or ``ctx.progress`` before it is
        cancelled as ``idle`` and retried like a timed-out one; ``expires_in`` seconds
        from its enqueue after which a job that gives no expiry of its own never starts
        (it ends dead, reason ``expired``); ``isolated`` runs a plain ``def`` handler
        in one of the pool's child processes instead of a thread (``child_processes``;
        see rota.worker.isolation): a module-level function, imported by the child.
        """

        def register(f: F) -> F:
            name = validate_name(options.pop("name", None) or f.__name__)
            if name in self.handlers:
                raise ValueError(f"job name {name!r} is registered twice")
            options.setdefault("backoff", default_backoff)
            self.handlers[name] = Handler(name=name, func=f, **options)
            return f

        return register(func) if func is not None else register

    def periodic(
        self,
        schedule: str,
        *,
        name: str | None = None,
        tz: str | None = None,
        args: tuple[Any, ...] = (),
        kwargs: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> Callable[[F], F]:
        """Register a handler (like ``job``) and enqueue it on a cron schedule, e.g.
        ``"*/5 * * * *"`` (UTC unless ``tz``; six fields for seconds). Each fire time is
        enqueued once, by whichever pool claims it; times when no pool runs are skipped."""

        def register(f: F) -> F:
            job_name = name or f.__name__
            try:
                cron = Cron(schedule, tz)
            except ValueError as exc:
                raise ValueError(f"periodic job {job_name!r}: {exc}") from None
            self.job(name=job_name, **options)(f)
            self.periodic_jobs.append(Periodic(job_name, cron, tuple(args), dict(kwargs or {})))
            return f

        return register

    def middleware(self, mw: Middleware) -> Middleware:
        """Wrap every handler: ``async def mw(ctx, call_next): return await call_next()``.
        The first registered is the outermost. Usable as a decorator."""
        self._middleware.append(mw)
        return mw

    def lifespan(self, func: Lifespan) -> Lifespan:
        """Register an async generator that yields the pool's shared state (a mapping),
        available to handlers as ``ctx.state``; it resumes when the pool stops."""
        self._lifespan = func
        return func

    # -- running --------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def running(
        self,
        redis_url: str | None = None,
        *,
        client: Client | None = None,
        force: anyio.Event | None = None,
    ) -> AsyncIterator[PoolRuntime]:
        """Run the pool while the block runs; leaving it drains the pool (see ``stop``).
        A Redis that refuses the pool's start for good (a wrong password, a missing
        permission) raises rota's error (:class:`~rota.RedisRefused`), redis-py's its
        ``__cause__``; one that is away or says "not now" is waited for."""
        if not self.handlers:
            raise RuntimeError("the pool has no handlers: register some with @pool.job")
        settings = self.settings
        own_client = client is None
        if client is None:
            if redis_url is not None:
                settings = _by_code(settings, redis_url=redis_url)
            # The heartbeat must get through within milliseconds of Redis answering again.
            client = Client.from_settings(settings, retry=one_quick_retry())
        starting = False  # while the pool's own start runs: its errors become rota's
        try:
            async with contextlib.AsyncExitStack() as stack:
                state: Mapping[str, Any] = {}
                if self._lifespan is not None:
                    state = await stack.enter_async_context(_noted(self._lifespan))
                rt = self._runtime(settings, client, state, force or anyio.Event())
                run = PoolRun(rt, self.periodic_jobs)
                self.runtime, self.current_run = rt, run
                starting = True
                async with run.running():
                    starting = False
                    yield rt
                self.told_to_stop = rt.control.stop_asked
        except Exception as exc:
            # The lifespan's errors and the block's own reach the caller as they are.
            mine = rota_error(exc) if starting else exc
            if mine is exc:
                raise
            raise mine from exc
        finally:
            self.runtime = self.current_run = None
            if own_client:
                await client.close()

    def _runtime(
        self, settings: Settings, client: Client, state: Mapping[str, Any], force: anyio.Event
    ) -> PoolRuntime:
        """What the tasks of a run share: each handler wrapped in the pool's middleware."""
        handlers = {
            name: dataclasses.replace(h, middleware=(*self._middleware, *h.middleware))
            for name, h in self.handlers.items()
        }
        return PoolRuntime(
            settings=settings,
            client=client,
            shard=client.admin.shards[0],
            others=client.admin.shards[1:],
            handlers=handlers,
            state=state,
            force=force,
            job_line=self.job_line,
            threads=self.threads,
        )

    async def run(
        self, redis_url: str | None = None, *, shutdown: anyio.Event | None = None
    ) -> None:
        """Run until SIGTERM or SIGINT (or until ``shutdown`` is set, for tests and
        embedding); then drain and return. A second signal skips the wait for running
        jobs: those on the event loop are put back at once, those whose handler thread
        still runs are left to their leases (the threads run on: see
        rota.worker.threads). Signal handlers only set flags; the draining happens here."""
        stop = shutdown or anyio.Event()
        force = anyio.Event()
        started = anyio.Event()
        try:
            async with anyio.create_task_group() as tg:
                if shutdown is None:
                    tg.start_soon(_watch_signals, stop, force)
                with anyio.CancelScope() as starting:
                    # A stop while the pool still waits for Redis to start ends the wait.
                    tg.start_soon(_cancel_unless_started, stop, started, starting)
                    async with self.running(redis_url, force=force):
                        started.set()
                        await stop.wait()
                if starting.cancelled_caught:
                    log.info("stopped before Redis could be used: no job was taken")
                tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # A failure to start (a wrong password, say) comes out as itself, with its
            # own cause (redis-py's error behind rota's), not the group's.
            if len(group.exceptions) == 1:
                failure = group.exceptions[0]
                raise failure from failure.__cause__
            raise


async def _cancel_unless_started(
    stop: anyio.Event, started: anyio.Event, scope: anyio.CancelScope
) -> None:
    await stop.wait()
    if not started.is_set():
        scope.cancel()


async def _watch_signals(stop: anyio.Event, force: anyio.Event) -> None:
    """The first SIGTERM/SIGINT starts a graceful stop, a second one skips the wait."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            if stop.is_set():
                log.warning("second signal: not waiting for running jobs", signal=signum.name)
                force.set()
            else:
                log.info("signal received: draining", signal=signum.name)
                stop.set()


@contextlib.asynccontextmanager
async def _noted(lifespan: Lifespan) -> AsyncIterator[Mapping[str, Any]]:
    """The lifespan's state. What the lifespan itself raises, at its start or at its end,
    carries a note naming it (:func:`rota.errors.from_lifespan`): the application's own
    error (its own Redis away, say), which ``rota worker`` must not blame on rota's
    ``redis_url``; an error of the block that passes through it is left as it is."""
    note = f"{LIFESPAN_NOTE} {getattr(lifespan, '__qualname__', '')}"
    manager = contextlib.asynccontextmanager(lifespan)()
    try:
        state = await manager.__aenter__()
    except Exception as exc:
        exc.add_note(f"{note}, before the pool started")
        raise
    try:
        yield state
    except BaseException as exc:
        try:
            suppressed = await manager.__aexit__(type(exc), exc, exc.__traceback__)
        except Exception as own:
            if own is not exc:
                own.add_note(f"{note}, after the pool stopped")
            raise
        if not suppressed:
            raise
    else:
        try:
            await manager.__aexit__(None, None, None)
        except Exception as own:
            own.add_note(f"{note}, after the pool stopped")
            raise


def _by_code(settings: Settings, **changes: Any) -> Settings:
    """``settings`` with the values the application's code passed (``pool.run(url)``,
    ``WorkerPool(settings=..., namespace=...)``), which the pool's ``settings`` line
    tells as the code's."""
    changed = settings.replace(**changes)
    setting_sources(changed, dict.fromkeys(changes, "code"))
    return changed
