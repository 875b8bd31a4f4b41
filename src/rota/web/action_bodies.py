"""The bodies the API answers its actions with: what changed, and how much."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

__all__ = [
    "Aborted",
    "Cleared",
    "CronState",
    "Deleted",
    "QueueLimit",
    "QueueRate",
    "QueueState",
    "Retried",
]


class QueueState(msgspec.Struct):
    name: str
    paused: bool


class QueueRate(msgspec.Struct):
    name: str
    rate: str | None


class QueueLimit(msgspec.Struct):
    name: str
    limit: int | None


class Cleared(msgspec.Struct):
    name: str
    deleted: int


class Retried(msgspec.Struct):
    retried: int


class Deleted(msgspec.Struct):
    deleted: int


class Aborted(msgspec.Struct):
    id: str
    was: Annotated[str, Meta(description="its state before")]


class CronState(msgspec.Struct):
    name: str
    enabled: bool
