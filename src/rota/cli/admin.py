"""Operator commands: enqueue and status."""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import click
import msgspec

from rota.cli.common import (
    ExitError,
    connection_options,
    json_option,
    number_within,
    parse_duration,
    with_client,
)
from rota.cli.debounce import debounce_options
from rota.cli.operate import name_argument
from rota.cli.output import age, echo_json, print_table, relative, when
from rota.client import Client, Debounce, JobSpec
from rota.client.spec import delay_seconds, moment_seconds, to_row
from rota.client.status import duration
from rota.config import Settings
from rota.errors import JobNotFound, PayloadTooLarge, RedisRefused, RedisUnavailable
from rota.protocol import codec
from rota.protocol.bounds import JOB, Bound
from rota.protocol.keys import validate_namespace

__all__ = ["enqueue", "status"]


def _value(text: str) -> Any:
    """key=value values are JSON when they parse as JSON (42, true, [1]), else text;
    a value that opens an array or an object and is no JSON is a typo, not text."""
    try:
        return codec.parse_input(text)
    except ValueError as exc:
        if text.lstrip().startswith(("[", "{")):
            raise ExitError(f"{text!r}: {exc} (quote it to give a string)") from None
        return text


def _pairs(pairs: tuple[str, ...]) -> dict[str, Any]:
    """KEY=VALUE arguments as keyword arguments: a key must be a Python identifier (it
    names a parameter of the handler), and a key given twice is a mistake, not a choice."""
    kwargs: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise ExitError(f"{pair!r} is not KEY=VALUE")
        if not key.isidentifier():
            raise ExitError(f"{pair!r}: the key {key!r} is not a parameter name")
        if key in kwargs:
            raise ExitError(f"{pair!r}: {key} is given twice")
        kwargs[key] = _value(text)
    return kwargs


def _run_at(delay: str | None, at: str | None) -> float | None:
    """--in or --at as a Unix time; a time without an offset is UTC, as for
    ``Client.enqueue_at`` and the web API."""
    if delay and at:
        raise click.UsageError("give --in or --at, not both")
    try:
        if delay:  # 0 to ten years, as a delay everywhere (rota.client.spec.delay_seconds)
            return time.time() + delay_seconds("--in", parse_duration(delay, "--in"))
        return None if not at else moment_seconds("--at", at)
    except ValueError as exc:
        raise ExitError(str(exc)) from None


