"""The settings' one object, :class:`Settings`, its checks, and where each value came
from (see :mod:`rota.config`; the sources are read by :mod:`rota.config.load`).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal, get_args

import msgspec

from rota.errors import ConfigError
from rota.protocol.bounds import SETTINGS as SETTINGS_BOUNDS
from rota.protocol.bounds import first_wrong
from rota.protocol.job import validate_name
from rota.protocol.keys import validate_namespace
from rota.urls import SENTINEL, check_url, redacted, sentinel_url

__all__ = [
    "ENV_PREFIX",
    "FIELDS",
    "SECRETS",
    "Settings",
    "build",
    "describe",
    "remember",
    "setting_sources",
]

ENV_PREFIX = "ROTA_"


class Settings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, weakref=True):
    """Every knob of rota, with its default. Durations are in seconds. Each number has a
    finite range (``rota.protocol.bounds.SETTINGS``); a value outside is a ConfigError."""

    redis_url: str = "redis://localhost:6379/0"
    namespace: str = "rota"
    # How many shards (hash tags) the namespace spans (rota.protocol.shards): 1 is one
    # slot; more spread one namespace over a cluster's nodes. Fixed for a namespace's life.
    shards: int = 1
    # Job names whose jobs start in enqueue order across the shards (rota.protocol.shards:
    # each is routed to one shard, the one its name names), comma- or space-separated.
    # Every producer of such a name must say so: the pools' own enqueues read it here, a
    # client takes it as its option ``ordered`` (docs/operations.md, "Ordered names",
    # tells every way to declare it; this is the one place that says what it is).
    ordered: str = ""
    concurrency: int = 10
    lease: float = 30.0
    heartbeat_interval: float = 5.0
    grace: float = 30.0
    max_lost: int = 3
    max_args_bytes: int = 512 * 1024
    keep_result: float = 3600.0
    keep_none: float = 60.0
    complete_max_count: int = 100_000
    unique_ttl: float = 86400.0
    wake_timeout: float = 5.0
    scheduler_interval: float = 10.0
    fetch_batch: int = 100
    prefetch: int = 100
    dead_max_count: int = 10_000
    dead_max_age: float = 180 * 86400.0
    # A job name with no job, pause, limit or live pool this long is forgotten (the
    # pages, /metrics and the queue figures list it no more); 0: never.
    forget_names_after: float = 7 * 86400.0
    log_format: Literal["auto", "json", "console"] = "auto"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    # ACL user and password, when the URL carries none (its user:password@ wins).
    redis_username: str | None = None
    redis_password: str | None = None
    redis_password_file: str | None = None
    # TLS (rediss://): the CA that signed the server's certificate, and this client's
    # certificate and key for a server that asks for one (tls-auth-clients).
    redis_tls_ca: str | None = None
    redis_tls_cert: str | None = None
    redis_tls_key: str | None = None
    # The web UI's credentials (rota web): a token, and USER:PASSWORD for HTTP Basic.
    web_token: str | None = None
    web_token_file: str | None = None
    web_auth: str | None = None
    web_auth_file: str | None = None
    # A token that opens GET /metrics and nothing else (a Prometheus scrape config
    # holds it instead of the UI's token).
    web_metrics_token: str | None = None
    web_metrics_token_file: str | None = None
    # A token for people who look and change nothing: every page and GET of the API,
    # and no action (with web_token or web_auth for those who act).
    web_readonly_token: str | None = None
    web_readonly_token_file: str | None = None
    # How long a login to the web UI lasts (seconds); logout and a new token end it
    # sooner (rota.web.sessions).
    web_session_ttl: float = 43200.0
    # Topologies (rota.redis.topology). The sentinel settings are folded into redis_url, which
    # becomes a redis+sentinel:// URL; the sentinels' password is a secret, as
    # redis_password is. durable_enqueue: replicas that must acknowledge an enqueue
    # (WAIT) within durable_timeout seconds; 0: do not wait.
    sentinels: str = ""
    sentinel_service: str = ""
    sentinel_password: str | None = None
    sentinel_password_file: str | None = None
    durable_enqueue: int = 0
    durable_timeout: float = 2.0
    # How long an enqueue rides through a Redis that is away or refusing (a restart, a
    # failover, a slot move) before it raises: it is sent again with the same job ids,
    # so a retry never enqueues a job twice. 0: raise at the first failure.
    ride_through: float = 10.0
    # A pool logs a warning when its event loop is blocked this long (seconds: 0 turns
    # the report off; else from 0.01 to 3600), naming the job that blocks it
    # (rota.worker.loopwatch).
    loop_block_warn: float = 1.0
    # The child processes of a pool's isolated handlers (``@pool.job(isolated=True)``):
    # how many (0: the machine's CPU count), and the address space each may take, in MiB
    # (0: no limit; past it the attempt ends ``crashed``).
    child_processes: int = 0
    child_memory_mb: int = 0

    def __post_init__(self) -> None:
        # Each check raises a ConfigError that names the setting and what was expected.
        self._resolve_sentinels()
        check_url(self.redis_url)  # redis://, rediss:// or unix://, else a ConfigError
        for name in SECRETS:
            if getattr(self, name) and getattr(self, f"{name}_file"):
                # Which would win is a guess nobody should have to make: refuse both.
                raise ConfigError(f"{name}: given, and {name}_file too: give one of them")
            self.secret(name)  # an unreadable or empty file: a ConfigError naming it
        self._check_tls()
        try:
            validate_namespace(self.namespace)
        except ValueError as exc:
            raise ConfigError(f"namespace: {exc}") from None
        self._check_numbers()
        for name in self.ordered.replace(",", " ").split():
            try:
                validate_name(name)
            except ValueError as exc:
                raise ConfigError(f"ordered: {exc}") from None

    def _resolve_sentinels(self) -> None:
        """Sentinel settings become the ``redis+sentinel://`` URL the connection reads."""
        given = [
            n
            for n in ("sentinel_service", "sentinel_password", "sentinel_password_file")
            if getattr(self, n)
        ]
        in_url = self.redis_url.startswith(f"{SENTINEL}:")  # the sentinels are in it
        if given and not self.sentinels and not in_url:
            raise ConfigError(
                f"{given[0]}: set, but redis_url is not a {SENTINEL}:// URL and sentinels"
                " is not set: give one (redis_url, ROTA_REDIS_URL; or sentinels as"
                " host:port,host:port, ROTA_SENTINELS)"
            )
        if self.sentinels or given:
            url = sentinel_url(
                self.redis_url,
                self.sentinels,
                self.sentinel_service,
                self.secret("sentinel_password") or "",
            )
            msgspec.structs.force_setattr(self, "redis_url", url)

    def _check_tls(self) -> None:
        tls = [n for n in ("redis_tls_ca", "redis_tls_cert", "redis_tls_key") if getattr(self, n)]
        if tls and not self.redis_url.startswith("rediss:"):
            raise ConfigError(
                f"{tls[0]}: set, but redis_url is not a rediss:// URL: use rediss:// for TLS"
            )
        for name in tls:
            if not Path(getattr(self, name)).is_file():
                raise ConfigError(f"{name}: no such file: {getattr(self, name)}")
        if bool(self.redis_tls_cert) != bool(self.redis_tls_key):
            raise ConfigError("redis_tls_cert: give the client certificate and its key together")

    def _check_numbers(self) -> None:
        # Each number within its range (rota.protocol.bounds): NaN passes every
        # comparison, and infinity or 1e30 is no time or size; each would end in a
        # crash at the first use, or a pool that grows until it is killed.
        wrong = first_wrong({n: getattr(self, n) for n in SETTINGS_BOUNDS}, SETTINGS_BOUNDS)
        if wrong is not None:
            raise ConfigError(wrong)
        if self.lease <= self.heartbeat_interval:
            raise ConfigError(
                f"lease: must be longer than heartbeat_interval ({self.heartbeat_interval}),"
                f" got {self.lease}"
            )

    def replace(self, **changes: Any) -> Settings:
        built = build({**msgspec.structs.asdict(self), **changes}, source="override")
        remember(built, {**_sources_of(self), **dict.fromkeys(changes, "override")})
        return built

    def secret(self, name: str) -> str | None:
        """The secret ``name`` (one of :data:`SECRETS`): its setting, else the content of
        the file its ``<name>_file`` setting names (without the trailing newline)."""
        value: str | None = getattr(self, name)
        path: str | None = getattr(self, f"{name}_file")
        if value or not path:
            return value or None
        try:
            text = Path(path).read_text(encoding="utf-8").rstrip("\r\n")
        except OSError as exc:
            raise ConfigError(f"{name}_file: cannot read {path}: {exc.strerror}") from None
        if not text:
            raise ConfigError(f"{name}_file: {path} is empty")
        return text

    def __repr__(self) -> str:
        shown = (f"{k}={_shown(k, v)!r}" for k, v in msgspec.structs.asdict(self).items())
        return f"Settings({', '.join(shown)})"


