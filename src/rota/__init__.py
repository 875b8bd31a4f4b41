"""rota: a job-queue daemon on Redis.

Producers use :class:`Client`; workers register handlers on a :class:`WorkerPool`.
The worker side is imported on first use, so a producer, the CLI or the web UI that
imports ``rota`` does not load it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rota import errors
from rota.client import (
    Admin,
    Client,
    Enqueued,
    FairKeyInfo,
    FairKeyJobs,
    JobSpec,
    Page,
    QueueInfo,
    RunningJob,
    Shard,
)
from rota.client.debounce import Debounce
from rota.client.status import Bucket, CronEntry, Found, History, LivePool, PoolJob
from rota.client.workflow import Group, GroupProgress, Related
from rota.config import Settings, load_settings
from rota.errors import *  # noqa: F403 (the errors, re-exported: its __all__ joins this one)
from rota.protocol.job import JobRecord, Reason, State
from rota.version import __version__

if TYPE_CHECKING:
    from rota.worker.context import JobContext
    from rota.worker.pool import Lifespan, WorkerPool
    from rota.worker.registry import Middleware

__all__ = [  # noqa: RUF022 (grouped by use, as the comments say)
    "__version__",
    # -- producing and reading: the client and what it takes and returns
    "Client",
    "Enqueued",
    "Group",
    "GroupProgress",
    "JobRecord",
    "JobSpec",
    "Debounce",
    "Reason",
    "Related",
    "State",
    # -- operating: client.admin, its shards, and what its views of queues, pools and
    # history return
    "Admin",
    "Shard",
    "Bucket",
    "CronEntry",
    "Found",
    "History",
    "LivePool",
    "Page",
    "PoolJob",
    "QueueInfo",
    "FairKeyInfo",
    "FairKeyJobs",
    "RunningJob",
    # -- running jobs: the pool, a handler's context, middleware (loaded on first use)
    "JobContext",
    "Lifespan",
    "Middleware",
    "WorkerPool",
    # -- settings
    "Settings",
    "load_settings",
]
# -- what a handler raises to steer its job, and the errors a caller catches
__all__ += errors.__all__


# The worker's names load the worker (anyio, the handlers' machinery) on first use only,
# so that a producer that imports rota does not.
_LAZY = {
    "WorkerPool": "rota.worker.pool",
    "Lifespan": "rota.worker.pool",
    "JobContext": "rota.worker.context",
    "Middleware": "rota.worker.registry",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rota' has no attribute {name!r}")
