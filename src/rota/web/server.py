"""Serving the app with uvicorn: on its own (``rota web``) or inside another program's
event loop (``rota demo``)."""

from __future__ import annotations

import contextlib
import signal
import socket
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence

import anyio
import uvicorn
from starlette.types import ASGIApp

from rota.config import Settings
from rota.web.app import create_app
from rota.web.middleware.host import is_loopback

__all__ = ["hosts_for", "listen", "parse_bind", "run", "serving", "url_of"]


def parse_bind(text: str) -> tuple[str, int]:
    """'127.0.0.1:5040', '[::1]:5040', 'localhost:80' -> (host, port); ValueError if not."""
    host, sep, port_text = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"{text!r}: write an IPv6 address in brackets, like [::1]:5040")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"{text!r} is not HOST:PORT (a port from 1 to 65535)")
    return host, int(port_text)


def listen(host: str, port: int) -> socket.socket:
    """A listening socket (OSError if the address is taken or not ours)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    if sock.family == socket.AF_INET6:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def _config(app: ASGIApp, trusted_proxies: Sequence[str] = ()) -> uvicorn.Config:
    """uvicorn's settings. Behind a reverse proxy listed in ``trusted_proxies``,
    ``X-Forwarded-Proto`` and ``X-Forwarded-For`` give the scheme (so the session cookie
    is ``Secure`` when the proxy speaks HTTPS) and the client address (which failed
    logins are throttled by). Without one, no such header is believed, loopback's
    neither: a local client could otherwise escape the throttle, or lock out any
    address it names."""
    return uvicorn.Config(
        app,
        proxy_headers=bool(trusted_proxies),
        forwarded_allow_ips=list(trusted_proxies),
        log_config=None,
        access_log=False,
        server_header=False,
        lifespan="on",
        timeout_graceful_shutdown=2,
    )


class _EmbeddedServer(uvicorn.Server):
    """A server that leaves signals to the program it runs in."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def run(app: ASGIApp, sock: socket.socket, *, trusted_proxies: Sequence[str] = ()) -> None:
    """Serve until SIGINT or SIGTERM; a second signal closes open connections at once."""
    server = _EmbeddedServer(_config(app, trusted_proxies))

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_stop_on_signals, server)
            await server.serve([sock])
            tg.cancel_scope.cancel()

    try:
        import uvloop  # noqa: F401
    except ImportError:
        options = {}
    else:
        options = {"use_uvloop": True}
    with contextlib.closing(sock):
        anyio.run(main, backend="asyncio", backend_options=options)


async def _stop_on_signals(server: uvicorn.Server) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            if server.should_exit:
                server.force_exit = True
            server.should_exit = True


@contextlib.asynccontextmanager
async def serving(
    settings: Settings, host: str = "127.0.0.1", port: int = 5040
) -> AsyncIterator[str]:
    """Serve the UI of ``settings`` in the current event loop while the block runs; yield
    its URL. When ``port`` is taken, a free port is used instead."""
    try:
        sock = listen(host, port)
    except OSError:
        sock = listen(host, 0)
    app = create_app(settings, allowed_hosts=hosts_for(host))
    server = _EmbeddedServer(_config(app))
    done = anyio.Event()

    async def serve() -> None:
        try:
            await server.serve([sock])
        finally:
            done.set()

    with contextlib.closing(sock):
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            with anyio.fail_after(10):
                while not server.started and not done.is_set():  # noqa: ASYNC110 - a flag
                    await anyio.sleep(0.01)
            try:
                yield url_of(sock)
            finally:
                server.should_exit = True
                with anyio.move_on_after(5, shield=True):
                    await done.wait()
                tg.cancel_scope.cancel()


def hosts_for(host: str, allowed: Iterable[str] = ()) -> frozenset[str] | None:
    """The Host names to answer when listening on ``host``: loopback names on loopback,
    and the names given (``--allowed-host``: a reverse proxy that keeps the client's
    Host, a machine's name on a network). None: any name (not on loopback, none given)."""
    given = {name.strip().lower().strip("[]") for name in allowed if name.strip()}
    if not is_loopback(host):
        return frozenset(given) if given else None
    return frozenset({"localhost", "127.0.0.1", "::1", host.lower(), *given})
