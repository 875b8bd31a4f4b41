"""``rota web``: the web UI and JSON API."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import click
import structlog

from rota.cli.common import ExitError, connection_options, parse_duration, preflight, resolve
from rota.config import Settings
from rota.errors import ConfigError
from rota.logging import configure_logging
from rota.protocol.bounds import SETTINGS, check
from rota.protocol.keys import validate_namespace
from rota.urls import redacted

if TYPE_CHECKING:
    import socket

    from starlette.applications import Starlette

    from rota.web import Auth

__all__ = ["web"]

log = structlog.get_logger("rota.web")


def _auth_pair(text: str | None, name: str = "--auth") -> tuple[str, str] | None:
    if text is None:
        return None
    user, sep, password = text.partition(":")
    if not sep or not user or not password:
        raise ExitError(f"{name}: expected USER:PASSWORD, both not empty")
    return user, password


def _credentials(basic: str | None, token: str | None, settings: Settings) -> Auth:
    """The web UI's credentials: the flags, else the settings (``ROTA_WEB_TOKEN``,
    ``web_token_file``, ``ROTA_WEB_AUTH``, ``web_auth_file``), which keep them out of
    the command line."""
    from rota.web import Auth

    try:
        token = token if token is not None else settings.secret("web_token")
        pair = _auth_pair(basic) or _auth_pair(settings.secret("web_auth"), "web_auth")
    except ConfigError as exc:
        raise ExitError(str(exc)) from None
    if token is not None and not token.strip():
        raise ExitError("--token: must not be empty")
    try:
        metrics_token = settings.secret("web_metrics_token")
        readonly_token = settings.secret("web_readonly_token")
    except ConfigError as exc:
        raise ExitError(str(exc)) from None
    if readonly_token is not None and token is None:
        raise ExitError(
            "web_readonly_token: give --token (or web_token) too: the read-only token"
            " opens the UI for people who look, the token for those who act"
        )
    if readonly_token is not None and readonly_token == token:
        raise ExitError("web_readonly_token: must differ from the token")
    return Auth(
        basic=pair,
        token=token,
        session_ttl=settings.web_session_ttl,
        metrics_token=metrics_token,
        readonly_token=readonly_token,
    )


def _session_ttl(ctx: click.Context, param: click.Parameter, text: str | None) -> float | None:
    """``--session-ttl``: a duration (the setting ``web_session_ttl`` when not given);
    refused here when not positive, so the message names the flag."""
    if text is None:
        return None
    try:
        seconds = parse_duration(text, "--session-ttl")
    except click.BadParameter as exc:
        raise ExitError(f"--session-ttl: {exc.message}") from None
    if seconds <= 0:
        raise ExitError("--session-ttl: must be more than 0")
    wrong = check("--session-ttl", seconds, SETTINGS["web_session_ttl"])
    if wrong is not None:
        raise ExitError(wrong)
    return seconds


#: Every credential the server takes, and where each may come from: the flag, else the
#: environment, else the config file (``<name>_file`` names a file holding the secret).
_CREDENTIALS = """Credentials (a flag, else ROTA_<NAME>, else the config file; <name>_file
or ROTA_<NAME>_FILE names a file that holds the secret, kept out of ps):

\b
  admin token      --token, ROTA_WEB_TOKEN, web_token_file: everything
  Basic login      --auth, ROTA_WEB_AUTH, web_auth_file: everything
  read-only token  ROTA_WEB_READONLY_TOKEN, web_readonly_token_file:
                   every page and GET, no change (needs the admin token too)
  metrics token    ROTA_WEB_METRICS_TOKEN, web_metrics_token_file:
                   GET /metrics only (a Prometheus scrape)
  login length     --session-ttl, ROTA_WEB_SESSION_TTL
