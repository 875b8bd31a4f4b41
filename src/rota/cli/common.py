"""Options and helpers every command shares."""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import anyio
import click

from rota import inspect
from rota.client import Client, admin_servers
from rota.config import Settings, load_settings
from rota.errors import ConfigError, RedisRefused, RedisUnavailable, RotaError, redis_cause
from rota.protocol.bounds import Bound, check
from rota.protocol.reshard import BadRecord
from rota.redis.access import explain
from rota.redis.outage import MEANING, REDIS_ERRORS, Condition, rota_error
from rota.urls import redacted
from rota.wire.redispy import RedisError

__all__ = [
    "ExitError",
    "connection_options",
    "json_option",
    "page_options",
    "parse_duration",
    "preflight",
    "reader_left",
    "redis_trouble",
    "resolve",
    "seconds_option",
    "with_client",
    "yes_option",
]

P = ParamSpec("P")
T = TypeVar("T")


class ExitError(Exception):
    """Stop the command with a one-line message and an exit code (2: bad settings)."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def connection_options(f: Callable[P, T]) -> Callable[P, T]:
    """--redis-url, --namespace and --config, for every command that reaches Redis."""
    f = click.option(
        "--config",
        "config_file",
        type=click.Path(path_type=Path),
        help="TOML settings file (default: config/rota.toml if present).",
    )(f)
    f = click.option("--namespace", help="Namespace of the rota installation.")(f)
    f = click.option(
        "--redis-url",
        help="redis://, rediss:// or unix:// URL of one server;"
        " redis+sentinel://host:port[,host:port...]/SERVICE for a Sentinel group;"
        " redis+cluster://host:port[,host:port...] for a Cluster (ROTA_REDIS_URL).",
    )(f)
    return f


def _count(lo: int, hi: int) -> Callable[[click.Context, click.Parameter, str], int]:
    """A callback reading an integer from ``lo`` to ``hi``; anything else stops the
    command with one line and exit code 2, as the web API answers 400 to the same values."""

    def check(ctx: click.Context, param: click.Parameter, text: str) -> int:
        flag = f"--{param.name}"
        try:
            value = int(text)
        except ValueError:
            raise ExitError(f"{flag}: expected an integer, got {text!r}") from None
        if value < lo:
            raise ExitError(f"{flag}: must be at least {lo}, got {value}")
        if value > hi:
            raise ExitError(f"{flag}: must be at most {hi}, got {value}")
        return value

    return check


def number_within(
    bound: Bound,
) -> Callable[[click.Context, click.Parameter, float | None], float | None]:
    """A callback refusing a number outside ``bound`` (NaN, inf, 1e300 too: click's own
    ranges let NaN through) with one line naming the flag, and exit code 2."""

    def within(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
        wrong = None if value is None else check(f"--{param.name}", value, bound)
        if wrong is not None:
            raise ExitError(wrong)
        return value

    return within


def page_options(default_limit: int = 50) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """--limit (at least 1) and --offset (at least 0) of a listing."""

    def decorate(f: Callable[P, T]) -> Callable[P, T]:
        f = click.option(
            "--offset",
            default="0",
            metavar="N",
            callback=_count(0, 10**9),
            help="Skip this many (default 0).",
        )(f)
        f = click.option(
            "--limit",
            default=str(default_limit),
            metavar="N",
            callback=_count(1, 10**6),
            help=f"List at most this many (default {default_limit}).",
        )(f)
        return f

    return decorate


#: --json: print what the command shows as JSON, for scripts (``as_json``).
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def yes_option(f: Callable[P, T]) -> Callable[P, T]:
    """-y/--yes: act without asking (what scripts and pipelines give)."""
    return click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")(f)


def resolve(config_file: Path | None, base: dict[str, Any] | None = None, **flags: Any) -> Settings:
    """Settings from every source; a bad value stops the command with exit code 2 and a
    line naming where it came from: the file, the ``ROTA_*`` variable, or the flag."""
    try:
        settings = load_settings(config_file, base=base)
    except ConfigError as exc:
        raise ExitError(str(exc)) from None
    given = {k: v for k, v in flags.items() if v is not None}
    for key, value in given.items():
        try:
            settings.replace(**{key: value})
        except ConfigError as exc:
            raise ExitError(f"--{key.replace('_', '-')}: {_bare(key, str(exc))}") from None
    try:
        return settings.replace(**given)
    except ConfigError as exc:  # two flags that do not go together
        raise ExitError(str(exc).replace("(from override)", "(from the flags)")) from None


def _bare(key: str, message: str) -> str:
    """A settings message without the setting's name and its source (the caller names
    the flag instead)."""
    return re.sub(r" \(from override\)$", "", message).removeprefix(f"{key}: ")


def with_client(
    func: Callable[..., Awaitable[T]],
) -> Callable[..., T]:
    """Run ``func(client, settings, **kwargs)`` with a checked connection."""

    @functools.wraps(func)
    def wrapper(
        redis_url: str | None, namespace: str | None, config_file: Path | None, **kwargs: Any
    ) -> T:
        settings = resolve(config_file, redis_url=redis_url, namespace=namespace)

        async def go() -> T:
            async with Client.from_settings(settings) as client:
                await check_redis(client, settings)
                shaped = await _as_recorded(client, settings)
                if shaped is settings:
                    await _following(client)
                    return await _naming_shards(client, func(client, settings, **kwargs))
            async with Client.from_settings(shaped) as client:
                await _following(client)
                return await _naming_shards(client, func(client, shaped, **kwargs))

        try:
            return anyio.run(go)
        except Exception as exc:
            if reader_left(exc):  # the reader left (`| head`): not Redis's doing
                raise
            trouble = redis_trouble(exc, settings)
            if trouble is None:
                raise
            raise trouble from None

    return wrapper


async def _naming_shards(client: Client, call: Awaitable[T]) -> T:
    """``call``; when it fails because some shards of the namespace cannot be read now
    while the others answer, one line naming those shards (exit code 1): a command that
    needs only the others works meanwhile."""
    try:
        return await call
    except (RedisRefused, RedisUnavailable, RedisError) as exc:  # or redis-py's, read bare
        if len(client.admin.shards) == 1 or inspect.away_cause(exc) is None:
            raise
        away = await inspect.shards_away(client)
        if not away or len(away) == len(client.admin.shards):
            raise
        raise ExitError(inspect.away_line(client, away), code=1) from None


def reader_left(exc: BaseException) -> bool:
    """Whether ``exc`` is the reader of stdout going away (``rota job show ID | head``)."""
    if isinstance(exc, BaseExceptionGroup):
        return any(reader_left(e) for e in exc.exceptions)
    return isinstance(exc, BrokenPipeError)


def redis_trouble(exc: BaseException, settings: Settings) -> ExitError | None:
    """The one line (exit code 1) for a Redis that refuses a command for now (out of
    memory, a read-only replica, loading...) or went away in the middle of one; exit
    code 2 for settings that do not reach it (credentials, ACL, TLS); None for any other
    error."""
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return redis_trouble(exc.exceptions[0], settings)
    if isinstance(exc, RedisError):  # a pool's tasks (rota worker, demo) raise redis-py's
        exc = rota_error(exc)
    if not isinstance(exc, RedisUnavailable | RedisRefused):
        return None
    if isinstance(exc, RedisRefused) and exc.condition:  # its message says what, and why
        return ExitError(f"{exc}: try again when it ends", code=1)
    line = explain(exc, settings)  # credentials, ACL, TLS, no server there
    if line is not None:
        return ExitError(line, code=1 if isinstance(exc, RedisUnavailable) else 2)
    if isinstance(exc, RedisUnavailable):
        url = redacted(settings.redis_url)
        return ExitError(f"{MEANING[Condition.UNREACHABLE]} at {url}: {redis_cause(exc)}", 1)
    return None


def preflight(settings: Settings) -> Settings:
    """Connect once (and PING) before a server starts, so that a wrong password, a
    refused command, a TLS failure or no Redis at all stops it with one line. The
    settings to serve with: the namespace's recorded shard count replaces the
    configured one (see :func:`_as_recorded`)."""

    async def go() -> Settings:
        async with Client.from_settings(settings) as client:
            await check_redis(client, settings)
            return await _as_recorded(client, settings)

    return anyio.run(go)


async def _as_recorded(client: Client, settings: Settings) -> Settings:
    """``settings`` with the shard count the namespace's pools recorded, if it differs:
    an operator's tool configured without ``shards`` still reads and changes every
    shard of a namespace that spans several. While shard 0, which holds the record, is
    away, the configured count serves (:func:`check_redis` let it through: others
    answer)."""
    try:
        recorded = await admin_servers.recorded_shard_count(client)
    except RedisError as exc:  # redis-py's: read without the client's guard
        if len(client.admin.shards) == 1 or inspect.away_cause(exc) is None:
            raise
        return settings
    if recorded is None or recorded == settings.shards:
        return settings
    return settings.replace(shards=recorded)


async def _following(client: Client) -> None:
    """``client`` over the shards the namespace's record names: the old and the new ones
    while a change of the count is under way (see rota.client.follow). A record that
    names none, or a shard 0 away, is left to the commands that need it (``rota shards
    resize`` names it); the others read the shards of the count the settings say (with
    shard 0 down, the shards that answer serve what needs no other)."""
    with contextlib.suppress(BadRecord, RotaError, *REDIS_ERRORS):
        await client.admin.follower.reread()


async def check_redis(client: Client, settings: Settings) -> None:
    """Stop with one line when the settings do not reach Redis. Over several shards,
    some that answer prove they do: the others are away for now (a primary down), and
    what needs them says so (see :func:`_naming_shards`)."""
    try:
        await inspect.ping(client)
    except (RedisRefused, RedisUnavailable) as exc:
        if len(client.admin.shards) > 1 and inspect.away_cause(exc) is not None:
            away = await inspect.shards_away(client)
            if len(away) < len(client.admin.shards):
                return
        if isinstance(exc, RedisRefused) and exc.condition:  # LOADING, BUSY...
            raise ExitError(f"{exc}: try again when it ends", 1) from None
        lost = admin_servers.lost_owner(client)
        if isinstance(exc, RedisUnavailable) and lost is not None and len(client.admin.shards) == 1:
            raise ExitError(
                f"shard 0 of namespace {client.namespace!r} cannot be reached: the cluster"
                f" names {lost} its primary, which does not answer ({redis_cause(exc)});"
                " shard 0 holds the namespace's shard count: over several shards, set"
                " shards (ROTA_SHARDS) to that count to reach the others meanwhile",
                code=1,
            ) from None
        line = explain(exc, settings)  # credentials, ACL, TLS, no server there
        if line is None:
            line = f"redis_url: {redacted(settings.redis_url)} refused: {redis_cause(exc)}"
        raise ExitError(line) from None  # exit code 2: the settings do not reach Redis


_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def seconds_option(
    name: str, default: float, what: str
) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """A duration flag (30s, 5m, 2h) for the setting ``name``; its help shows the
    setting's default, while the flag itself defaults to None so that the code, the file
    and ``ROTA_*`` variables still apply when it is not given."""

    def check(ctx: click.Context, param: click.Parameter, text: str | None) -> float | None:
        if text is None:
            return None
        try:
            return parse_duration(text)
        except click.BadParameter as exc:
            raise ExitError(f"--{name}: {exc.message}") from None

    return click.option(
        f"--{name}", metavar="DURATION", callback=check, help=f"{what} (default {default:g}s)."
    )


def parse_duration(text: str, option: str | None = None) -> float:
    """'90', '90s', '1.5m', '2h', '1d', '250ms', '1h30m', '2d4h' -> seconds; an error
    names ``option``."""
    parts = _PART.findall(text.replace(" ", ""))
    bare = re.fullmatch(r"\s*\d+(?:\.\d+)?\s*", text)
    if bare:
        return float(text)
    if not parts or "".join(n + u for n, u in parts) != text.replace(" ", ""):
        raise click.BadParameter(
            f"{text!r} is not a duration like 30s, 5m, 1h30m or 1d", param_hint=option
        )
    return sum(float(n) * _UNITS[u] for n, u in parts)
