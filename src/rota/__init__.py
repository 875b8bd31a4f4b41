"""rota: a job-queue daemon on Redis.

Producers use :class:`Client`; workers register handlers on a :class:`WorkerPool`.
The worker side is imported on first use, so a producer, the CLI or the web UI that
imports ``rota`` does not load it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rota.client import Client, Job, JobSpec, Page, QueueInfo, RunningJob
from rota.config import Settings, load_settings
from rota.errors import (
    Abort,
    ConfigError,
    InvalidArgs,
    JobFailed,
    JobNotFound,
    NotReplicated,
    PayloadTooLarge,
    RedisRefused,
    Retry,
    RotaError,
)
from rota.operations import LivePool
from rota.protocol.job import JobRecord, Reason, State
from rota.workflow import Group, GroupProgress

if TYPE_CHECKING:
    from rota.worker.context import JobContext
    from rota.worker.pool import WorkerPool

__version__ = "0.1.0"

__all__ = [
    "Abort",
    "Client",
    "ConfigError",
    "Group",
    "GroupProgress",
    "InvalidArgs",
    "Job",
    "JobContext",
    "JobFailed",
    "JobNotFound",
    "JobRecord",
    "JobSpec",
    "LivePool",
    "NotReplicated",
    "Page",
    "PayloadTooLarge",
    "QueueInfo",
    "Reason",
    "RedisRefused",
    "Retry",
    "RotaError",
    "RunningJob",
    "Settings",
    "State",
    "WorkerPool",
    "__version__",
    "load_settings",
]


def __getattr__(name: str) -> Any:
    if name == "WorkerPool":
        from rota.worker.pool import WorkerPool

        return WorkerPool
    if name == "JobContext":
        from rota.worker.context import JobContext

        return JobContext
    raise AttributeError(f"module 'rota' has no attribute {name!r}")