"""


@click.command(epilog=_CREDENTIALS)
@click.option(
    "--bind",
    default="127.0.0.1:5040",
    show_default=True,
    help="HOST:PORT to listen on ([::1]:5040 for IPv6).",
)
@click.option(
    "--auth",
    "basic",
    metavar="USER:PASSWORD",
    help="Require HTTP Basic authentication (better: ROTA_WEB_AUTH or web_auth_file).",
)
@click.option(
    "--token",
    help="Require this token: a Bearer header, or the login form's cookie (better:"
    " ROTA_WEB_TOKEN or web_token_file).",
)
@click.option(
    "--session-ttl",
    "session_ttl",
    metavar="DURATION",
    callback=_session_ttl,
    help="How long a login through the form lasts (30m, 12h, 7d; default 12h, or"
    " ROTA_WEB_SESSION_TTL): the server refuses its cookie after. Logout, or a new"
    " token, ends it sooner.",
)
@click.option(
    "--insecure-open",
    is_flag=True,
    help="Serve a non-loopback address without authentication: anyone who reaches it"
    " may retry, delete and enqueue.",
)
@click.option(
    "--trusted-proxy",
    "trusted_proxies",
    multiple=True,
    metavar="ADDRESS",
    help="A reverse proxy whose X-Forwarded-For/-Proto headers are believed (repeatable).",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="A Host name the server answers to (repeatable): the name a reverse proxy"
    " passes on, or the machine's name on the network. Other names get 400, so a web"
    " page cannot reach the UI through DNS rebinding. Loopback binds answer to loopback"
    " names besides.",
)
@click.option(
    "--also",
    "also",
    multiple=True,
    metavar="NAMESPACE",
    help="Show this namespace too, beside --namespace (repeatable): a switch in the"
    " header, ?ns= in the API.",
)
@click.option(
    "--grafana-dashboard",
    is_flag=True,
    help="Print the Grafana dashboard of /metrics (JSON, to import) and exit.",
)
@connection_options
def web(
    grafana_dashboard: bool,
    bind: str,
    basic: str | None,
    token: str | None,
    session_ttl: float | None,
    insecure_open: bool,
    trusted_proxies: tuple[str, ...],
    allowed_hosts: tuple[str, ...],
    also: tuple[str, ...],
    config_file: Path | None,
    redis_url: str | None,
    namespace: str | None,
) -> None:
    """Serve the web UI, the JSON API (/api/) and Prometheus metrics (/metrics)."""
    if grafana_dashboard:  # shipped in the package: no checkout needed
        click.echo((resources.files("rota.web") / "grafana-dashboard.json").read_text(), nl=False)
        return
    from rota.web.server import hosts_for, listen, parse_bind, run, url_of

    try:
        host, port = parse_bind(bind)
    except ValueError as exc:
        raise ExitError(f"--bind: {exc}") from None
    _auth_pair(basic)  # a malformed --auth is told before anything else
    if token is not None and not token.strip():
        raise ExitError("--token: must not be empty")
    settings = resolve(
        config_file, redis_url=redis_url, namespace=namespace, web_session_ttl=session_ttl
    )
    auth = _credentials(basic, token, settings)
    hosts = hosts_for(host, allowed_hosts)
    if not auth.enabled and hosts_for(host) is None and insecure_open and hosts is None:
        raise ExitError(
            f"--insecure-open: name the hosts an open UI on {host} answers to with"
            " --allowed-host NAME (its address or name on the network): without a Host"
            " check, any web page a user opens could reach it through DNS rebinding"
        )
    if not auth.enabled and hosts_for(host) is None and not insecure_open:
        raise ExitError(
            f"--bind: {host} is reachable from other machines and the UI has no"
            " authentication: give --token or --auth (or ROTA_WEB_TOKEN, ROTA_WEB_AUTH),"
            " or --insecure-open if an open UI is what you want"
        )
    configure_logging(settings.log_format, settings.log_level)
    try:
        sock = listen(host, port)
    except OSError as exc:
        raise ExitError(f"--bind: cannot listen on {bind}: {exc.strerror or exc}") from None
    app = _app(settings, auth, hosts, sock, also)
    if not auth.enabled and hosts_for(host) is None:
        log.warning("web UI open to the network without authentication (--insecure-open)",
                    bind=bind)  # fmt: skip
    log.info(
        "web started",
        url=url_of(sock),
        namespace=settings.namespace,
        redis_url=redacted(settings.redis_url),
        auth="on" if auth.enabled else "off",
    )
    run(app, sock, trusted_proxies=trusted_proxies)
    log.info("web stopped")


def _app(
    settings: Settings,
    auth: Auth,
    hosts: frozenset[str] | None,
    sock: socket.socket,
    also: tuple[str, ...],
) -> Starlette:
    """The app, once Redis answered; the socket is closed when either fails. ``hosts``:
    the Host names it answers to (None: any); ``also``: the other namespaces it shows."""
    from rota.web import create_app

    try:
        for ns in also:
            validate_namespace(ns)
        # A wrong password, ACL, TLS or no Redis: one line, now; and the namespace's
        # shard count as its pools recorded it.
        settings = preflight(settings)
        app = create_app(settings, auth=auth, allowed_hosts=hosts, namespaces=also)
    except ConfigError as exc:  # names the setting
        sock.close()
        raise ExitError(str(exc)) from None
    except ValueError as exc:
        sock.close()
        if str(exc).startswith("invalid namespace"):
            raise ExitError(f"--also: {exc}") from None
        raise ExitError(f"redis_url: {exc}") from None
    except ExitError:
        sock.close()
        raise
    return app
