"""Helpers for the pool's task groups and cancel scopes (see rota.worker.run)."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator

import anyio
from anyio.abc import TaskGroup

__all__ = ["until_forced", "unwrapped"]


async def until_forced(
    force: anyio.Event, limit: float, step: Callable[[], Awaitable[object]]
) -> bool:
    """Run ``step`` for at most ``limit`` seconds, or until ``force`` (a second signal)
    is set; whether the time ran out."""
    with anyio.move_on_after(limit) as scope:
        async with anyio.create_task_group() as wait:
            wait.start_soon(_cancel_on, force, wait)
            await step()
            wait.cancel_scope.cancel()
    return scope.cancelled_caught


async def _cancel_on(event: anyio.Event, tg: TaskGroup) -> None:
    await event.wait()
    tg.cancel_scope.cancel()


@contextlib.contextmanager
def unwrapped() -> Iterator[None]:
    """An error of one task comes out as itself, not wrapped in a group the caller did
    not ask for."""
    try:
        yield
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
