"""A private, throwaway ``redis-server`` process for tests.

Each instance owns a loopback port and a temporary directory. It never
touches the default Redis port (6379) and never persists RDB snapshots;
AOF can be enabled through ``extra_args`` for fault-injection tests.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

import redis

DEFAULT_REDIS_PORT = 6379
START_TIMEOUT = 10.0
STOP_TIMEOUT = 5.0

INSTALL_HINT = (
    "redis-server not found on PATH: install it "
    "(Debian/Ubuntu: sudo apt-get install redis-server; macOS: brew install redis)"
)


def free_port() -> int:
    """Return a currently unused TCP port on 127.0.0.1 (never 6379)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port != DEFAULT_REDIS_PORT:
            return port


class RedisServer:
    """Start and control a private ``redis-server`` bound to 127.0.0.1."""

    def __init__(
        self,
        extra_args: Sequence[str] = (),
        *,
        port: int | None = None,
        start: bool = True,
    ) -> None:
        # ROTA_TEST_REDIS_SERVER runs the suite on another server binary (Redis 6.2,
        # Valkey): the server matrix.
        binary = os.environ.get("ROTA_TEST_REDIS_SERVER") or shutil.which("redis-server")
        if binary is None:
            raise RuntimeError(INSTALL_HINT)
        self._binary = binary
        self.port = port if port is not None else free_port()
        assert self.port != DEFAULT_REDIS_PORT, "refusing to use the default Redis port 6379"
        self.extra_args = list(extra_args)
        self._tmp = tempfile.TemporaryDirectory(prefix="rota-redis-")
        self.dir = Path(self._tmp.name)
        self.logfile = self.dir / "redis.log"
        self._proc: subprocess.Popen[bytes] | None = None
        if start:
            try:
                self.start()
            except BaseException:
                self._tmp.cleanup()
                raise

    # -- properties ---------------------------------------------------------

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # -- lifecycle ----------------------------------------------------------

    def _command(self) -> list[str]:
        return [
            self._binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.dir),
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
            "--logfile",
            str(self.logfile),
            *self.extra_args,
        ]

    def start(self) -> None:
        """Start the server (again) on the same port and directory."""
        assert self.port != DEFAULT_REDIS_PORT, "refusing to use the default Redis port 6379"
        if self.running:
            raise RuntimeError(f"redis-server on port {self.port} is already running")
        self._proc = subprocess.Popen(
            self._command(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._wait_ready()

    def _wait_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + START_TIMEOUT
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            code = self._proc.poll()
            if code is not None:
                self._proc = None
                raise RuntimeError(
                    f"redis-server on port {self.port} exited with code {code} "
                    f"during startup:\n{self._log_tail()}"
                )
            client = redis.Redis(
                host="127.0.0.1", port=self.port, socket_connect_timeout=0.5, socket_timeout=0.5
            )
            try:
                if client.ping():
                    return
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError) as exc:
                last_error = exc
            finally:
                client.close()
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(
            f"redis-server on port {self.port} did not answer PING within "
            f"{START_TIMEOUT:.0f}s (last error: {last_error!r}):\n{self._log_tail()}"
        )

    def _log_tail(self, lines: int = 20) -> str:
        try:
            text = self.logfile.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Stop gracefully: SIGTERM, then SIGKILL if still alive after 5 s."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._proc = None

    def kill(self) -> None:
        """Kill abruptly with SIGKILL; nothing is flushed to disk."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        self._proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop the server and remove its directory."""
        self.stop()
        self._tmp.cleanup()

    # -- clients ------------------------------------------------------------

    def client(self, **kwargs: object) -> redis.Redis:
        """A synchronous client for this server (bytes responses)."""
        options: dict[str, object] = {"decode_responses": False}
        options.update(kwargs)
        return redis.Redis(host="127.0.0.1", port=self.port, db=0, **options)  # type: ignore[arg-type]

    # -- context manager ----------------------------------------------------

    def __enter__(self) -> Self:
        if not self.running:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"RedisServer(port={self.port}, pid={self.pid}, {state})"
