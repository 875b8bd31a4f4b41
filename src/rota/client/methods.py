"""The public methods of the client's objects, made as they are promised.

Every public coroutine method of :class:`~rota.client.client.Client`, of
:class:`~rota.client.admin.Admin` and of the admin's parts raises rota's errors, not
redis-py's (:func:`rota.redis.outage.guarded`): :func:`guard_methods` is the one place
they change. The operator's methods that Client had before :class:`Admin` stay on it one
release, as :func:`moved` aliases that warn and call ``client.admin``; a part's method
renamed keeps its old name one release too (:func:`renamed`).
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from typing import Any

from rota.redis.outage import guarded

__all__ = ["MOVED", "guard_methods", "moved", "renamed"]

#: The operator's methods documented on Client before :class:`Admin`: kept one release.
MOVED = [
    "pause",
    "resume",
    "set_limit",
    "set_rate",
    "queues",
    "page",
    "retry",
    "delete",
    "clear_queue",
    "stats",
    "pools",
    "running",
]


def moved(name: str) -> Callable[..., Any]:
    """``Client.<name>``: a warning, then ``client.admin.<name>``."""
    return _alias(name, f"Client.{name}", f"client.admin.{name}", lambda self: self.admin, name)


def renamed(part: str, old: str, new: str) -> Callable[..., Any]:
    """``<part>.<old>`` of an operator's part (``client.admin.fair``, ...): a warning,
    then ``<part>.<new>``, the name it has now."""
    return _alias(old, f"{part}.{old}", f"{part}.{new}", lambda self: self, new)


def _alias(
    name: str, was: str, now: str, owner: Callable[[Any], Any], method: str
) -> Callable[..., Any]:
    """A method ``name`` kept one release: it warns that ``was`` is deprecated, then
    calls ``method`` of ``owner(self)``."""

    async def alias(self: Any, *args: Any, **kwargs: Any) -> Any:
        warnings.warn(f"{was} is deprecated: use {now}", DeprecationWarning, stacklevel=2)
        return await getattr(owner(self), method)(*args, **kwargs)

    alias.__name__ = alias.__qualname__ = name
    alias.__doc__ = f"Deprecated: ``{now}``."
    return alias


def guard_methods(cls: type) -> None:
    """Every public coroutine method of ``cls`` raises rota's errors, not redis-py's."""
    for name, method in inspect.getmembers(cls, inspect.iscoroutinefunction):
        if not name.startswith("_"):
            setattr(cls, name, guarded(method))