#: The settings that hold a secret; each has a ``<name>_file`` companion.
SECRETS: Final = (
    "redis_password",
    "web_token",
    "web_auth",
    "web_metrics_token",
    "web_readonly_token",
    "sentinel_password",
)


def _shown(name: str, value: Any) -> Any:
    """A setting's value as printed: a secret masked, and the password in ``redis_url``."""
    if name in SECRETS and value:
        return "***"
    return redacted(value) if name == "redis_url" else value


FIELDS = {f.name: f for f in msgspec.structs.fields(Settings)}
#: Settings whose words are read in any case (``WARNING`` is ``warning``).
_CASELESS = frozenset({"log_level", "log_format"})


#: msgspec's type names, as an error message says them.
_KINDS: Final = {
    "int": "a whole number",
    "float": "a number",
    "str": "text",
    "bool": "true or false",
    "str | null": "text",
}

#: Where each setting of a built Settings came from, when load_settings or replace built
#: it, by the object's identity: equal Settings are equal keys of a WeakKeyDictionary,
#: which then keeps one entry and drops it with the first of them (a pool's settings,
#: rebuilt equal by a replace, then told every value as the code's).
_SOURCES: dict[int, tuple[weakref.ref[Settings], dict[str, str]]] = {}


def _sources_of(settings: Settings) -> dict[str, str]:
    ref, sources = _SOURCES.get(id(settings), (None, {}))
    return sources if ref is not None and ref() is settings else {}


