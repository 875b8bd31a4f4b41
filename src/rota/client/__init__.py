"""The client layer: the producer's :class:`Client`, the operator's :class:`Admin`
(``client.admin``), one :class:`Shard` per hash tag of a namespace, and the routing over
them (:mod:`rota.client.routing`). What the CLI and the web UI show or change goes
through here, so they never need the worker package."""

from __future__ import annotations

from rota.client.admin import Admin
from rota.client.client import Client
from rota.client.debounce import Debounce
from rota.client.fair import FairKeyInfo, FairKeyJobs
from rota.client.options import Options
from rota.client.run_times import HistogramBucket, RunTimes
from rota.client.shard import Shard
from rota.client.spec import Enqueued, JobSpec
from rota.client.status import Bucket, History, Page, QueueInfo, RunningJob
from rota.protocol.job import JobSet, now_ms, validate_name

__all__ = [
    "Admin",
    "Bucket",
    "Client",
    "Debounce",
    "Enqueued",
    "FairKeyInfo",
    "FairKeyJobs",
    "HistogramBucket",
    "History",
    "JobSet",
    "JobSpec",
    "Options",
    "Page",
    "QueueInfo",
    "RunTimes",
    "RunningJob",
    "Shard",
    "now_ms",
    "validate_name",
]
