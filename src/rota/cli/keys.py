"""``rota keys``: the fair keys of a job name from a terminal: list those with the
largest backlog (then those with jobs running only), list one key's jobs, and pause,
resume, cap, weigh, rate-limit or clear one key (or set the default limit of every key
of a name).

Every change goes through ``client.admin`` (:mod:`rota.client.fair`), so the words and
ranges are those of the Python API and the web; a name, a key and a number are checked
before Redis is reached, each wrong one a line and exit code 2. ``none`` removes a
setting. ``--json`` prints what was done (or the keys) as JSON, as the other commands do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, ParamSpec, TypeVar

import click
import msgspec

from rota.cli.common import ExitError, connection_options, json_option, with_client, yes_option
from rota.cli.operate import name_argument
from rota.cli.output import echo_json, print_table, relative
from rota.client import Client
from rota.client.fair_jobs import FAIR_JOBS
from rota.client.fair_reads import default_key_limit
from rota.client.spec import check_fair_key
from rota.config import Settings
from rota.protocol.bounds import FAIR, Bound, checked
from rota.protocol.rate import parse_rate

__all__ = ["keys"]

P = ParamSpec("P")
T = TypeVar("T")


def _key(key: str) -> str:
    try:
        return check_fair_key(key, "KEY")
    except ValueError as exc:
        raise ExitError(str(exc)) from None


#: KEY, a fair key checked before Redis is reached.
key_argument = click.argument("key", callback=lambda ctx, param, key: _key(key))


def _bounded(
    flag: str, default: int, bound: Bound, help: str
) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """A whole-number option whose range is the API's (``bound``), so that the command
    refuses what the Python API and the web would."""
    span = click.IntRange(int(bound.lo), int(bound.hi))
    return click.option(flag, default=default, show_default=True, type=span, help=help)


def _count(option: str, text: str) -> int | None:
    """A limit or a weight as typed: ``none`` for none, else a whole number in range."""
    if text.lower() == "none":
        return None
    try:
        value = int(text)
    except ValueError:
        raise ExitError(f"{option}: expected a whole number or none, got {text!r}") from None
    try:
        return checked(option.lower(), value, FAIR[option.lower()])
    except ValueError as exc:
        raise ExitError(str(exc)) from None


def _said(as_json: bool, line: str, **done: Any) -> None:
    echo_json(done) if as_json else click.echo(line)


@click.group()
def keys() -> None:
    """List the fair keys of a job name, or pause, cap, weigh, rate-limit or clear one."""


@keys.command("list")
@name_argument
@_bounded("--top", 20, FAIR["top"], "Keys listed, the largest backlog first.")
@json_option
@connection_options
@with_client
async def list_keys(client: Client, settings: Settings, name: str, top: int, as_json: bool) -> None:
    """The fair keys of NAME with the most jobs queued, largest first, then those with
    jobs running and none queued: queued, running, the limit each runs under, weight,
    pause and rate (a setting written wrong is marked); and the default limit of every
    key."""
    rows = await client.admin.fair.of(name, top)
    default = await default_key_limit(client, name)
    if as_json:
        echo_json({"name": name, "default_limit": default, "keys": msgspec.to_builtins(rows)})
        return
    table = [
        (
            r.key,
            r.queued,
            r.running,
            r.limit,
            r.weight,
            "paused" if r.paused else "",
            r.rate,
            ",".join(r.malformed),
        )
        for r in rows
    ]
    headers = ("key", "queued", "running", "limit", "weight", "state", "rate", "malformed")
    limit = "none" if default is None else default
    print_table(f"fair keys of {name} (default limit: {limit})", headers, table)


@keys.command("jobs")
@name_argument
@key_argument
@_bounded("--offset", 0, FAIR_JOBS["offset"], "Queued jobs skipped.")
@_bounded("--count", 50, FAIR_JOBS["count"], "Queued jobs listed (and running ones at most).")
@json_option
@connection_options
@with_client
async def key_jobs(
    client: Client, settings: Settings, name: str, key: str, offset: int, count: int, as_json: bool
) -> None:
    """The jobs of KEY of NAME: its running ones (the soonest lease deadline first),
    then a page of its queued ones, the next to run first."""
    view = await client.admin.fair.jobs(name, key, offset, count)
    if as_json:
        echo_json(msgspec.to_builtins(view))
        return
    rows = [("running", j.id, j.state, relative(j.started_at)) for j in view.running_jobs] + [
        (str(offset + n), j.id, j.state, relative(j.enqueued_at))
        for n, j in enumerate(view.jobs, 1)
    ]
    bad = f", malformed: {', '.join(view.malformed)}" if view.malformed else ""
    title = f"jobs of {key} of {name} ({view.queued} queued, {view.running} running{bad})"
    print_table(title, ("#", "id", "state", "since"), rows)


def _switch(verb: Literal["pause", "resume"], help: str) -> click.Command:
    @click.command(verb, help=help)
    @name_argument
    @key_argument
    @json_option
    @connection_options
    @with_client
    async def switch(
        client: Client, settings: Settings, name: str, key: str, as_json: bool
    ) -> None:
        admin = client.admin
        await (admin.fair.pause_key if verb == "pause" else admin.fair.resume_key)(name, key)
        _said(as_json, f"{verb}d {key} of {name}", name=name, key=key, paused=verb == "pause")

    return switch


keys.add_command(
    _switch(
        "pause",
        "Stop workers from taking jobs of KEY of NAME: its jobs stay queued, its running"
        " ones finish, enqueues go on.",
    )
)
keys.add_command(_switch("resume", "Let workers take jobs of KEY of NAME again."))


def _limit_words(ctx: click.Context, param: click.Parameter, rest: tuple[str, ...]) -> Any:
    """KEY N, or N alone with --default (an eager flag, so read first): the key and the
    count, checked before Redis is reached."""
    if len(rest) != (1 if ctx.params.get("default") else 2):
        raise click.UsageError("give KEY N, or --default and N")
    return (None if len(rest) == 1 else _key(rest[0])), _count("LIMIT", rest[-1])


@keys.command()
@name_argument
@click.argument("rest", nargs=-1, required=True, metavar="KEY N|none", callback=_limit_words)
@click.option(
    "--default", is_flag=True, is_eager=True, help="Set the default of every key: NAME N."
)
@json_option
@connection_options
@with_client
async def limit(
    client: Client,
    settings: Settings,
    name: str,
    rest: tuple[str | None, int | None],
    default: bool,
    as_json: bool,
) -> None:
    """Run at most N jobs of KEY of NAME at once across all pools (1 to 1000000; none:
    no limit of its own). With --default, give NAME N: the limit of every key of NAME
    without its own."""
    key, count = rest
    await client.admin.fair.set_key_limit(name, key, count)
    who = f"every key of {name}" if key is None else f"{key} of {name}"
    line = f"{who}: at most {count} at once" if count else f"{who}: no limit"
    _said(as_json, line, name=name, key=key, limit=count)


@keys.command()
@name_argument
@key_argument
@click.argument("weight", metavar="W|none", callback=lambda c, p, w: _count("WEIGHT", w))
@json_option
@connection_options
@with_client
async def weight(
    client: Client, settings: Settings, name: str, key: str, weight: int | None, as_json: bool
) -> None:
    """Give KEY of NAME W turns (1 to 1000) for each one of a key of weight 1 while both
    have jobs; none: back to 1."""
    await client.admin.fair.set_weight(name, key, weight)
    _said(as_json, f"{key} of {name}: weight {weight or 1}", name=name, key=key, weight=weight)


def _rate(ctx: click.Context, param: click.Parameter, rate: str) -> str | None:
    """RATE as written back (``10/s``), or None for ``none``."""
    if rate.lower() == "none":
        return None
    try:
        return str(parse_rate(rate))
    except ValueError as exc:
        raise ExitError(str(exc)) from None


@keys.command()
@name_argument
@key_argument
@click.argument("rate", metavar="RATE|none", callback=_rate)
@json_option
@connection_options
@with_client
async def rate(
    client: Client, settings: Settings, name: str, key: str, rate: str | None, as_json: bool
) -> None:
    """Let at most RATE jobs of KEY of NAME start across all pools (10/s, 30/min,
    2/hour); none: no rate limit."""
    await client.admin.fair.set_key_rate(name, key, rate)
    line = f"{key} of {name}: at most {rate} start" if rate else f"{key} of {name}: no rate"
    _said(as_json, line, name=name, key=key, rate=rate)


@keys.command()
@name_argument
@key_argument
@yes_option
@json_option
@connection_options
@with_client
async def clear(
    client: Client, settings: Settings, name: str, key: str, yes: bool, as_json: bool
) -> None:
    """Delete every queued job of KEY of NAME (running ones finish)."""
    if not yes:
        click.confirm(f"delete the queued jobs of {key} of {name}?", abort=True)
    n = await client.admin.fair.clear_key(name, key)
    _said(as_json, f"deleted {n} jobs", name=name, key=key, deleted=n)
