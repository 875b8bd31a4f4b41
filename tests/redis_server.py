"""The test suite's private ``redis-server``: :class:`rota.testing.embedded.RedisServer` (the one
starter of the demo, the benchmark and the tests) with a synchronous client, on the
binary ``ROTA_TEST_REDIS_SERVER`` names when set (the server matrix: Redis 6.2, Valkey).

Each instance owns a loopback port and a temporary directory. It never touches the
default Redis port (6379) and never persists RDB snapshots; AOF can be enabled through
``extra_args`` for fault-injection tests.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import redis

from rota.testing import embedded
from rota.testing.embedded import DEFAULT_PORT as DEFAULT_REDIS_PORT
from rota.testing.embedded import free_port

__all__ = ["DEFAULT_REDIS_PORT", "START_TIMEOUT", "RedisServer", "free_port"]

START_TIMEOUT = 10.0


class RedisServer(embedded.RedisServer):
    """Start and control a private ``redis-server`` bound to 127.0.0.1."""

    def __init__(
        self,
        extra_args: Sequence[str] = (),
        *,
        port: int | None = None,
        start: bool = True,
        binary: str | None = None,
    ) -> None:
        binary = binary or os.environ.get("ROTA_TEST_REDIS_SERVER") or None
        super().__init__(
            extra_args, port=port, binary=binary, ready_within=START_TIMEOUT, start=start
        )

    def ping(self) -> bool:
        """PING through :meth:`client`, so that a subclass that reaches the server
        otherwise (TLS) is waited for the same way."""
        conn = self.client(socket_connect_timeout=0.5, socket_timeout=0.5)
        try:
            return bool(conn.ping())
        except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError) as exc:
            raise OSError(str(exc)) from exc
        finally:
            conn.close()

    def client(self, **kwargs: object) -> redis.Redis:
        """A synchronous client for this server (bytes responses)."""
        options: dict[str, object] = {"decode_responses": False}
        options.update(kwargs)
        return redis.Redis(host="127.0.0.1", port=self.port, db=0, **options)  # type: ignore[arg-type]
