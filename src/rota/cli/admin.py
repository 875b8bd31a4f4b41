"""Operator commands: enqueue, status, queue, dead, job."""

from __future__ import annotations

import time
from collections import Counter
from datetime import datetime
from typing import Any

import anyio
import click
import msgspec

from rota.cli.common import ExitError, connection_options, parse_duration, with_client
from rota.cli.output import age, duration, echo_json, print_table, when
from rota.cli.workflows import print_relations, relations
from rota.client import Client, JobSpec
from rota.config import Settings
from rota.errors import JobNotFound, PayloadTooLarge

__all__ = ["dead", "enqueue", "job", "queue", "status"]


def _value(text: str) -> Any:
    """key=value values are JSON when they parse as JSON (42, true, [1]), else text."""
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return text


@click.command()
@click.argument("name")
@click.argument("pairs", nargs=-1, metavar="[KEY=VALUE]...")
@click.option("--args", "args_json", help="All args as one JSON object or array.")
@click.option("--in", "delay", help="Run after this delay: 30s, 5m, 2h, 1d.")
@click.option("--at", "at", help="Run at this time (ISO-8601, e.g. 2026-01-31T09:00:00+00:00).")
@click.option("--unique", help="Enqueue nothing while a live job holds this key.")
@click.option(
    "--after",
    "after",
    multiple=True,
    metavar="ID",
    help="Run once job ID has completed (repeat for several; it waits meanwhile).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@connection_options
@with_client
async def enqueue(
    client: Client,
    settings: Settings,
    name: str,
    pairs: tuple[str, ...],
    args_json: str | None,
    delay: str | None,
    at: str | None,
    unique: str | None,
    after: tuple[str, ...],
    as_json: bool,
) -> None:
    """Enqueue a job NAME with args given as KEY=VALUE pairs or --args JSON.

    With --after, the job waits until every job named completes, and ends dead if one
    of them ends dead or aborted."""
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}
    if args_json is not None:
        if pairs:
            raise click.UsageError("give args as KEY=VALUE pairs or --args, not both")
        try:
            parsed = msgspec.json.decode(args_json)
        except msgspec.DecodeError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--args") from None
        if isinstance(parsed, list):
            args = tuple(parsed)
        elif isinstance(parsed, dict):
            kwargs = parsed
        else:
            raise click.BadParameter("must be a JSON object or array", param_hint="--args")
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="KEY=VALUE")
        kwargs[key] = _value(text)
    if delay and at:
        raise click.UsageError("give --in or --at, not both")
    run_at = None
    if delay:
        run_at = time.time() + parse_duration(delay)
    elif at:
        try:
            moment = datetime.fromisoformat(at)
        except ValueError:
            raise click.BadParameter(f"{at!r} is not an ISO-8601 time", param_hint="--at") from None
        if moment.tzinfo is None:
            moment = moment.astimezone()
        run_at = moment.timestamp()
    spec = JobSpec(name=name, args=args, kwargs=kwargs, run_at=run_at, unique=unique, after=after)
    try:
        (job,) = await client.enqueue_many([spec])
    except (ValueError, TypeError, PayloadTooLarge, JobNotFound) as exc:
        raise ExitError(str(exc), code=1) from None
    if as_json:
        echo_json({"id": job.id, "name": job.name, "created": job.created})
    elif job.created:
        click.echo(job.id)
    else:
        click.echo(f"{job.id} (already enqueued: nothing new)")


