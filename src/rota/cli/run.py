"""``rota worker`` and ``rota demo``: the commands that run pools."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click
import msgspec

from rota.cli.common import (
    ExitError,
    connection_options,
    number_within,
    redis_trouble,
    resolve,
    seconds_option,
)
from rota.config import Settings, setting_sources
from rota.errors import ConfigError, from_lifespan
from rota.logging import configure_logging
from rota.protocol.bounds import Bound
from rota.redis.access import explain

__all__ = ["demo", "worker"]

_DEFAULTS = Settings()


#: Where the supervisor's settings came from, for its children's ``settings`` line
#: (not ROTA_*: it is no setting).
SOURCES_VARIABLE = "_ROTA_SETTING_SOURCES"


def _child_env(settings: Settings) -> dict[str, str]:
    """The resolved settings as ROTA_* variables, so every child sees the same ones
    (an environment, unlike a command line, is not shown to other users by ``ps``),
    and where each came from, which the child tells instead of its ROTA_* variable."""
    env = dict(os.environ)
    for key, value in msgspec.structs.asdict(settings).items():
        if value is not None:
            env["ROTA_" + key.upper()] = str(value)
    env[SOURCES_VARIABLE] = msgspec.json.encode(setting_sources(settings)).decode()
    return env


@click.command()
@click.argument("target")
@click.option(
    "-c",
    "--concurrency",
    type=int,
    help=f"Jobs run at once by each process (default {_DEFAULTS.concurrency}).",
)
@seconds_option(
    "lease", _DEFAULTS.lease, "How long a job is held before another pool may take it over"
)
@seconds_option("grace", _DEFAULTS.grace, "How long running jobs may finish on SIGTERM")
@click.option(
    "--prefetch",
    type=int,
    help="Jobs leased ahead of free workers while jobs are short (at most the"
    f" concurrency); 0: none (default {_DEFAULTS.prefetch}).",
)
@click.option(
    "--processes",
    type=click.IntRange(1, 256),
    default=1,
    show_default=True,
    help="Pool processes; more than 1 runs a supervisor that restarts them.",
)
@click.option(
    "--child-processes",
    type=int,
    help="Child processes of the isolated handlers, 0 to 1024; 0: the CPU count"
    f" (default {_DEFAULTS.child_processes}).",
)
@click.option(
    "--child-memory-mb",
    type=int,
    help="Address space each child process may take (MiB), 0 (no limit) or 64 to 1048576"
    f" (default {_DEFAULTS.child_memory_mb}).",
)
@click.option("--log-format", type=click.Choice(["auto", "json", "console"]))
@click.option(
    "--log-level", type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False)
)
@connection_options
def worker(target: str, processes: int, config_file: Path | None, **flags: Any) -> None:
    """Run the WorkerPool TARGET (module:attribute, e.g. app.jobs:pool) until SIGTERM.

    A flag given here wins over the pool's code, the config file and ROTA_* variables."""
    from rota.daemon import STOPPED, load_pool, run_pool, supervise

    try:
        pool = load_pool(target)
    except (ImportError, AttributeError, ValueError, TypeError) as exc:
        raise ExitError(f"cannot load {target}: {exc}") from None
    settings = resolve(config_file, base=pool.code_settings, **flags)
    told = os.environ.pop(SOURCES_VARIABLE, "")  # a child of `--processes N`
    if told:
        setting_sources(settings, msgspec.json.decode(told, type=dict[str, str]))
    pool.job_line = configure_logging(settings.log_format, settings.log_level)
    if processes > 1:
        command = [sys.executable, "-m", "rota", "worker", target]
        raise SystemExit(supervise(command, processes, env=_child_env(settings)))
    try:
        run_pool(pool, settings)
        if told and pool.told_to_stop:  # a child of a supervisor: not to be restarted
            raise SystemExit(STOPPED)
    except Exception as exc:
        stop = _stopped_by(exc, settings)
        if stop is None:
            raise
        raise stop from None


@click.command()
@click.option(
    "--app", default="rota.examples.jobs:pool", show_default=True, help="The pool to run."
)
@click.option(
    "--rate",
    type=float,
    default=2.0,
    show_default=True,
    callback=number_within(Bound(0, 1000)),
    help="Example jobs enqueued per second (0 to 1000).",
)
@connection_options
def demo(app: str, rate: float, config_file: Path | None, **flags: Any) -> None:
    """Run the example jobs with a steady trickle of work, on an embedded Redis unless
    --redis-url is given. Ctrl-C stops everything and cleans up."""
    from rota.examples.demo import load_demo, run_demo

    try:
        pool, sample = load_demo(app)
    except (ImportError, AttributeError, ValueError, TypeError) as exc:
        raise ExitError(f"cannot load {app}: {exc}") from None
    settings = resolve(config_file, base=pool.code_settings, **flags)
    pool.job_line = configure_logging(settings.log_format, settings.log_level)
    explicit_url = flags.get("redis_url") or os.environ.get("ROTA_REDIS_URL")
    try:
        run_demo(pool, sample, settings, rate=rate, embedded=not explicit_url)
    except Exception as exc:
        stop = _stopped_by(exc, settings)
        if stop is None:
            raise
        raise stop from None


def _stopped_by(exc: Exception, settings: Settings) -> ExitError | None:
    """The one line to stop with when Redis or the settings stopped the command (None: a
    bug). Exit code 2: the settings are wrong (password, ACL rules, TLS, a shard count
    the namespace does not span: what the pool finds at its start), a restart cannot
    mend it. What the pool's lifespan raised is the application's (its own Redis client,
    say), not rota's connection: it is shown as it is, with its traceback."""
    if from_lifespan(exc):
        return None
    if isinstance(exc, ConfigError):
        return ExitError(str(exc))
    line = explain(exc, settings)
    if line is not None:
        return ExitError(line)
    return redis_trouble(exc, settings)
