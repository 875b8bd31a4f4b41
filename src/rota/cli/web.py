"""``rota web``: the web UI and JSON API."""

from __future__ import annotations

from pathlib import Path

import click
import structlog

from rota.cli.common import ExitError, connection_options, resolve
from rota.connection import redacted
from rota.errors import ConfigError
from rota.logging import configure_logging

__all__ = ["web"]

log = structlog.get_logger("rota.web")


def _auth_pair(text: str | None) -> tuple[str, str] | None:
    if text is None:
        return None
    user, sep, password = text.partition(":")
    if not sep or not user or not password:
        raise ExitError("--auth: expected USER:PASSWORD, both not empty")
    return user, password


@click.command()
@click.option(
    "--bind",
    default="127.0.0.1:5040",
    show_default=True,
    help="HOST:PORT to listen on ([::1]:5040 for IPv6).",
)
@click.option("--auth", "basic", metavar="USER:PASSWORD", help="Require HTTP Basic authentication.")
@click.option("--token", help="Require this token: a Bearer header, or the login form's cookie.")
@connection_options
def web(
    bind: str,
    basic: str | None,
    token: str | None,
    config_file: Path | None,
    redis_url: str | None,
    namespace: str | None,
) -> None:
    """Serve the web UI, the JSON API (/api/) and Prometheus metrics (/metrics)."""
    from rota.web import Auth, create_app
    from rota.web.server import hosts_for, listen, parse_bind, run, url_of

    try:
        host, port = parse_bind(bind)
    except ValueError as exc:
        raise ExitError(f"--bind: {exc}") from None
    pair = _auth_pair(basic)
    if token is not None and not token.strip():
        raise ExitError("--token: must not be empty")
    settings = resolve(config_file, redis_url=redis_url, namespace=namespace)
    configure_logging(settings.log_format, settings.log_level)
    try:
        sock = listen(host, port)
    except OSError as exc:
        raise ExitError(f"--bind: cannot listen on {bind}: {exc.strerror or exc}") from None
    auth = Auth(basic=pair, token=token)
    try:
        app = create_app(settings, auth=auth, allowed_hosts=hosts_for(host))
    except ConfigError as exc:  # names the setting
        sock.close()
        raise ExitError(str(exc)) from None
    except ValueError as exc:
        sock.close()
        raise ExitError(f"redis_url: {exc}") from None
    if not auth.enabled and hosts_for(host) is None:
        log.warning("web UI open to the network without --auth or --token", bind=bind)
    log.info(
        "web started",
        url=url_of(sock),
        namespace=settings.namespace,
        redis_url=redacted(settings.redis_url),
        auth="on" if auth.enabled else "off",
    )
    run(app, sock)
    log.info("web stopped")