async def _status(client: Client, settings: Settings) -> dict[str, Any]:
    queues = await client.queues()
    pools = await client.pools()
    running = await client.running([q.name for q in queues])
    busy = Counter(r.pool for r in running)
    stats = await client.stats()
    now = time.time() * 1000
    stale_after = settings.heartbeat_interval * 2000
    return {
        "namespace": settings.namespace,
        "queues": [msgspec.structs.asdict(q) for q in queues],
        "pools": [
            {
                **msgspec.structs.asdict(p),
                "busy": busy[p.id],
                "last_heartbeat": beat,
                "stale": now - beat > stale_after,
            }
            for p, beat in pools
        ],
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
        ["id", "host", "pid", "version", "concurrency", "busy", "started", "heartbeat", "jobs"],
        [
            [
                p["id"],
                p["host"],
                p["pid"],
                p["version"],
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
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--watch",
    type=float,
    is_flag=False,
    flag_value=2.0,
    default=None,
    help="Refresh every N seconds (default 2) until Ctrl-C.",
)
@connection_options
@with_client
async def status(client: Client, settings: Settings, as_json: bool, watch: float | None) -> None:
    """Queues, pools, busy workers and totals."""
    while True:
        data = await _status(client, settings)
        if watch:
            click.clear()
        if as_json:
            echo_json(data)
        else:
            _print_status(data)
        if not watch:
            return
        await anyio.sleep(watch)


@click.group()
def queue() -> None:
    """Pause, resume, clear or rate-limit the queue of a job name."""


@queue.command()
@click.argument("name")
@connection_options
@with_client
async def pause(client: Client, settings: Settings, name: str) -> None:
    """Stop workers from taking jobs of NAME (running ones finish)."""
    await client.pause(name)
    click.echo(f"paused {name}")


@queue.command()
@click.argument("name")
@connection_options
@with_client
async def resume(client: Client, settings: Settings, name: str) -> None:
    """Let workers take jobs of NAME again."""
    await client.resume(name)
    click.echo(f"resumed {name}")


@queue.command()
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@connection_options
@with_client
async def clear(client: Client, settings: Settings, name: str, yes: bool) -> None:
    """Delete every queued job of NAME."""
    (info,) = await client.queues([name])
    if not yes:
        click.confirm(f"delete the {info.size} queued jobs of {name}?", abort=True)
    click.echo(f"deleted {await client.clear_queue(name)} jobs")


def _job_rows(jobs: list[Any]) -> list[list[Any]]:
    return [
        [
            j.id,
            j.name,
            j.state,
            j.attempts,
            j.reason or "",
            when(j.finished_at),
            (j.error or "")[:80],
        ]
        for j in jobs
    ]


@click.group()
def dead() -> None:
    """List, retry or delete dead jobs."""


@dead.command("list")
@click.option("--limit", type=int, default=50, show_default=True)
@click.option("--offset", type=int, default=0)
@click.option("--json", "as_json", is_flag=True)
@connection_options
@with_client
async def dead_list(
    client: Client, settings: Settings, limit: int, offset: int, as_json: bool
) -> None:
    """Dead jobs, newest first."""
    page = await client.page("dead", offset=offset, count=limit)
    if as_json:
        echo_json(
            {
                "total": page.total,
                "offset": page.offset,
                "jobs": [msgspec.structs.asdict(j) for j in page.jobs],
            }
        )
        return
    print_table(
        f"dead jobs {offset + 1}-{offset + len(page.jobs)} of {page.total}",
        ["id", "name", "state", "attempts", "reason", "died", "error"],
        _job_rows(page.jobs),
    )


def _ids_or_all(ids: tuple[str, ...], all_: bool) -> list[str] | None:
    if bool(ids) == all_:
        raise click.UsageError("give job ids or --all")
    return None if all_ else list(ids)


@dead.command("retry")
@click.argument("ids", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Every dead job.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@connection_options
@with_client
async def dead_retry(
    client: Client, settings: Settings, ids: tuple[str, ...], all_: bool, yes: bool
) -> None:
    """Queue dead jobs again, with their failures reset."""
    chosen = _ids_or_all(ids, all_)
    if chosen is None and not yes:
        total = (await client.set_sizes())["dead"]
        click.confirm(f"retry all {total} dead jobs?", abort=True)
    click.echo(f"retried {await client.retry('dead', chosen)} jobs")


@dead.command("delete")
@click.argument("ids", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Every dead job.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@connection_options
@with_client
async def dead_delete(
    client: Client, settings: Settings, ids: tuple[str, ...], all_: bool, yes: bool
) -> None:
    """Delete dead jobs for good."""
    chosen = _ids_or_all(ids, all_)
    if not yes:
        what = "all dead jobs" if chosen is None else f"{len(chosen)} dead jobs"
        click.confirm(f"delete {what}?", abort=True)
    click.echo(f"deleted {await client.delete('dead', chosen)} jobs")


@click.group()
def job() -> None:
    """Inspect one job."""


@job.command("show")
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True)
@connection_options
@with_client
async def job_show(client: Client, settings: Settings, job_id: str, as_json: bool) -> None:
    """Everything stored about job JOB_ID, and the jobs it waits for and that wait
    for it, with their states."""
    record = await client.job(job_id)
    if record is None:
        raise ExitError(f"no job {job_id}", code=1)
    rel = await relations(client, record)
    if as_json:
        echo_json({**msgspec.structs.asdict(record), **rel})
        return
    for key, value in msgspec.structs.asdict(record).items():
        if value is None or key in ("after", "group", "waits_group"):
            continue
        if key == "pending" and record.state != "waiting":
            continue
        if key.endswith("_at"):
            value = f"{when(value)} ({age(value)} ago)"
        click.echo(f"{key:>12}  {value}")
    print_relations(record, rel)
