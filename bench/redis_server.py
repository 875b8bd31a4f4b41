"""The benchmark's private redis-server: a free loopback port (never 6379), no persistence."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

__all__ = ["RedisServer"]

_DEFAULT_PORT = 6379


def _free_port() -> int:
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port != _DEFAULT_PORT:
            return port


class RedisServer:
    """``wrap``: a command to run the server under (a profiler), given the time it may
    take to answer its first PING."""

    def __init__(self, wrap: Sequence[str] = (), ready_within: float = 10.0) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError(
                "redis-server not found on PATH (Debian: apt-get install redis-server)"
            )
        self.port = _free_port()
        self._tmp = tempfile.TemporaryDirectory(prefix="rota-bench-redis-")
        self.dir = Path(self._tmp.name)
        self.proc = subprocess.Popen(
            [
                *wrap,
                binary,
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--save", "",
                "--appendonly", "no",
                "--dir", str(self.dir),
                "--daemonize", "no",
                "--loglevel", "warning",
                "--logfile", str(self.dir / "redis.log"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self._wait_ready(ready_within)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _wait_ready(self, within: float) -> None:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with code {self.proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"redis-server on port {self.port} did not answer PING")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._tmp.cleanup()

    def __enter__(self) -> RedisServer:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
