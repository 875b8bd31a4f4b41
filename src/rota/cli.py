"""The ``rota`` command. For now: ``rota worker MODULE:POOL`` and ``rota --version``."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

import anyio

from rota import __version__

__all__ = ["main"]


def _load(target: str) -> object:
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise SystemExit(f"rota: expected MODULE:POOL, got {target!r}")
    sys.path.insert(0, ".")
    obj: object = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rota", description="A job-queue daemon on Redis.")
    parser.add_argument("--version", action="version", version=f"rota {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    worker = sub.add_parser("worker", help="run a worker pool until SIGTERM/SIGINT")
    worker.add_argument("pool", help="MODULE:POOL, e.g. app.jobs:pool")
    worker.add_argument("--redis-url")
    sub.add_parser("demo", help="run the example jobs on an embedded Redis")
    args = parser.parse_args(argv)
    if args.command == "demo":
        print("rota demo: not yet available")  # noqa: T201 - command output
        return 0
    pool = _load(args.pool)
    run = getattr(pool, "run", None)
    if run is None:
        raise SystemExit(f"rota: {args.pool} is not a WorkerPool")
    anyio.run(lambda: run(args.redis_url))
    return 0


if __name__ == "__main__":
    sys.exit(main())
