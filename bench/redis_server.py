"""The benchmark's private redis-server: :class:`rota.testing.embedded.RedisServer`, the one
starter of the demo, the tests and the benchmark (a free loopback port, never 6379, no
persistence)."""

from __future__ import annotations

from rota.testing.embedded import RedisServer

__all__ = ["RedisServer"]
