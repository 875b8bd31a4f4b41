"""The example jobs, under the name the Dockerfile, docker-compose.yml and older docs use
(``rota worker examples.jobs:pool``); they live in the package as
:mod:`rota.examples.jobs`, so that ``rota demo`` needs no checkout."""

from __future__ import annotations

from rota.examples.jobs import (
    always_fails,
    flaky_webhook,
    nightly_report,
    pool,
    resize_image,
    sample,
    send_email,
)

__all__ = [
    "always_fails",
    "flaky_webhook",
    "nightly_report",
    "pool",
    "resize_image",
    "sample",
    "send_email",
]