def _args(args_json: str | None, pairs: tuple[str, ...]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The args and kwargs of ``--args`` JSON or KEY=VALUE pairs (not both)."""
    if args_json is None:
        return (), _pairs(pairs)
    if pairs:
        raise click.UsageError("give args as KEY=VALUE pairs or --args, not both")
    try:
        parsed = codec.parse_input(args_json)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--args") from None
    if isinstance(parsed, list):
        return tuple(parsed), {}
    if isinstance(parsed, dict):
        return (), parsed
    raise click.BadParameter("must be a JSON object or array", param_hint="--args")


@click.command()
@name_argument
@click.argument("pairs", nargs=-1, metavar="[KEY=VALUE]...")
@click.option("--args", "args_json", help="All args as one JSON object or array.")
@click.option("--in", "delay", help="Run after this delay: 30s, 5m, 1h30m, 1d.")
@click.option(
    "--at",
    "at",
    help="Run at this time, ISO-8601 (2026-01-31T09:00:00+01:00); without an offset, UTC.",
)
@click.option("--unique", help="Enqueue nothing while a live job holds this key.")
@click.option(
    "--after",
    "after",
    multiple=True,
    metavar="ID",
    help="Run once job ID has completed (repeat for several; it waits meanwhile).",
)
@click.option(
    "--max-fails",
    type=click.IntRange(min=1),
    help="Failures before it ends dead (instead of its handler's max_fails).",
)
@click.option(
    "--timeout",
    "attempt_timeout",
    metavar="DURATION",
    help="How long one attempt may run: 30s, 5m, 1h30m (instead of its handler's).",
)
@click.option(
    "--expires-in",
    metavar="DURATION",
    help="Not started within this (30s, 5m, 1h30m), it never starts: it ends dead (expired).",
)
@click.option(
    "--expires-at",
    metavar="TIME",
    help="Not started by this ISO-8601 time (UTC without an offset), it never starts.",
)
@click.option("--job-id", help="Its id (an id that exists enqueues nothing).")
@click.option(
    "--fair-key",
    metavar="KEY",
    help="Its fair key (a tenant, 1-200 printable characters): the name's keys take turns.",
)
@click.option(
    "--ordered",
    is_flag=True,
    help="Route it by its name, as the setting 'ordered' does: the name's jobs start in order.",
)
@json_option
@debounce_options
@connection_options
def enqueue(
    redis_url: str | None,
    namespace: str | None,
    config_file: Path | None,
    name: str,
    pairs: tuple[str, ...],
    args_json: str | None,
    delay: str | None,
    at: str | None,
    unique: str | None,
    after: tuple[str, ...],
    max_fails: int | None,
    attempt_timeout: str | None,
    expires_in: str | None,
    expires_at: str | None,
    job_id: str | None,
    fair_key: str | None,
    ordered: bool,
    as_json: bool,
    debounce: Debounce | None,
) -> None:
    """Enqueue a job NAME with args given as KEY=VALUE pairs or --args JSON.

    \b
    Each KEY names a parameter of the handler (given once). Each VALUE is read
    as JSON when it parses as JSON, else kept as text:
      n=42 -> 42    ok=true -> True    ids=[1,2] -> [1, 2]    to=ada -> 'ada'
      ver=1.10 -> 1.1 (a number): quote it to keep a string: 'ver="1.10"'
    --args '{"ver": "1.10"}' gives every argument as JSON at once.

    With --after, the job waits until every job named completes, and ends dead if one
    of them ends dead or aborted. With --debounce-key and --debounce-window, enqueues of
    one key within the window become one job (see --debounce-mode)."""
    # What was typed is read before Redis is reached: a mistake in it is told as itself,
    # not as the Redis that could not be reached meanwhile.
    args, kwargs = _args(args_json, pairs)
    run_at = _run_at(delay, at)
    spec = JobSpec(
        name=name,
        args=args,
        kwargs=kwargs,
        run_at=run_at,
        unique=unique,
        after=after,
        max_fails=max_fails,
        timeout=None if attempt_timeout is None else parse_duration(attempt_timeout, "--timeout"),
        job_id=job_id,
        expires_in=None if expires_in is None else parse_duration(expires_in, "--expires-in"),
        expires_at=expires_at,
        debounce=debounce,
        fair_key=fair_key,
        ordered=ordered,
    )
    try:  # every option as the client checks it (the args' size aside: a setting's)
        to_row(spec, max_args_bytes=sys.maxsize, unique_ttl=JOB["unique_ttl"].hi)
    except (ValueError, TypeError) as exc:
        raise ExitError(str(exc), code=2) from None
    _enqueue(redis_url, namespace, config_file, spec=spec, as_json=as_json)


@with_client
async def _enqueue(client: Client, settings: Settings, spec: JobSpec, as_json: bool) -> None:
    run_at, name = spec.run_at, spec.name
    try:
        (job,) = await client.enqueue_many([spec])
    except JobNotFound as exc:  # a parent that Redis does not hold: a state, not a typo
        raise ExitError(str(exc), code=1) from None
    except (ValueError, TypeError, PayloadTooLarge) as exc:  # what was typed: a usage error
        raise ExitError(str(exc), code=2) from None
    if as_json:
        shown = {"id": job.id, "name": job.name, "created": job.created}
        echo_json(shown if run_at is None else {**shown, "run_at": run_at})
    elif not job.created and spec.debounce is not None:
        click.echo(f"{job.id} (debounced: its pending job took this enqueue in)")
    elif not job.created:
        click.echo(f"{job.id} (already enqueued: nothing new)")
    elif run_at is not None:  # `--in 60000000` is 694 days: say so
        click.echo(f"{job.id} (runs at {when(run_at)}, {relative(run_at)})")
    else:
        click.echo(job.id)
    await _warn_if_unregistered(client, name)


async def _warn_if_unregistered(client: Client, name: str) -> None:
    """One line when no pool ever registered ``name`` (most likely a typo): the job
    waits in its queue until a pool that handles it starts. A user who may not read
    the priorities (an enqueue-only ACL role), or whose Redis went away after the
    enqueue, gets no warning, and the job all the same."""
    try:
        (info,) = await client.admin.queues([name])
    except (RedisRefused, RedisUnavailable):
        return
    if info.priority is None:
        click.echo(
            f"rota: warning: no pool has registered the job name {name!r} (a typo?);"
            " enqueued anyway: it waits until a pool that handles it starts",
            err=True,
        )


async def _status(client: Client, settings: Settings) -> dict[str, Any]:
    queues = await client.admin.queues()
    pools = await client.admin.pools()
    running = await client.admin.running([q.name for q in queues], pools)
    busy = Counter(r.pool for r in running)
    stats = await client.admin.stats()
    return {
        "namespace": settings.namespace,
        "queues": [msgspec.structs.asdict(q) for q in queues],
        "pools": [{**msgspec.structs.asdict(p), "busy": busy[p.id]} for p in pools],
        "busy": [msgspec.structs.asdict(r) for r in running],
        "totals": {k: stats.get(k, 0) for k in ("processed", "failed", "dead", "lost")},
    }


def _print_status(data: dict[str, Any]) -> None:
    t = data["totals"]
    click.echo(
        f"namespace {data['namespace']}: processed {t['processed']}, failed "
        f"{t['failed']}, dead {t['dead']}, lost {t['lost']}"
    )
    print_table(
        "queues",
        ["name", "size", "latency", "running", "limit", "rate", "priority", "paused"],
        [
            [
                q["name"],
                q["size"],
                duration(q["latency"]),
                q["running"],
                q["limit"] or "",
                q["rate"] or "",
                q["priority"] or "",
                "yes" if q["paused"] else "",
            ]
            for q in data["queues"]
        ],
    )
    print_table(
        "pools",
        [
            "id",
            "host",
            "pid",
            "version",
            "state",
            "concurrency",
            "busy",
            "started",
            "heartbeat",
            "jobs",
        ],
        [
            [
                p["id"],
                p["host"],
                p["pid"],
                p["version"],
                p["state"],
                p["concurrency"],
                p["busy"],
                age(p["started_at"]),
                age(p["last_heartbeat"]) + (" STALE" if p["stale"] else ""),
                ",".join(p["jobs"]),
            ]
            for p in data["pools"]
        ],
    )
    print_table(
        "busy workers",
        ["job", "name", "since", "progress", "checkin", "pool"],
        [
            [b["job_id"], b["name"], age(b["since"]), b["progress"], b["message"], b["pool"]]
            for b in data["busy"]
        ],
    )


@click.command()
@json_option
@click.option(
    "--watch",
    type=float,
    is_flag=False,
    flag_value=2.0,
    default=None,
    callback=number_within(Bound(0.1, 3600)),
    help="Refresh every N seconds (0.1 to 3600, default 2) until Ctrl-C.",
)
@click.option(
    "--also",
    multiple=True,
    metavar="NAMESPACE",
    help="Show this namespace too, after --namespace (repeatable); --json then prints a list.",
)
@connection_options
@with_client
async def status(
    client: Client, settings: Settings, as_json: bool, watch: float | None, also: tuple[str, ...]
) -> None:
    """Queues, pools, busy workers and totals."""
    try:
        names = [validate_namespace(ns) for ns in dict.fromkeys(also) if ns != client.namespace]
    except ValueError as exc:
        raise ExitError(f"--also: {exc}") from None
    others = [Client.from_settings(settings.replace(namespace=ns)) for ns in names]
    try:
        while True:
            await _show([client, *others], settings, as_json, clear=bool(watch))
            if not watch:
                return
            await anyio.sleep(watch)
    finally:
        for other in others:
            await other.close()


async def _show(clients: list[Client], settings: Settings, as_json: bool, clear: bool) -> None:
    shown = [await _status(c, settings.replace(namespace=c.namespace)) for c in clients]
    if clear:
        click.clear()
    if as_json:
        echo_json(shown if len(shown) > 1 else shown[0])
        return
    for i, data in enumerate(shown):
        if i:
            click.echo()
        _print_status(data)