def remember(settings: Settings, sources: dict[str, str]) -> None:
    key = id(settings)

    def forget(ref: weakref.ref[Settings]) -> None:
        if _SOURCES.get(key, (None,))[0] is ref:
            del _SOURCES[key]

    _SOURCES[key] = (weakref.ref(settings, forget), sources)


def setting_sources(settings: Settings, told: Mapping[str, str] | None = None) -> dict[str, str]:
    """Where each setting of ``settings`` came from, as :func:`describe` names it; with
    ``told``, those first: a worker process that a supervisor started reads every
    setting from the ``ROTA_*`` variables it was given, not from where they came."""
    if told:
        remember(settings, {**_sources_of(settings), **told})
    return dict(_sources_of(settings))


def describe(settings: Settings) -> dict[str, str]:
    """The settings that differ from the defaults, each as ``"<value> (<source>)"``:
    ``code`` (what the application passed), a config file's path, ``ROTA_<NAME>``,
    ``flag`` (an override given to :func:`load_settings`: the command line's flags), or
    ``override`` (:meth:`Settings.replace`). Secrets are masked, and the
    password in ``redis_url``. A pool logs this at its start."""
    sources = _sources_of(settings)
    out = {}
    for name, field in FIELDS.items():
        value = getattr(settings, name)
        if value == field.default:
            continue
        out[name] = f"{_shown(name, value)} ({sources.get(name, 'code')})"
    return out


def _origin(name: str, source: str, sources: Mapping[str, str] | None) -> str:
    """Where the value of ``name`` came from, in the words of an error message: its own
    source when the caller knows the source of each setting, else ``source``."""
    if sources is None:
        if source == "environment" and name in FIELDS:
            return f"environment variable {ENV_PREFIX}{name.upper()}"
        return source
    found = sources.get(name)
    if found is None:
        return "the default"
    if found.startswith(ENV_PREFIX):
        return f"environment variable {found}"
    return {"flag": "a flag", "code": "code"}.get(found, found)


def build(
    values: Mapping[str, Any],
    *,
    source: str,
    strict: bool = True,
    sources: Mapping[str, str] | None = None,
) -> Settings:
    for key in values:
        if key not in FIELDS:
            raise ConfigError(f"{key}: unknown setting (from {source})")
    if sources is not None:
        _check_lease(values, sources)
    values = {
        k: v.lower() if k in _CASELESS and isinstance(v, str) else v for k, v in values.items()
    }
    try:
        return msgspec.convert(values, Settings, strict=strict)
    except msgspec.ValidationError as exc:
        if isinstance(exc.__cause__, ConfigError):  # from __post_init__: names the setting
            name = str(exc.__cause__).split(":", 1)[0]
            raise ConfigError(f"{exc.__cause__} (from {_origin(name, source, sources)})") from None
        # msgspec says "Expected `int`, got `str` - at `$.concurrency`"
        text = str(exc)
        where = text.rsplit("$.", 1)[-1].strip("`") if "$." in text else "settings"
        what = text.split(" - at ")[0]
        expected = what.removeprefix("Expected ").split(",")[0].strip("`")
        if what.startswith("Expected ") and where in values:
            kind = _KINDS.get(expected, expected.replace("`", ""))
            what = f"expected {kind}, got {values[where]!r}"
        if what.startswith("Invalid enum value") and where in FIELDS:
            choices = get_args(FIELDS[where].type)
            what = f"{values.get(where)!r} is not one of {', '.join(map(str, choices))}"
        raise ConfigError(f"{where}: {what} (from {_origin(where, source, sources)})") from None


def _check_lease(values: Mapping[str, Any], sources: Mapping[str, str]) -> None:
    """The lease must outlast the heartbeat: blame the one the user set (a heartbeat of
    40 s given alone is too long for the default lease, not the lease too short)."""
    if "heartbeat_interval" not in sources or "lease" in sources:
        return
    try:
        lease = float(values.get("lease", FIELDS["lease"].default))
        beat = float(values["heartbeat_interval"])
    except (TypeError, ValueError):
        return  # the conversion names the setting
    if math.isfinite(beat) and beat >= lease:
        origin = _origin("heartbeat_interval", "", sources)
        raise ConfigError(
            f"heartbeat_interval: must be shorter than lease ({lease}, the default), got"
            f" {values['heartbeat_interval']} (from {origin})"
        )
