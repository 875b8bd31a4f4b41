"""What the operator asked of this pool through Redis (quiet, stop, resume), and how far
the pool got: the state its heartbeat writes into its snapshot.

The command is the pool's field of ``Keys.pool_commands`` (see
:mod:`rota.client.pools`), which the heartbeat of the pool's first shard reads at each
beat, before it writes the snapshot, so that the beat that learns a command also
acknowledges it. A message on ``Keys.pool_commands_told`` (heard by the abort listener)
brings that beat forward:

- ``quiet``: the fetchers begin no fetch, and one waiting on its wake lists is nudged
  out of the wait (the fetch behind that wait still runs: it was sent before the
  command was known). Jobs leased already (running, or waiting for a free worker) run
  to their end. The pool says ``quiet`` once no fetch of its is under way (``quieting``
  until then), and keeps beating: its leases stay extended.
- no field while quiet: the fetchers go on, at once.
- ``stop``: the run's block is ended (the block of ``WorkerPool.running``, which
  ``WorkerPool.run`` and the daemon wait in), and the pool drains as on SIGTERM: it says
  ``stopping`` until its heartbeat is removed. A stop is final.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Final

import anyio
import structlog

from rota.worker.rounds import FETCH, rounds_of

__all__ = ["QUIET_WAIT", "Control"]

log = structlog.get_logger("rota.pool")

#: The most seconds the beat that learns a quiet waits for the fetches under way to end
#: before it writes the snapshot (said ``quieting`` if one has not: its wait on the wake
#: lists could not be ended, without CLIENT UNBLOCK, and ends by its own timeout).
QUIET_WAIT: Final = 1.0


class Control:
    """One pool's command and state, shared by its shards' runtimes."""

    def __init__(self) -> None:
        self.quiet = False
        self.stop_asked = False
        #: Ends the run's block: set by the run while its block runs.
        self.end_block: Callable[[], None] | None = None
        self._resumed = anyio.Event()
        self._resumed.set()
        self._leasing = 0  # fetches under way (a wait on the wake lists included)
        self._no_lease = anyio.Event()
        self._told = anyio.Event()
        #: Called when a message says the namespace's shard record changed (see
        #: rota.worker.follow).
        self.on_reshard: Callable[[], None] = lambda: None

    def told(self) -> None:
        """A message said this pool's command changed: the heartbeat beats now."""
        self._told.set()

    async def until_told(self, seconds: float) -> None:
        """Wait ``seconds`` (the heartbeat's interval), or until :meth:`told`."""
        with anyio.move_on_after(seconds):
            await self._told.wait()
        self._told = anyio.Event()

    def state(self, stopping: bool) -> str:
        """What the snapshot says (one of rota.protocol.snapshot.POOL_STATES)."""
        if stopping or self.stop_asked:
            return "stopping"
        if self.quiet:
            return "quieting" if self._leasing else "quiet"
        return "running"

    async def obey(self, command: str | None, pool_id: str, beat: float) -> None:
        """Act on the pool's field as read (None: none): see the module. ``beat``: the
        heartbeat interval, which a wait for the fetches under way stays within."""
        if command == "stop":
            if not self.stop_asked:
                self.stop_asked = True
                log.info("told to stop through Redis: draining", pool=pool_id)
            if self.end_block is not None:
                self.end_block()
        elif command == "quiet":
            if not self.quiet and not self.stop_asked:
                log.info("told to be quiet through Redis: fetching no more jobs", pool=pool_id)
                self.quiet = True
                self._resumed = anyio.Event()
            if self._leasing:
                self._no_lease = anyio.Event()
                rounds_of(pool_id).nudge(FETCH)  # a wait on the wake lists ends now
                with anyio.move_on_after(min(QUIET_WAIT, beat / 2)):
                    await self._no_lease.wait()
        elif self.quiet:
            log.info("resumed through Redis: fetching again", pool=pool_id)
            self.quiet = False
            self._resumed.set()

    async def parked(self) -> bool:
        """Before a fetch: wait while the pool is quiet. Whether it waited (what it
        knew of its room and its wake lists is old then)."""
        if not self.quiet:
            return False
        await self._resumed.wait()
        return True

    @contextlib.contextmanager
    def leasing(self) -> Iterator[None]:
        """Around one fetch (begun when the pool was not quiet): a quiet pool says so
        once none is under way."""
        self._leasing += 1
        try:
            yield
        finally:
            self._leasing -= 1
            if not self._leasing:
                self._no_lease.set()
